#!/usr/bin/env bash
# Builds the device check's binaries into bench/gpu/bin (git-ignored) on a
# machine with Go; run.sh then runs them on a machine with a GPU and no Go.
# All are static (CGO_ENABLED=0: the CUDA libraries are opened at run time)
# and stripped.
#
# It also packs them, with the revision they were built from, into
# bench/gpu/bin.tar.xz: that archive, not bin/, is what travels to the
# device machine (carry: ["bench/gpu/bin.tar.xz"]), and run.sh unpacks it.
# The device tool sends the whole working tree (tracked and untracked files
# git does not ignore) plus the carried paths, at most 64 MiB in all; the
# tree alone is about 46 MB and the three binaries about 55 MB, so bin/
# itself cannot travel, while xz at -9 (one 64 MiB window, so the code the
# binaries share is stored once) brings them to about 10 MB.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=bench/gpu/bin
archive=bench/gpu/bin.tar.xz
limit=$((64 << 20))
command -v xz >/dev/null || {
	echo "build.sh: xz not found (apt-get install xz-utils): the binaries travel as bench/gpu/bin.tar.xz" >&2
	exit 1
}
rm -rf "$out" && mkdir -p "$out"
flags=(-trimpath -ldflags=-s\ -w)
CGO_ENABLED=0 go test -c "${flags[@]}" -o "$out/cuda.test" ./llm/cuda
CGO_ENABLED=0 go build "${flags[@]}" -o "$out/gpubench" ./bench/gpu/gpubench
CGO_ENABLED=0 go build "${flags[@]}" -o "$out/sweep" ./cmd/sweep
# The device machine's copy has no git history: the summary names the
# revision the binaries were built from.
git describe --always --dirty --abbrev=12 >"$out/REVISION" 2>/dev/null || echo unknown >"$out/REVISION"
du -sh "$out"/*
tar -C bench/gpu -cf - bin | xz -9 -T1 >"$archive.tmp"
mv "$archive.tmp" "$archive"
# What the device tool would send: the working tree as git sees it (tracked
# files that exist, untracked files that are not ignored), a shared/ folder
# if there is one, and the archive. Finding out there costs device time.
tree=$( (git ls-files -z --cached --others --exclude-standard | du -cb --files0-from=- 2>/dev/null || true) | tail -1 | cut -f1)
shared=0
[ -d shared ] && shared=$(du -sb shared | cut -f1)
packed=$(stat -c %s "$archive")
total=$((tree + shared + packed))
echo "build.sh: $archive is $packed bytes; with the working tree ($tree bytes) and shared/ ($shared bytes), $total bytes travel, $((100 * total / limit))% of the device tool's 64 MiB"
if [ "$total" -gt "$limit" ]; then
	echo "build.sh: over the device tool's 64 MiB: remove or ignore untracked files, or carry less" >&2
	exit 1
fi
