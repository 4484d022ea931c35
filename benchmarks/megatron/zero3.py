"""GPT-3 175B with ZeRO-3 and no model parallelism at 384, 768 and 1 536 A100s: simcomm against SC'21.

Narayanan et al. SC'21 compare PTD-P with DeepSpeed ZeRO-3 without model parallelism (their Table 2): the
175B GPT at a global batch of 1 536 on 384, 768 and 1 536 DGX A100 80 GB GPUs, micro-batch 4, 2 and 1 (one
micro-batch per GPU per iteration), achieving 144, 88 and 44 TFLOP/s per GPU: with their eq. (3) FLOP count
(full activation recomputation) 81.6, 66.8 and 66.8 s per iteration, the figures issue 24 quotes.  ZeRO-3
stops scaling between 768 and 1 536 GPUs.

Each row runs ``simcomm.pipeline.simulate`` (strategy ``megatron``, tp 1, pp 1, zero 3, full recomputation,
cluster ``dgx-a100-hdr``, fp16) on the same roofline trace as ``score.py`` with the compute efficiency that
``score.py`` calibrated on its one calibration row (Korthikanti 22B, read from its cached result): nothing
here is fitted.  Rows run under each framework's schedule (``--frameworks``): every row is a prediction.

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

#: (GPUs, micro-batch, published s): SC'21 Table 2's 175B ZeRO-3 rows (global batch 1 536)
ROWS = ((384, 4, 81.6), (768, 2, 66.8), (1536, 1, 66.8))
GLOBAL_BATCH = 1536
FRAMEWORKS = ("none", "deepspeed-0.3", "deepspeed", "fsdp1", "torchtitan")


def calibrated_eff() -> float:
    """The compute efficiency score.py calibrated (its cached calibration row)."""
    cached = json.loads((score.RESULTS / "additive-korthikanti-22B-full.json").read_text(encoding="utf-8"))
    return float(cached["compute_eff"])


def run_row(gpus: int, microbatch: int, framework: str, eff: float, extra: dict | None = None) -> dict:
    from simcomm.pipeline import simulate
    from simcomm.scenario import from_flat

    row = score.Row("zero3", f"175B-zero3-{gpus}", 96, 12288, 96, 1, 1, gpus, GLOBAL_BATCH, microbatch, 1, 1.0)
    flat = {"strategy": "megatron", "cluster": score.CLUSTER, "nodes": gpus // 8, "precision": score.DTYPE,
            "batch": microbatch, "scaling": "weak", "tp": 1, "pp": 1, "zero": 3, "recompute": "full",
            "microbatch": microbatch, "global_batch": GLOBAL_BATCH}
    if framework != "none":
        flat["framework"] = framework
    flat.update(extra or {})
    t0 = time.perf_counter()
    res = simulate(from_flat(flat), trace=score.build_trace(row, eff), baseline=False, analytic=False)
    wall = time.perf_counter() - t0
    b = res.breakdown
    return {"gpus": gpus, "framework": framework, "iteration_s": float(res.mean_s), "compute_s": float(b.compute),
            "exposed_s": float(b.comm_exposed), "hidden_s": float(b.comm_hidden), "wall_s": wall,
            "tflops": score.sc21_flops(GLOBAL_BATCH, 96, 12288) / (float(res.mean_s) * gpus) / 1e12}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frameworks", default=",".join(FRAMEWORKS))
    ap.add_argument("--gpus", default="384,768,1536")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="a what-if: any scenario key or megatron option (rows so run are not predictions)")
    args = ap.parse_args(argv)
    eff = calibrated_eff()
    want = {int(g) for g in args.gpus.split(",")}
    extra = dict(item.split("=", 1) for item in args.set)
    if extra:
        print(f"what-if (not a prediction): {extra}")
    print(f"compute efficiency {eff:g} (score.py's calibration row); published: SC'21 Table 2 via eq. (3)")
    print("| framework | GPUs | micro-batch | published s | simcomm s | error | compute s | exposed comm s | "
          "wall s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for fw in args.frameworks.split(","):
        for gpus, mb, published in ROWS:
            if gpus not in want:
                continue
            r = run_row(gpus, mb, fw, eff, extra)
            err = (r["iteration_s"] - published) / published * 100
            print(f"| {fw} | {gpus} | {mb} | {published:.1f} | {r['iteration_s']:.1f} | {err:+.0f} % | "
                  f"{r['compute_s']:.1f} | {r['exposed_s']:.1f} | {r['wall_s']:.0f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
