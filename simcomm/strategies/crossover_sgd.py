"""``crossover-sgd``: segment-wise gossip on fair random topologies (seed 001, Yeo et al.).

Pattern: the model is cut into S segments of consecutive layers (default:
ResNet blocks plus stem and FC, 18 for ResNet-50).  After the local update,
for each segment a fresh destination table is drawn (Alg. 2: a derangement
from a seed shared by all ranks, so no rank sends to itself and each
receives exactly one copy); every rank sends segment s to dest_s[rank].
``mode=overlap`` (Alg. 1) posts all S sends and receives at once and waits
for them together; ``mode=serial`` (the published code) runs the segments one
after another with a barrier between them.  Then each received segment is
averaged into the model: x_s <- (x_s + x_s,recv)/2.

``overlap=none`` (default) sends the freshly updated model and waits before
the next iteration, as the published implementation does: the paper's
conclusion lists overlapping the exchange with backward as future work.
``overlap=compute`` posts the exchange at the start of the iteration (the
parameters of the previous update) and averages before the update, as SGP
does, hiding it behind forward and backward (Sec. 3.1 argues this is easy).

Closed form (contention free): overlap ``T_comm = max_s(α + |θ_s|β)`` per rank
with all S flows sharing its NIC, i.e. about ``α + |θ|β``; serial
``T_comm = Σ_s(α + |θ_s|β + T_barrier)``.  Per iteration a rank sends and
receives |θ| bytes, to and from up to S different peers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from simcomm.ops import PlanBuilder
from simcomm.strategies._gossip import check_int, check_interval, fair_peer_table, gossip_iterations, \
    model_segments
from simcomm.strategies.base import NotApplicable, Strategy, register
from simcomm.strategies.common import check_choice, emit_forward_backward, emit_update

MODES = ("overlap", "serial")
OVERLAPS = ("none", "compute")


@dataclass(frozen=True)
class CrossoverParams:
    """Options of ``crossover-sgd`` (also used by the hierarchical variant)."""

    segments: int = 0  # 0 = blocks + stem + head from layer names (18 for ResNet-50)
    mode: str = "overlap"
    interval: int = 1
    seed: int = 0
    overlap: str = "none"

    def __post_init__(self):
        check_int("segments", self.segments, 0)
        check_choice("mode", self.mode, MODES)
        check_choice("overlap", self.overlap, OVERLAPS)
        check_interval(self.interval)
        check_int("seed", self.seed, 0)

    @property
    def assumed(self) -> tuple[str, ...]:
        out = []
        if self.segments == 0:
            out.append("segments: one per ResNet-style block plus stem and head (seed 001), "
                       "else 18 of about equal bytes")
        if self.interval == 1:
            out.append("communication interval 1 (seed 001 used 42 to emulate a large batch)")
        if self.overlap == "none":
            out.append("exchange not overlapped with compute (published code; overlap=compute hides it)")
        out.append(f"peer tables drawn from seed {self.seed} per (iteration, segment); one representative iteration")
        return tuple(out)


def emit_segment_exchange(b: PlanBuilder, members: Sequence[int], ready: dict[int, int | None],
                          seg_bytes: Sequence[float], mode: str, seed: int,
                          iteration: int) -> tuple[dict[int, list[int]], dict[int, float]]:
    """The S segment transfers among ``members``: (rank -> transfer ids it waits for, rank -> bytes received).

    ``ready[r]`` is the op after which rank r's parameters may be sent (None:
    at once).  Destination tables index ``members``, so the same code serves
    leaders of groups in the hierarchical variant.
    """
    g = len(members)
    done: dict[int, list[int]] = {r: [] for r in members}
    recv_bytes: dict[int, float] = {r: 0.0 for r in members}
    barrier = None
    for s, nbytes in enumerate(seg_bytes):
        dest = fair_peer_table(g, seed, iteration, s)
        stream = f"seg{s}" if mode == "overlap" else "comm"
        ids = []
        for i, r in enumerate(members):
            d = members[int(dest[i])]
            after = ([ready[r]] if ready[r] is not None else []) + ([barrier] if barrier is not None else [])
            t = b.transfer(r, d, nbytes, after=after, label=f"segment {s} {r}->{d}", stream=stream)
            done[r].append(t)
            done[d].append(t)
            recv_bytes[d] += nbytes
            ids.append(t)
        if mode == "serial" and s < len(seg_bytes) - 1:
            # the published code waits for every rank's segment before the next one
            barrier = b.collective("allreduce", members, 0.0, after=ids, label=f"barrier {s}")
    return done, recv_bytes


def emit_crossover(b: PlanBuilder, members: Sequence[int], ready: dict[int, int], seg_bytes: Sequence[float],
                   mode: str, seed: int, iteration: int, gamma) -> dict[int, int]:
    """Crossover exchange among ``members`` then averaging; returns rank -> id of its averaging op."""
    done, recv_bytes = emit_segment_exchange(b, members, ready, seg_bytes, mode, seed, iteration)
    return {r: b.compute(r, gamma(r) * recv_bytes[r], after=done[r], label="average segments",
                         category="update") for r in members}


@register
class CrossoverSGD(Strategy):
    """Crossover-SGD: S segments gossiped to fresh fair random peers."""

    name = "crossover-sgd"
    summary = "gossip S model segments to fresh fair random peers (derangements), all at once"
    reference = "Yeo et al., Crossover-SGD, Concurrency Computat. Pract. Exper. 2022 (seed 001), Alg. 1 and 2"
    Params = CrossoverParams

    def plan(self, workload, topology):
        w, p = workload, self.params
        n = w.n_ranks
        if n < 2:
            raise NotApplicable("crossover-sgd needs at least 2 ranks")
        segs, how = model_segments(w, p.segments)
        seg_bytes = [sum(w.layers[i].grad_bytes for i in s) for s in segs]
        b = PlanBuilder(n)
        if p.overlap == "compute":
            # Send the previous update's parameters at once; average before this update.
            done, recv = emit_segment_exchange(b, range(n), dict.fromkeys(range(n)), seg_bytes, p.mode, p.seed, 0)
            for r in range(n):
                it = emit_forward_backward(b, w, r, buckets=(tuple(w.ready_order),))
                avg = b.compute(r, topology.gamma(r) * recv[r], after=[it.backward_end, *done[r]],
                                label="average segments", category="update")
                emit_update(b, w, r, after=[avg])
        else:
            ready = {}
            for r in range(n):
                emit_forward_backward(b, w, r, buckets=(tuple(w.ready_order),))
                ready[r] = emit_update(b, w, r)
            emit_crossover(b, range(n), ready, seg_bytes, p.mode, p.seed, 0, topology.gamma)
        return b.build(kind=f"gossip ({len(segs)} segments, {p.mode}, overlap {p.overlap})", segments=len(segs),
                       assumed=(f"segments: {how}",))

    def iterations(self, workload, topology) -> list:
        return gossip_iterations(workload, topology, self.params.interval,
                                 lambda _: self.plan(workload, topology))
