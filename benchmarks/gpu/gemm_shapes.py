"""Measure GEMM time by shape on a GPU, bf16 and fp8, for the GEMM-shape compute model (docs/transformers.md).

Shapes: the per-tensor-parallel-rank GEMMs of transformer layers people run (QKV, attention output, MLP up and
down; forward, and the two backward GEMMs: data gradient and weight gradient), for several hidden sizes, token
counts (micro-batch x sequence) and tensor-parallel sizes, plus square sizes.  Each shape is timed with CUDA
events over repeated launches after warm-up, on random data; fp8 through torch._scaled_mm (e4m3 inputs,
per-tensor scales, bf16 output: what Transformer Engine's FP8 GEMM computes).

    python3 benchmarks/gpu/gemm_shapes.py --out gemm.json    # on the GPU machine (about 2 minutes)

Writes one JSON: the device, torch/CUDA versions, and per shape (m, n, k, dtype) the median seconds and TFLOP/s.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch


def shapes() -> list[tuple[str, int, int, int]]:
    out = []
    # (label, hidden, ffn, gated): GPT-3 175B, Megatron 3.6B, Llama 3 8B and 70B, GPT-2 small
    models = [("gpt3-175b", 12288, 49152, False), ("megatron-3.6b", 3072, 12288, False),
              ("llama3-8b", 4096, 14336, True), ("llama3-70b", 8192, 28672, True), ("gpt2-small", 768, 3072, False)]
    for name, h, f, gated in models:
        for tokens in (2048, 8192):
            for tp in (1, 2, 4, 8):
                qkv = 3 * h // tp  # MHA; GQA shrinks it, the shape class is the same
                up = (2 if gated else 1) * f // tp
                for label, n, k in (("qkv", qkv, h), ("proj", h, h // tp), ("up", up, h), ("down", h, f // tp)):
                    # forward y = x W^T: (tokens x k) @ (k x n); dgrad: (tokens x n) @ (n x k); wgrad: (n x tokens)@(tokens x k)
                    out.append((f"{name}/t{tokens}/tp{tp}/{label}/fwd", tokens, n, k))
                    out.append((f"{name}/t{tokens}/tp{tp}/{label}/dgrad", tokens, k, n))
                    out.append((f"{name}/t{tokens}/tp{tp}/{label}/wgrad", n, k, tokens))
    for s in (256, 512, 1024, 2048, 4096, 8192, 16384):
        out.append((f"square/{s}", s, s, s))
    return out


def time_it(fn, reps: int) -> float:
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(5):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(reps):
            fn()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) / 1e3 / reps)
    return statistics.median(samples)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--budget-s", type=float, default=150.0)
    args = ap.parse_args()
    dev = torch.device("cuda")
    props = torch.cuda.get_device_properties(dev)
    rows = []
    t0 = time.time()
    fp8 = hasattr(torch, "float8_e4m3fn") and props.major >= 9
    for label, m, n, k in shapes():
        if time.time() - t0 > args.budget_s:
            break
        a = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
        b = torch.randn(n, k, device=dev, dtype=torch.bfloat16)
        flops = 2.0 * m * n * k
        reps = max(3, min(200, int(2e10 / flops)))
        t = time_it(lambda a=a, b=b: a @ b.t(), reps)
        rows.append({"label": label, "m": m, "n": n, "k": k, "dtype": "bf16", "s": t, "tflops": flops / t / 1e12})
        if fp8 and m % 16 == 0 and n % 16 == 0 and k % 16 == 0:
            a8, b8 = a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn)
            one = torch.ones((), device=dev, dtype=torch.float32)
            t8 = time_it(lambda a8=a8, b8=b8, one=one: torch._scaled_mm(a8, b8.t(), scale_a=one, scale_b=one,
                                                               out_dtype=torch.bfloat16), reps)
            rows.append({"label": label, "m": m, "n": n, "k": k, "dtype": "fp8", "s": t8,
                         "tflops": flops / t8 / 1e12})
        del a, b
    blob = {"device": props.name, "sms": props.multi_processor_count, "torch": torch.__version__,
            "cuda": torch.version.cuda, "date": time.strftime("%Y-%m-%d"), "rows": rows,
            "complete": len(rows) >= len(shapes()) * (2 if fp8 else 1) - 14}
    with open(args.out, "w") as fh:
        json.dump(blob, fh, indent=1, sort_keys=True)
    print(f"{len(rows)} rows in {time.time() - t0:.0f} s on {props.name}")


if __name__ == "__main__":
    main()
