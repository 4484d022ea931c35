"""Speed of the NCCL model at scale: one 1 GB all-reduce on 2 048 x 8 GPUs of a rail-optimised fabric.

    python benchmarks/bench_nccl.py

Times (wall clock, after imports) building the dgx-h100-ndr cluster at 2 048
nodes with the nccl stack, and simulating the all-reduce with NCCL's own
choice and with Ring and Tree forced; peak memory from the OS.  The target
(issue 13) is under 5 s on the development machine (2 vCPU).  Results go in
docs/performance.md by hand, with the machine and date.
"""

from __future__ import annotations

import resource
import time


def main() -> None:
    from simcomm.bench import bench
    from simcomm.pipeline import Context
    from simcomm.scenario import Scenario, StackSpec

    for algo in (None, "ring", "tree"):
        t0 = time.perf_counter()
        ctx = Context(Scenario(nodes=2048, gpus_per_node=8, cluster="dgx-h100-ndr", stack=StackSpec(nccl_algo=algo)))
        _, topo = ctx.cluster(2048, 0)
        t1 = time.perf_counter()
        row = bench("allreduce", topo, ctx.runtime(), [1e9])[0]
        t2 = time.perf_counter()
        print(f"{algo or 'auto':5s} build {t1 - t0:5.2f} s  simulate {t2 - t1:5.2f} s  total {t2 - t0:5.2f} s  "
              f"{row.algorithm}: {row.time_us / 1e3:.2f} ms, busbw {row.busbw:.1f} GB/s")
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    main()
