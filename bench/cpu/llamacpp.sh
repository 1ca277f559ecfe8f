#!/usr/bin/env bash
# llama.cpp peer for bench/cpu: runs llama.cpp (node-llama-cpp's prebuilt
# CPU binaries) on the same GPT-2 checkpoint as tsbench, converted to a
# float32 GGUF by bench/cpu/gguf, and prints one JSON line per case in
# tsbench's format with engine "llama.cpp" (stdout; logs go to stderr), so
# the lines can be appended to compare.sh's results.jsonl.
#
# Before timing it checks the conversion: tinyserve and llama.cpp each
# generate CHECK_TOKENS greedy tokens from the same prompt and the agreement
# is logged (and printed as a JSON line on stderr).
#
# Usage: bench/cpu/llamacpp.sh CKPT_DIR [REPS] [CASES]
#   CKPT_DIR  checkpoint folder (config.json + model.safetensors), e.g. from
#             go run ./bench/cpu/gencheckpoint -model gpt2-124m-random -out DIR
#   REPS      timed runs per case, the median is reported (default 5)
#   CASES     comma-separated (default
#             prefill-128,prefill-512,decode-b1,decode-b4,decode-b8,decode-b32,e2e-b1,e2e-b4)
# Environment:
#   LLAMACPP_DIR      where node-llama-cpp is installed
#                     (default ~/.cache/tinyserve-llamacpp)
#   NODE_LLAMA_CPP    npm version spec to install (default 3)
#   THREADS           llama.cpp threads (default: all cores, nproc)
#   KV=f16|f32        KV cache type (default f16, llama.cpp's default)
#   FLASH=auto|true|false  flash attention (default auto)
#   CHECK_TOKENS=16   greedy tokens compared with tinyserve (0: skip)
#   GGUF=<file>       where to write the converted model (default:
#                     $LLAMACPP_DIR/<checkpoint name>.gguf, rebuilt when
#                     older than the checkpoint)
set -euo pipefail
if [ $# -lt 1 ] || [ $# -gt 3 ]; then
	sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
	exit 2
fi
ckpt=$(cd "$1" && pwd)
reps=${2:-5}
cases=${3:-prefill-128,prefill-512,decode-b1,decode-b4,decode-b8,decode-b32,e2e-b1,e2e-b4}
cd "$(dirname "$0")/../.."
dir=${LLAMACPP_DIR:-$HOME/.cache/tinyserve-llamacpp}
export LLAMACPP_DIR=$dir
threads=${THREADS:-$(nproc)}
check=${CHECK_TOKENS:-16}
log() { echo "llamacpp.sh: $*" >&2; }
die() {
	log "$*"
	exit 1
}

command -v node >/dev/null || die "node is not installed (node-llama-cpp 3 needs Node.js 20 or newer)"
command -v npm >/dev/null || die "npm is not installed"
[ -f "$ckpt/model.safetensors" ] && [ -f "$ckpt/config.json" ] || die "$ckpt has no config.json + model.safetensors"

# 1. node-llama-cpp with its prebuilt CPU binaries (the optional dependency
#    @node-llama-cpp/linux-x64 on x86-64 Linux). Nothing is built from
#    source: the peer asks for build "never".
if [ ! -f "$dir/node_modules/node-llama-cpp/package.json" ]; then
	log "installing node-llama-cpp@${NODE_LLAMA_CPP:-3} into $dir"
	mkdir -p "$dir"
	npm install --prefix "$dir" --no-audit --no-fund --loglevel=error "node-llama-cpp@${NODE_LLAMA_CPP:-3}" >&2 ||
		die "npm install node-llama-cpp failed (is the npm registry reachable?)"
	[ -f "$dir/node_modules/node-llama-cpp/package.json" ] || die "node-llama-cpp did not install into $dir"
fi
ls "$dir"/node_modules/@node-llama-cpp/linux-*/bins/*/llama-addon.node >/dev/null 2>&1 ||
	die "no prebuilt llama.cpp binary under $dir/node_modules/@node-llama-cpp (unsupported platform? delete $dir and retry)"

# 2. The GGUF, converted once per checkpoint.
gguf=${GGUF:-$dir/$(basename "$ckpt").gguf}
if [ ! -f "$gguf" ] || [ "$ckpt/model.safetensors" -nt "$gguf" ] || [ "$ckpt/config.json" -nt "$gguf" ]; then
	log "converting $ckpt to $gguf"
	go run ./bench/cpu/gguf -in "$ckpt" -out "$gguf" || die "GGUF conversion failed"
fi

peer() { node bench/cpu/llamacpp_peer.mjs --model "$gguf" --threads "$threads" --kv "${KV:-f16}" --flash "${FLASH:-auto}" "$@"; }

# 3. Greedy check against tinyserve on the same checkpoint.
if [ "$check" -gt 0 ]; then
	want=$(mktemp -t tinyserve-greedy.XXXXXX.json)
	trap 'rm -f "$want"' EXIT
	go run ./bench/cpu/gguf -in "$ckpt" -greedy -n "$check" >"$want" || die "tinyserve greedy run failed"
	peer --check "$check" --expect "$want" >&2 || die "llama.cpp greedy check failed to run"
fi

# 4. The cases.
peer --reps "$reps" --cases "$cases" || die "llama.cpp peer failed"
