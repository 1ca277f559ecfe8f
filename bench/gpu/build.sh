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
if [ -d cmd/sweep ]; then
	CGO_ENABLED=0 go build "${flags[@]}" -o "$out/sweep" ./cmd/sweep
else
	rm -f "$out/sweep"
	echo "build.sh: cmd/sweep does not exist yet; run.sh will skip the embedded sweep" >&2
fi
du -sh "$out"/*
