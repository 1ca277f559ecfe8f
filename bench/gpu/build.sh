#!/usr/bin/env bash
# Builds the device check's binaries into bench/gpu/bin (git-ignored) on a
# machine with Go; run.sh then runs them on a machine with a GPU and no Go.
# All are static (CGO_ENABLED=0: the CUDA libraries are opened at run time)
# and stripped.
#
# It also packs them, with the revision they were built from, into
# bench/gpu/bin.tar.xz, and the test fixtures the GPU tests read into
# bench/gpu/fixtures.tar.xz: those archives, not bin/ and testdata/, are
# what travels to the device machine (carry: ["bench/gpu/bin.tar.xz",
# "bench/gpu/fixtures.tar.xz"]), and run.sh unpacks them. The device tool
# sends the working tree (tracked files and untracked ones git does not
# ignore) plus the carried paths, at most 64 MiB in all; testdata/ alone is
# about 70 MB, so it stays behind (untracked for the call) and the
# fixtures travel packed: the config, weights and golden of the two GPT-2
# checkpoints and of the tiny Qwen2, Llama and Qwen3 ones (about 32 MB with
# xz, 12.5 MB of it gpt2-tiny-hot's: FIXTURES_NO_HOT=1 leaves that out, and
# the tests that use it then take gpt2-tiny). The three binaries are about
# 55 MB, xz at -9 (one 64 MiB window, so the code they share is stored
# once) brings them to about 12 MB.
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
# The fixtures the GPU tests read (llm/cuda's ../../testdata): what
# model.Load and the goldens need of each, nothing else.
fixtures=bench/gpu/fixtures.tar.xz
files=()
dirs=(gpt2-tiny gpt2-tiny-hot qwen2-tiny llama-tiny qwen3-tiny)
[ "${FIXTURES_NO_HOT:-}" = 1 ] && dirs=(gpt2-tiny qwen2-tiny llama-tiny qwen3-tiny)
for d in "${dirs[@]}"; do
	for f in config.json generation_config.json model.safetensors golden.json; do
		[ -f "testdata/$d/$f" ] && files+=("$d/$f")
	done
	[ -f "testdata/$d/model.safetensors" ] || {
		echo "build.sh: testdata/$d/model.safetensors is missing" >&2
		exit 1
	}
done
tar -C testdata -cf - "${files[@]}" | xz -9 -T1 >"$fixtures.tmp"
mv "$fixtures.tmp" "$fixtures"
# What the device tool sends when testdata/ stays behind: the working tree
# as git sees it outside testdata/ (tracked files that exist, untracked
# files that are not ignored), a shared/ folder if there is one, and the
# two archives. Finding out there costs device time.
tree=$( (git ls-files -z --cached --others --exclude-standard -- ':!testdata' | du -cb --files0-from=- 2>/dev/null || true) | tail -1 | cut -f1)
shared=0
[ -d shared ] && shared=$(du -sb shared | cut -f1)
packed=$(stat -c %s "$archive")
packedFixtures=$(stat -c %s "$fixtures")
total=$((tree + shared + packed + packedFixtures))
echo "build.sh: $archive is $packed bytes, $fixtures $packedFixtures; with the working tree outside testdata/ ($tree bytes) and shared/ ($shared bytes), $total bytes travel, $((100 * total / limit))% of the device tool's 64 MiB"
if [ "$total" -gt "$limit" ]; then
	echo "build.sh: over the device tool's 64 MiB: remove or ignore untracked files, or carry less" >&2
	exit 1
fi
