"""``gaussian-k``: Gaussian-threshold top-k (Shi et al., 2019), seed 000 Table I.

Pattern: every rank estimates the threshold that keeps about k of its d
gradients from a Gaussian fit (one mean/std pass, no exact selection), then
two all-gathers: the per-rank counts (4 bytes each) and the selected entries
(values + indices); each rank sums the R sparse sets; then the update.

Closed form (seed 000 Table I): ``2(log2 R)α + 2k(R-1)β`` plus
``d·r_threshold`` and ``R·k·r_acc`` compute.
"""

from __future__ import annotations

from dataclasses import dataclass

from simcomm.ops import PlanBuilder
from simcomm.strategies._fold import fold_plan
from simcomm.strategies._sparse import SparseParams, emit_compute_phase, emit_updates, entry_bytes, n_elements, rate, top_k
from simcomm.strategies.base import NotApplicable, Strategy, register


@dataclass(frozen=True)
class GaussianKParams(SparseParams):
    """Options of ``gaussian-k``."""


@register
class GaussianK(Strategy):
    """Gaussian threshold estimate, all-gather of counts then of sparse entries."""

    name = "gaussian-k"
    summary = "Gaussian threshold top-k estimate, all-gather of counts and sparse entries"
    reference = "Shi et al., Understanding top-k sparsification in distributed deep learning, 2019; seed 000 Table I"
    Params = GaussianKParams

    def plan(self, workload, topology):
        w, p = workload, self.params
        n = w.n_ranks
        if n < 2:
            raise NotApplicable("gaussian-k needs at least 2 ranks")
        d, k = n_elements(w), top_k(w, p.density)

        def emit(b: PlanBuilder):
            ranks = list(range(n))
            ready = emit_compute_phase(b, w, lambda r: d * rate(w, "threshold", p.elem_s) * w.scale(r), "threshold")
            counts = b.collective("allgather", ranks, n * 4.0, after=list(ready.values()), label="allgather counts")
            ag = b.collective("allgather", ranks, n * k * entry_bytes(w), after=[counts], label="allgather sparse")
            acc = {r: b.compute(r, n * k * rate(w, "accumulate") * w.scale(r), after=[ag], label="sum sparse",
                                category="compression") for r in ranks}
            emit_updates(b, w, lambda r: [acc[r]])
            return b.build(kind="sparse", k=k, assumed=(f"k = {k} of d = {d}",))

        return fold_plan(w, n, emit)
