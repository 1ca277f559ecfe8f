#!/usr/bin/env bash
# GPU device check for llm/cuda (issues 7 and 28). Runs on a machine with an
# NVIDIA GPU (CUDA 12 or 13 driver) from binaries build.sh made elsewhere;
# Go is not needed here. Python 3 with torch + transformers is needed only
# for the PyTorch peer (skipped, and said so, without them). The binaries
# come as bench/gpu/bin.tar.xz (what the device tool carries), unpacked here
# into bench/gpu/bin, or already in bench/gpu/bin; the test fixtures as
# bench/gpu/fixtures.tar.xz, unpacked into testdata/, or already there.
#
#   bench/gpu/run.sh            # results in bench/gpu/out (or $RESULTS)
#   OUT=/some/dir bench/gpu/run.sh  # also packs them, as the device tool
#                               # wants: $OUT/summary.md and $OUT/results.tar.gz
#                               # (it brings back at most 8 files)
#
# Steps (about 3-4 minutes on an H200; each bounded by a timeout):
#   1. correctness: the llm/cuda GPU tests, skips turned into failures: every
#      architecture against its goldens (GPT-2, and the tiny Qwen2, Llama 3
#      and Qwen3: float32 greedy ids and top-10 logits, mixed batches vs the
#      CPU backend, float16/bfloat16 top-10), graph replays, and the built-in
#      qwen2.5-0.5b-random against the CPU backend
#   2. per-step time: GPT-2 124M, 4 decoding sequences (goal: < 1 ms) and
#      one 64-token prefill chunk; then for GPT-2 (DTYPE) and for
#      qwen2.5-0.5b-random in bfloat16, with CUDA graphs, the decode step at
#      batch 1, 4 and 32 (ms/step and the effective bandwidth) and the
#      prefill step of a 64- and a 512-token prompt (issue 31); then the decode step with
#      the weights quantized to Q8_0 and kept 8-bit on the GPU beside
#      float16/bfloat16 (gpubench decode: GPT-2 124M and
#      qwen2.5-0.5b-random, batch 1 and 4, CUDA graphs, ms/step and the
#      ratio; issue 32); then (their own processes)
#      eager steps' time by kernel and GEMM (TestProfileGPUStep), GPT-2
#      float16 and Qwen bfloat16
#   3. tiny-vLLM's seven scenarios through the engine on the GPU (gpubench),
#      eager and with CUDA graphs
#   4. the same scenarios with Hugging Face transformers (hf_peer.py)
#   5. the comparison table -> table.md, everything -> summary.md; then
#      (issue 31) the decode model (qwen2.5-0.5b-random) on the seven
#      scenarios with CUDA graphs against transformers on the same weights
#      (QWEN_REQUESTS each) -> table-decode-model.md, and serving-inference's
#      short, long_prefill, decode_heavy and mixed workloads
#      (experiments/si-qwen-*.json) through the embedded server at
#      concurrency 4 (QWEN_SI_REQUESTS each): TTFT, latency, tok/s
#   6. the embedded sweep with experiments/sweep-*.json, when cmd/sweep and
#      those configs exist (backend cuda with the tools' defaults, CUDA
#      graphs on, REQUESTS requests, one repeat, no warm-up), skipped when the
#      earlier steps ran long
#
# Knobs: REQUESTS (per scenario, default 16; tiny-vLLM used 100),
# DTYPE (default float16), TINYSERVE_CUDA_LIB_DIR (library folder),
# MODEL (built-in name or checkpoint folder for the GPT-2 benchmark, the
# scenarios and the sweep; default gpt2-124m-random), DECODE_MODEL (the
# batched decode benchmark's and second profile's model, default
# qwen2.5-0.5b-random) and DECODE_DTYPE (default bfloat16), BENCHTIME (the
# step benchmarks' -test.benchtime, default 300x), BUDGET_S (the whole
# check's time budget, default 300: no step runs past it, each step's own
# limit is cut to what is left, the PyTorch peer starts only with 100 s to
# spare and the sweeps only with 70), PYTHON (the interpreter with torch,
# default python3), STEP_TIMEOUT_SCALE (multiplies every step's own limit,
# default 1), Q8 (0 skips the Q8_0 decode step), Q8_STEPS (its timed
# steps per row, default 200; Q8_WARMUP untimed ones first, default 10),
# Q8_BATCHES (default 1,4), QWEN_REQUESTS (default 8) and QWEN_SI_REQUESTS
# (default 16), TINYSERVE_GPU_PREFILL_TOKENS (the prefill step's prompt
# sizes, default 64,512). bench/gpu/emulate.sh
# sets them for a dry run on the host emulator.
set -uo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
bin=$root/bench/gpu/bin
out=${RESULTS:-$root/bench/gpu/out}
pack=${OUT:-}
requests=${REQUESTS:-16}
dtype=${DTYPE:-float16}
model=${MODEL:-gpt2-124m-random}
benchtime=${BENCHTIME:-300x}
budget=${BUDGET_S:-300}
timeout_scale=${STEP_TIMEOUT_SCALE:-1}
decode_model=${DECODE_MODEL:-qwen2.5-0.5b-random}
decode_dtype=${DECODE_DTYPE:-bfloat16}
python=${PYTHON:-python3}
q8=${Q8:-1}
q8_steps=${Q8_STEPS:-200}
q8_batches=${Q8_BATCHES:-1,4}
q8_warmup=${Q8_WARMUP:-10}
qwen_requests=${QWEN_REQUESTS:-8}
qwen_si_requests=${QWEN_SI_REQUESTS:-16}
# The peer reads a local checkpoint; never let transformers try the network.
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
scratch=$(mktemp -d)
# The device tool returns at most 8 files from $OUT, two folders deep, so the
# evidence (every log, JSON and sweep folder) travels as one archive beside
# the summary, even when the check stops early.
finish() {
	if [ -n "$pack" ]; then
		mkdir -p "$pack" && cp "$out/summary.md" "$pack/" 2>/dev/null
		tar -czf "$pack/results.tar.gz" -C "$(dirname "$out")" "$(basename "$out")"
	fi
	rm -rf "$scratch"
}
trap finish EXIT
# A rerun keeps the earlier evidence (renamed) and measures afresh.
[ -e "$out" ] && mv "$out" "$out.$(date -u +%Y%m%dT%H%M%S)"
mkdir -p "$out" && out=$(cd "$out" && pwd)
# The GPU tests skip without a GPU; here a skip must be a failure.
export TINYSERVE_CUDA_REQUIRE=1
summary=$out/summary.md
fail=0
note() { # to the summary, and (so that a killed run still leaves it) to $OUT
	echo "$*" | tee -a "$summary"
	[ -z "$pack" ] || { mkdir -p "$pack" && cp "$summary" "$pack/"; }
}
step() { # step NAME TIMEOUT CMD... ; output to $out/NAME.txt
	local name=$1 limit=$2
	shift 2
	local left=$((budget - SECONDS))
	if [ $left -lt 15 ]; then
		note "- $name: SKIPPED (the check's $budget s budget is spent)"
		fail=1
		return 1
	fi
	limit=$((limit * timeout_scale))
	[ $limit -le $left ] || limit=$left
	local t0=$SECONDS
	timeout "$limit" "$@" >"$out/$name.txt" 2>&1
	local rc=$?
	if [ $rc -eq 0 ]; then note "- $name: ok ($((SECONDS - t0)) s)"; else
		note "- $name: FAILED (exit $rc after $((SECONDS - t0)) s; see $name.txt)"
		tail -n 40 "$out/$name.txt" | sed 's/^/      /' # into the call's output tail too
		fail=1
	fi
	return $rc
}

: >"$summary"
note "# tinyserve GPU device check"
note ""
note "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
# The binaries and the fixtures travel packed (build.sh): unpack them,
# with xz, or with Python's tarfile where xz is not installed.
unpack() { # unpack ARCHIVE DIR
	mkdir -p "$2"
	if command -v xz >/dev/null; then
		tar -C "$2" -xJf "$1"
	else
		"$python" - "$1" "$2" <<'PY'
import sys, tarfile
with tarfile.open(sys.argv[1]) as t:
    if hasattr(tarfile, "data_filter"):
        t.extractall(sys.argv[2], filter="data")
    else:
        t.extractall(sys.argv[2])
PY
	fi
}
if [ -f "$bin.tar.xz" ]; then
	rm -rf "$bin"
	unpack "$bin.tar.xz" "$(dirname "$bin")" || note "cannot unpack $bin.tar.xz"
fi
if [ -f "$root/bench/gpu/fixtures.tar.xz" ]; then
	unpack "$root/bench/gpu/fixtures.tar.xz" "$root/testdata" || note "cannot unpack bench/gpu/fixtures.tar.xz"
fi
# A checkpoint folder (the fixtures' too, now unpacked) by its absolute
# path: the steps run in different folders.
case $model in
*/*) model=$(cd "$model" && pwd) ;;
esac
case $decode_model in
*/*) decode_model=$(cd "$decode_model" && pwd) ;;
esac
note "git: $(cat "$bin/REVISION" 2>/dev/null || git rev-parse --short HEAD 2>/dev/null || echo unknown) (binaries built from it)"
note "libcuda per the system loader: $( (ldconfig -p 2>/dev/null | grep -m3 'libcuda\.so\.1 ' | sed 's/.*=> //' | paste -sd' ') || true)"
note "gpu: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo 'nvidia-smi not found')"
note "model: $model, requests per scenario: $requests, dtype: $dtype; batched decode: $decode_model, $decode_dtype"
note "fixtures: $(cd "$root/testdata" 2>/dev/null && ls -d */ 2>/dev/null | tr -d / | paste -sd' ')"
note ""
for f in cuda.test gpubench; do
	if [ ! -x "$bin/$f" ]; then
		note "missing $bin/$f: run bench/gpu/build.sh on a machine with Go first, and carry bench/gpu/bin.tar.xz"
		exit 2
	fi
done

# 1. Correctness (the test binary reads ../../testdata relative to llm/cuda).
cd "$root/llm/cuda"
step correctness 180 "$bin/cuda.test" -test.v -test.count=1 -test.run '^TestGPU'
grep -E '^(--- |    --- )|max .*(GPU|device)|max \|graph - eager\||graph memory:|prompts \(up to|GPU .*sm_|is not here' "$out/correctness.txt" | grep -v -- '--- SKIP: TestGPU.*/len' | sed 's/^/    /' >>"$summary"

# 2. Per-step time, then where an eager step's time goes (events between
#    its launches, the step queued behind a hold kernel). Two processes: a
#    test binary skips its benchmarks once a test of the same run has failed
#    (testing.M.Run), so a failing profile must not cost the step time.
TINYSERVE_GPU_BENCH_MODEL=$model step step_time 75 "$bin/cuda.test" -test.v -test.run '^$' -test.bench 'GPUDecodeStep|GPUPrefillChunk|GPUMixedStep' -test.benchtime "$benchtime"
grep -E 'Benchmark' "$out/step_time.txt" | sed 's/^/    /' >>"$summary"
# The decode step at batch 1, 4 and 32 and the prefill step of a 64- and a
# 512-token prompt, CUDA graphs on: GPT-2 (in DTYPE), then the decode model.
TINYSERVE_GPU_DECODE_MODEL=$model TINYSERVE_GPU_DECODE_DTYPE=$dtype \
	step decode_batch_model 90 "$bin/cuda.test" -test.v -test.run '^$' -test.bench 'GPUDecodeBatch|GPUPrefillStep' -test.benchtime "$benchtime"
grep -E 'Benchmark' "$out/decode_batch_model.txt" | sed 's/^/    /' >>"$summary"
TINYSERVE_GPU_DECODE_MODEL=$decode_model TINYSERVE_GPU_DECODE_DTYPE=$decode_dtype \
	step decode_batch 120 "$bin/cuda.test" -test.v -test.run '^$' -test.bench 'GPUDecodeBatch|GPUPrefillStep' -test.benchtime "$benchtime"
grep -E 'Benchmark' "$out/decode_batch.txt" | sed 's/^/    /' >>"$summary"
# The decode step on Q8_0 weights (8-bit on the GPU, dequantized in the
# GEMV's registers) beside the same model's float16 and bfloat16 weights.
if [ "$q8" != 0 ]; then
	for m in "$model" "$decode_model"; do
		n=q8_decode_$(basename "$m" | tr -c 'a-zA-Z0-9\n' '_')
		step "$n" 90 "$bin/gpubench" decode -model "$m" -quantization q8_0 -dtypes float16,bfloat16 \
			-batches "$q8_batches" -steps "$q8_steps" -warmup "$q8_warmup" -out "$out/$n.md" &&
			{ note ""; sed 's/^/    /' "$out/$n.md" >>"$summary"; note ""; }
	done
fi
TINYSERVE_GPU_BENCH_MODEL=$model step profile 45 "$bin/cuda.test" -test.v -test.run '^TestProfileGPUStep$'
sed -n -E '/(decode|prefill) step, .* eager, mean of/,/total \(GPU/p' "$out/profile.txt" | sed -E 's/^ *[a-z_]+_test.go:[0-9]*: //; s/^/    /' >>"$summary"
TINYSERVE_GPU_BENCH_MODEL=$decode_model TINYSERVE_GPU_BENCH_DTYPE=$decode_dtype \
	step profile_decode_model 60 "$bin/cuda.test" -test.v -test.run '^TestProfileGPUStep$'
sed -n -E '/(decode|prefill) step, .* eager, mean of/,/total \(GPU/p' "$out/profile_decode_model.txt" | sed -E 's/^ *[a-z_]+_test.go:[0-9]*: //; s/^/    /' >>"$summary"
cd "$root"

# 3. tinyserve on the seven scenarios, eager, then with CUDA graphs.
step tinyserve 120 "$bin/gpubench" scenarios -model "$model" -requests "$requests" -dtype "$dtype" -out "$out/tinyserve.json"
grep -m1 -o 'cuda: backend ready.*' "$out/tinyserve.txt" | sed 's/^/    /' >>"$summary" # the device and the libraries used
step tinyserve_graphs 120 "$bin/gpubench" scenarios -model "$model" -graphs -requests "$requests" -dtype "$dtype" -out "$out/tinyserve-graphs.json"

# 4. The PyTorch peer on the same weights (hf_peer.py: transformers'
#    AutoModelForCausalLM on the checkpoint gpubench writes), when there is
#    time for it.
peer() { # peer MODEL DTYPE REQUESTS NAME SPARE: the peer's report in $out/NAME.json
	local m=$1 dt=$2 n=$3 name=$4 spare=$5
	if [ $SECONDS -gt $((budget - spare)) ]; then
		note "- $name: SKIPPED (the earlier steps took $SECONDS s; the whole check must stay within $budget s)"
	elif "$python" -c 'import torch, transformers, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
		local ckpt=$m
		if [ -d "$m" ] || step "checkpoint_$name" 60 "$bin/gpubench" checkpoint -model "$m" "$scratch/checkpoint-$name"; then
			[ -d "$m" ] || ckpt=$scratch/checkpoint-$name
			step "$name" 150 "$python" bench/gpu/hf_peer.py --model "$ckpt" --requests "$n" --dtype "$dt" --out "$out/$name.json"
		fi
	else
		note "- $name: SKIPPED ($python with torch, transformers and a CUDA device not found)"
	fi
}
peer "$model" "$dtype" "$requests" hf 100

# 5. Tables: tinyserve (eager and graphs) against the PyTorch peer.
: >"$out/table.md"
for ts in tinyserve tinyserve-graphs; do
	[ -f "$out/$ts.json" ] || continue
	other=$out/hf.json
	[ -f "$other" ] || other=$out/$ts.json # no peer: the table still shows tinyserve's numbers
	"$bin/gpubench" table "$out/$ts.json" "$other" >>"$out/table.md" && echo >>"$out/table.md"
done
if [ -s "$out/table.md" ]; then
	note ""
	cat "$out/table.md" >>"$summary"
	cat "$out/table.md"
fi

# 5b. The decode model (qwen2.5-0.5b-random, the Qwen2.5-0.5B shape; issue
#     31): the seven scenarios with CUDA graphs, then transformers on the
#     same weights, both with QWEN_REQUESTS requests per scenario (default
#     8: transformers takes about 26 ms a step there), then
#     serving-inference's four workloads through the embedded server at
#     concurrency 4 (time to first token, the long_prefill goal).
if [ $SECONDS -gt $((budget - 90)) ]; then
	note "- $decode_model scenarios: SKIPPED (the earlier steps took $SECONDS s; the whole check must stay within $budget s)"
else
	step tinyserve_decode_model 120 "$bin/gpubench" scenarios -model "$decode_model" -graphs -requests "$qwen_requests" -dtype "$decode_dtype" -out "$out/tinyserve-decode-model.json"
	peer "$decode_model" "$decode_dtype" "$qwen_requests" hf_decode_model 80
	if [ -f "$out/tinyserve-decode-model.json" ]; then
		other=$out/hf_decode_model.json
		[ -f "$other" ] || other=$out/tinyserve-decode-model.json
		if "$bin/gpubench" table "$out/tinyserve-decode-model.json" "$other" >"$out/table-decode-model.md"; then
			note ""
			cat "$out/table-decode-model.md" >>"$summary"
			cat "$out/table-decode-model.md"
		fi
	fi
fi
retarget() { # retarget CONFIG OUT.json REQUESTS DTYPE OUTDIR MODEL CONCURRENCY [TOKENIZER]: a sweep config on the GPU, one repeat
	python3 - "$@" <<'PY'
import json, sys
src, dst, n, dtype, outdir, model, conc = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6], sys.argv[7]
tok = sys.argv[8] if len(sys.argv) > 8 else ""
c = json.load(open(src))
t = c.setdefault("target", {"kind": "embedded"})
e = t.setdefault("engine", {})
e["backend"] = "cuda"  # the configs' own dtype is kept, and their model unless MODEL is set
e.setdefault("model", "gpt2-124m-random")
if model:  # served under the config's own name, which its requests use
    e["model"], e["served_model_name"] = model, c["model"]
c["num_requests"] = min(n, c.get("num_requests", n))
if conc:
    c["concurrency"] = [int(x) for x in conc.split(",")]
if tok:
    e["tokenizer"] = tok
c["warmups"], c["repeats"], c["output_dir"] = 0, 1, outdir
json.dump(c, open(dst, "w"), indent=2)
PY
}
for w in short long_prefill decode_heavy mixed; do
	c=experiments/si-qwen-$w.json
	if [ ! -x "$bin/sweep" ] || [ ! -f "$c" ]; then
		note "- si-qwen-$w: SKIPPED (no bench/gpu/bin/sweep or no $c)"
		continue
	fi
	if [ $SECONDS -gt $((budget - 40)) ]; then
		note "- si-qwen-$w and later: SKIPPED (time)"
		break
	fi
	dm= tok=
	case $decode_model in */*) dm=$decode_model ;; esac # a folder (the dry run's): served under the config's name
	# The tiny Qwen fixtures carry no tokenizer.json: they take the built-in Qwen2.5 one, as their tests do.
	[ -z "$dm" ] || [ -f "$dm/tokenizer.json" ] || tok=qwen2.5
	retarget "$c" "$scratch/si-qwen-$w.json" "$qwen_si_requests" "$decode_dtype" "$out/sweep-qwen" "$dm" 4 "$tok" || { note "- si-qwen-$w: cannot retarget config"; continue; }
	step "sweep-si-qwen-$w" 60 "$bin/sweep" "$scratch/si-qwen-$w.json"
done
for r in "$out"/sweep-qwen/*/; do
	[ -f "$r/summary.json" ] || continue
	python3 - "$r/summary.json" <<'PY' | tee -a "$summary"
import json, sys
s = json.load(open(sys.argv[1]))
for c in s.get("by_concurrency", []):
    ttft, lat = c.get("ttft_s") or {}, c.get("latency_s") or {}
    print(f"    {s['config']['name']}: concurrency {c['concurrency']}, {c.get('counts', {}).get('successful', 0)} requests: "
          f"TTFT p50 {1000 * (ttft.get('p50') or 0):.1f} ms, p95 {1000 * (ttft.get('p95') or 0):.1f} ms; "
          f"latency p50 {1000 * (lat.get('p50') or 0):.0f} ms; {c.get('output_token_throughput_per_s') or 0:.0f} output tok/s")
PY
done

# 6. Embedded sweep (needs cmd/sweep, experiments/sweep-*.json and the
#    cuda backend wired into tinyserve.Open).
shopt -s nullglob
configs=(experiments/sweep-*.json)
if [ $SECONDS -gt $((budget - 70)) ]; then
	note "- embedded sweep: SKIPPED (the earlier steps took $SECONDS s; the whole check must stay within $budget s)"
elif [ -x "$bin/sweep" ] && [ ${#configs[@]} -gt 0 ]; then
	for c in "${configs[@]}"; do
		if [ $SECONDS -gt $((budget - 20)) ]; then
			note "- sweep $c and later: SKIPPED (time)"
			break
		fi
		name=$(basename "$c" .json)
		name=${name#sweep-}
		retarget "$c" "$scratch/$name.json" "$requests" "$dtype" "$out/sweep" "${MODEL:+$model}" "" || { note "- $name: cannot retarget config"; continue; }
		step "sweep-$name" 45 "$bin/sweep" "$scratch/$name.json"
	done
else
	note "- embedded sweep: SKIPPED ($([ -x "$bin/sweep" ] || echo 'no bench/gpu/bin/sweep: run bench/gpu/build.sh first; ')$([ ${#configs[@]} -gt 0 ] || echo 'no experiments/sweep-*.json'))"
fi
# The sweeps' figures (HTTP, streaming) against the PyTorch peer.
roots=()
for r in "$out"/sweep/*/; do [ -f "$r/summary.json" ] && roots+=("$r"); done
if [ ${#roots[@]} -gt 0 ] && "$bin/gpubench" fromsweep "$out/sweep.json" "${roots[@]}"; then
	other=$out/hf.json
	[ -f "$other" ] || other=$out/sweep.json
	if "$bin/gpubench" table "$out/sweep.json" "$other" >"$out/sweep-table.md"; then
		note ""
		cat "$out/sweep-table.md" >>"$summary"
		cat "$out/sweep-table.md"
	fi
fi

note ""
note "total: $SECONDS s; $([ $fail -eq 0 ] && echo 'all steps passed' || echo 'SOME STEPS FAILED')"
exit $fail
