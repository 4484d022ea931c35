"""``node-based``: node-based communication, seed 000 (Alg. 2).

Pattern:

* every iteration, gradients are all-reduced (averaged) only *inside* each
  node (group g_group, R_m ranks, intranode links); with R_m = 1 this is no
  communication at all;
* at iteration K' of each epoch and at the epoch's last iteration the
  *parameters* (|θ| bytes) are all-reduced over all R ranks (G_group),
  crossing the internode network.

Internode exchanges per epoch, with K = ⌈N/(R·B)⌉ iterations per epoch:
``X = 1 + ⌊K/K'⌋`` when K' < K, exactly 1 when K' ≥ K (seed 000 footnote 1;
never more than K).  The strategy returns two kinds of iteration:
``local`` (weight K - X) and ``exchange`` (weight X); the mean iteration time is
``((K - X)·T_local + X·T_exchange) / K`` and the epoch time ``K`` times that.

Closed form (ring, no overlap): T_local = t_c + 2(R_m-1)α_i + 2(R_m-1)/R_m·|θ|β_i,
T_exchange = T_local + 2(R-1)α + 2(R-1)/R·|θ|β over the slowest link.
"""

from __future__ import annotations

from dataclasses import dataclass

from simcomm.errors import ConfigError
from simcomm.ops import PlanBuilder
from simcomm.strategies.base import Strategy, register
from simcomm.strategies.common import check_algorithm, check_choice, emit_forward_backward, emit_update, \
    machine_groups


def exchanges_per_epoch(k: int, k_prime: int) -> int:
    """Internode parameter exchanges in an epoch of ``k`` iterations (seed 000, footnote 1)."""
    if k_prime >= k:
        return 1
    return min(k, 1 + k // k_prime)


@dataclass(frozen=True)
class NodeBasedParams:
    """Options of ``node-based``."""

    k_prime: int = 50
    algorithm: str = "auto"  # internode parameter all-reduce
    intra_algorithm: str = "auto"  # intranode gradient all-reduce
    overlap: str = "backward"

    def __post_init__(self):
        if isinstance(self.k_prime, bool) or not isinstance(self.k_prime, int) or self.k_prime <= 0:
            raise ConfigError(f"k-prime: {self.k_prime!r} must be a positive integer (iterations between "
                              "internode exchanges)")
        check_choice("overlap", self.overlap, ("none", "backward"))
        check_algorithm("algorithm", "allreduce", self.algorithm)
        check_algorithm("intra-algorithm", "allreduce", self.intra_algorithm)

    @property
    def assumed(self) -> tuple[str, ...]:
        out = []
        if self.k_prime == 50:
            out.append("K' = 50 (seed 000's value for ImageNet and RNN runs)")
        if self.overlap == "backward":
            out.append("intranode gradient all-reduce overlapped with backward, bucketed (ColossalAI-style DDP)")
        return tuple(out)


@register
class NodeBased(Strategy):
    """Intranode gradient all-reduce every iteration; internode parameter all-reduce every K' iterations."""

    name = "node-based"
    summary = "intranode gradient all-reduce each iteration, internode parameter all-reduce every K' iterations"
    reference = "seed 000: Moreno-Alvarez et al., IEEE TNNLS 2023, Alg. 2"
    Params = NodeBasedParams

    def plan(self, workload, topology, *, exchange: bool = False):
        p = self.params
        w = workload
        machines = machine_groups(topology, w.n_ranks)
        b = PlanBuilder(topology.n_ranks)
        its = {r: emit_forward_backward(b, w, r) for r in range(w.n_ranks)}
        grads: dict[int, list[int]] = {r: [] for r in range(w.n_ranks)}
        for m in machines:
            if len(m) < 2:
                continue  # a single replica per node: g_group is empty, no traffic
            for i in range(len(w.buckets)):
                after = [its[r].bucket_ready[i] if p.overlap == "backward" else its[r].backward_end for r in m]
                op = b.collective("allreduce", m, w.bucket_bytes(i), algorithm=p.intra_algorithm, after=after,
                                  label=f"intra-grad-allreduce[{i}]")
                for r in m:
                    grads[r].append(op)
        after_all = [x for r in range(w.n_ranks) for x in (grads[r] or [its[r].backward_end])]
        if exchange and w.n_ranks > 1:
            # Alg. 2 averages θ over G_group before this iteration's update.
            op = b.collective("allreduce", tuple(range(w.n_ranks)), w.model_bytes, algorithm=p.algorithm,
                              after=after_all, label="inter-param-allreduce")
            for r in range(w.n_ranks):
                emit_update(b, w, r, after=(op,))
        else:
            for r in range(w.n_ranks):
                emit_update(b, w, r, after=grads[r])
        return b.build(kind="exchange" if exchange else "local", strategy=self.name)

    def iterations(self, workload, topology) -> list:
        k = workload.iterations_per_epoch
        if k is None:  # unknown dataset: one period of K' iterations
            k = self.params.k_prime
        x = exchanges_per_epoch(k, self.params.k_prime)
        out = [(float(x), self.plan(workload, topology, exchange=True))]
        if k - x > 0:
            out.insert(0, (float(k - x), self.plan(workload, topology, exchange=False)))
        return out
