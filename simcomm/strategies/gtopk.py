"""``gtopk``: global top-k sparsification (Shi et al., ICDCS 2019), seed 002 baseline, seed 000 Table I.

Pattern: every rank selects its local top-k (values + indices); ranks merge
pairwise up a binary tree (the same tree as gs-SGD), each merge keeping the
top-k of the 2k entries it holds, so every message stays k entries; the
global top-k then goes back down the tree; then the sparse update.

Closed form (seed 000 Table I): ``2(log2 R)α + 4k(log2 R)β`` (β per 4-byte
word; k entries = 2k words), plus ``d·r_topk`` selection and ``2k·r_topk``
per merge.
"""

from __future__ import annotations

from dataclasses import dataclass

from simcomm.ops import PlanBuilder
from simcomm.strategies._sparse import SparseParams, emit_compute_phase, emit_tree_broadcast, emit_tree_reduce, \
    emit_updates, entry_bytes, n_elements, rate, top_k
from simcomm.strategies.base import NotApplicable, Strategy, register


@dataclass(frozen=True)
class GTopkParams(SparseParams):
    """Options of ``gtopk``."""


@register
class GTopk(Strategy):
    """Tree merge of top-k sets keeping the global top-k, broadcast back."""

    name = "gtopk"
    summary = "local top-k, tree merge keeping the global top-k, broadcast back"
    reference = "Shi et al., A distributed synchronous SGD algorithm with global top-k sparsification, ICDCS 2019"
    Params = GTopkParams

    def plan(self, workload, topology):
        w, p = workload, self.params
        n = w.n_ranks
        if n < 2:
            raise NotApplicable("gtopk needs at least 2 ranks")
        d, k = n_elements(w), top_k(w, p.density)
        r_top = rate(w, "topk", p.elem_s)
        nbytes = k * entry_bytes(w)
        b = PlanBuilder(n)
        ranks = list(range(n))
        ready = emit_compute_phase(b, w, lambda r: d * r_top * w.scale(r), "top-k select")
        root = emit_tree_reduce(b, ranks, ready, nbytes, lambda r: 2 * k * r_top * w.scale(r), "top-k")
        have = emit_tree_broadcast(b, ranks, root, nbytes, "top-k")
        emit_updates(b, w, lambda r: [have[r]])
        return b.build(kind="sparse", k=k, assumed=(f"k = {k} of d = {d}",))
