#!/usr/bin/env bash
# Builds the tests' host emulator of the CUDA kernels (llm/cuda/testdata/emu)
# as libcuda.so.1, libcublas.so.12 and libnvrtc.so.12 in bench/gpu/emu (or
# $EMU_DIR), for TINYSERVE_CUDA_LIB_DIR. Needs g++ on x86-64 Linux.
#
#   bench/gpu/emu-libs.sh
#   TINYSERVE_CUDA_LIB_DIR=$PWD/bench/gpu/emu go run ./cmd/generate --backend cuda
#   # the host side of a step alone (kernels and GEMMs skipped):
#   TINYSERVE_CUDA_LIB_DIR=$PWD/bench/gpu/emu TINYSERVE_CUDA_EMU_NULL=1 \
#     go test ./llm/cuda -run '^$' -bench GPUDecodeStep
set -euo pipefail
cd "$(dirname "$0")/../.."
emu=${EMU_DIR:-bench/gpu/emu}
rm -rf "$emu" && mkdir -p "$emu"
src=llm/cuda/kernels/decoder.cu
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
	-o "$emu/libtinyserve_cuda_emu.so" "$shim/emu.cc" "$shim/driver.cc" "$shim/blas.cc" "$shim/nvrtc.cc"
for name in libcuda.so.1 libcublas.so.12 libnvrtc.so.12; do
	ln -s libtinyserve_cuda_emu.so "$emu/$name"
done
echo "emulator: $(grep -c . "$emu/kernels.inc") kernels in $emu" >&2
