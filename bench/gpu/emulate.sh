#!/usr/bin/env bash
# Dry run of the GPU device check on a machine without a GPU: builds the
# binaries (build.sh), builds the tests' host emulator of the CUDA kernels
# (llm/cuda/testdata/emu) as libcuda.so.1, libcublas.so.12 and
# libnvrtc.so.12, and runs run.sh against it with a small model. Every step
# of the check then executes as it would on a GPU machine — the same
# binaries, the same purego calls into C functions with NVIDIA's
# prototypes, the same scripts, reports and tables — so a mistake in any of
# them shows here, not in the scarce minutes of a real device. Its timings
# are of the emulator (a CPU running each CUDA thread as a fiber) and mean
# nothing; the PyTorch peer is skipped (no CUDA device for torch).
#
#   bench/gpu/emulate.sh        # results in bench/gpu/out-emulated, or $OUT
#
# Needs Go and g++ (x86-64 Linux). Knobs: REQUESTS (default 4), MODEL
# (default testdata/gpt2-tiny), and run.sh's others.
set -euo pipefail
cd "$(dirname "$0")/../.."
bench/gpu/build.sh >/dev/null
emu=bench/gpu/emu
rm -rf "$emu" && mkdir -p "$emu"
src=llm/cuda/kernels/gpt2.cu
# The kernels to register: each TS_INSTANTIATE'd template kernel for each
# storage suffix, and the plain extern "C" kernels.
{
	for sfx in $(grep -oE '^TS_INSTANTIATE\([A-Z0-9]+, *[a-z0-9]+\)' "$src" | sed -E 's/.*, *([a-z0-9]+)\)/\1/'); do
		for k in $(grep -oE '__global__ void [a-z_0-9]+_##SUF' "$src" | sed -E 's/__global__ void //; s/_##SUF//'); do
			echo "TS_EMU_KERNEL(${k}_$sfx)"
		done
	done
	for k in $(grep -oE '^extern "C" __global__ void [a-z_0-9]+' "$src" | sed -E 's/.* //'); do
		echo "TS_EMU_KERNEL($k)"
	done
} >"$emu/kernels.inc"
shim=llm/cuda/testdata/emu
${CXX:-g++} -std=c++17 -O2 -shared -fPIC -fvisibility=hidden -I"$emu" -Illm/cuda/kernels -I"$shim" \
	-o "$emu/libtinyserve_cuda_emu.so" "$shim/emu.cc" "$shim/driver.cc"
for name in libcuda.so.1 libcublas.so.12 libnvrtc.so.12; do
	ln -s libtinyserve_cuda_emu.so "$emu/$name"
done
echo "emulator: $(grep -c . "$emu/kernels.inc") kernels in $emu" >&2
export TINYSERVE_CUDA_LIB_DIR=$PWD/$emu
export MODEL=${MODEL:-testdata/gpt2-tiny} REQUESTS=${REQUESTS:-4} BENCHTIME=${BENCHTIME:-20x}
export BUDGET_S=${BUDGET_S:-1200} OUT=${OUT:-bench/gpu/out-emulated}
exec bench/gpu/run.sh
