"""GPT-3 175B and the 530B GPT with ZeRO-3 and no model parallelism: simcomm against SC'21's Table 2.

Narayanan et al. SC'21 compare PTD-P with DeepSpeed ZeRO-3 without model parallelism (their Table 2): the
175B GPT at a global batch of 1 536 on 384, 768 and 1 536 DGX A100 80 GB GPUs, micro-batch 4, 2 and 1 (one
micro-batch per GPU per iteration), achieving 144, 88 and 44 TFLOP/s per GPU: with their eq. (3) FLOP count
(full activation recomputation) 81.6, 66.8 and 66.8 s per iteration, the figures issue 24 quotes.  ZeRO-3
stops scaling between 768 and 1 536 GPUs.  The same table's 529.6B rows (105 layers, hidden 20 480, 128 heads):
640 GPUs at micro-batch 4 and global batch 2 560, 1 120 and 2 240 GPUs at micro-batch 2 and 1 and global batch
2 240, achieving 138, 98 and 48 TFLOP/s per GPU (255.5, 179.9 and 183.7 s by eq. (3)).

Each row runs ``simcomm.pipeline.simulate`` (strategy ``megatron``, tp 1, pp 1, zero 3, full recomputation,
cluster ``dgx-a100-hdr``, fp16) on the same roofline trace as ``score.py`` with the compute efficiency that
``score.py`` calibrated on its one calibration row (Korthikanti 22B, read from its cached result of the tallied
GEMM model): nothing here is fitted.  Rows run under each framework's schedule (``--frameworks``); the rows under
``deepspeed-0.3`` (the release SC'21 ran) are the predictions and are cached in ``results/zero3-*.json`` for
``score.py``'s summary; the other frameworks' rows are not-a-test (what another schedule would do).

    python benchmarks/megatron/zero3.py                       # all frameworks, all three sizes (a few minutes)
    python benchmarks/megatron/zero3.py --frameworks deepspeed-0.3 --gpus 384
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import score  # noqa: E402  (the trace builder and the paper's FLOP count)

#: model -> (heads, hidden, layers): SC'21 Table 2's two models
MODELS = {"175B": (96, 12288, 96), "530B": (128, 20480, 105)}
#: (model, GPUs, micro-batch, global batch, published TFLOP/s per GPU): SC'21 Table 2's ZeRO-3 rows
ROWS = (("175B", 384, 4, 1536, 144), ("175B", 768, 2, 1536, 88), ("175B", 1536, 1, 1536, 44),
        ("530B", 640, 4, 2560, 138), ("530B", 1120, 2, 2240, 98), ("530B", 2240, 1, 2240, 48))
PREDICTED_FRAMEWORK = "deepspeed-0.3"  # the release SC'21 ran: its rows are the predictions
FRAMEWORKS = ("none", "deepspeed-0.3", "deepspeed", "fsdp1", "torchtitan")


def calibrated_eff() -> float:
    """The compute efficiency score.py calibrated (its cached calibration row)."""
    cached = json.loads((score.RESULTS / "gemm-korthikanti-22B-full.json").read_text(encoding="utf-8"))
    return float(cached["compute_eff"])


def published_s(model: str, global_batch: int, gpus: int, tflops: float) -> float:
    """The published TFLOP/s per GPU as an iteration time, by SC'21's eq. (3)."""
    heads, hidden, layers = MODELS[model]
    return score.sc21_flops(global_batch, layers, hidden) / (tflops * 1e12 * gpus)


def run_row(model: str, gpus: int, microbatch: int, global_batch: int, framework: str, eff: float,
            extra: dict | None = None) -> dict:
    from simcomm.pipeline import simulate
    from simcomm.scenario import from_flat

    heads, hidden, layers = MODELS[model]
    row = score.Row("zero3", f"{model}-zero3-{gpus}", heads, hidden, layers, 1, 1, gpus, global_batch, microbatch,
                    1, 1.0)
    flat = {"strategy": "megatron", "cluster": score.CLUSTER, "nodes": gpus // 8, "precision": score.DTYPE,
            "batch": microbatch, "scaling": "weak", "tp": 1, "pp": 1, "zero": 3, "recompute": "full",
            "microbatch": microbatch, "global_batch": global_batch}
    if framework != "none":
        flat["framework"] = framework
    flat.update(extra or {})
    t0 = time.perf_counter()
    res = simulate(from_flat(flat), trace=score.build_trace(row, eff), baseline=False, analytic=False)
    wall = time.perf_counter() - t0
    b = res.breakdown
    return {"model": model, "gpus": gpus, "microbatch": microbatch, "global_batch": global_batch,
            "framework": framework, "iteration_s": float(res.mean_s), "compute_s": float(b.compute),
            "exposed_s": float(b.comm_exposed), "hidden_s": float(b.comm_hidden), "wall_s": round(wall, 1),
            "compute_eff": eff,
            "tflops": score.sc21_flops(global_batch, layers, hidden) / (float(res.mean_s) * gpus) / 1e12}


def store(result: dict, published: float) -> None:
    """Cache a prediction row (``PREDICTED_FRAMEWORK``, no what-if) for score.py's summary."""
    key = f"zero3/{result['model']}-{result['gpus']}"
    d = {**result, "row": key, "published_s": round(published, 4), "role": "prediction",
         "source": "narayanan", "generation": "A100", "kind": score.layout_kind(1, 1, zero=3)}
    path = score.RESULTS / f"zero3-{result['model']}-{result['gpus']}.json"
    path.write_text(json.dumps(d, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frameworks", default=",".join(FRAMEWORKS))
    ap.add_argument("--gpus", default="384,768,1536,640,1120,2240")
    ap.add_argument("--models", default="175B,530B")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="a what-if: any scenario key or megatron option (rows so run are not predictions)")
    args = ap.parse_args(argv)
    eff = calibrated_eff()
    want = {int(g) for g in args.gpus.split(",")}
    models = set(args.models.split(","))
    extra = dict(item.split("=", 1) for item in args.set)
    if extra:
        print(f"what-if (not a prediction): {extra}")
    print(f"compute efficiency {eff:g} (score.py's calibration row); published: SC'21 Table 2 via eq. (3)")
    print("| framework | model | GPUs | micro-batch | published s | simcomm s | error | compute s | exposed comm s | "
          "wall s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for fw in args.frameworks.split(","):
        for model, gpus, mb, batch, tflops in ROWS:
            if gpus not in want or model not in models:
                continue
            published = published_s(model, batch, gpus, tflops)
            r = run_row(model, gpus, mb, batch, fw, eff, extra)
            if fw == PREDICTED_FRAMEWORK and not extra:
                store(r, published)
            err = (r["iteration_s"] - published) / published * 100
            print(f"| {fw} | {model} | {gpus} | {mb} | {published:.1f} | {r['iteration_s']:.1f} | {err:+.0f} % | "
                  f"{r['compute_s']:.1f} | {r['exposed_s']:.1f} | {r['wall_s']:.0f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
