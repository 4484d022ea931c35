"""Speed of large ``megatron`` layouts: one training iteration of GPT-3 175B and Llama 3.1 405B (issue 16).

    python benchmarks/bench_megatron.py [gpt3|llama|llama-pp16 ...] [--replicas all]

Each case is ``simcomm run --strategy megatron ... --no-baseline`` (flow fidelity, the
cluster's NCCL stack, default event resolution), timed after imports: the plan alone
(built once more, to count its ops), then the whole run (trace, memory check, plan,
flow simulation and the closed-form estimate).  Prints wall and CPU seconds and the
peak RSS.  The targets (issue 16): GPT-3 175B on 1 024 GPUs under 10 s, Llama 3 405B
on 16 384 GPUs under 60 s.  Results go in docs/performance.md ("Large-model layouts")
by hand, with the machine and date.

``llama-pp16`` is Meta's own layout (tp 8, pp 16, dp 128 on 16 384 GPUs); its 126 layers
split over 16 stages as 7 + 14 x 8 + 7 (``first_stage_layers``/``last_stage_layers``, the
first and last stage one layer short, as Meta describes).  ``llama`` is the nearest even
layout on about as many GPUs: pp 14, dp 144 on 16 128 GPUs.

Memory: a reference cycle in the fluid core kept every isolated run's link-sized arrays alive
while the garbage collector was paused (``gpt3`` peaked at about 16 GB); broken since
2026-11-26 (``run_isolated`` drops the core's small-flows view), ``gpt3`` peaks at 0.7 GB.
"""

from __future__ import annotations

import resource
import sys
import time

COMMON = {"strategy": "megatron", "precision": "bf16", "microbatch": 1, "sequence_parallel": True,
          "recompute": "selective"}
CASES = {
    # Narayanan et al. SC'21, Table 1's 175B row: tp 8, pp 16, 1 024 A100s, batch 1536
    "gpt3": {"model": "gpt3-175b", "cluster": "dgx-a100-hdr", "nodes": 128, "gpus_per_node": 8, "tp": 8, "pp": 16,
             "schedule": "interleaved", "virtual": 2, "global_batch": 1536},
    # Llama 3 Herd of Models, Table 4: 16 384 H100s, tp 8, pp 16, dp 128, 2 048 sequences of 8 192
    "llama-pp16": {"model": "llama3.1-405b", "cluster": "dgx-h100-ndr", "nodes": 2048, "gpus_per_node": 8, "tp": 8,
                   "pp": 16, "schedule": "1f1b", "global_batch": 2048, "zero": 1, "first_stage_layers": 7,
                   "last_stage_layers": 7},
    "llama": {"model": "llama3.1-405b", "cluster": "dgx-h100-ndr", "nodes": 2016, "gpus_per_node": 8, "tp": 8,
              "pp": 14, "schedule": "1f1b", "global_batch": 2016, "zero": 1,
              "recompute": "full"},
}


def run(name: str, replicas: str) -> None:
    from simcomm.errors import SimcommError
    from simcomm.pipeline import Context, make_strategy, simulate
    from simcomm.scenario import from_flat
    from simcomm.workload import build_workload

    scn = from_flat({**COMMON, **CASES[name], "replicas": replicas})
    try:
        t0, c0 = time.perf_counter(), time.process_time()
        ctx = Context(scn)
        trace = ctx.trace()
        _, topo = ctx.cluster(scn.nodes, 0)
        w = build_workload(trace, topo.n_ranks, wire_dtype="bf16")
        plan = make_strategy("megatron", dict(scn.options)).plan(w, topo)
        t1, c1 = time.perf_counter(), time.process_time()
        print(f"{name}: plan {len(plan.ops):,} ops ({len(plan.info.measured_ranks or ()) or topo.n_ranks} ranks "
              f"simulated in full) built in {t1 - t0:.2f} s wall, {c1 - c0:.2f} s CPU", flush=True)
        del plan
        t1, c1 = time.perf_counter(), time.process_time()
        res = simulate(scn, baseline=False)
        t2, c2 = time.perf_counter(), time.process_time()
    except SimcommError as exc:
        print(f"{name}: error: {exc}")
        return
    print(f"{name}: run {t2 - t1:.2f} s wall, {c2 - c1:.2f} s CPU; iteration {res.mean_s:.4g} s "
          f"(closed form {res.analytic_mean_s:.4g} s); peak RSS "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB", flush=True)


def main(argv: list[str]) -> None:
    replicas = "auto"
    if "--replicas" in argv:
        i = argv.index("--replicas")
        replicas = argv[i + 1]
        argv = argv[:i] + argv[i + 2:]
    for name in argv or ["gpt3", "llama-pp16", "llama"]:
        run(name, replicas)


if __name__ == "__main__":
    main(sys.argv[1:])
