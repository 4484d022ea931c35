"""``gs-sgd``: global-sketching SGD (Dai et al. 2021, seed 002).

Pattern: every rank compresses its gradient into a Count-Sketch of
rows × cols counters; the sketches are summed by a binary tree (pairs at
distance 1, 2, 4, ... send toward rank 0, the highest rank of an odd set
skipping a round) and the sum comes back down the same tree: 2⌈log2 P⌉
rounds for any P.  Every rank then recovers the top-k coordinates with
HEAVYMIX and a second round (an all-reduce of k values at the agreed
coordinates) fetches their exact sums; then the update.

Closed form (seed 002 Eq. 1 plus the second round):
``t = 2⌈log2 P⌉(α + S β) + T_allreduce(k values) + d·rows·(r_sketch + r_query)``
with S = rows·cols·dtype bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

from simcomm.errors import ConfigError
from simcomm.ops import PlanBuilder
from simcomm.strategies._gossip import check_int
from simcomm.strategies._sparse import SparseParams, emit_compute_phase, emit_tree_broadcast, emit_tree_reduce, \
    emit_updates, n_elements, rate, top_k
from simcomm.strategies.base import NotApplicable, Strategy, register

DEFAULT_ROWS = 5


@dataclass(frozen=True)
class SketchParams(SparseParams):
    """Options of the sketching strategies."""

    sketch_rows: int = DEFAULT_ROWS
    sketch_cols: int = 0  # 0 = k columns

    def __post_init__(self):
        super().__post_init__()
        check_int("sketch-rows", self.sketch_rows, 1)
        check_int("sketch-cols", self.sketch_cols, 0)

    @property
    def assumed(self) -> tuple[str, ...]:
        out = list(super().assumed)
        if self.sketch_rows == DEFAULT_ROWS:
            out.append(f"sketch rows {DEFAULT_ROWS} (Sketched-SGD's usual depth)")
        if self.sketch_cols == 0:
            out.append("sketch columns = k")
        return tuple(out)


def sketch_shape(w, p: SketchParams) -> tuple[int, int, int, float]:
    """(d, k, cols, sketch bytes)."""
    d = n_elements(w)
    k = top_k(w, p.density)
    cols = p.sketch_cols or k
    return d, k, cols, float(p.sketch_rows * cols * w.dtype_bytes)


@register
class GsSGD(Strategy):
    """Count-sketches summed by a tree all-reduce, HEAVYMIX, second round."""

    name = "gs-sgd"
    summary = "count-sketch gradients, tree all-reduce of sketches (2⌈log2 P⌉ rounds), top-k second round"
    reference = "Dai et al., A distributed SGD algorithm with global sketching, 2021 (seed 002), Alg. 1-2, Eq. 1"
    Params = SketchParams

    def plan(self, workload, topology):
        w, p = workload, self.params
        n = w.n_ranks
        if n < 2:
            raise NotApplicable("gs-sgd needs at least 2 ranks")
        d, k, cols, sbytes = sketch_shape(w, p)
        if sbytes >= w.model_bytes:
            raise ConfigError(f"sketch-cols: a {p.sketch_rows}x{cols} sketch is not smaller than the gradient")
        r_sk = rate(w, "sketch", p.elem_s)
        r_q = rate(w, "query")
        b = PlanBuilder(n)
        ranks = list(range(n))
        ready = emit_compute_phase(b, w, lambda r: d * p.sketch_rows * r_sk * w.scale(r), "sketch")
        root = emit_tree_reduce(b, ranks, ready, sbytes, lambda r: topology.gamma(r) * sbytes, "sketch")
        have = emit_tree_broadcast(b, ranks, root, sbytes, "sketch")
        hm = [b.compute(r, d * p.sketch_rows * r_q * w.scale(r), after=[have[r]], label="heavymix",
                        category="compression") for r in ranks]
        second = b.collective("allreduce", ranks, k * w.dtype_bytes, after=hm, label="top-k values")
        emit_updates(b, w, lambda r: [second])
        return b.build(kind="sketch", k=k, sketch_bytes=sbytes,
                       assumed=(f"k = {k} of d = {d}; sketch {p.sketch_rows} x {cols}",))
