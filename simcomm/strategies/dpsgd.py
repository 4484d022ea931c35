"""``dpsgd``: decentralized parallel SGD on a ring (Lian et al., NeurIPS 2017), seed 001 Fig. 1.

Pattern: every iteration each rank exchanges its whole model with both ring
neighbours (rank ± 1), posted at the start of the iteration and overlapped
with forward and backward (as in SGP), then averages the three models and
applies its gradient.  With R = 2 the two neighbours coincide: one exchange.

Closed form (contention free, both sends in parallel):
``T = max(t_fwd + t_bwd, α + |θ|β) + t_update + 2|θ|γ``.
"""

from __future__ import annotations

from dataclasses import dataclass

from simcomm.ops import PlanBuilder
from simcomm.strategies._gossip import check_interval, gossip_iterations, ring_neighbours
from simcomm.strategies.base import NotApplicable, Strategy, register
from simcomm.strategies.sgp import emit_peer_exchange


@dataclass(frozen=True)
class DPSGDParams:
    """Options of ``dpsgd``."""

    interval: int = 1

    def __post_init__(self):
        check_interval(self.interval)

    @property
    def assumed(self) -> tuple[str, ...]:
        return ("both neighbour exchanges posted at iteration start and overlapped with compute",
                "model sent with one extra element (as SGP's implementation)")


@register
class DPSGD(Strategy):
    """D-PSGD: model exchange with both ring neighbours every iteration."""

    name = "dpsgd"
    summary = "exchange the model with both ring neighbours every iteration (D-PSGD)"
    reference = "Lian et al., Can decentralized algorithms outperform centralized ones?, NeurIPS 2017; seed 001"
    Params = DPSGDParams

    def plan(self, workload, topology):
        n = workload.n_ranks
        if n < 2:
            raise NotApplicable("dpsgd needs at least 2 ranks")
        peers = {r: ring_neighbours(r, n) for r in range(n)}
        return emit_peer_exchange(PlanBuilder(n), workload, topology, peers, "gossip (ring)")

    def iterations(self, workload, topology) -> list:
        return gossip_iterations(workload, topology, self.params.interval,
                                 lambda _: self.plan(workload, topology))
