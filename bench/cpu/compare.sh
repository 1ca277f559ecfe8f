#!/usr/bin/env bash
# Side by side on one random-weight checkpoint (safetensors; a GGUF
# conversion of it for llama.cpp): tinyserve's CPU backend, optionally an
# older tinyserve revision, the PyTorch peer and (LLAMACPP=1) llama.cpp,
# then one table with ratios. Cases (bench/cpu/tsbench, torch_peer.py and
# llamacpp_peer.mjs define them identically): prefill 128 and 512 tokens
# with the LM head on the last row only; one decode step at batch 1, 4, 8
# and 32 (context ~140); end to end, a 128-token prompt plus 64 greedy
# tokens at batch 1 and 4.
#
# MODEL picks the checkpoint and the engines:
#   gpt2-124m-random (issue 8; float32 checkpoint): tinyserve (float32
#     weights, AVX-512), tinyserve-avx2 (GODEBUG=cpu.avx512f=off),
#     tinyserve-bf16 (bfloat16 weight storage); llama.cpp on a float32 GGUF.
#   qwen2.5-0.5b-random (issue 26; Qwen2.5-0.5B's shape, bfloat16
#     checkpoint): tinyserve-bf16 (its stored type; the table's base),
#     tinyserve-f32 (float32 weights; F32=0 leaves it out); PyTorch in
#     float32 (the checkpoint widened exactly); llama.cpp on a BF16 GGUF
#     (exact; TYPE=f16 for float16).
#   Either with TYPE=q8_0 (issue 32): tinyserve-q8_0 (tsbench -dtype q8_0:
#     the checkpoint quantized at load to the same bytes as the GGUF's,
#     float32 activations; the table's base, with its own bandwidth floor)
#     and tinyserve-bf16 for reference; llama.cpp on the Q8_0 GGUF of the
#     same weights (its products also round the activations to 8 bits);
#     the greedy check compares llama.cpp with tinyserve on that GGUF file.
#
# Every engine prints how it really runs (threads, the BLAS torch has
# mapped, the ggml CPU library llama.cpp loaded) as a configuration line in
# results.jsonl; after each round `tsbench -verify` checks them (THREADS
# threads everywhere, an optimised BLAS under torch) and the greedy checks
# (PyTorch and llama.cpp against tinyserve's tokens: equal except after a
# near-tie, tinyserve's top-1 minus top-2 margin under 0.05). A failure
# stops the script (ALLOW_MISCONFIGURED=1: a loud warning instead, recorded
# in results.jsonl).
#
# Usage: bench/cpu/compare.sh
# Environment:
#   MODEL=gpt2-124m-random  or qwen2.5-0.5b-random
#   THREADS=$(nproc)  threads of every engine
#   REPS=5        timed runs per case (medians are reported)
#   BEFORE=<rev>  also build tsbench against this git revision (e.g. the
#                 pure-Go backend) and report it as engine "before"
#   BEFORE_REPS=1 timed runs per case for BEFORE (a pure-Go prefill of 512
#                 tokens takes many seconds)
#   CASES=...     comma-separated subset of the cases
#   PYTHON=...    interpreter with torch (default: python3, else /usr/bin/python3)
#   LLAMACPP=1    also run llama.cpp (bench/cpu/llamacpp.sh: installs
#                 node-llama-cpp from npm into ~/.cache, about 700 MB, once)
#   TYPE=...      the GGUF's matrix type for llama.cpp (f32, f16, bf16, or
#                 q8_0: tinyserve's Q8_0 engines, see MODEL above)
#   CHECK_TOKENS=16  greedy tokens of the correctness checks (0: none)
#   OUT=<dir>     keep the checkpoint and results.jsonl here (default: a temp dir)
#   RUNS=1        rounds of all engines, interleaved; the table keeps each
#                 engine's best median per case (for shared machines)
#   QUIET=<load>  before each engine, wait until the 1-minute load average
#                 is below this (at most QUIET_WAIT seconds, default 1800):
#                 on a shared machine llama.cpp's spinning thread barriers
#                 make it many times slower whenever another process wants
#                 one of its cores
set -euo pipefail
cd "$(dirname "$0")/../.."
reps=${REPS:-5}
cases=${CASES:-prefill-128,prefill-512,decode-b1,decode-b4,decode-b8,decode-b32,e2e-b1,e2e-b4}
model=${MODEL:-gpt2-124m-random}
threads=${THREADS:-$(nproc)}
check=${CHECK_TOKENS:-16}
out=${OUT:-$(mktemp -d -t tsbench.XXXXXX)}
mkdir -p "$out"
ckpt="$out/$model"
results="$out/results.jsonl"
: >"$results"
note() { echo "# $*" | tee -a "$results" >&2; }

case $model in
gpt2-124m-random)
	ckpt_dtype=float32 base=tinyserve yardstick=true gguf_type=${TYPE:-}
	;;
qwen2.5-0.5b-random)
	ckpt_dtype=bfloat16 base=tinyserve-bf16 yardstick=false gguf_type=${TYPE:-bf16}
	;;
*)
	echo "compare.sh: MODEL=$model: want gpt2-124m-random or qwen2.5-0.5b-random" >&2
	exit 2
	;;
esac
q8=
if [ "$gguf_type" = q8_0 ]; then
	q8=1 base=tinyserve-q8_0 yardstick=false
fi

note "$(date -u +%Y-%m-%dT%H:%MZ)  $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')  $(nproc) cores  load $(cut -d' ' -f1-3 /proc/loadavg)  rev $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . 2>/dev/null || echo '+uncommitted')  model $model  threads $threads"
[ "$threads" = 2 ] || note "WARNING: THREADS=$threads; the issues' goals are stated for 2 threads"
[ -f "$ckpt/model.safetensors" ] || go run ./bench/cpu/gencheckpoint -model "$model" -dtype "$ckpt_dtype" -out "$ckpt"
go build -o "$out/tsbench" ./bench/cpu/tsbench
go build -o "$out/gguf" ./bench/cpu/gguf

quiet() { # engine-name: wait for the machine to calm down, record the load
	if [ -n "${QUIET:-}" ]; then
		local start=$SECONDS
		while awk -v l="$(cut -d' ' -f1 /proc/loadavg)" -v q="$QUIET" 'BEGIN { exit !(l >= q) }' &&
			[ $((SECONDS - start)) -lt "${QUIET_WAIT:-1800}" ]; do
			sleep 10
		done
		note "$1: waited $((SECONDS - start)) s for load < $QUIET"
	fi
	note "$1: start  load $(cut -d' ' -f1-3 /proc/loadavg)  $(date -u +%H:%M:%SZ)"
}

run() { # engine-name command...
	local name=$1
	shift
	quiet "$name"
	echo "## $name" >&2
	"$@" -model "$ckpt" -threads "$threads" -reps "$reps" -cases "$cases" -json -engine "$name" | tee -a "$results"
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
	note "pytorch: not installed (apt-get install python3-torch libopenblas0-pthread python3-numpy), skipped"
	py=
}
# The tuned environment from issue 8: OpenBLAS's AVX-512 kernels where the
# CPU has AVX-512 (a forced core type the CPU lacks would crash), OpenMP
# threads that sleep rather than spin between ops, and glibc keeping freed
# activations instead of returning them to the kernel.
coretype=Haswell
grep -qw avx512f /proc/cpuinfo && coretype=SkylakeX
torch_env=(OPENBLAS_CORETYPE=$coretype OMP_WAIT_POLICY=PASSIVE
	MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TRIM_THRESHOLD_=68719476736)

# tinyserve's own greedy tokens (with each step's top-1 minus top-2 logit
# margin), which the peers' checks compare with.
greedy="$out/tinyserve-greedy.json"
greedy_in=$ckpt
if [ -n "$q8" ]; then
	# One Q8_0 GGUF for llama.cpp and for tinyserve's greedy tokens, so
	# that the check compares the two engines on the same 8-bit weights.
	export GGUF="$out/$model-q8_0.gguf"
	[ -f "$GGUF" ] || "$out/gguf" -in "$ckpt" -out "$GGUF" -type q8_0
	greedy_in=$GGUF
fi
if [ "$check" -gt 0 ]; then
	"$out/gguf" -in "$greedy_in" -greedy -n "$check" -threads "$threads" >"$greedy"
fi

verify() {
	local v rc=0
	v=$("$out/tsbench" -verify "$results" -threads "$threads" 2>&1) || rc=$?
	sed 's/^/# /' <<<"$v" >>"$results"
	echo "$v" >&2
	if [ $rc -ne 0 ]; then
		if [ -n "${ALLOW_MISCONFIGURED:-}" ]; then
			note "WARNING WARNING: an engine is not set up as a user would run it, or a greedy check failed (above); these results are NOT a fair comparison"
		else
			note "REFUSED: an engine is not set up as a user would run it, or a greedy check failed (above); fix it, or set ALLOW_MISCONFIGURED=1 to record anyway"
			exit 1
		fi
	fi
}

# One round runs every engine once; RUNS rounds interleave them, so that a
# burst of load from the machine's other tenants hits one round of one
# engine rather than all of an engine's figures.
for round in $(seq "${RUNS:-1}"); do
	note "round $round  load $(cut -d' ' -f1-3 /proc/loadavg)  $(date -u +%H:%M:%SZ)"
	if [ -n "$q8" ]; then
		run tinyserve-q8_0 "$out/tsbench" -dtype q8_0 -bandwidth
		run tinyserve-bf16 "$out/tsbench" -dtype bfloat16
	elif [ "$model" = gpt2-124m-random ]; then
		run tinyserve "$out/tsbench" -bandwidth
		GODEBUG=cpu.avx512f=off run tinyserve-avx2 "$out/tsbench"
		run tinyserve-bf16 "$out/tsbench" -dtype bfloat16
	else
		run tinyserve-bf16 "$out/tsbench" -dtype bfloat16 -bandwidth
		if [ "${F32:-1}" != 0 ]; then
			run tinyserve-f32 "$out/tsbench" -dtype float32
		fi
	fi
	if [ -n "${BEFORE:-}" ]; then
		reps=${BEFORE_REPS:-1} run before "$out/tsbench-before"
	fi
	if [ -n "$py" ]; then
		quiet pytorch
		echo "## pytorch $("$py" -c 'import torch; print(torch.__version__)')" >&2
		if [ "$round" = 1 ] && [ "$check" -gt 0 ]; then
			env "${torch_env[@]}" "$py" bench/cpu/torch_peer.py --model "$ckpt" --threads "$threads" --check "$greedy" |
				grep '"check"' | tee -a "$results" || true
		fi
		env "${torch_env[@]}" "$py" bench/cpu/torch_peer.py --model "$ckpt" --threads "$threads" --reps "$reps" --cases "$cases" |
			tee -a "$results" || note "pytorch peer failed (exit status ${PIPESTATUS[0]})"
	fi
	if [ -n "${LLAMACPP:-}" ]; then
		# llama.cpp through node-llama-cpp's prebuilt CPU binaries, on the
		# same checkpoint converted to a GGUF; its KV cache stays at
		# llama.cpp's default (float16), half of tinyserve's bytes. The
		# greedy-token check against tinyserve runs in the first round.
		quiet llama.cpp
		echo "## llama.cpp" >&2
		CHECK_TOKENS=$([ "$round" = 1 ] && echo "$check" || echo 0) GREEDY_JSON=$greedy THREADS=$threads TYPE=$gguf_type \
			bench/cpu/llamacpp.sh "$ckpt" "$reps" "$cases" | tee -a "$results" || note "llama.cpp peer failed (exit status ${PIPESTATUS[0]})"
	fi
	verify
done
note "end  load $(cut -d' ' -f1-3 /proc/loadavg)  $(date -u +%H:%M:%SZ)"

echo
"$out/tsbench" -table "$results" -base "$base" -issue-floor="$yardstick"
echo "(ratios above 1: $base is that many times faster; results in $results)"
