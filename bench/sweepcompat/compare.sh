#!/usr/bin/env bash
# Behaviour check for a refactor of sweep/ and cmd/sweep: runs the same small
# embedded-mock sweep (two concurrency levels, one warm-up, two repeats) with
# `go run ./cmd/sweep` at BEFORE (a git revision, checked out with
# `git worktree add`) and at the working tree, masks what may differ between
# two runs (timings, timestamps, environment and git fields, paths), and
# diffs every file the two sweeps wrote. Exit status 0: same files, same keys,
# same non-timing values.
#
#   bench/sweepcompat/compare.sh [BEFORE]     (default: HEAD)
set -euo pipefail
cd "$(dirname "$0")/../.."
before=${1:-HEAD}
work=$(mktemp -d)
trap 'git worktree remove --force "$work/before" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
git worktree add --detach "$work/before" "$before" >/dev/null 2>&1

# Four prompts of the serving-inference row shape.
mkdir -p "$work/in"
for i in 0 1 2 3; do
  printf '{"id":"r%d","workload":"compat","prompt":"hello number %d","input_tokens":3,"max_tokens":4}\n' $i $i
done > "$work/in/prompts.jsonl"

config() { # $1: output dir
  cat <<JSON
{
  "name": "compat",
  "prompts": "$work/in/prompts.jsonl",
  "model_metadata": {"revision": null, "dtype": null, "quantization": null, "max_model_len": null},
  "num_requests": 4,
  "concurrency": [1, 2],
  "warmups": 1,
  "repeats": 2,
  "seed": 1,
  "ignore_eos": true,
  "output_dir": "$1",
  "target": {"kind": "embedded", "engine": {"backend": "mock", "max_num_seqs": 2}}
}
JSON
}

for side in before after; do
  src=$PWD; [ $side = before ] && src="$work/before"
  config "$work/out-$side" > "$work/$side.json"
  (cd "$src" && go run ./cmd/sweep "$work/$side.json") > "$work/$side.stdout" 2> "$work/$side.stderr"
done

# mask.py FILE: prints FILE with timing/timestamp/environment values replaced.
cat > "$work/mask.py" <<'PY'
import json, re, sys
TIMING = re.compile(r'(_s|_ms|_ns|_seconds|_per_s|_per_second|_tok_s|time|timestamp|ttft|tpot|itl|latency|throughput|duration|elapsed|started|finished|rate|_at|goodput|in_flight|date|eta|pid|host|boot|hostname|sha|commit|git|dirty|version|go|kernel|cpu|os|arch|accelerator|path|dir|root|file|url|environment|python|uname|user|start|end|speed|p50|p90|p95|p99|mean|median|min|max|std|stdev|cv|spread|gain|rise|ratio|efficiency|queue|prefill|decode|phase|counter|delta|metric)', re.I)
# How the stream was cut into chunks and which connection was reused depend
# on timing too.
CHUNKING = re.compile(r'^(stream_text_event_count|connection_reused|malformed_stream_events|count|created)$')
KEEP = re.compile(r'^(max_tokens|input_tokens|output_tokens|max_num_seqs|max_model_len|num_requests|concurrency|status)$')
def mask(v, key=""):
    if key and (TIMING.search(key) or CHUNKING.match(key)) and not KEEP.match(key):
        return "<masked %s>" % type(v).__name__
    if key == "x_request_id" and isinstance(v, str):
        return re.sub(r'-\d{6,}-', '-<nonce>-', v)
    if isinstance(v, dict):
        return {k: mask(x, k) for k, x in sorted(v.items())}
    if isinstance(v, list):
        return [mask(x, key) for x in v]
    if isinstance(v, float):
        return "<float>"
    if isinstance(v, str) and re.search(r'/tmp/|\d{4}-\d\d-\d\dT', v):
        return "<masked str>"
    return v
p = sys.argv[1]
txt = open(p, encoding="utf-8", errors="replace").read()
if p.endswith(".json"):
    print(json.dumps(mask(json.loads(txt)), indent=1, sort_keys=True))
elif p.endswith(".jsonl"):
    # Records are written as requests finish: order by request index.
    rows = [json.loads(l) for l in txt.splitlines()]
    rows.sort(key=lambda r: r.get("request_index", 0))
    for r in rows:
        print(json.dumps(mask(r), sort_keys=True))
elif p.endswith(".csv"):
    lines = txt.splitlines()
    print(lines[0])  # the header: same columns in the same order
    for l in lines[1:]:
        print(",".join(c if re.fullmatch(r'-?\d+', c) or c == "" else "<v>" for c in l.split(",")))
elif p.endswith(".md"):
    # Noise warnings (repeats disagree, concurrency not held) come and go
    # with the machine's load: dropped, with the lines that list levels.
    keep = [l for l in txt.splitlines() if not re.match(r'(\*\*Warning|- concurrency|warning:)', l)]
    # On the mock without a latency model, throughput is noise: so are the
    # signs of its changes and the verdicts drawn from them.
    out = re.sub(r'\d+(\.\d+)?', 'N', re.sub(r'/tmp/\S*', '<path>', "\n".join(keep)))
    out = re.sub(r'[+-]N%', '±N%', out)
    out = re.sub(r'\| (yes|no) \|', '| ? |', out)
    out = re.sub(r'(saturation concurrency:?)[^\n]*', r'\1 <verdict>', out)
    print(re.sub(r'\n{3,}', '\n\n', out))
else:
    print("<binary %s>" % ("empty" if not txt else "present"))
PY

status=0
(cd "$work/out-before" && find . -type f | sort) > "$work/files-before"
(cd "$work/out-after" && find . -type f | sort) > "$work/files-after"
if ! diff -u "$work/files-before" "$work/files-after"; then status=1; fi
while read -r f; do
  [ -f "$work/out-after/$f" ] || continue
  if ! diff -u <(python3 "$work/mask.py" "$work/out-before/$f") <(python3 "$work/mask.py" "$work/out-after/$f") > "$work/d"; then
    echo "differs: $f"; head -40 "$work/d"; status=1
  fi
done < "$work/files-before"
mstd() { grep -v '^warning:' "$1" | sed -E 's/(saturation concurrency:).*/\1 <verdict>/; s#/tmp/[^ ]*#<path>#g; s/[0-9]+(\.[0-9]+)?/N/g'; }
if ! diff -u <(mstd "$work/before.stdout") <(mstd "$work/after.stdout"); then echo "stdout differs"; status=1; fi
n=$(wc -l < "$work/files-before")
if [ $status = 0 ]; then echo "sweepcompat: same $n files, same keys and non-timing values ($before vs working tree)"; fi
exit $status
