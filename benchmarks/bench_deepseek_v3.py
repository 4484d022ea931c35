"""Speed of DeepSeek-V3 training at 2 048 H800s in its published layout (issue 24: under 60 s of wall time).

    python benchmarks/bench_deepseek_v3.py [--microbatch B] [--replicas auto|one|all] [--schedule 1f1b|gpipe]

DeepSeek-V3 technical report (arXiv 2412.19437): 2 048 H800 GPUs (section 3.1), 16-way pipeline parallelism,
64-way expert parallelism spanning 8 nodes, ZeRO-1 data parallelism, no tensor parallelism (3.2); the batch
ramps to 15 360 sequences of 4 096 tokens (4.2).  DualPipe (3.2.1) is not modelled: the run uses 1F1B
(an ``assumed:`` line).  The micro-batch is not published; 1 sequence is used unless ``--microbatch`` says
otherwise (15 360 / dp 128 = 120 sequences per replica: 120 micro-batches).  Megatron-core's rank order
``tp-dp-pp`` (``order``), so each 64-rank expert-parallel group is 8 whole nodes.

The model: the zoo's ``deepseek-v3`` (simcomm/llm/zoo.py: 61 layers, the first 3 dense with FFN 18 432, hidden
7 168, MLA, 256 routed experts of FFN 2 048 top-8 + 1 shared, vocab 129 280, sequence 4 096).

Each run is the whole of ``simcomm run`` after imports (trace, memory estimate (memory = warn), plan, flow simulation, closed
form), timed with ``time.perf_counter``; measure the process with ``/usr/bin/time -v``.  Results go in
docs/performance.md ("DeepSeek-V3 at 2 048 GPUs") by hand, with the machine, date and load.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time

MODEL = "deepseek-v3"
LAYOUT = {"strategy": "megatron", "precision": "bf16", "cluster": "hgx-h800", "nodes": 256, "gpus_per_node": 8,
          "tp": 1, "pp": 16, "experts_parallel": 64, "zero": 1, "global_batch": 15360, "order": "tp-dp-pp",
          "schedule": "1f1b", "first_stage_layers": 4, "last_stage_layers": 1,
          # the memory model (simcomm/memory) finds this layout over 80 GB without full recomputation: run anyway
          "memory": "warn"}


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--microbatch", type=int, default=1)
    ap.add_argument("--replicas", default="auto")
    # interleaving needs every stage's layer count a multiple of its chunks: 61 layers cannot
    ap.add_argument("--schedule", default="1f1b", choices=("1f1b", "gpipe"))
    ap.add_argument("--global-batch", type=int, default=LAYOUT["global_batch"])
    args = ap.parse_args(argv)
    from simcomm.pipeline import simulate
    from simcomm.scenario import from_flat

    model = MODEL
    flat = {**LAYOUT, "model": model, "microbatch": args.microbatch, "replicas": args.replicas,
            "schedule": args.schedule, "global_batch": args.global_batch}
    t0, c0 = time.perf_counter(), time.process_time()
    res = simulate(from_flat(flat), baseline=False)
    t1, c1 = time.perf_counter(), time.process_time()
    print(f"deepseek-v3 ({model}) on 2048 H800, pp 16, ep 64, dp 128, micro-batch {args.microbatch}, "
          f"{args.schedule}: run {t1 - t0:.2f} s wall, {c1 - c0:.2f} s CPU; iteration {res.mean_s:.4g} s "
          f"(closed form {res.analytic_mean_s:.4g} s); peak RSS "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB; load {os.getloadavg()[0]:.2f}")
    print(f"  assumed: schedule {args.schedule} in place of DeepSeek-V3's DualPipe (its bidirectional schedule "
          "overlapping each chunk's all-to-all with another's compute is not modelled)")
    print(f"  assumed: micro-batch {args.microbatch} sequence(s) of 4096 (not published); 61 layers as 4 + 14 x 4 + 1 "
          "over the 16 stages (the last with the output head; the MTP module not modelled)")
    for line in res.assumed:
        print("  assumed:", line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
