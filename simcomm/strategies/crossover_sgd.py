"""``crossover-sgd``: segment-wise gossip on fair random topologies (seed 001, Yeo et al.).

Pattern: the model is cut into S segments of consecutive layers (default:
ResNet blocks plus stem and FC, 18 for ResNet-50, seed 001 Table 1).  After
the local update, for each segment a fresh destination table is drawn
(Alg. 2 as the code's ``select_layer`` runs it: a derangement from a seed
all ranks share, with the forced choice at G-2, see
``_gossip.select_sources``); every rank sends segment s to dest_s[rank] and
receives one segment.  Then the received segment is averaged in:
x_s <- (x_s + x_s,recv)/2.  How the segments run (``mode``):

* ``serial`` (default; the authors' training code, imagenet_test.py:840-857):
  one segment at a time, isend + blocking recv + wait, then a barrier over
  all ranks, then the 0.5/0.5 average; a 2-cycle is two messages (MPI).
* ``blocking`` (the AWS timing code behind Fig. 11, aws:796-831): one
  segment at a time per rank, a threaded send and a blocking recv, no
  barrier; a 2-cycle (send_to = recv_from) runs a 2-rank all-reduce instead
  of two messages (same bytes); one averaging pass after the last segment.
* ``overlap`` (the paper's Alg. 1): every segment's isend/irecv posted at
  once, one wait at the end, then averaging.  The code does not implement it.

``overlap=none`` (default) sends the freshly updated model and waits before
the next iteration, as both code paths do (the paper's conclusion lists
overlapping the exchange with backward as future work).  ``overlap=compute``
posts the exchange at the start of the iteration (the parameters of the
previous update) and averages before the update, hiding it behind forward
and backward (Sec. 3.1 argues this is easy).

Closed form (contention free): overlap ``T_comm ≈ α + |θ|β`` per rank
(all S flows share its NIC); blocking ``Σ_s(α + |θ_s|β)``; serial
``Σ_s(α + |θ_s|β + T_barrier)``.  Per iteration a rank sends and receives
|θ| bytes, to and from up to S different peers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simcomm.ops import PlanBuilder
from simcomm.strategies._fold import builder_for
from simcomm.strategies._gossip import (
    BARRIER_BYTES,
    SEGMENT_MODES,
    check_int,
    check_interval,
    emit_segment_gossip,
    fair_peer_table,
    gossip_iterations,
    segment_bytes,
)
from simcomm.strategies.base import NotApplicable, Strategy, register
from simcomm.strategies.common import check_choice, emit_forward_backward, emit_update

MODES = SEGMENT_MODES
OVERLAPS = ("none", "compute")


@dataclass(frozen=True)
class CrossoverParams:
    """Options of ``crossover-sgd`` (also used by the hierarchical variant)."""

    segments: int = 0  # 0 = blocks + stem + head from layer names (18 for ResNet-50)
    mode: str = "serial"  # the authors' training code
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
        if self.mode == "serial":
            out.append("mode serial: segments one at a time with a barrier after each, as the authors' training "
                       "code (imagenet_test.py:840-857); mode=blocking is their AWS timing code (no barrier, "
                       "2-cycles as a pair all-reduce), mode=overlap the paper's Alg. 1")
        if self.interval == 1:
            out.append("communication interval 1 (seed 001's AWS timing code; its training used 42)")
        if self.overlap == "none":
            out.append("exchange not overlapped with compute (published code; overlap=compute hides it)")
        out.append(f"peer tables drawn from seed {self.seed} per (iteration, segment); one representative iteration")
        return tuple(out)


def crossover_rounds(members, seed: int, iteration: int):
    """rounds(s) for :func:`emit_segment_gossip`: one round per segment on a fresh fair table."""
    members = tuple(members)

    def rounds(s: int) -> list[dict]:
        dest = fair_peer_table(len(members), seed, iteration, s).tolist()  # (Python ints: 16 384 of them at scale)
        return [{r: (members[d],) for r, d in zip(members, dest, strict=True)}]
    return rounds


def emit_crossover(b: PlanBuilder, members, ready: dict, seg_bytes, mode: str, seed: int, iteration: int,
                   gamma, *, tables: bool = True, **kw) -> dict[int, list[int]]:
    """Crossover exchange among ``members`` (ranks, or group roots) and averaging; rank -> final op ids.

    The averaging follows each code path: per segment in the training code
    (``serial``), once at the end in the AWS code (``blocking``, flat) and in
    Alg. 1 (``overlap``); callers may override ``average``.  ``serial`` with the averaging per segment (both
    strategies' default) is emitted by :func:`emit_serial_tables`, the same ops as
    :func:`~simcomm.strategies._gossip.emit_segment_gossip` makes (``tables=False``: that one, the reference).
    """
    kw.setdefault("average", "end" if mode == "blocking" else "segment")
    if tables and mode == "serial" and kw["average"] == "segment" and set(kw) <= _SERIAL_KEYS:
        return emit_serial_tables(b, members, ready, seg_bytes, seed, iteration, gamma,
                                  **{k: v for k, v in kw.items() if k != "average"})
    return emit_segment_gossip(b, members, ready, seg_bytes, crossover_rounds(members, seed, iteration), mode=mode,
                               gamma=gamma, pair_allreduce=mode == "blocking", **kw)


#: the options of emit_segment_gossip that emit_serial_tables takes as they are
_SERIAL_KEYS = frozenset({"average", "barrier_ranks", "after_segment", "avg_stream"})


def emit_serial_tables(b: PlanBuilder, members, ready: dict, seg_bytes, seed: int, iteration: int, gamma, *,
                       barrier_ranks=None, after_segment=None, avg_stream: str = "compute") -> dict[int, list[int]]:
    """``emit_segment_gossip(mode="serial", average="segment")`` on crossover's fair tables: the same ops, ids,
    deps and labels, made with less work per message (at 16 384 GPUs: 18 x 16 384 messages and as many
    averaging computes).

    Each segment is one round on a fresh table (:func:`crossover_rounds`: member i sends to member dest[i]):
    its messages in member order on stream ``comm`` after the member's gate, the barrier over ``barrier_ranks``
    (default ``members``) after them, then each member's averaging of what it received after the barrier, and
    ``after_segment``.  The table is read as a list (no dict of destinations per round), the gates as lists by
    member position, and nothing of the blocking and overlap modes is kept (their done lists, pair checks,
    stream names); tests/strategies/test_crossover_tables.py compares both emitters op by op.
    """
    members = tuple(members)
    m = len(members)
    gammas = [gamma(r) for r in members]
    gate = [[ready[r]] if ready.get(r) is not None else [] for r in members]
    bar_ranks = tuple(barrier_ranks or members)
    transfers, computes, collective = b.transfers, b.computes, b.collective
    distinct = len(set(members)) == m
    for s, nbytes in enumerate(seg_bytes):
        table = fair_peer_table(m, seed, iteration, s)
        dest = table.tolist()
        prefix = f"segment {s} "
        recv = [0.0] * m
        if distinct and (table != np.arange(m)).all():  # a derangement of distinct members: every member sends
            srcs, afters, to = list(members), gate, dest
        else:  # (i, j): member i sends to member j; a message to oneself is a local copy
            sends = [(i, j) for i, j in enumerate(dest) if members[j] != members[i]]
            srcs, afters, to = [members[i] for i, _ in sends], [gate[i] for i, _ in sends], [j for _, j in sends]
        dsts = [members[j] for j in to]
        made = transfers(srcs, dsts, nbytes, afters=afters,
                         labels=[f"{prefix}{r}->{d}" for r, d in zip(srcs, dsts, strict=True)])
        for j in to:
            recv[j] += nbytes
        bar = collective("allreduce", bar_ranks, BARRIER_BYTES, after=made, label=f"barrier {s}.0")
        after = [bar]
        label = f"average segment {s}"
        gate = [[oid] for oid in computes(members, [g * x for g, x in zip(gammas, recv, strict=True)], after=after,
                                           label=label, stream=avg_stream, category="update")]
        if after_segment is not None:
            out = after_segment(s, dict(zip(members, gate, strict=True)))
            gate = [out[r] for r in members]
    return dict(zip(members, gate, strict=True))


@register
class CrossoverSGD(Strategy):
    """Crossover-SGD: S segments gossiped to fresh fair random peers."""

    name = "crossover-sgd"
    summary = "gossip S model segments to fresh fair random peers (derangements), one segment at a time"
    reference = "Yeo et al., Crossover-SGD, Concurrency Computat. Pract. Exper. 2022 (seed 001), Alg. 1 and 2"
    Params = CrossoverParams
    paper_baseline = ("allreduce", (("bucket_mb", 0.0), ("overlap", "none")),
                      "seed 001's AllReduce-SGD: one all-reduce of all gradients after backward")

    def plan(self, workload, topology):
        w, p = workload, self.params
        n = w.n_ranks
        if n < 2:
            raise NotApplicable("crossover-sgd needs at least 2 ranks")
        seg_bytes, how = segment_bytes(w, p.segments)
        b = builder_for(w, n)
        if p.overlap == "compute":
            # Send the previous update's parameters at once (averaging on its own stream so the
            # exchange runs beside forward and backward); average before this update.
            done = emit_crossover(b, range(n), dict.fromkeys(range(n)), seg_bytes, p.mode, p.seed, 0,
                                  topology.gamma, avg_stream="gossip")
            for r in range(n):
                it = emit_forward_backward(b, w, r, buckets=(tuple(w.ready_order),))
                emit_update(b, w, r, after=[it.backward_end, *done[r]])
        else:
            ready = {}
            for r in range(n):
                emit_forward_backward(b, w, r, buckets=(tuple(w.ready_order),))
                ready[r] = emit_update(b, w, r)
            emit_crossover(b, range(n), ready, seg_bytes, p.mode, p.seed, 0, topology.gamma)
        return b.build(kind=f"gossip ({len(seg_bytes)} segments, {p.mode}, overlap {p.overlap})",
                       segments=len(seg_bytes), assumed=(f"segments: {how}",))

    def iterations(self, workload, topology) -> list:
        return gossip_iterations(workload, topology, self.params.interval,
                                 lambda _: self.plan(workload, topology))
