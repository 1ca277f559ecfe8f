#!/usr/bin/env bash
# Interoperability check with the official OpenAI Node SDK: installs a pinned
# version of the npm package "openai" into a temporary folder, builds and
# starts tinyserve-serve on a free loopback port, waits for /health, runs
# openai-node.mjs against it and stops the server; then does the same with
# openai-node-chat.mjs against testdata/qwen3-tiny served with its chat
# template and vLLM's hermes and qwen3 parsers; then runs resilience.mjs,
# which starts servers of its own from the same binary (429 retries, draining
# 503s, error events mid-stream). Needs Go, Node.js (20 or later) and npm with
# access to the npm registry; it is a developer's script, not part of
# `go test` (the Go suite never uses the network). Exits 1 if either failed.
#
# Usage: examples/interop/run.sh [serve flags...]   (default: --model tiny-gpt2
#        --enable-prefix-caching --api-key interop-key, and the checks of both;
#        the checks count GPT-2 tokens, so the model needs GPT-2's tokenizer;
#        the flags are openai-node.mjs's server's: resilience.mjs always
#        starts the built-in gpt2-124m-random with flags of its own)
# Environment:
#   OPENAI_NODE_VERSION  the SDK version to install (default 6.49.0, the newest
#                        whose package.json accepts Node 20; 7.x declares
#                        Node >= 22, though 7.59.0 also passed on Node 20)
#   SDK_DIR              install the SDK here and keep it (default: a temp
#                        folder, removed at the end)
#   KEEP_LOG=1           keep the server's log (its path is printed)
set -euo pipefail
cd "$(dirname "$0")/../.."
version=${OPENAI_NODE_VERSION:-6.49.0}
work=$(mktemp -d -t tinyserve-interop.XXXXXX)
sdk=${SDK_DIR:-$work/sdk}
log=$work/serve.log
pid=
cleanup() {
	if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
		kill -TERM "$pid"
		wait "$pid" || true
	fi
	if [ "${KEEP_LOG:-0}" = 1 ]; then
		echo "server log: $log"
		[ -n "${SDK_DIR:-}" ] || rm -rf "$sdk"
	else
		rm -rf "$work"
	fi
}
trap cleanup EXIT

if [ ! -f "$sdk/node_modules/openai/package.json" ] ||
	[ "$(node -p "require('$sdk/node_modules/openai/package.json').version")" != "$version" ]; then
	echo "== npm install openai@$version"
	mkdir -p "$sdk"
	npm install --prefix "$sdk" --no-audit --no-fund --loglevel=error "openai@$version" >/dev/null
fi
# The scripts import "openai", which Node resolves from the script's folder.
cp examples/interop/openai-node.mjs examples/interop/openai-node-chat.mjs examples/interop/resilience.mjs "$sdk/"

echo "== go build ./cmd/serve"
go build -o "$work/tinyserve-serve" ./cmd/serve
if [ $# -eq 0 ]; then
	set -- --model tiny-gpt2 --enable-prefix-caching --api-key interop-key
	export INTEROP_API_KEY=interop-key INTEROP_PREFIX_CACHING=1
fi
# start runs tinyserve-serve with the given flags on a free port and sets
# pid and addr once /health answers.
start() {
	"$work/tinyserve-serve" "$@" --host 127.0.0.1 --port 0 >"$log" 2>&1 &
	pid=$!
	# --port 0 picks a free port; the server logs it as listening addr=HOST:PORT.
	addr=
	for _ in $(seq 200); do
		addr=$(sed -n 's/.*msg=listening addr=\([^ ]*\).*/\1/p' "$log" | head -n1)
		[ -n "$addr" ] && break
		kill -0 "$pid" 2>/dev/null || { cat "$log" >&2; echo "the server exited" >&2; exit 1; }
		sleep 0.1
	done
	[ -n "$addr" ] || { cat "$log" >&2; echo "the server did not report its address" >&2; exit 1; }
	for _ in $(seq 100); do
		curl -fsS "http://$addr/health" >/dev/null 2>&1 && break
		sleep 0.1
	done
	curl -fsS "http://$addr/health" >/dev/null || { cat "$log" >&2; echo "/health never answered 200" >&2; exit 1; }
}

# stop ends the server start began.
stop() {
	kill -TERM "$pid"
	wait "$pid" || true
	pid=
}

start "$@"
echo "== node openai-node.mjs http://$addr"
rc=0
node "$sdk/openai-node.mjs" "http://$addr" || rc=1
stop

start --model testdata/qwen3-tiny --tokenizer qwen2.5 --tool-call-parser hermes --enable-auto-tool-choice --reasoning-parser qwen3
echo "== node openai-node-chat.mjs http://$addr"
node "$sdk/openai-node-chat.mjs" "http://$addr" || rc=1
stop

echo "== node resilience.mjs"
node "$sdk/resilience.mjs" "$work/tinyserve-serve" || rc=1
exit $rc
