"""``hierarchical-allreduce``: the standard two-level all-reduce (NCCL / Horovod).

Pattern, per gradient bucket of n bytes on M machines with L ranks each:

1. reduce-scatter inside each machine (n bytes total; each rank keeps n/L);
2. all-reduce of the n/L shards among the M ranks with the same local index,
   all L of them in parallel over the internode network;
3. all-gather inside each machine (n bytes total).

Closed form with ring stages (reference §1b, [HVD] and [derived]):
``2(L-1)α_i + 2(L-1)/L·nβ_i + (L-1)/L·nγ + 2(M-1)α_e + 2(M-1)/M·(n/L)β_e + (M-1)/M·(n/L)γ``.

With one rank per machine it degenerates to a flat all-reduce, so it is
reported as not applicable rather than silently equal to ``allreduce``.
"""

from __future__ import annotations

from dataclasses import dataclass

from simcomm.errors import ConfigError
from simcomm.strategies._fold import builder_for
from simcomm.strategies.base import NotApplicable, Strategy, register
from simcomm.strategies.common import check_algorithm, check_choice, emit_forward_backward, emit_update, local_groups, machine_groups


@dataclass(frozen=True)
class HierarchicalParams:
    """Options of ``hierarchical-allreduce``."""

    algorithm: str = "auto"  # internode all-reduce of the shards
    bucket_mb: float | None = None
    overlap: str = "backward"

    def __post_init__(self):
        check_choice("overlap", self.overlap, ("none", "backward"))
        check_algorithm("algorithm", "allreduce", self.algorithm)
        if self.bucket_mb is not None and not self.bucket_mb >= 0:
            raise ConfigError(f"bucket-mb: {self.bucket_mb!r} must be >= 0 (0 = one bucket after backward)")

    @property
    def assumed(self) -> tuple[str, ...]:
        return ("intranode stages reduce-scatter + all-gather (engine's auto algorithm)",
                *(("overlap backward (buckets sent as their gradients are ready)",)
                  if self.overlap == "backward" else ()))


@register
class HierarchicalAllreduce(Strategy):
    """Two-level all-reduce: intranode reduce-scatter, internode all-reduce, intranode all-gather."""

    name = "hierarchical-allreduce"
    summary = "intranode reduce-scatter, internode all-reduce of shards, intranode all-gather"
    reference = "Horovod NCCLHierarchicalAllreduce (Sergeev & Del Balso 2018); NCCL; baseline of seeds 000/001"
    Params = HierarchicalParams

    def plan(self, workload, topology):
        p = self.params
        w = workload.rebucketed(p.bucket_mb) if p.bucket_mb is not None else workload
        machines = machine_groups(topology, w.n_ranks)
        sizes = {len(m) for m in machines}
        if sizes == {1}:
            raise NotApplicable("hierarchical-allreduce needs more than 1 GPU per node")
        if len(sizes) != 1:
            raise NotApplicable("hierarchical-allreduce needs the same number of ranks on every node")
        lanes = local_groups(machines)
        L = len(machines[0])
        b = builder_for(w, topology.n_ranks)
        its = {r: emit_forward_backward(b, w, r) for r in range(w.n_ranks)}
        last: dict[int, list[int]] = {k: [] for k in range(len(machines))}
        for i in range(len(w.buckets)):
            n = w.bucket_bytes(i)
            rs = [b.collective("reduce_scatter", m, n,
                               after=[its[r].bucket_ready[i] if p.overlap == "backward" else its[r].backward_end
                                      for r in m], label=f"intra-reduce-scatter[{i}]") for m in machines]
            ar = [b.collective("allreduce", lane, n / L, algorithm=p.algorithm, after=rs, label=f"inter-allreduce[{i}]")
                  if len(lane) > 1 else None for lane in lanes]
            ar = [x for x in ar if x is not None] or rs
            for k, m in enumerate(machines):
                last[k].append(b.collective("allgather", m, n, after=ar, label=f"intra-allgather[{i}]"))
        for k, m in enumerate(machines):
            for r in m:
                emit_update(b, w, r, after=last[k])
        return b.build(kind="every iteration", strategy=self.name)
