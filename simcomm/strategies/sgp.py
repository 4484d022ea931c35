"""``sgp``: Stochastic Gradient Push (Assran et al., ICML 2019), as seed 001 ran it.

Seed 001 compares against SGP but its code runs its own SGP-style gossip,
not the reference implementation (seed-code-facts §A.2, §C5).  Three modes:

* ``mode=blocking`` (default; the AWS timing code behind Fig. 11,
  220606_aws/imagenet_test.py:311-318, 665-707): after the optimizer step,
  for each model segment (the same segments as Crossover-SGD: ResNet blocks
  plus stem and FC, 18 for ResNet-50) a rank sends the fp32 segment to
  rank + 2^(t mod floor(log2 R)) in a thread, blocks on the receive from
  rank - 2^(...), then averages 0.5/0.5; the next segment follows.  When
  the out- and in-peer coincide (offset R/2) the pair runs one 2-rank
  all-reduce instead (same bytes).  No push-sum weight, no overlap.
* ``mode=neuron`` (the NEURON training code, imagenet_test.py:742-797):
  2 peers per iteration at offsets j·3^i (j = 1, 2; i = t mod
  (floor(log3(R-1)) + 1)); per segment an exchange with peer 1, a barrier,
  the same with peer 2, a barrier, then 1/3 averaging.  The code also sleeps
  0.3 s before each exchange; we leave the sleeps out (they are not
  communication and made the paper's NEURON SGP times meaningless).
* ``mode=overlap`` (reference SGP, facebookresearch/stochastic_gradient_push,
  overlap mode): the whole model plus the push-sum weight (one extra element)
  goes to rank + 2^i, i cycling through 0..floor(log2(R-1)); it is posted at
  the start of the iteration (the previous update's parameters) and waited
  for before the update, so it hides behind forward and backward.

Closed forms (one iteration, contention free, S segments of |θ_s| bytes):
blocking ``T = t_fwd + t_bwd + t_upd + Σ_s (α + |θ_s|β + |θ_s|γ)``;
neuron ``T = t_fwd + t_bwd + t_upd + Σ_s (2(α + |θ_s|β + T_barrier) + 2|θ_s|γ)``;
overlap ``T = max(t_fwd + t_bwd, α + (|θ| + w)β) + t_upd + |θ|γ``.

The peer changes every iteration, so ``iterations()`` returns one plan per
step of the graph's period, each with weight 1/period.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from simcomm.errors import ConfigError
from simcomm.ops import PlanBuilder
from simcomm.strategies._fold import builder_for, folds, pattern_ranks
from simcomm.strategies._gossip import (
    aws_exp_offsets,
    base3_offsets,
    check_int,
    check_interval,
    emit_segment_gossip,
    exp_graph_exponents,
    floor_log,
    gossip_iterations,
    push_sum_bytes,
    segment_bytes,
)
from simcomm.strategies.base import NotApplicable, Strategy, register
from simcomm.strategies.common import check_choice, emit_forward_backward, emit_update

MODES = ("blocking", "neuron", "overlap")
#: fold: ``auto`` simulates a few ranks of each blocking iteration from 256 ranks (the pipeline's choice,
#: simcomm.strategies._fold.FOLD_RANKS), ``on`` at any size, ``off`` never (every rank simulated)
FOLDS = ("auto", "on", "off")


@dataclass(frozen=True)
class SGPParams:
    """Options of ``sgp``."""

    mode: str = "blocking"  # seed 001's AWS timing code (Fig. 11)
    segments: int = 0  # blocking/neuron: 0 = blocks + stem + head (18 for ResNet-50), as Crossover-SGD
    interval: int = 1  # iterations per gossip step (seed 001 accumulates 42)
    iteration: int = 0  # which iteration of the period plan() shows
    fold: str = "auto"  # blocking mode: simulate a few ranks for all (an approximation, see _fold.pattern_ranks)

    def __post_init__(self):
        check_choice("mode", self.mode, MODES)
        check_choice("fold", self.fold, FOLDS)
        check_int("segments", self.segments, 0)
        check_interval(self.interval)
        check_int("iteration", self.iteration, 0)

    @property
    def assumed(self) -> tuple[str, ...]:
        out = []
        if self.mode == "blocking":
            out.append("mode blocking: seed 001's AWS timing code (220606_aws/imagenet_test.py:665-707): after the "
                       "step, per segment a blocking send to rank + 2^(t mod floor(log2 R)) and receive from "
                       "rank - 2^(...), 0.5/0.5 averaging, a 2-rank all-reduce when both peers coincide; no "
                       "push-sum weight (mode=neuron: the NEURON training variant; mode=overlap: reference SGP)")
        elif self.mode == "neuron":
            out.append("mode neuron: seed 001's NEURON training code (imagenet_test.py:742-797), 2 peers at "
                       "j*3^i, a barrier after each exchange, 1/3 averaging; WITHOUT its 0.3 s sleep before each "
                       "exchange (0.6 s per segment, not communication)")
        else:
            out.append("mode overlap: reference SGP (push-sum weight as one extra model element; posted at "
                       "iteration start, waited before the update); seed 001's code ran mode=blocking")
        if self.interval == 1:
            out.append("communication interval 1 (seed 001's AWS timing code; its training used 42)")
        return tuple(out)


def emit_peer_exchange(b: PlanBuilder, w, topology, peers: dict[int, tuple[int, ...]], kind: str,
                       extra_bytes: float = 0.0):
    """One iteration where rank r sends its whole model to each of peers[r] at the start (overlap mode).

    Sends go on one stream per destination so a rank's sends run in parallel;
    each rank waits for its sends and its receives, then updates and mixes.
    ``extra_bytes`` rides along with each model (SGP's push-sum weight).
    """
    n = w.n_ranks
    nbytes = w.model_bytes + extra_bytes
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


def emit_after_step(b: PlanBuilder, w) -> dict[int, int]:
    """Forward, backward (one gradient-ready point) and the step of every rank; rank -> step op id."""
    return emit_after_step_of(b, w, range(w.n_ranks))


def emit_folded_blocking(b: PlanBuilder, w, topology, d: int, seg_bytes, kind: str, assumed: tuple):
    """A blocking iteration with offset ``d`` on the ranks :func:`pattern_ranks` picks (an approximation).

    Each simulated rank steps, then per segment sends to its real peer ``r + d`` (or, when the peers pair up,
    all-reduces with it, as the full plan does) and averages once its own message and its receive are done.
    The receive is the in-peer's message when the in-peer is simulated; otherwise it is taken to end with the
    rank's own message (every rank does the same, so the in-peer's message is a copy of its own on another
    route).  Each route class's messages go on a stream of their own whose bytes count for every message of the
    class (``traffic_weights``), so the bytes per link family are the full plan's.  None when every rank would be
    simulated anyway.
    """
    n = w.n_ranks
    live, klass = pattern_ranks(topology, d, n)
    pair = (2 * d) % n == 0  # every rank's peer sends back to it: one 2-rank all-reduce per pair
    owners = np.arange(n // 2 if pair else n)  # the rank that issues each message (pairs: the lower one)
    full = np.bincount(klass[owners])
    chosen = set(live.tolist())
    covered = {int(klass[r]) for r in chosen if not pair or r < (r + d) % n}
    # every route class needs a simulated message to stand for it: the first of each class not covered
    classes, first = np.unique(klass[owners], return_index=True)
    chosen.update(int(owners[i]) for c, i in zip(classes.tolist(), first.tolist(), strict=True) if c not in covered)
    ranks = sorted(chosen | ({(r + d) % n for r in chosen} if pair else set()))
    if len(ranks) == n:
        return None  # nothing to fold: the full plan, without the approximation's line
    issued = [r for r in ranks if not pair or r < (r + d) % n]
    klasses = klass[issued].tolist()
    here = Counter(klasses)
    # per issued rank (its peer, its class's stream) and per rank (its in-peer, its gamma), once for every segment
    sends = [(r, (r + d) % n, f"comm{c}") for r, c in zip(issued, klasses, strict=True)]
    averages = [(r, (r - d) % n, topology.gamma(r)) for r in ranks]
    gate = {r: [i] for r, i in emit_after_step_of(b, w, ranks).items()}
    for s, nbytes in enumerate(seg_bytes):
        done: dict[int, int] = {}
        if pair:
            for r, dst, stream in sends:
                done[r] = done[dst] = b.collective("allreduce", (r, dst), nbytes, after=gate[r] + gate[dst],
                                                   label=f"segment {s} {r}<->{dst}", stream=stream)
        else:
            transfer = b.transfer
            for r, dst, stream in sends:
                done[r] = transfer(r, dst, nbytes, after=gate[r], label=f"segment {s} {r}->{dst}", stream=stream)
        compute, label = b.compute, f"average segment {s}"
        for r, src, gamma in averages:
            own = done[r]
            recv = done.get(src, own)
            # (the deps sorted, one when both are the same op: what sorted({own, recv}) gives)
            gate[r] = [compute(r, gamma * nbytes, after=(own,) if recv == own else (min(own, recv), max(own, recv)),
                               label=label, category="update")]
    note = ("sgp fold: each blocking iteration simulates a few of the ranks (the first 64, those whose messages "
            "get the smallest share of a link, and every rank whose message shares a link with theirs); a rank "
            "whose in-peer is not simulated takes its receive to end with its own send; bytes per link family "
            "scaled per route class; within 0.06 % of every rank simulated at 256, 512 and 1 024 GPUs on dgx-a100-hdr "
            "(docs/engine.md; --opt fold=off simulates every rank)")
    return b.build(kind=kind, segments=len(seg_bytes), assumed=(*assumed, note), measured_ranks=ranks,
                   simulated_ranks=len(ranks), paths={"message_fold": {"used": True, "simulated_ranks": len(ranks),
                                                                       "ranks": n}},
                   traffic_weights={f"comm{c}": float(full[c]) / here[c] for c in here})


def emit_after_step_of(b: PlanBuilder, w, ranks) -> dict[int, int]:
    """:func:`emit_after_step` for ``ranks`` only."""
    ready = {}
    for r in ranks:
        emit_forward_backward(b, w, r, buckets=(tuple(w.ready_order),))
        ready[r] = emit_update(b, w, r)
    return ready


@register
class SGP(Strategy):
    """SGP-style gossip as seed 001 ran it (blocking per segment), or reference SGP (overlap)."""

    name = "sgp"
    summary = "gossip the model to one peer per iteration on an exponential graph (seed 001's SGP)"
    reference = "Assran et al., Stochastic Gradient Push, ICML 2019; seed 001 (Yeo et al.) baseline and code"
    Params = SGPParams
    paper_baseline = ("allreduce", (("bucket_mb", 0.0), ("overlap", "none")),
                      "seed 001's AllReduce-SGD: one all-reduce of all gradients after backward")

    def period(self, n_ranks: int) -> int:
        if n_ranks < 2:
            return 0
        if self.params.mode == "blocking":
            return len(aws_exp_offsets(n_ranks))
        if self.params.mode == "neuron":
            return floor_log(n_ranks - 1, 3) + 1
        return len(exp_graph_exponents(n_ranks))

    def plan_iteration(self, workload, topology, iteration: int):
        w, p = workload, self.params
        n = w.n_ranks
        if n < 2:
            raise NotApplicable("sgp needs at least 2 ranks")
        b = builder_for(w, n)
        if p.mode == "overlap":
            i = exp_graph_exponents(n)[iteration % self.period(n)]
            peers = {r: ((r + 2 ** i) % n,) for r in range(n)}
            return emit_peer_exchange(b, w, topology, peers, f"gossip (peer +2^{i})",
                                      extra_bytes=push_sum_bytes(w.dtype_bytes))
        seg_bytes, how = segment_bytes(w, p.segments)
        if p.mode == "blocking":
            d = aws_exp_offsets(n)[iteration % self.period(n)]
            kind = f"gossip (peer +{d}, blocking per segment)"
            folded = emit_folded_blocking(PlanBuilder(n), w, topology, d, seg_bytes, kind, (f"segments: {how}",)) \
                if self._folds(w) else None
            if folded is not None:
                return folded
            ready = emit_after_step(b, w)
            rounds = [{r: ((r + d) % n,) for r in range(n)}]
        else:
            ready = emit_after_step(b, w)
            offs = base3_offsets(n, iteration)
            rounds = [{r: ((r + d) % n,) for r in range(n)} for d in offs]
            kind = f"gossip (peers +{offs[0]}, +{offs[1]}, barrier per exchange)"
        emit_segment_gossip(b, range(n), ready, seg_bytes, lambda s: rounds, gamma=topology.gamma,
                            mode="blocking" if p.mode == "blocking" else "serial",
                            pair_allreduce=p.mode == "blocking")
        return b.build(kind=kind, segments=len(seg_bytes), assumed=(f"segments: {how}",),
                       paths={"message_fold": {"used": False, "simulated_ranks": n, "ranks": n}})

    def _folds(self, w) -> bool:
        """Whether blocking iterations simulate a few ranks for all (``fold``; refused where ranks differ)."""
        p = self.params
        if p.mode != "blocking" or p.fold == "off" or (p.fold == "auto" and not (folds(w) and w.fold_messages)):
            return False
        if w.compute_jitter or len(set(w.compute_scale)) > 1:
            raise ConfigError("fold: on takes every rank to compute alike (its receive ends with its own send); "
                              "with compute jitter or unequal compute scales use --opt fold=off")
        return True

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
