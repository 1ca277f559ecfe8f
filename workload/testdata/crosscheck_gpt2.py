# Independent cross-check of the committed GPT-2 prompt files: re-creates them
# in pure Python (random.Random for the order, tiktoken's BPE algorithm over
# the r50k ranks with the `regex` module, json.dumps for the output) and
# compares bytes. Usage:
#   python3 crosscheck_gpt2.py R50K_TIKTOKEN_FILE EXPERIMENTS_DIR PROMPTS_DIR
import base64, hashlib, json, random, sys
from pathlib import Path
import regex

ranks = {}
for line in open(sys.argv[1], "rb").read().splitlines():
    if line:
        tok, r = line.split()
        ranks[base64.b64decode(tok)] = int(r)
decoder = {r: t for t, r in ranks.items()}
EOT = "<|endoftext|>"
PAT = regex.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")

def bpe(piece):
    parts = [bytes([b]) for b in piece]
    while len(parts) > 1:
        best = None
        for i in range(len(parts) - 1):
            r = ranks.get(parts[i] + parts[i + 1])
            if r is not None and (best is None or r < best[0]):
                best = (r, i)
        if best is None:
            break
        i = best[1]
        parts[i:i + 2] = [parts[i] + parts[i + 1]]
    return [ranks[p] for p in parts]

def encode(text):
    ids = []
    segs = text.split(EOT)
    for k, seg in enumerate(segs):
        for m in PAT.findall(seg):
            b = m.encode("utf-8")
            ids.extend([ranks[b]] if b in ranks else bpe(b))
        if k < len(segs) - 1:
            ids.append(50256)
    return ids

def decode(ids):
    return b"".join(decoder[i] for i in ids if i != 50256).decode("utf-8", "replace")

SOURCE = ("Analyze how continuous batching, KV-cache allocation, request scheduling, "
          "and GPU kernel execution affect latency and throughput in an inference "
          "service. Use precise technical language and concrete reasoning. ")
bad = 0
for path in sorted(Path(sys.argv[2]).glob("*.json")):
    cfg = json.loads(path.read_text())
    if "buckets" not in cfg or cfg["tokenizer"] != "gpt2":
        continue
    seq = [b for b in cfg["buckets"] for _ in range(b["count"])]
    random.Random(cfg["seed"]).shuffle(seq)
    filler = encode(" benchmark")
    assert len(filler) == 1
    out = []
    for i, b in enumerate(seq):
        ids = encode("%s request %06d. " % (cfg["name"], i) + SOURCE)
        while len(ids) < b["prompt_tokens"]:
            ids.extend(filler)
        prompt = decode(ids[:b["prompt_tokens"]])
        row = {"id": "%s_%06d" % (cfg["name"], i), "workload": cfg["name"], "bucket": b["name"],
               "prompt": prompt, "prompt_tokens": len(encode(prompt)),
               "target_prompt_tokens": b["prompt_tokens"], "target_output_tokens": b["output_tokens"]}
        out.append(json.dumps(row, sort_keys=True, separators=(",", ":")) + "\n")
    data = "".join(out).encode()
    meta = json.dumps({"schema_version": "1.0", "workload_sha256": hashlib.sha256(data).hexdigest(),
                       "generation_config": cfg}, indent=2, sort_keys=True) + "\n"
    pdir = Path(sys.argv[3])
    same = data == (pdir / (cfg["name"] + ".jsonl")).read_bytes() and \
        meta.encode() == (pdir / (cfg["name"] + ".metadata.json")).read_bytes()
    bad += not same
    print("same" if same else "DIFFERENT", cfg["name"], hashlib.sha256(data).hexdigest())
sys.exit(1 if bad else 0)
