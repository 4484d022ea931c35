"""Time the baseline strategies on ResNet-50 at 1 024 GPUs (128 nodes x 8), flow fidelity.

Usage: ``python benchmarks/bench_strategies_a.py [strategy,...]``.  Prints a
markdown table: plan + simulation wall time per strategy (the shared trace and
cluster are built once, first, and timed separately), the simulated mean
iteration time and the engine's max-min solve count.  Target (issue 4): < 10 s each.
"""

from __future__ import annotations

import sys
import time
from dataclasses import replace

from simcomm.pipeline import Context, simulate
from simcomm.scenario import Scenario

DEFAULT = ("allreduce", "hierarchical-allreduce", "node-based", "ps", "ps-layer-drop")


def main(names: list[str]) -> None:
    base = Scenario(cluster="dgx-a100-hdr", nodes=128, gpus_per_node=8)
    ctx = Context(base)
    t0 = time.perf_counter()
    ctx.trace()
    ctx.cluster(128, 0)
    print(f"trace + cluster build: {time.perf_counter() - t0:.2f} s\n")
    print("| strategy | wall (s) | mean iteration (ms) |")
    print("|---|---:|---:|")
    for name in names:
        t0 = time.perf_counter()
        r = simulate(replace(base, strategy=name), ctx=ctx, baseline=False, analytic=False)
        wall = time.perf_counter() - t0
        cell = "n/a" if r.not_applicable else f"{r.mean_s * 1e3:.2f}"
        print(f"| {name} | {wall:.2f} | {cell} |")


if __name__ == "__main__":
    main(sys.argv[1].split(",") if len(sys.argv) > 1 else list(DEFAULT))
