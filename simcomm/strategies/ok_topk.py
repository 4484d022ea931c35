"""``ok-topk``: near-optimal sparse all-reduce (Li & Hoefler, PPoPP 2022), seed 000 Table I.

Pattern: every rank picks about k entries with a threshold that is
re-estimated only every few iterations (so selection costs a threshold pass,
not an exact top-k); split-and-reduce sends each region's entries to the
rank owning that region (an all-to-all) where they are summed; the regions'
selected results are balanced and all-gathered (all-gatherv); then the
update.

Closed forms: Li & Hoefler Eq. 3 ``≤ (2R + 2 log2 R)α + 6k(R-1)/R β``
(``volume=6k``, the default: all-to-all of 2k words, all-gather of 4k words),
and seed 000 Table I's ``2k(R-1)/R β`` (``volume=2k``, the COO lower bound:
all-to-all and all-gather of k words each).  β is per 4-byte word.
"""

from __future__ import annotations

from dataclasses import dataclass

from simcomm.ops import PlanBuilder
from simcomm.strategies._fold import fold_plan
from simcomm.strategies._sparse import SparseParams, emit_compute_phase, emit_updates, entry_bytes, n_elements, rate, top_k
from simcomm.strategies.base import NotApplicable, Strategy, register
from simcomm.strategies.common import check_choice

#: (all-to-all entries, all-gather entries) per k, for each volume variant
VOLUMES = {"6k": (1.0, 2.0), "2k": (0.5, 0.5)}


@dataclass(frozen=True)
class OkTopkParams(SparseParams):
    """Options of ``ok-topk``."""

    volume: str = "6k"

    def __post_init__(self):
        super().__post_init__()
        check_choice("volume", self.volume, tuple(VOLUMES))

    @property
    def assumed(self) -> tuple[str, ...]:
        out = list(super().assumed)
        if self.volume == "6k":
            out.append("volume 6k(R-1)/R words (Li & Hoefler Eq. 3 bound), not seed 000's 2k lower bound")
        out.append("threshold selection cost (thresholds reused between re-estimations)")
        return tuple(out)


@register
class OkTopk(Strategy):
    """Split-and-reduce all-to-all, then balanced all-gather of the selected entries."""

    name = "ok-topk"
    summary = "threshold top-k, split-and-reduce all-to-all, balanced all-gather (O(k) volume)"
    reference = "Li & Hoefler, Near-optimal sparse allreduce for distributed deep learning, PPoPP 2022"
    Params = OkTopkParams

    def plan(self, workload, topology):
        w, p = workload, self.params
        n = w.n_ranks
        if n < 2:
            raise NotApplicable("ok-topk needs at least 2 ranks")
        d, k = n_elements(w), top_k(w, p.density)
        a2a, ag = VOLUMES[p.volume]
        e = entry_bytes(w)

        def emit(b: PlanBuilder):
            ranks = list(range(n))
            ready = emit_compute_phase(b, w, lambda r: d * rate(w, "threshold", p.elem_s) * w.scale(r), "threshold")
            split = b.collective("alltoall", ranks, a2a * k * e, after=list(ready.values()), label="split-and-reduce")
            acc = [b.compute(r, k * rate(w, "accumulate") * w.scale(r), after=[split], label="sum region",
                             category="compression") for r in ranks]
            gat = b.collective("allgather", ranks, ag * k * e, after=acc, label="allgatherv selected")
            emit_updates(b, w, lambda r: [gat])
            return b.build(kind="sparse", k=k, assumed=(f"k = {k} of d = {d}",))

        return fold_plan(w, n, emit)
