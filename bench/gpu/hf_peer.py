#!/usr/bin/env python3
"""PyTorch + Hugging Face transformers peer for tinyserve's GPU device check.

Runs tiny-vLLM's seven scenarios (the same shapes gpubench runs: prompt
length, output length, concurrency, number of requests) with transformers'
AutoModelForCausalLM on the same GPU, and writes a JSON report with the
fields gpubench writes, so `gpubench table` can compare them, plus each
scenario's median time per generate step (step_ms_p50: a batch's time over
its output length), since transformers' speed moves with its host.

The model is the checkpoint `gpubench checkpoint DIR` writes: a built-in
model's weights (gpt2-124m-random, GPT-2 124M shape, or
qwen2.5-0.5b-random, Qwen2.5-0.5B shape), so both sides run identical
weights. Prompts are random token ids of the scenario's lengths (greedy
decoding with a fixed output length does the same work whatever the ids).

Serving model: static batches of `concurrency` requests (HF generate has no
continuous batching); every request of a batch finishes when the batch does,
so its latency is the batch's time. Prompts of a batch are left-padded (only
mixed_prefill has unequal lengths). Output length is forced with
min_new_tokens = max_new_tokens (ignore_eos).
"""

import argparse
import json
import sys
import time

SCENARIOS = [
    # name, isl, isl2 (mixed_prefill's other half), osl, concurrency
    ("latency_c1", 128, 0, 32, 1),
    ("batch_c2", 128, 0, 32, 2),
    ("batch_c4", 128, 0, 32, 4),
    ("queue_c8", 128, 0, 32, 8),
    ("prefill_512_16", 512, 0, 16, 4),
    ("decode_32_128", 32, 0, 128, 4),
    ("mixed_prefill", 32, 256, 32, 4),
]


def percentile(xs, p):
    """Linear interpolation between closest ranks (numpy's default)."""
    s = sorted(xs)
    if not s:
        return 0.0
    pos = p / 100 * (len(s) - 1)
    lo = int(pos)
    if lo >= len(s) - 1:
        return s[-1]
    f = pos - lo
    return s[lo] * (1 - f) + s[lo + 1] * f


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="checkpoint folder written by `gpubench checkpoint`")
    ap.add_argument("--requests", type=int, default=32, help="requests per scenario")
    ap.add_argument("--dtype", default="float16", choices=["float16", "bfloat16", "float32"])
    ap.add_argument("--only", default="", help="comma-separated scenario names")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    import torch
    import transformers
    from transformers import AutoModelForCausalLM

    if not torch.cuda.is_available():
        sys.exit("hf_peer: torch sees no CUDA device")
    dtype = getattr(torch, args.dtype)
    # transformers 5 names the argument dtype (torch_dtype is deprecated);
    # every 4.x knows torch_dtype.
    major = int(transformers.__version__.split(".")[0])
    kw = {"dtype": dtype} if major >= 5 else {"torch_dtype": dtype}
    model = AutoModelForCausalLM.from_pretrained(args.model, **kw)
    if model.dtype != dtype:
        sys.exit(f"hf_peer: loaded {model.dtype}, want {dtype}")
    model = model.to("cuda").eval()
    vocab = model.config.vocab_size
    # Any id pads: the mask hides it and min_new_tokens forces the length.
    eos = model.config.eos_token_id
    pad = model.config.pad_token_id
    if pad is None:
        pad = (eos[0] if isinstance(eos, list) else eos) if eos is not None else 0
    gen = torch.Generator().manual_seed(20240601)
    only = set(filter(None, args.only.split(",")))

    def run_batch(prompts, osl):
        width = max(len(p) for p in prompts)
        ids = torch.full((len(prompts), width), pad, dtype=torch.long)
        mask = torch.zeros((len(prompts), width), dtype=torch.long)
        for i, p in enumerate(prompts):
            ids[i, width - len(p):] = p
            mask[i, width - len(p):] = 1
        ids, mask = ids.to("cuda"), mask.to("cuda")
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.inference_mode():
            out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=osl, min_new_tokens=osl,
                                 do_sample=False, pad_token_id=pad, use_cache=True)
        torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        new = out.shape[1] - width
        if new != osl:
            raise RuntimeError(f"generated {new} tokens, want {osl}")
        return dt

    results = []
    for name, isl, isl2, osl, conc in SCENARIOS:
        if only and name not in only:
            continue
        n = args.requests
        prompts = []
        for i in range(n):
            length = isl2 if isl2 and i % 2 == 1 else isl
            prompts.append(torch.randint(0, vocab, (length,), generator=gen))
        # Warm-up, untimed, at the scenario's own batch shape: PyTorch and
        # cuBLAS pick (and some compile) kernels per shape on first use,
        # which cost one timed batch up to seconds when the warm-up was a
        # single prompt (seen on an H200, 2026-12-04: decode_32_128's first
        # 4-wide batch took 4.9 s against 0.76 s for the others).
        run_batch(prompts[:conc], osl)
        lat, steps = [], []
        start = time.perf_counter()
        for i in range(0, n, conc):
            batch = prompts[i:i + conc]
            dt = run_batch(batch, osl)
            lat.extend([dt] * len(batch))
            steps.append(dt / osl)
        wall = time.perf_counter() - start
        r = {
            "name": name, "isl": isl, "isl2": isl2, "osl": osl, "concurrency": conc,
            "requests": n, "wall_s": wall, "output_tokens": n * osl,
            "output_tok_s": n * osl / wall,
            "latency_p50_s": percentile(lat, 50), "latency_p95_s": percentile(lat, 95),
            "ttft_p50_s": None, "step_ms_p50": percentile(steps, 50) * 1000,
        }
        print(f"hf_peer: {name}: {r['output_tok_s']:.0f} tok/s, p50 {r['latency_p50_s']*1000:.1f} ms, "
              f"{r['step_ms_p50']:.2f} ms/step", file=sys.stderr)
        results.append(r)

    report = {
        "engine": "hf-transformers",
        "device": torch.cuda.get_device_name(0),
        "dtype": args.dtype,
        "model": args.model,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "results": results,
    }
    with open(args.out, "w") as f:
        json.dump(report, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
