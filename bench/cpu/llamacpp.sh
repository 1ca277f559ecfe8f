#!/usr/bin/env bash
# llama.cpp peer for bench/cpu: runs llama.cpp (node-llama-cpp's prebuilt
# CPU binaries) on the same checkpoint as tsbench (GPT-2, or Qwen2 such as
# qwen2.5-0.5b-random), converted to a GGUF by bench/cpu/gguf, and prints
# one JSON line per case in tsbench's format with engine "llama.cpp"
# (stdout; logs go to stderr), so the lines can be appended to compare.sh's
# results.jsonl. Before the cases it prints a {"engine":"llama.cpp",
# "config":{...}} line: how llama.cpp is really set up (threads, the ggml
# CPU library loaded, system info, the GGUF's file type).
#
# Before timing it checks the conversion: tinyserve and llama.cpp each
# generate CHECK_TOKENS greedy tokens from the same prompt, free-running and
# teacher-forced; the result is a JSON line on stdout, and the script fails
# when the tokens differ anywhere but after a near-tie (tinyserve's top-1
# minus top-2 logit margin under 0.05 at that step).
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
#   TYPE=f32|f16|bf16|q8_0|q4_0  how the GGUF stores the matrices (default: f32 for
#                     GPT-2, bf16 for Qwen2, exact for a bfloat16 checkpoint)
#   KV=f16|f32        KV cache type (default f16, llama.cpp's default)
#   FLASH=auto|true|false  flash attention (default auto)
#   CHECK_TOKENS=16   greedy tokens compared with tinyserve (0: skip)
#   GREEDY_JSON=<file> tinyserve's greedy tokens for the check, as
#                     `go run ./bench/cpu/gguf -greedy` prints them
#                     (default: computed here)
#   GGUF=<file>       where to write the converted model (default:
#                     $LLAMACPP_DIR/<checkpoint name>[-TYPE].gguf, rebuilt
#                     when older than the checkpoint)
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

# 2. The GGUF, converted once per checkpoint and type.
type=${TYPE:-}
gguf=${GGUF:-$dir/$(basename "$ckpt")${type:+-$type}.gguf}
if [ ! -f "$gguf" ] || [ "$ckpt/model.safetensors" -nt "$gguf" ] || [ "$ckpt/config.json" -nt "$gguf" ]; then
	log "converting $ckpt to $gguf"
	go run ./bench/cpu/gguf -in "$ckpt" -out "$gguf" ${type:+-type "$type"} || die "GGUF conversion failed"
fi
vocab=$(node -e 'console.log(JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")).vocab_size ?? 50257)' "$ckpt/config.json")

peer() { node bench/cpu/llamacpp_peer.mjs --model "$gguf" --vocab "$vocab" --threads "$threads" --kv "${KV:-f16}" --flash "${FLASH:-auto}" "$@"; }

# 3. Greedy check against tinyserve on the same checkpoint (its JSON line
#    goes to stdout with the results).
if [ "$check" -gt 0 ]; then
	want=$(mktemp -t tinyserve-greedy.XXXXXX.json)
	got=$(mktemp -t llamacpp-greedy.XXXXXX.jsonl)
	trap 'rm -f "$want" "$got"' EXIT
	if [ -n "${GREEDY_JSON:-}" ]; then
		cp "$GREEDY_JSON" "$want"
	else
		# On the same GGUF file: with TYPE=q8_0 both engines run the same 8-bit weights.
		go run ./bench/cpu/gguf -in "$gguf" -greedy -n "$check" >"$want" || die "tinyserve greedy run failed"
	fi
	rc=0
	peer --check "$check" --expect "$want" >"$got" || rc=$?
	grep '"check"' "$got" || true
	case $rc in
	0) ;;
	3) die "GREEDY CHECK FAILED: llama.cpp's tokens differ from tinyserve's where tinyserve's margin is not a near-tie (see the check line above)" ;;
	*) die "llama.cpp greedy check failed to run" ;;
	esac
fi

# 4. The cases.
peer --reps "$reps" --cases "$cases" || die "llama.cpp peer failed"
