#!/usr/bin/env bash
# Builds the device check's binaries into bench/gpu/bin (git-ignored) on a
# machine with Go; run.sh then runs them on a machine with a GPU and no Go.
# All are static (CGO_ENABLED=0: the CUDA libraries are opened at run time)
# and stripped, to stay well inside a 64 MiB carry.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=bench/gpu/bin
mkdir -p "$out"
flags=(-trimpath -ldflags=-s\ -w)
CGO_ENABLED=0 go test -c "${flags[@]}" -o "$out/cuda.test" ./llm/cuda
CGO_ENABLED=0 go build "${flags[@]}" -o "$out/gpubench" ./bench/gpu/gpubench
CGO_ENABLED=0 go build "${flags[@]}" -o "$out/sweep" ./cmd/sweep
du -sh "$out"/*
# The device tool refuses a carry over 64 MiB, and finding that out there
# costs device time: fail here instead.
total=$(du -cb "$out"/* | tail -1 | cut -f1)
limit=$((64 << 20))
if [ "$total" -gt "$limit" ]; then
	echo "build.sh: $out holds $total bytes, over the 64 MiB carry limit" >&2
	exit 1
fi
echo "build.sh: $total bytes, $((100 * total / limit))% of the 64 MiB carry"
