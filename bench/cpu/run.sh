#!/usr/bin/env bash
# CPU benchmark of tinyserve's GPT-2 forward on the 124M shape (issue 3):
# prefill tokens/s for one 128- and one 512-token prompt (LM head for the last
# row only), decode tokens/s at batch 1, 8 and 32 (context 128), and peak
# resident memory. Writes the random 124M checkpoint as safetensors first, so
# the benchmark loads weights the way a served checkpoint is loaded.
#
# Usage: bench/cpu/run.sh [count]   (count = repetitions per benchmark, default 3)
# Environment: GOMAXPROCS limits the cores used; KEEP_CHECKPOINT=1 keeps it.
set -euo pipefail
cd "$(dirname "$0")/../.."
count=${1:-3}
ckpt=$(mktemp -d -t gpt2-124m-random.XXXXXX)
cleanup() { [ "${KEEP_CHECKPOINT:-0}" = 1 ] || rm -rf "$ckpt"; }
trap cleanup EXIT

echo "# $(date -u +%Y-%m-%dT%H:%MZ)  $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')  $(nproc) cores  GOMAXPROCS=${GOMAXPROCS:-all}"
go run ./bench/cpu/gencheckpoint -model gpt2-124m-random -out "$ckpt"

# Each benchmark runs in its own process so peakRSS-MiB is that benchmark's
# own peak (model + KV + buffers), not the largest of the whole run.
for bench in 'CPUPrefill/tokens=128$' 'CPUPrefill/tokens=512$' 'CPUDecode/batch=1$' 'CPUDecode/batch=8$' 'CPUDecode/batch=32$'; do
	TINYSERVE_BENCH_MODEL="$ckpt" go test ./llm/cpu/ -run '^$' -bench "$bench" -benchtime 2x -count "$count" -timeout 60m |
		grep '^Benchmark'
done
