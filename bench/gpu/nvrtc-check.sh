#!/usr/bin/env bash
# Compile-checks the CUDA kernels with real NVRTCs on a machine without a
# GPU or CUDA toolkit: fetches NVRTC 11.8 (Debian 12) and 12.4 (Debian 13)
# from Debian's non-free archive (two packages each, checked against their
# SHA-256), unpacks them into a cache folder, and runs the llm/cuda tests
# that need only NVRTC, once per version: the kernels compile for every
# architecture the version lists from sm_70 on (both list sm_70 to sm_90)
# and to PTX, a broken source reports NVRTC's log, and ptxas reports no
# register spills (register counts logged). A GPU machine's own NVRTC
# (13 on a CUDA 13 driver) is checked by the device check itself.
#
#   bench/gpu/nvrtc-check.sh              # both versions; needs curl and dpkg-deb (or ar + tar)
#   NVRTC_VERSIONS=12.4 bench/gpu/nvrtc-check.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
cache=${XDG_CACHE_HOME:-$HOME/.cache}/tinyserve
pool=http://deb.debian.org/debian/pool/non-free/n/nvidia-cuda-toolkit

# version: the Debian package version, then "package sha256" pairs.
declare -A deb_version=(
	[11.8]=11.8.89~11.8.0-5~deb12u1
	[12.4]=12.4.127~12.4.1-2
)
declare -A deb_files=(
	[11.8]="libnvrtc11.2 051b70a3d8737eae470b4158e234cf112c803f631b2c77ae60a24a1146309c22
libnvrtc-builtins11.8 e446e112c304b86a35925bea6a3991a866a29736fac261adb218ec29efb49bb8"
	[12.4]="libnvrtc12 db76acbd9ad53eae57291114b615ed21551592dee0b1160990a33066d86c251c
libnvrtc-builtins12.4 c4f9ea43c3e176a9f46b50718d546adb0dc7344432cd7d8b1483692e0416d24c"
)

# fetch puts NVRTC $1's libraries in $2 unless they are there already.
fetch() {
	local v=$1 dir=$2
	if ls "$dir"/libnvrtc.so.* >/dev/null 2>&1; then
		return
	fi
	local tmp
	tmp=$(mktemp -d)
	while read -r pkg sum; do
		local deb=$tmp/$pkg.deb
		curl -fsSL -o "$deb" "$pool/${pkg}_${deb_version[$v]}_amd64.deb"
		echo "$sum  $deb" | sha256sum -c --quiet
		if command -v dpkg-deb >/dev/null; then
			dpkg-deb -x "$deb" "$tmp/x"
		else
			(cd "$tmp" && ar x "$deb" data.tar.xz && mkdir -p x && tar -xJf data.tar.xz -C x && rm data.tar.xz)
		fi
	done <<<"${deb_files[$v]}"
	mkdir -p "$dir"
	cp -a "$tmp"/x/usr/lib/x86_64-linux-gnu/libnvrtc* "$dir"/
	rm -rf "$tmp"
}

status=0
for v in ${NVRTC_VERSIONS:-11.8 12.4}; do
	if [ -z "${deb_version[$v]:-}" ]; then
		echo "nvrtc-check: no NVRTC $v here (known: ${!deb_version[*]})" >&2
		exit 2
	fi
	dir=$cache/nvrtc-$v
	fetch "$v" "$dir"
	echo "== NVRTC $v in $dir" >&2
	TINYSERVE_CUDA_LIB_DIR=$dir go test ./llm/cuda -count=1 -v \
		-run 'TestKernelsCompile|TestKernelsNoSpills|TestKernelImageCompilesAndCaches|TestPTXFallbackArch' |
		grep -E '^(---|ok|FAIL)|NVRTC|registers|compiled for' || status=1
done
exit $status
