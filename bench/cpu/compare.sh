#!/usr/bin/env bash
# Issue 8 side-by-side: tinyserve's GPT-2 CPU backend (AVX-512 and, with
# GODEBUG=cpu.avx512f=off, AVX2), optionally an older tinyserve revision, the
# PyTorch peer and (LLAMACPP=1) llama.cpp, all on the same random 124M
# checkpoint (safetensors; a GGUF conversion of it for llama.cpp),
# then one table with ratios. Cases (bench/cpu/tsbench and torch_peer.py
# define them identically): prefill 128 and 512 tokens with the LM head on
# the last row only; one decode step at batch 1, 4, 8 and 32 (context ~140);
# end to end, a 128-token prompt plus 64 greedy tokens at batch 1 and 4.
#
# Usage: bench/cpu/compare.sh
# Environment:
#   REPS=5        timed runs per case (medians are reported)
#   (tinyserve-bf16 is the same backend with bfloat16 weight storage)
#   BEFORE=<rev>  also build tsbench against this git revision (e.g. the
#                 pure-Go backend) and report it as engine "before"
#   BEFORE_REPS=1 timed runs per case for BEFORE (a pure-Go prefill of 512
#                 tokens takes many seconds)
#   CASES=...     comma-separated subset of the cases
#   PYTHON=...    interpreter with torch (default: python3, else /usr/bin/python3)
#   LLAMACPP=1    also run llama.cpp (bench/cpu/llamacpp.sh: installs
#                 node-llama-cpp from npm into ~/.cache, about 700 MB, once)
#   OUT=<dir>     keep the checkpoint and results.jsonl here (default: a temp dir)
#   RUNS=1        rounds of all engines, interleaved; the table keeps each
#                 engine's best median per case (for shared machines)
set -euo pipefail
cd "$(dirname "$0")/../.."
reps=${REPS:-5}
cases=${CASES:-prefill-128,prefill-512,decode-b1,decode-b4,decode-b8,decode-b32,e2e-b1,e2e-b4}
out=${OUT:-$(mktemp -d -t tsbench.XXXXXX)}
mkdir -p "$out"
ckpt="$out/gpt2-124m-random"
results="$out/results.jsonl"
: >"$results"

echo "# $(date -u +%Y-%m-%dT%H:%MZ)  $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')  $(nproc) cores  load $(cut -d' ' -f1-3 /proc/loadavg)  rev $(git rev-parse --short HEAD)"
[ -f "$ckpt/model.safetensors" ] || go run ./bench/cpu/gencheckpoint -model gpt2-124m-random -out "$ckpt"
go build -o "$out/tsbench" ./bench/cpu/tsbench

run() { # engine-name command...
	local name=$1
	shift
	echo "## $name" >&2
	"$@" -model "$ckpt" -reps "$reps" -cases "$cases" -json -engine "$name" | tee -a "$results"
}

if [ -n "${BEFORE:-}" ]; then
	# tsbench uses only public API, so today's source builds against the
	# older tree; the older tree is exported, never checked out here.
	src="$out/before-src"
	rm -rf "$src" && mkdir -p "$src"
	git archive "$BEFORE" | tar -x -C "$src"
	mkdir -p "$src/bench/cpu/tsbench"
	cp bench/cpu/tsbench/*.go "$src/bench/cpu/tsbench/"
	(cd "$src" && go build -tags before -o "$out/tsbench-before" ./bench/cpu/tsbench)
fi

py=${PYTHON:-python3}
"$py" -c 'import torch' 2>/dev/null || py=/usr/bin/python3
"$py" -c 'import torch, numpy' 2>/dev/null || {
	echo "## pytorch: not installed (apt-get install python3-torch), skipped" >&2
	py=
}

# One round runs every engine once; RUNS rounds interleave them, so that a
# burst of load from the machine's other tenants hits one round of one
# engine rather than all of an engine's figures.
for round in $(seq "${RUNS:-1}"); do
	echo "## round $round  load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
	run tinyserve "$out/tsbench" -bandwidth
	GODEBUG=cpu.avx512f=off run tinyserve-avx2 "$out/tsbench"
	run tinyserve-bf16 "$out/tsbench" -dtype bfloat16
	if [ -n "${BEFORE:-}" ]; then
		reps=${BEFORE_REPS:-1} run before "$out/tsbench-before"
	fi
	if [ -n "$py" ]; then
		echo "## pytorch $("$py" -c 'import torch; print(torch.__version__)')" >&2
		# The tuned environment from issue 8.
		OPENBLAS_CORETYPE=SkylakeX OMP_WAIT_POLICY=PASSIVE \
			MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TRIM_THRESHOLD_=68719476736 \
			"$py" bench/cpu/torch_peer.py --model "$ckpt" --reps "$reps" --cases "$cases" | tee -a "$results"
	fi
	if [ -n "${LLAMACPP:-}" ]; then
		# llama.cpp through node-llama-cpp's prebuilt CPU binaries, on the
		# same checkpoint converted to a float32 GGUF; its KV cache stays at
		# llama.cpp's default (float16), half of tinyserve's bytes. The
		# greedy-token check against tinyserve runs in the first round.
		echo "## llama.cpp" >&2
		CHECK_TOKENS=$([ "$round" = 1 ] && echo "${CHECK_TOKENS:-16}" || echo 0) \
			bench/cpu/llamacpp.sh "$ckpt" "$reps" "$cases" | tee -a "$results"
	fi
done

echo
"$out/tsbench" -table "$results" -base tinyserve
echo "(ratios above 1: tinyserve is that many times faster; results in $results)"
