#!/usr/bin/env python3
"""PyTorch peer for bench/cpu: the same GPT-2 checkpoint and the same cases
as tsbench, written the way a tuned PyTorch server would run them.

Cases (same definitions as bench/cpu/tsbench):
  prefill-128, prefill-512  one prompt through every layer, LM head on the
                            last row only
  decode-bN                 one greedy decode step for N sequences whose
                            context is about 140 tokens
  e2e-bN                    N 128-token prompts prefilled in one step, then
                            63 decode steps (64 greedy tokens each)

Each case prints the median of --reps timed runs after one warm-up run, as
one JSON object per line: {"engine", "case", "ms", "runs"}.

The KV cache is preallocated per layer ([B, H, T, D]) and written in place,
as an inference server does; only the argmax of the last row's logits is
taken. Run it with the environment settings from issue 8 (run.sh sets them):
OPENBLAS_CORETYPE=SkylakeX OMP_WAIT_POLICY=PASSIVE
MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TRIM_THRESHOLD_=68719476736.
"""

import argparse
import json
import math
import mmap
import os
import statistics
import struct
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

DECODE_CONTEXT = 140


def load_safetensors(path):
    """Reads a float32 safetensors file into torch tensors (no safetensors
    package needed: an 8-byte header length, a JSON header, raw data)."""
    f = open(path, "rb")
    mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    (n,) = struct.unpack("<Q", mm[:8])
    header = json.loads(mm[8 : 8 + n])
    base = 8 + n
    out = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        if meta["dtype"] != "F32":
            sys.exit(f"torch_peer: {name} is {meta['dtype']}, only F32 is supported")
        lo, hi = meta["data_offsets"]
        arr = np.frombuffer(mm, dtype=np.float32, count=(hi - lo) // 4, offset=base + lo)
        # A private copy: weights become ordinary resident tensors, as
        # after torch.load.
        out[name.removeprefix("transformer.")] = torch.from_numpy(arr.copy()).reshape(meta["shape"])
    return out


class GPT2:
    def __init__(self, ckpt):
        cfg = json.load(open(os.path.join(ckpt, "config.json")))
        self.L, self.C, self.H = cfg["n_layer"], cfg["n_embd"], cfg["n_head"]
        self.D = self.C // self.H
        self.eps = cfg.get("layer_norm_epsilon", 1e-5)
        self.w = load_safetensors(os.path.join(ckpt, "model.safetensors"))
        self.head = self.w.get("lm_head.weight", self.w["wte.weight"])
        self.kc = self.vc = None

    def alloc(self, seqs, length):
        """Preallocates the KV cache for seqs sequences of length tokens."""
        self.kc = self.vc = None
        self.kc = [torch.zeros(seqs, self.H, length, self.D) for _ in range(self.L)]
        self.vc = [torch.zeros(seqs, self.H, length, self.D) for _ in range(self.L)]

    def forward(self, tokens, start):
        """tokens [B, T] at positions start..start+T-1 of sequences 0..B-1;
        returns the argmax of the last row's logits per sequence."""
        w, C, H, D = self.w, self.C, self.H, self.D
        B, T = tokens.shape
        end = start + T
        pos = torch.arange(start, end)
        x = w["wte.weight"][tokens] + w["wpe.weight"][pos]
        mask = None
        if T > 1:
            mask = torch.full((T, end), float("-inf")).triu(start + 1)
        scale = 1.0 / math.sqrt(D)
        for l in range(self.L):
            p = f"h.{l}."
            h = F.layer_norm(x, (C,), w[p + "ln_1.weight"], w[p + "ln_1.bias"], self.eps)
            qkv = torch.addmm(w[p + "attn.c_attn.bias"], h.view(B * T, C), w[p + "attn.c_attn.weight"])
            q, k, v = qkv.view(B, T, 3, H, D).permute(2, 0, 3, 1, 4)
            self.kc[l][:B, :, start:end] = k
            self.vc[l][:B, :, start:end] = v
            keys, vals = self.kc[l][:B, :, :end], self.vc[l][:B, :, :end]
            att = torch.matmul(q, keys.transpose(-1, -2)) * scale
            if mask is not None:
                att = att + mask
            att = torch.matmul(torch.softmax(att, dim=-1), vals)
            att = att.transpose(1, 2).reshape(B * T, C)
            x = x + torch.addmm(w[p + "attn.c_proj.bias"], att, w[p + "attn.c_proj.weight"]).view(B, T, C)
            h = F.layer_norm(x, (C,), w[p + "ln_2.weight"], w[p + "ln_2.bias"], self.eps)
            f = F.gelu(torch.addmm(w[p + "mlp.c_fc.bias"], h.view(B * T, C), w[p + "mlp.c_fc.weight"]), approximate="tanh")
            x = x + torch.addmm(w[p + "mlp.c_proj.bias"], f, w[p + "mlp.c_proj.weight"]).view(B, T, C)
        last = F.layer_norm(x[:, -1], (C,), w["ln_f.weight"], w["ln_f.bias"], self.eps)
        return torch.matmul(last, self.head.t()).argmax(dim=-1)


def tokens(seqs, n, vocab=50257):
    # The same deterministic ids as tsbench's runner.tokens.
    return torch.tensor([[(s * 7919 + i * 104729) % vocab for i in range(n)] for s in range(seqs)])


def cache_shape(case, reps):
    """(sequences, tokens) of KV cache the case needs."""
    kind, n = case.rsplit("-", 1)
    if kind == "prefill":
        return 1, int(n)
    seqs = int(n.removeprefix("b"))
    if kind == "decode":
        return seqs, DECODE_CONTEXT + reps + 2
    return seqs, 128 + 64


def run_case(m, case, i, state):
    """Run i of case; returns the seconds of the part the case measures."""
    kind, n = case.rsplit("-", 1)
    if i == 0:
        m.alloc(*cache_shape(case, state["reps"]))
    if kind == "prefill":
        t = time.perf_counter()
        m.forward(tokens(1, int(n)), 0)
        return time.perf_counter() - t
    seqs = int(n.removeprefix("b"))
    if kind == "decode":
        if i == 0:
            state["next"] = m.forward(tokens(seqs, DECODE_CONTEXT), 0)
        t = time.perf_counter()
        state["next"] = m.forward(state["next"].view(seqs, 1), DECODE_CONTEXT + i)
        return time.perf_counter() - t
    if kind == "e2e":
        t = time.perf_counter()
        nxt = m.forward(tokens(seqs, 128), 0)
        for step in range(63):
            nxt = m.forward(nxt.view(seqs, 1), 128 + step)
        return time.perf_counter() - t
    sys.exit(f"torch_peer: unknown case {case}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True, help="checkpoint folder (config.json + model.safetensors)")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--cases", default="prefill-128,prefill-512,decode-b1,decode-b4,decode-b8,decode-b32,e2e-b1,e2e-b4")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    m = GPT2(args.model)
    print(f"pytorch {torch.__version__}, {torch.get_num_threads()} threads", file=sys.stderr)
    with torch.inference_mode():
        for case in args.cases.split(","):
            state = {"reps": args.reps}
            times = [run_case(m, case, i, state) for i in range(args.reps + 1)][1:]
            print(json.dumps({"engine": "pytorch", "case": case, "ms": round(statistics.median(times) * 1000, 2), "runs": len(times)}), flush=True)


if __name__ == "__main__":
    main()
