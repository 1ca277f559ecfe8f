#!/usr/bin/env bash
# Compile-checks the CUDA kernels with a real NVRTC on a machine without a
# GPU or CUDA toolkit: fetches NVRTC 11.8 from Debian's non-free archive
# (two packages, checked against their SHA-256), unpacks them into a cache
# folder, and runs the llm/cuda tests that need only NVRTC: the kernels
# compile for every architecture from sm_70 and to PTX, a broken source
# reports NVRTC's log, and ptxas reports no register spills (register
# counts logged). NVRTC 11.8 knows sm_70..sm_90; a GPU machine's newer
# NVRTC is checked by the device check itself.
#
#   bench/gpu/nvrtc-check.sh        # needs curl and dpkg-deb (or ar + tar)
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=${NVRTC_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/tinyserve/nvrtc-11.8}
pool=http://deb.debian.org/debian/pool/non-free/n/nvidia-cuda-toolkit
version=11.8.89~11.8.0-5~deb12u1
debs=(
	"libnvrtc11.2 051b70a3d8737eae470b4158e234cf112c803f631b2c77ae60a24a1146309c22"
	"libnvrtc-builtins11.8 e446e112c304b86a35925bea6a3991a866a29736fac261adb218ec29efb49bb8"
)
if ! ls "$dir"/libnvrtc.so.* >/dev/null 2>&1; then
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	for entry in "${debs[@]}"; do
		read -r pkg sum <<<"$entry"
		deb=$tmp/$pkg.deb
		curl -fsSL -o "$deb" "$pool/${pkg}_${version}_amd64.deb"
		echo "$sum  $deb" | sha256sum -c --quiet
		if command -v dpkg-deb >/dev/null; then
			dpkg-deb -x "$deb" "$tmp/x"
		else
			(cd "$tmp" && ar x "$deb" data.tar.xz && mkdir -p x && tar -xJf data.tar.xz -C x)
		fi
	done
	mkdir -p "$dir"
	cp -a "$tmp"/x/usr/lib/x86_64-linux-gnu/libnvrtc* "$dir"/
fi
echo "NVRTC in $dir" >&2
TINYSERVE_CUDA_LIB_DIR=$dir go test ./llm/cuda -count=1 -v \
	-run 'TestKernelsCompile|TestKernelsNoSpills|TestKernelImageCompilesAndCaches|TestPTXFallbackArch' |
	grep -E '^(---|ok|FAIL)|NVRTC|registers|compiled for'
