#!/usr/bin/env bash
# Dry run of the GPU device check on a machine without a GPU: builds the
# binaries (build.sh), builds the tests' host emulator of the CUDA kernels
# as libcuda.so.1, libcublas.so.12 and libnvrtc.so.12 (emu-libs.sh), and
# runs run.sh against it with a small model. Every step
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
# (default testdata/gpt2-tiny), and run.sh's others.
set -euo pipefail
cd "$(dirname "$0")/../.."
bench/gpu/build.sh >/dev/null
emu=bench/gpu/emu
EMU_DIR=$emu bench/gpu/emu-libs.sh
export TINYSERVE_CUDA_LIB_DIR=$PWD/$emu
export MODEL=${MODEL:-testdata/gpt2-tiny} REQUESTS=${REQUESTS:-4} BENCHTIME=${BENCHTIME:-20x}
export BUDGET_S=${BUDGET_S:-1200} RESULTS=${RESULTS:-bench/gpu/out-emulated}
exec bench/gpu/run.sh
