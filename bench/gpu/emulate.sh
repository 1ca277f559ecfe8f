#!/usr/bin/env bash
# Dry run of the GPU device check on a machine without a GPU: builds the
# binaries (build.sh), builds the tests' host emulator of the CUDA kernels
# as libcuda.so.1, libcublas.so.12 and libnvrtc.so.12 (emu-libs.sh), and
# runs run.sh against it with a small model, in a copy of what the device
# tool would send (the working tree outside testdata/, the binaries' and
# the fixtures' archives). Every step
# of the check then executes as it would on a GPU machine — the same
# binaries, the same purego calls into C functions with NVIDIA's
# prototypes, the same scripts, reports and tables — so a mistake in any of
# them shows here, not in the scarce minutes of a real device. Its timings
# are of the emulator (a CPU running each CUDA thread as a fiber) and mean
# nothing; the PyTorch peer is skipped (no CUDA device for torch).
#
#   bench/gpu/emulate.sh        # results in bench/gpu/out-emulated, or $RESULTS
#
# Needs Go and g++ (x86-64 Linux). Knobs: REQUESTS (default 4), MODEL
# (default testdata/gpt2-tiny), DECODE_MODEL (default testdata/qwen2-tiny),
# and run.sh's others.
set -euo pipefail
cd "$(dirname "$0")/../.."
bench/gpu/build.sh >/dev/null
emu=bench/gpu/emu
EMU_DIR=$emu bench/gpu/emu-libs.sh
export TINYSERVE_CUDA_LIB_DIR=$PWD/$emu
# The emulator runs each CUDA thread as a fiber: the GPU tests (every golden
# prompt, and qwen2.5-0.5b-random against the CPU backend) take it about
# ten minutes, so the steps' limits are scaled; the batched decode
# benchmark takes a tiny Qwen2 rather than the 494M-parameter model, whose
# emulated GEMMs would take hours, and the device gets 8 GiB (the
# float32 copy of qwen2.5-0.5b-random is 2 GB).
export MODEL=${MODEL:-testdata/gpt2-tiny} REQUESTS=${REQUESTS:-4} BENCHTIME=${BENCHTIME:-20x}
export DECODE_MODEL=${DECODE_MODEL:-testdata/qwen2-tiny} STEP_TIMEOUT_SCALE=${STEP_TIMEOUT_SCALE:-8}
export TINYSERVE_CUDA_EMU_MEMORY_MB=${TINYSERVE_CUDA_EMU_MEMORY_MB:-8192}
export BUDGET_S=${BUDGET_S:-3600}
# The Q8_0 decode step: a few steps suffice to show it runs.
export Q8_STEPS=${Q8_STEPS:-3} Q8_WARMUP=${Q8_WARMUP:-1}
# The decode model's scenarios and serving-inference sweeps: a couple of
# requests each (long_prefill's 2,048-token prompts are minutes of
# emulated attention apiece), and prefill steps of 64 and 256 tokens.
export QWEN_REQUESTS=${QWEN_REQUESTS:-2} QWEN_SI_REQUESTS=${QWEN_SI_REQUESTS:-2}
export TINYSERVE_GPU_PREFILL_TOKENS=${TINYSERVE_GPU_PREFILL_TOKENS:-64,256}
RESULTS=${RESULTS:-bench/gpu/out-emulated}
[[ $RESULTS = /* ]] || RESULTS=$PWD/$RESULTS
export RESULTS
# The check runs in a copy of what the device tool sends: the working tree
# outside testdata/ and the two archives, so that a file the check needs
# and the archives lack fails here.
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
git ls-files -z --cached --others --exclude-standard -- ':!testdata' |
	while IFS= read -r -d '' f; do
		[ -e "$f" ] || [ -L "$f" ] || continue
		cp -P --parents -- "$f" "$stage/"
	done
cp bench/gpu/bin.tar.xz bench/gpu/fixtures.tar.xz "$stage/bench/gpu/"
rc=0
(cd "$stage" && bench/gpu/run.sh) || rc=$?
exit $rc
