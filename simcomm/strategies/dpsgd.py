"""``dpsgd``: decentralized parallel SGD on a ring (Lian et al., NeurIPS 2017), seed 001 Fig. 1.

Seed 001 only draws D-PSGD (Fig. 1: a bidirectional ring) and never runs
it, so no seed code fixes how it executes.  Two modes:

* ``mode=overlap`` (default; Lian et al. Alg. 1): the gradient is computed
  at x_k while the neighbours' x_k are fetched, so the exchange of the whole
  model with both ring neighbours (rank ± 1) is posted at the start of the
  iteration and hides behind forward and backward; then the three models
  are averaged and the gradient applied.  D-PSGD's mixing matrix is
  symmetric, so no push-sum weight travels.
* ``mode=blocking`` (D-PSGD run the way seed 001's code runs its gossip,
  cf. ``sgp`` mode blocking): after the optimizer step, per model segment a
  rank sends the segment to both neighbours and blocks on both receives (the
  two directions in parallel), then averages 1/3 each; the next segment
  follows.  No barrier.

With R = 2 the two neighbours coincide: one exchange.

Closed forms (contention free, both sends in parallel):
overlap ``T = max(t_fwd + t_bwd, α + |θ|β) + t_upd + 2|θ|γ``;
blocking ``T = t_fwd + t_bwd + t_upd + Σ_s (α + |θ_s|β + 2|θ_s|γ)``.
"""

from __future__ import annotations

from dataclasses import dataclass

from simcomm.strategies._fold import builder_for
from simcomm.strategies._gossip import check_int, check_interval, emit_segment_gossip, gossip_iterations, ring_neighbours, segment_bytes
from simcomm.strategies.base import NotApplicable, Strategy, register
from simcomm.strategies.common import check_choice
from simcomm.strategies.sgp import emit_after_step, emit_peer_exchange

MODES = ("overlap", "blocking")


@dataclass(frozen=True)
class DPSGDParams:
    """Options of ``dpsgd``."""

    mode: str = "overlap"
    segments: int = 0  # blocking: 0 = blocks + stem + head (18 for ResNet-50)
    interval: int = 1

    def __post_init__(self):
        check_choice("mode", self.mode, MODES)
        check_int("segments", self.segments, 0)
        check_interval(self.interval)

    @property
    def assumed(self) -> tuple[str, ...]:
        if self.mode == "overlap":
            out = ["mode overlap: both neighbour exchanges posted at iteration start and hidden behind "
                   "forward+backward (Lian et al. Alg. 1; seed 001 never ran D-PSGD; mode=blocking runs it as "
                   "seed 001's code runs its gossip)"]
        else:
            out = ["mode blocking: after the step, per segment both neighbours at once, blocking receives, 1/3 "
                   "averaging (seed 001's gossip code structure applied to D-PSGD's ring)"]
        if self.interval == 1:
            out.append("communication interval 1")
        return tuple(out)


@register
class DPSGD(Strategy):
    """D-PSGD: model exchange with both ring neighbours every iteration."""

    name = "dpsgd"
    summary = "exchange the model with both ring neighbours every iteration (D-PSGD)"
    reference = "Lian et al., Can decentralized algorithms outperform centralized ones?, NeurIPS 2017; seed 001"
    Params = DPSGDParams
    paper_baseline = ("allreduce", (("bucket_mb", 0.0), ("overlap", "none")),
                      "seed 001's AllReduce-SGD: one all-reduce of all gradients after backward")

    def plan(self, workload, topology):
        w, p = workload, self.params
        n = w.n_ranks
        if n < 2:
            raise NotApplicable("dpsgd needs at least 2 ranks")
        peers = {r: ring_neighbours(r, n) for r in range(n)}
        b = builder_for(w, n)
        if p.mode == "overlap":
            return emit_peer_exchange(b, w, topology, peers, "gossip (ring)")
        seg_bytes, how = segment_bytes(w, p.segments)
        ready = emit_after_step(b, w)
        emit_segment_gossip(b, range(n), ready, seg_bytes, lambda s: [peers], mode="blocking",
                            gamma=topology.gamma)
        return b.build(kind="gossip (ring, blocking per segment)", segments=len(seg_bytes),
                       assumed=(f"segments: {how}",))

    def iterations(self, workload, topology) -> list:
        return gossip_iterations(workload, topology, self.params.interval,
                                 lambda _: self.plan(workload, topology))
