"""``gs-sgd``: global-sketching SGD (Dai et al. 2021, seed 002).

Pattern (seed-code-facts C6): every rank compresses its gradient into a
Count-Sketch of rows × cols counters (O(rows·d) on the GPU); the sketches are
summed by a binary tree (pairs at distance 1, 2, 4, ... send toward rank 0,
the highest rank of an odd set skipping a round) and the sum comes back down
the same tree: 2⌈log2 P⌉ rounds for any P (Alg. 1, S2:L92).  Every rank then
recovers the top-k coordinates with HEAVYMIX (O(rows·d) queries) and a second
round (Alg. 2 line 4, S2:L157) fetches the exact values of those k coordinates
as a k-element tree all-reduce over the same tree (values only: every rank
knows the coordinates); then the update.

Sketch size.  Seed 002 sizes a sketch at O(log d) elements (Eq. 1:
``2⌈log P⌉(α + log d·β)``; Sec. III-A: "a size of O(1/ε log d)").  The default
rows × cols follow Count-Sketch's error bound (Charikar, Chen, Farach-Colton,
ICALP 2002) for the guarantee "every one of the d coordinates is estimated
within ±ε‖g‖₂, with probability at least 1 - δ" (the (α, ℓ2)-heavy-hitter
guarantee seed 002 quotes, α = 2ε):

* one row of width c estimates g_i without bias with variance ≤ ‖g‖₂²/c, so by
  Markov on the squared error it errs by more than √(8/c)·‖g‖₂ with probability
  ≤ 1/8 (Charikar et al.'s per-row event); c = ⌈8/ε²⌉ makes that ε‖g‖₂;
* the median of r independent rows errs only if at least r/2 rows do:
  Chernoff, P ≤ exp(-r·D(½‖⅛)) with D(½‖⅛) = ½ ln(16/7) ≈ 0.413; a union bound
  over the d coordinates asks d·exp(-r·D) ≤ δ, so r = ⌈ln(d/δ) / D(½‖⅛)⌉.

So a sketch holds ⌈8/ε²⌉ · ⌈2 ln(d/δ)/ln(16/7)⌉ = O(log d) counters, not
O(k): HEAVYMIX only needs the heavy set H from the sketch and fills the rest
of the top-k at random (Alg. 2 line 3).  Defaults ε = 0.1, δ = 0.01 (assumed:
the paper gives only the O()).  ``sketch-rows`` / ``sketch-cols`` override.

Closed form (seed 002 Eq. 1 plus the second round):
``t = 2⌈log2 P⌉(α + S β) + 2⌈log2 P⌉(α + k·dtype β) + d·rows·(r_sketch + r_query)``
with S = rows·cols·dtype bytes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from simcomm.errors import ConfigError
from simcomm.strategies._fold import builder_for
from simcomm.strategies._gossip import check_int
from simcomm.strategies._sparse import (
    SparseParams,
    emit_compute_phase,
    emit_tree_broadcast,
    emit_tree_reduce,
    emit_updates,
    n_elements,
    rate,
    top_k,
)
from simcomm.strategies.base import NotApplicable, Strategy, register

#: Count-Sketch guarantee: every coordinate within ±ε‖g‖₂ with probability ≥ 1 - δ (assumed values)
DEFAULT_EPS = 0.1
DEFAULT_DELTA = 0.01
#: Chernoff exponent D(1/2 || 1/8) of the median of rows that each err with probability 1/8
ROW_EXPONENT = 0.5 * math.log(16 / 7)


def sketch_dims(d: int, eps: float = DEFAULT_EPS, delta: float = DEFAULT_DELTA) -> tuple[int, int]:
    """(rows, cols) of a Count-Sketch estimating all ``d`` coordinates to ±eps·‖g‖₂ with probability 1 - delta.

    cols = ⌈8/ε²⌉ (Markov: a row errs with probability ≤ 1/8), rows = ⌈ln(d/δ) / D(½‖⅛)⌉
    (Chernoff on the median, union bound over d).  See the module docstring.
    """
    cols = math.ceil(round(8.0 / eps ** 2, 9))
    rows = math.ceil(round(math.log(max(d, 1) / delta) / ROW_EXPONENT, 9))
    return rows, cols


@dataclass(frozen=True)
class SketchParams(SparseParams):
    """Options of the sketching strategies."""

    sketch_eps: float = DEFAULT_EPS
    sketch_delta: float = DEFAULT_DELTA
    sketch_rows: int = 0  # 0 = derived from eps, delta and d
    sketch_cols: int = 0  # 0 = derived from eps

    def __post_init__(self):
        super().__post_init__()
        for name, v in (("sketch-eps", self.sketch_eps), ("sketch-delta", self.sketch_delta)):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v < 1:
                raise ConfigError(f"{name}: {v!r} must be in (0, 1)")
        check_int("sketch-rows", self.sketch_rows, 0)
        check_int("sketch-cols", self.sketch_cols, 0)

    @property
    def assumed(self) -> tuple[str, ...]:
        out = list(super().assumed)
        if not (self.sketch_rows and self.sketch_cols):
            out.append(f"Count-Sketch sized for every coordinate within +-{self.sketch_eps:g}·||g||_2 with "
                       f"probability {1 - self.sketch_delta:g} (Charikar et al.): cols = ceil(8/eps^2), rows = "
                       "ceil(ln(d/delta)/D(1/2||1/8)), O(log d) counters as seed 002's Eq. 1 (eps, delta assumed)")
        return tuple(out)


def sketch_shape(w, p: SketchParams) -> tuple[int, int, int, int, float]:
    """(d, k, rows, cols, sketch bytes) for workload ``w``."""
    d = n_elements(w)
    k = top_k(w, p.density)
    rows, cols = sketch_dims(d, p.sketch_eps, p.sketch_delta)
    rows, cols = p.sketch_rows or rows, p.sketch_cols or cols
    return d, k, rows, cols, float(rows * cols * w.dtype_bytes)


@register
class GsSGD(Strategy):
    """Count-sketches summed by a tree all-reduce, HEAVYMIX, second round."""

    name = "gs-sgd"
    summary = "count-sketch gradients, tree all-reduce of sketches (2⌈log2 P⌉ rounds), top-k second round"
    reference = "Dai et al., A distributed SGD algorithm with global sketching, 2021 (seed 002), Alg. 1-2, Eq. 1"
    Params = SketchParams
    paper_baseline = ("gtopk", (), "seed 002 compares gs-SGD with gTop-k (Table II)")
    wire_dtypes = ("fp32", "fp64")  # Count-Sketch counters sum many gradients: seed 002 keeps them fp32

    def plan(self, workload, topology):
        w, p = workload, self.params
        n = w.n_ranks
        if n < 2:
            raise NotApplicable("gs-sgd needs at least 2 ranks")
        d, k, rows, cols, sbytes = sketch_shape(w, p)
        if sbytes >= w.model_bytes:
            raise ConfigError(f"sketch-cols: a {rows}x{cols} sketch is not smaller than the gradient "
                              f"({d} elements); raise sketch-eps or set sketch-rows/sketch-cols")
        r_sk = rate(w, "sketch", p.elem_s)
        r_q = rate(w, "query")
        b = builder_for(w, n)
        ranks = list(range(n))
        ready = emit_compute_phase(b, w, lambda r: d * rows * r_sk * w.scale(r), "sketch")
        gamma = topology.gammas().tolist()  # (topology.gamma of each rank, read once for both trees)
        root = emit_tree_reduce(b, ranks, ready, sbytes, lambda r: gamma[r] * sbytes, "sketch")
        have = emit_tree_broadcast(b, ranks, root, sbytes, "sketch")
        hm = {r: b.compute(r, d * rows * r_q * w.scale(r), after=[have[r]], label="heavymix",
                           category="compression") for r in ranks}
        # second round (Alg. 2 line 4): the k exact values, summed up and sent down the same tree
        vbytes = float(k * w.dtype_bytes)
        top = emit_tree_reduce(b, ranks, hm, vbytes, lambda r: gamma[r] * vbytes, "top-k values")
        exact = emit_tree_broadcast(b, ranks, top, vbytes, "top-k values")
        emit_updates(b, w, lambda r: [exact[r]])
        return b.build(kind="sketch", k=k, sketch_bytes=sbytes,
                       assumed=(f"k = {k} of d = {d}; sketch {rows} x {cols} = {rows * cols} counters "
                                f"({sbytes / 1e3:.4g} kB)",))
