"""``topka``: all-gather of sparse top-k gradients (TopkA; Renggli et al., SparCML, SC 2019), seed 000 Table I.

Pattern: every rank selects its local top-k (values + indices); an
all-gather gives every rank all R sparse sets; each rank sums them locally;
then the update.

Closed form (seed 000 Table I): ``(log2 R)α + 2k(R-1)β`` — the all-gather of
R·k entries (2k words each) by recursive doubling or Bruck — plus
``d·r_topk`` selection and ``R·k·r_acc`` accumulation.
"""

from __future__ import annotations

from dataclasses import dataclass

from simcomm.ops import PlanBuilder
from simcomm.strategies._fold import fold_plan
from simcomm.strategies._sparse import SparseParams, emit_compute_phase, emit_updates, entry_bytes, n_elements, rate, top_k
from simcomm.strategies.base import NotApplicable, Strategy, register


@dataclass(frozen=True)
class TopkAParams(SparseParams):
    """Options of ``topka``."""


@register
class TopkA(Strategy):
    """All-gather every rank's sparse top-k, reduce locally."""

    name = "topka"
    summary = "local top-k, all-gather of every rank's sparse set, local sum"
    reference = "Renggli et al., SparCML, SC 2019 (TopkA); seed 000 Table I"
    Params = TopkAParams

    def plan(self, workload, topology):
        w, p = workload, self.params
        n = w.n_ranks
        if n < 2:
            raise NotApplicable("topka needs at least 2 ranks")
        d, k = n_elements(w), top_k(w, p.density)

        def emit(b: PlanBuilder):
            ranks = list(range(n))
            ready = emit_compute_phase(b, w, lambda r: d * rate(w, "topk", p.elem_s) * w.scale(r), "top-k select")
            ag = b.collective("allgather", ranks, n * k * entry_bytes(w), after=list(ready.values()),
                              label="allgather sparse")
            acc = {r: b.compute(r, n * k * rate(w, "accumulate") * w.scale(r), after=[ag], label="sum sparse",
                                category="compression") for r in ranks}
            emit_updates(b, w, lambda r: [acc[r]])
            return b.build(kind="sparse", k=k, assumed=(f"k = {k} of d = {d}",))

        return fold_plan(w, n, emit)
