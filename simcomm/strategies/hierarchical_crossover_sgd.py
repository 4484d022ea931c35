"""``hierarchical-crossover-sgd``: Crossover-SGD among group leaders (seed 001, Sec. 3.3, Fig. 7).

Pattern: ranks form groups (physical nodes by default, or G equal blocks of
consecutive ranks with ``groups=G``).  (1) Each group reduces its gradients
to its leader (lowest rank), bucket by bucket as backward produces them;
(2) the leader updates, then the leaders run Crossover-SGD among groups
(segments, fair peer tables, overlap or serial); (3) each leader broadcasts
its averaged parameters to its group.

Closed form (contention free, group size L, G groups, one bucket):
``T = t_fwd + t_bwd + T_reduce(L, |θ|) + t_update + T_crossover(G) + T_bcast(L, |θ|)``.
"""

from __future__ import annotations

from dataclasses import dataclass

from simcomm.errors import ConfigError
from simcomm.ops import PlanBuilder
from simcomm.strategies._gossip import check_int, gossip_iterations, model_segments
from simcomm.strategies.base import NotApplicable, Strategy, register
from simcomm.strategies.common import emit_forward_backward, emit_update, machine_groups
from simcomm.strategies.crossover_sgd import CrossoverParams, emit_crossover


@dataclass(frozen=True)
class HierarchicalCrossoverParams(CrossoverParams):
    """Options of ``hierarchical-crossover-sgd``: Crossover's plus ``groups``."""

    groups: int = 0  # 0 = one group per physical node

    def __post_init__(self):
        super().__post_init__()
        check_int("groups", self.groups, 0)
        if self.overlap != "none":
            # Its leaders' gossip sits between the group reduce and broadcast of one iteration.
            raise ConfigError(f"overlap: {self.overlap!r} is not supported by hierarchical-crossover-sgd; "
                              "valid choices: none")

    @property
    def assumed(self) -> tuple[str, ...]:
        out = list(super().assumed)
        if self.groups == 0:
            out.append("groups: one per physical node, leader = lowest rank")
        out.append("group reduce and broadcast with the engine's automatic algorithm choice")
        return tuple(out)


def rank_groups(topology, n: int, groups: int) -> list[tuple[int, ...]]:
    if groups == 0:
        return machine_groups(topology, n)
    if groups > n or n % groups:
        raise ConfigError(f"groups: {groups} does not divide the {n} ranks into equal groups")
    size = n // groups
    return [tuple(range(g * size, (g + 1) * size)) for g in range(groups)]


@register
class HierarchicalCrossoverSGD(Strategy):
    """Reduce in groups, Crossover-SGD among leaders, broadcast in groups."""

    name = "hierarchical-crossover-sgd"
    summary = "reduce to group leaders, Crossover-SGD among leaders, broadcast back"
    reference = "Yeo et al., Crossover-SGD, Concurrency Computat. Pract. Exper. 2022 (seed 001), Sec. 3.3"
    Params = HierarchicalCrossoverParams

    def plan(self, workload, topology):
        w, p = workload, self.params
        n = w.n_ranks
        groups = rank_groups(topology, n, p.groups)
        if len(groups) < 2:
            raise NotApplicable("hierarchical-crossover-sgd needs at least 2 groups")
        segs, how = model_segments(w, p.segments)
        seg_bytes = [sum(w.layers[i].grad_bytes for i in s) for s in segs]
        b = PlanBuilder(n)
        its = {r: emit_forward_backward(b, w, r) for r in range(n)}
        ready = {}
        for grp in groups:
            lead = grp[0]
            red = []
            if len(grp) > 1:
                for i in range(len(w.buckets)):
                    red.append(b.collective("reduce", grp, w.bucket_bytes(i), root=0,
                                            after=[its[r].bucket_ready[i] for r in grp],
                                            label=f"group reduce[{i}]"))
            ready[lead] = emit_update(b, w, lead, after=red)
        leaders = [g[0] for g in groups]
        avg = emit_crossover(b, leaders, ready, seg_bytes, p.mode, p.seed, 0, topology.gamma)
        for grp in groups:
            if len(grp) > 1:
                b.collective("broadcast", grp, w.model_bytes, root=0, after=[avg[grp[0]]], label="group broadcast")
        return b.build(kind=f"gossip among {len(groups)} groups", groups=len(groups), segments=len(segs),
                       assumed=(f"segments: {how}",))

    def iterations(self, workload, topology) -> list:
        return gossip_iterations(workload, topology, self.params.interval,
                                 lambda _: self.plan(workload, topology))
