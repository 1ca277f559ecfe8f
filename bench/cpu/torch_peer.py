#!/usr/bin/env python3
"""PyTorch peer for bench/cpu: the same checkpoint (GPT-2, or a Qwen2 /
Llama-family model such as qwen2.5-0.5b-random) and the same cases as
tsbench, written the way a tuned PyTorch server would run them, in float32
(a bfloat16 or float16 checkpoint is widened exactly at load).

Cases (same definitions as bench/cpu/tsbench):
  prefill-128, prefill-512  one prompt through every layer, LM head on the
                            last row only
  decode-bN                 one greedy decode step for N sequences whose
                            context is about 140 tokens
  e2e-bN                    N 128-token prompts prefilled in one step, then
                            63 decode steps (64 greedy tokens each)

Each case prints the median of --reps timed runs after one warm-up run, as
one JSON object per line: {"engine", "case", "ms", "runs"}.

The KV cache is preallocated per layer ([B, H, T, D], H the key/value
heads) and written in place, as an inference server does; only the argmax
of the last row's logits is taken. Run it with the environment settings
from issue 8 (compare.sh sets them): OPENBLAS_CORETYPE=SkylakeX
OMP_WAIT_POLICY=PASSIVE MALLOC_MMAP_THRESHOLD_=33554432
MALLOC_TRIM_THRESHOLD_=68719476736.

Before the cases it prints one JSON line {"engine": "pytorch", "config":
{...}}: the threads torch and the BLAS really use, which BLAS library the
process has mapped (from /proc/self/maps: Debian's python3-torch calls
whatever libblas.so.3 the alternatives system points at, and without
libopenblas0-pthread that is the reference BLAS, 20-40x slower), OpenBLAS's
own configuration, and a 1024x1024x1024 sgemm rate. It refuses to run
(exit status 2) on the reference BLAS unless --allow-slow-blas.

--check FILE compares greedy tokens with tinyserve's (the JSON of
`go run ./bench/cpu/gguf -greedy`): free-running, teacher-forced, and the
first step's top-5 logits. --golden DIR compares with a float64 reference
(testdata/qwen2-tiny/golden.json: top-10 and probe logits, greedy tokens).
"""

import argparse
import ctypes
import json
import math
import mmap
import os
import re
import statistics
import struct
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

DECODE_CONTEXT = 140


def load_safetensors(path, strip="transformer."):
    """Reads a safetensors file into float32 torch tensors (no safetensors
    package needed: an 8-byte header length, a JSON header, raw data);
    BF16 and F16 values are widened exactly."""
    f = open(path, "rb")
    mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    (n,) = struct.unpack("<Q", mm[:8])
    header = json.loads(mm[8 : 8 + n])
    base = 8 + n
    out = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        lo, hi = meta["data_offsets"]
        dt = meta["dtype"]
        if dt == "F32":
            # A private copy: weights become ordinary resident tensors, as
            # after torch.load.
            arr = np.frombuffer(mm, dtype=np.float32, count=(hi - lo) // 4, offset=base + lo).copy()
        elif dt == "BF16":
            raw = np.frombuffer(mm, dtype=np.uint16, count=(hi - lo) // 2, offset=base + lo)
            arr = (raw.astype(np.uint32) << 16).view(np.float32)
        elif dt == "F16":
            arr = np.frombuffer(mm, dtype=np.float16, count=(hi - lo) // 2, offset=base + lo).astype(np.float32)
        else:
            sys.exit(f"torch_peer: {name} is {dt}, only F32, BF16 and F16 are supported")
        out[name.removeprefix(strip)] = torch.from_numpy(arr).reshape(meta["shape"])
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

    def forward(self, tokens, start, logits=False):
        """tokens [B, T] at positions start..start+T-1 of sequences 0..B-1;
        returns the argmax of the last row's logits per sequence (with
        logits=True, those logits [B, vocab])."""
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
        out = torch.matmul(last, self.head.t())
        return out if logits else out.argmax(dim=-1)


class Qwen2:
    """A Llama-family decoder (Llama, Qwen2) as transformers'
    modeling_qwen2.py computes it, in float32: RMSNorm before attention and
    MLP, rotate-half RoPE, grouped-query attention with optional q/k/v
    biases, a SwiGLU MLP, a final RMSNorm and the LM head (tied to the
    embedding when the config says so). As a tuned server (vLLM) does, the
    q, k and v projections are fused into one matrix, and gate and up into
    another, at load."""

    def __init__(self, ckpt):
        cfg = json.load(open(os.path.join(ckpt, "config.json")))
        if cfg.get("model_type") not in ("qwen2", "llama"):
            sys.exit(f"torch_peer: model_type {cfg.get('model_type')!r}: this peer runs gpt2, qwen2 and llama")
        for key, ok in (("rope_scaling", None), ("use_sliding_window", False), ("hidden_act", "silu"),
                        ("mlp_bias", False), ("attention_bias", cfg.get("model_type") == "qwen2")):
            if cfg.get(key, ok) != ok:
                sys.exit(f"torch_peer: {key} {cfg.get(key)!r} is not supported")
        self.L, self.C, self.H = cfg["num_hidden_layers"], cfg["hidden_size"], cfg["num_attention_heads"]
        self.KVH = cfg.get("num_key_value_heads", self.H)
        self.D = cfg.get("head_dim") or self.C // self.H
        self.G = self.H // self.KVH
        self.I = cfg["intermediate_size"]
        self.eps = cfg.get("rms_norm_eps", 1e-6)
        self.vocab = cfg["vocab_size"]
        w = load_safetensors(os.path.join(ckpt, "model.safetensors"), strip="model.")
        self.embed = w["embed_tokens.weight"]
        self.head = self.embed if cfg.get("tie_word_embeddings", False) else w["lm_head.weight"]
        self.final = w["norm.weight"]
        self.layers = []
        for l in range(self.L):
            p = f"layers.{l}."
            a = p + "self_attn."
            qkv_b = None
            if a + "q_proj.bias" in w:
                qkv_b = torch.cat([w[a + "q_proj.bias"], w[a + "k_proj.bias"], w[a + "v_proj.bias"]])
            self.layers.append({
                "attn_norm": w[p + "input_layernorm.weight"],
                "qkv": torch.cat([w[a + "q_proj.weight"], w[a + "k_proj.weight"], w[a + "v_proj.weight"]]),  # [out, in]
                "qkv_b": qkv_b,
                "o": w[a + "o_proj.weight"],
                "mlp_norm": w[p + "post_attention_layernorm.weight"],
                "gate_up": torch.cat([w[p + "mlp.gate_proj.weight"], w[p + "mlp.up_proj.weight"]]),
                "down": w[p + "mlp.down_proj.weight"],
            })
        del w
        # Rotary tables, rotate-half layout (dimension i pairs with i + D/2);
        # the angles in float64, then rounded to float32.
        theta = cfg.get("rope_theta", 10000.0)
        inv = 1.0 / (theta ** (torch.arange(0, self.D, 2, dtype=torch.float64) / self.D))
        ang = torch.outer(torch.arange(min(cfg.get("max_position_embeddings", 4096), 32768), dtype=torch.float64), inv)
        ang = torch.cat([ang, ang], dim=-1)
        self.cos, self.sin = ang.cos().float(), ang.sin().float()
        self.kc = self.vc = None

    def alloc(self, seqs, length):
        """Preallocates the KV cache for seqs sequences of length tokens."""
        self.kc = self.vc = None
        self.kc = [torch.zeros(seqs, self.KVH, length, self.D) for _ in range(self.L)]
        self.vc = [torch.zeros(seqs, self.KVH, length, self.D) for _ in range(self.L)]

    def rms(self, x, w):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * w

    def rope(self, x, cos, sin):
        """x [B, T, heads, D]; cos, sin [T, 1, D]."""
        half = self.D // 2
        rot = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
        return x * cos + rot * sin

    def forward(self, tokens, start, logits=False):
        """tokens [B, T] at positions start..start+T-1 of sequences 0..B-1;
        returns the argmax of the last row's logits per sequence (with
        logits=True, those logits [B, vocab])."""
        C, H, KVH, D, G, I = self.C, self.H, self.KVH, self.D, self.G, self.I
        B, T = tokens.shape
        end = start + T
        x = self.embed[tokens]
        cos, sin = self.cos[start:end].unsqueeze(1), self.sin[start:end].unsqueeze(1)
        mask = None
        if T > 1:
            # Row t of each group of query heads sees positions <= start+t.
            mask = torch.full((T, end), float("-inf")).triu(start + 1).repeat(G, 1)
        scale = 1.0 / math.sqrt(D)
        for l, ly in enumerate(self.layers):
            h = self.rms(x, ly["attn_norm"])
            qkv = linear(h, ly["qkv"], ly["qkv_b"])
            q, k, v = qkv.split([H * D, KVH * D, KVH * D], dim=-1)
            q = self.rope(q.view(B, T, H, D), cos, sin)
            k = self.rope(k.view(B, T, KVH, D), cos, sin)
            self.kc[l][:B, :, start:end] = k.transpose(1, 2)
            self.vc[l][:B, :, start:end] = v.view(B, T, KVH, D).transpose(1, 2)
            keys, vals = self.kc[l][:B, :, :end], self.vc[l][:B, :, :end]
            # Grouped-query attention without copying keys: the G query
            # heads of one key/value head are stacked as G·T rows.
            qg = q.transpose(1, 2).reshape(B, KVH, G * T, D)
            att = torch.matmul(qg, keys.transpose(-1, -2)) * scale
            if mask is not None:
                att = att + mask
            att = torch.matmul(torch.softmax(att, dim=-1), vals)  # [B, KVH, G·T, D]
            att = att.view(B, H, T, D).transpose(1, 2).reshape(B, T, H * D)
            x = x + linear(att, ly["o"])
            h = self.rms(x, ly["mlp_norm"])
            g, u = linear(h, ly["gate_up"]).split([I, I], dim=-1)
            x = x + linear(F.silu(g) * u, ly["down"])
        last = self.rms(x[:, -1], self.final)
        out = linear(last, self.head)
        return out if logits else out.argmax(dim=-1)


def linear(x, w, b=None):
    """x·wᵀ + b over the last dimension of x. A single row (a decode step
    at batch 1) goes through gemv, as F.linear does for a 1-D input:
    OpenBLAS's sgemm with one row streams the weights 2-4x slower than its
    sgemv on this kind of machine."""
    if x.numel() == x.shape[-1]:
        y = torch.mv(w, x.reshape(-1)) if b is None else torch.addmv(b, w, x.reshape(-1))
        return y.view(*x.shape[:-1], w.shape[0])
    return F.linear(x, w, b)


def open_model(ckpt):
    cfg = json.load(open(os.path.join(ckpt, "config.json")))
    if cfg.get("model_type", "gpt2") == "gpt2":
        m = GPT2(ckpt)
        m.vocab = cfg.get("vocab_size", 50257)
        return m
    return Qwen2(ckpt)


VOCAB = 50257


def tokens(seqs, n, vocab=None):
    # The same deterministic ids as tsbench's runner.tokens.
    vocab = vocab or VOCAB
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


def blas_config(threads):
    """What BLAS this process really runs: the libraries mapped (after a
    matmul, so that a lazily loaded one is there too), which kind they are,
    OpenBLAS's own settings, and a sgemm rate."""
    a = torch.randn(1024, 1024)
    torch.matmul(a, a)
    libs = set()
    for line in open("/proc/self/maps"):
        parts = line.split()
        if len(parts) >= 6 and re.search(r"/lib(open)?blas|/libblis|/libmkl|/libatlas|/libflexiblas|/liblapack", parts[5]):
            libs.add(os.path.realpath(parts[5]))
    libs = sorted(libs)
    kind = "unknown"
    if any("openblas" in l for l in libs):
        kind = "openblas"
    elif any("blis" in l for l in libs):
        kind = "blis"
    elif any("mkl" in l for l in libs):
        kind = "mkl"
    elif any(re.search(r"/blas/libblas\.so", l) for l in libs):
        kind = "reference"  # Debian's libblas3: netlib's Fortran loops
    cfg = {"blas_libraries": libs, "blas": kind}
    if kind == "openblas":
        lib = ctypes.CDLL(next(l for l in libs if "libopenblas" in l or "openblas" in l))
        lib.openblas_get_config.restype = ctypes.c_char_p
        lib.openblas_get_corename.restype = ctypes.c_char_p
        n = lib.openblas_get_num_threads()
        if n != threads:
            # torch.set_num_threads does not reach a BLAS it was not built
            # against (Debian's: BLAS_INFO=generic), so say it here too.
            lib.openblas_set_num_threads(threads)
            cfg["openblas_threads_default"] = n
        cfg["openblas_threads"] = lib.openblas_get_num_threads()
        cfg["openblas_config"] = lib.openblas_get_config().decode()
        cfg["openblas_core"] = lib.openblas_get_corename().decode()
    best = math.inf
    for _ in range(3):
        t = time.perf_counter()
        torch.matmul(a, a)
        best = min(best, time.perf_counter() - t)
    cfg["sgemm_1024_gflops"] = round(2 * 1024**3 / best / 1e9, 1)
    return cfg


def peer_config(threads):
    cfg = {"torch": torch.__version__, "python": sys.executable, "threads_requested": threads,
           "torch_threads": torch.get_num_threads(), "torch_interop_threads": torch.get_num_interop_threads(),
           "mkldnn": torch.backends.mkldnn.is_available()}
    m = re.search(r"BLAS_INFO=([^,]*)", torch.__config__.show())
    cfg["torch_blas_info"] = m.group(1) if m else None
    cfg.update(blas_config(threads))
    cfg["env"] = {k: v for k, v in sorted(os.environ.items()) if re.match(r"(OPENBLAS|OMP|MKL|GOTO|MALLOC)_", k)}
    return cfg


def greedy_run(m, prompt, n):
    """n greedy tokens after prompt, with the logits of every step."""
    m.alloc(1, len(prompt) + n + 1)
    out, rows = [], []
    lg = m.forward(torch.tensor([prompt]), 0, logits=True)[0]
    for step in range(n):
        rows.append(lg)
        out.append(int(lg.argmax()))
        if step + 1 < n:
            lg = m.forward(torch.tensor([[out[-1]]]), len(prompt) + step, logits=True)[0]
    return out, rows


def check(m, path, tie):
    """Greedy tokens against tinyserve's (gguf -greedy JSON)."""
    want = json.load(open(path))
    prompt, ref, margins = want["prompt"], want["tokens"], want.get("margins", [])
    n = len(ref)
    got, rows = greedy_run(m, prompt, n)
    # Teacher forcing: tinyserve's tokens fed, this peer's argmax taken.
    m.alloc(1, len(prompt) + n + 1)
    forced = []
    nxt = m.forward(torch.tensor([prompt]), 0)
    forced.append(int(nxt[0]))
    for step in range(n - 1):
        forced.append(int(m.forward(torch.tensor([[ref[step]]]), len(prompt) + step)[0]))
    prefix = 0
    while prefix < n and got[prefix] == ref[prefix]:
        prefix += 1
    near = lambda i: i < len(margins) and margins[i] < tie
    top = [[int(i), float(rows[0][i])] for i in torch.topk(rows[0], 5).indices]
    ts_top = want.get("top", [])
    top_diff = max((abs(float(rows[0][int(i)]) - v) for i, v in ts_top), default=None)
    out = {
        "engine": "pytorch", "check": f"greedy-{n}", "prompt_len": len(prompt), "pytorch": got, "tinyserve": ref,
        "agree": sum(a == b for a, b in zip(got, ref)), "agree_prefix": prefix,
        "teacher_forced": forced, "teacher_forced_agree": sum(a == b for a, b in zip(forced, ref)),
        "tie": tie, "margins": [round(x, 4) for x in margins[:n]],
        "first_difference": {"step": prefix, "margin": round(margins[prefix], 4)} if prefix < n and prefix < len(margins) else None,
        "teacher_forced_differences": [{"step": i, "margin": round(margins[i], 4) if i < len(margins) else None}
                                       for i in range(n) if forced[i] != ref[i]],
        "top": [[i, round(v, 4)] for i, v in top], "tinyserve_top": ts_top,
        "top5_max_abs_diff": top_diff,
    }
    out["ok"] = (prefix == n or near(prefix)) and all(forced[i] == ref[i] or near(i) for i in range(n))
    print(f"torch_peer: greedy check: {out['agree']}/{n} tokens agree with tinyserve (first {prefix} in a row), "
          f"teacher-forced {out['teacher_forced_agree']}/{n}; tinyserve's top-5 logits after the prompt within "
          f"{top_diff:.2e}: {'OK' if out['ok'] else 'FAILED'}", file=sys.stderr)
    print(json.dumps(out), flush=True)
    return out["ok"]


def golden(m, path, tol=1e-4):
    """Against a float64 reference (testdata/qwen2-tiny/golden.json):
    top-10 and probe logits after each prompt within tol, top-10 ids and
    greedy tokens equal (up to a step whose margin is under tol)."""
    g = json.load(open(os.path.join(path, "golden.json")))
    ok = True
    worst = 0.0
    for c in g["cases"]:
        ids, gr = c["input_ids"], c["greedy"]
        got, rows = greedy_run(m, ids, len(gr["tokens"]))
        last = rows[0]
        errs = [abs(float(last[i]) - v) for i, v in zip(c["last_logits_top10"]["ids"], c["last_logits_top10"]["values"])]
        errs += [abs(float(last[i]) - v) for i, v in zip(c["last_logits_probe"]["ids"], c["last_logits_probe"]["values"])]
        errs += [abs(float(rows[k][t]) - v) for k, (t, v) in enumerate(zip(gr["tokens"], gr["chosen_logits"])) if k < len(rows)]
        top10 = [int(i) for i in torch.topk(last, 10).indices]
        n = 0
        while n < len(got) and got[n] == gr["tokens"][n]:
            n += 1
        tokens_ok = n == len(got) or gr["margins"][n] < tol
        case_ok = max(errs) <= tol and tokens_ok and top10 == c["last_logits_top10"]["ids"]
        worst = max(worst, max(errs))
        ok = ok and case_ok
        print(json.dumps({"engine": "pytorch", "golden": c["name"], "tokens": len(ids), "max_abs_logit_err": max(errs),
                          "greedy_agree_prefix": n, "top10_equal": top10 == c["last_logits_top10"]["ids"], "ok": case_ok}), flush=True)
    print(f"torch_peer: golden {path}: max logit error {worst:.2e} (tolerance {tol}): {'OK' if ok else 'FAILED'}", file=sys.stderr)
    return ok


def main():
    global VOCAB
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", help="checkpoint folder (config.json + model.safetensors)")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--cases", default="prefill-128,prefill-512,decode-b1,decode-b4,decode-b8,decode-b32,e2e-b1,e2e-b4")
    ap.add_argument("--check", metavar="FILE", help="compare greedy tokens with tinyserve's (gguf -greedy JSON) instead of timing")
    ap.add_argument("--tie", type=float, default=0.05, help="with --check: margins under this are near-ties")
    ap.add_argument("--golden", metavar="DIR", help="compare with DIR/golden.json (testdata/qwen2-tiny) instead of timing; DIR is the model")
    ap.add_argument("--allow-slow-blas", action="store_true", help="run even on the reference BLAS")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    cfg = peer_config(args.threads)
    print(json.dumps({"engine": "pytorch", "config": cfg}), flush=True)
    print(f"pytorch {torch.__version__}, {torch.get_num_threads()} threads, BLAS {cfg['blas']} "
          f"({cfg.get('openblas_config', ', '.join(cfg['blas_libraries']))}), sgemm {cfg['sgemm_1024_gflops']} GFLOP/s", file=sys.stderr)
    if cfg["blas"] == "reference" and not args.allow_slow_blas:
        print("torch_peer: REFUSED: torch runs on the reference BLAS (Debian's libblas3), 20-40x slower than a user's "
              "torch: apt-get install libopenblas0-pthread (or pass --allow-slow-blas)", file=sys.stderr)
        sys.exit(2)
    with torch.inference_mode():
        if args.golden:
            sys.exit(0 if golden(open_model(args.golden), args.golden) else 3)
        if not args.model:
            ap.error("--model is required")
        m = open_model(args.model)
        VOCAB = m.vocab
        if args.check:
            sys.exit(0 if check(m, args.check, args.tie) else 3)
        for case in args.cases.split(","):
            state = {"reps": args.reps}
            times = [run_case(m, case, i, state) for i in range(args.reps + 1)][1:]
            print(json.dumps({"engine": "pytorch", "case": case, "ms": round(statistics.median(times) * 1000, 2), "runs": len(times)}), flush=True)


if __name__ == "__main__":
    main()
