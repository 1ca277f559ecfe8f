#!/usr/bin/env bash
# Client-overhead benchmark: the sweep's load client against wrk on one
# local endpoint that answers at once. Needs wrk (Debian: apt-get install wrk).
# Usage: bench/client/run.sh [REQUESTS]   (run from the repository root)
set -euo pipefail
N=${1:-20000}
ADDR=127.0.0.1:18080
URL=http://$ADDR/v1/completions
DUR=${DUR:-10s}
BIN=$(mktemp -d)
trap 'kill $SERVER 2>/dev/null || true; rm -rf "$BIN"' EXIT
go build -o "$BIN/client" ./bench/client
"$BIN/client" serve "$ADDR" &
SERVER=$!
sleep 0.5
echo "== endpoint: $URL (answers at once with a 4-chunk SSE stream)"
echo "== machine: $(nproc) CPUs, $(go version)"
for C in 1 256; do
  T=$(( C < 2 ? 1 : 2 ))
  echo "-- wrk -t$T -c$C -d$DUR"
  wrk -t"$T" -c"$C" -d"$DUR" --latency -s bench/client/post.lua "$URL" | grep -E 'Requests/sec|Latency|50%|99%'
  echo "-- sweep client, concurrency $C, $N requests"
  "$BIN/client" load "$URL" "$C" "$N"
done
