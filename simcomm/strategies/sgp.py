"""``sgp``: Stochastic Gradient Push (Assran et al., ICML 2019), as compared in seed 001.

Pattern: every iteration each rank sends its whole model plus the push-sum
weight (one extra element) to one out-peer and receives one model from its
in-peer.  Peers follow the directed exponential graph: out-peer =
rank + 2^i mod R with i cycling through 0..floor(log2(R-1)) across
iterations (SGP's graph manager).  The exchange is non-blocking: it is posted
at the start of the iteration (the parameters of the last update are ready)
and waited for at the end, so it hides behind forward and backward; then the
rank updates and mixes the received model (x <- (x + x_recv)/2).

Closed form (one iteration, contention free):
``T = max(t_fwd + t_bwd, α + (|θ| + w)β) + t_update + |θ|γ``.

The peer changes every iteration, so ``iterations()`` returns one plan per
exponent, each with weight 1 (a period of floor(log2(R-1)) + 1 iterations).
"""

from __future__ import annotations

from dataclasses import dataclass

from simcomm.ops import PlanBuilder
from simcomm.strategies._gossip import check_int, check_interval, exp_graph_exponents, gossip_iterations, \
    push_sum_bytes
from simcomm.strategies.base import NotApplicable, Strategy, register
from simcomm.strategies.common import emit_forward_backward, emit_update


@dataclass(frozen=True)
class SGPParams:
    """Options of ``sgp``."""

    interval: int = 1  # iterations per gossip step (seed 001 accumulates 42)
    iteration: int = 0  # which iteration of the period plan() shows

    def __post_init__(self):
        check_interval(self.interval)
        check_int("iteration", self.iteration, 0)

    @property
    def assumed(self) -> tuple[str, ...]:
        out = ["push-sum weight sent as one extra model element (SGP implementation)",
               "gossip posted at iteration start, waited before the update (SGP overlap mode)"]
        if self.interval == 1:
            out.append("communication interval 1 (seed 001 used 42 to emulate a large batch)")
        return tuple(out)


def emit_peer_exchange(b: PlanBuilder, w, topology, peers: dict[int, tuple[int, ...]], kind: str):
    """One iteration where rank r sends its model to each of peers[r] at the start.

    Sends go on one stream per destination so a rank's sends run in parallel;
    each rank waits for its sends and its receives, then updates and mixes.
    """
    n = w.n_ranks
    nbytes = w.model_bytes + push_sum_bytes(w.dtype_bytes)
    sends: dict[int, list[int]] = {r: [] for r in range(n)}
    recvs: dict[int, list[int]] = {r: [] for r in range(n)}
    for r in range(n):
        for k, p in enumerate(peers[r]):
            t = b.transfer(r, p, nbytes, label=f"gossip {r}->{p}", stream=f"comm{k}")
            sends[r].append(t)
            recvs[p].append(t)
    for r in range(n):
        emit_forward_backward(b, w, r, buckets=(tuple(w.ready_order),))
        up = emit_update(b, w, r, after=sends[r] + recvs[r])
        b.compute(r, topology.gamma(r) * w.model_bytes * len(recvs[r]), after=(up,), label="mix",
                  category="update")
    return b.build(kind=kind, peers={r: peers[r] for r in range(min(n, 64))})


@register
class SGP(Strategy):
    """Stochastic Gradient Push on the directed exponential graph."""

    name = "sgp"
    summary = "push the model to one peer per iteration on the directed exponential graph"
    reference = "Assran et al., Stochastic Gradient Push, ICML 2019; seed 001 (Yeo et al.) baseline"
    Params = SGPParams

    def period(self, n_ranks: int) -> int:
        return len(exp_graph_exponents(n_ranks))

    def plan_iteration(self, workload, topology, iteration: int):
        n = workload.n_ranks
        exps = exp_graph_exponents(n)
        if not exps:
            raise NotApplicable("sgp needs at least 2 ranks")
        i = exps[iteration % len(exps)]
        peers = {r: ((r + 2 ** i) % n,) for r in range(n)}
        return emit_peer_exchange(PlanBuilder(n), workload, topology, peers, f"gossip (peer +2^{i})")

    def plan(self, workload, topology):
        return self.plan_iteration(workload, topology, self.params.iteration)

    def iterations(self, workload, topology) -> list:
        n = self.period(workload.n_ranks)
        if n == 0:
            raise NotApplicable("sgp needs at least 2 ranks")
        out = []
        for it in range(n):
            for weight, p in gossip_iterations(workload, topology, self.params.interval,
                                               lambda _, it=it: self.plan_iteration(workload, topology, it)):
                out.append((weight / n, p))
        return out
