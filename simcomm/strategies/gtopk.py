"""``gtopk``: global top-k sparsification (Shi et al., ICDCS 2019), seed 002 baseline, seed 000 Table I.

Pattern, as the authors' code runs it (hclhkbu/gtopkssgd ``allreducer.py``,
``gtopk_sparse_allreduce``; seed-code-facts C7):

* every rank selects its local top-k on the GPU (``torch.topk``, d·r_topk)
  and ships k values + k indices (2k words) to the host;
* ⌈log2 P⌉ tree rounds (pairs at distance 1, 2, 4, ... as gs-SGD's): the
  receiver merges the 2k entries it holds *on the host in numpy*
  (``np.intersect1d`` of the indices, then an argsort of the 2k values to
  keep the top k): 2k·r_merge_cpu per round, the cost C7 flags; every rank
  then waits in ``comm.Barrier()`` (a 4-byte all-reduce here);
* the global top-k goes back with ``comm.Bcast`` from rank 0 (the MPI
  library's broadcast, ``down=bcast``, default) or, as the paper's algorithm
  describes it, down the same tree (``down=tree``);
* each rank intersects its own indices with the global set (k·r_merge_cpu),
  then the sparse update.

Closed form (seed 000 Table I, tree both ways): ``2(log2 R)α + 4k(log2 R)β``
(β per 4-byte word; k entries = 2k words), plus ``d·r_topk`` selection and
``2k·r_merge_cpu`` per merge.
"""

from __future__ import annotations

from dataclasses import dataclass

from simcomm.strategies._fold import builder_for
from simcomm.strategies._sparse import (
    SparseParams,
    emit_compute_phase,
    emit_tree_broadcast,
    emit_updates,
    entry_bytes,
    n_elements,
    rate,
    top_k,
    tree_rounds,
)
from simcomm.strategies.base import NotApplicable, Strategy, register
from simcomm.strategies.common import check_choice

DOWN = ("bcast", "tree")


@dataclass(frozen=True)
class GTopkParams(SparseParams):
    """Options of ``gtopk``."""

    down: str = "bcast"  # how the global top-k returns: MPI broadcast (the code) or the reverse tree (the paper)

    def __post_init__(self):
        super().__post_init__()
        check_choice("down", self.down, DOWN)

    @property
    def assumed(self) -> tuple[str, ...]:
        out = list(super().assumed)
        out.append("per-round merge on the host in numpy (intersect1d + argsort of 2k entries, as "
                   "hclhkbu/gtopkssgd), 0.2 us per merged entry (measured on one AMD EPYC core)")
        if self.down == "bcast":
            out.append("global top-k returned by MPI Bcast from rank 0 (the code's comm.Bcast); down=tree is "
                       "the paper's reverse tree")
        return tuple(out)


@register
class GTopk(Strategy):
    """Tree merge of top-k sets keeping the global top-k, broadcast back."""

    name = "gtopk"
    summary = "local top-k, tree merge keeping the global top-k (host merges, barrier per round), broadcast back"
    reference = "Shi et al., A distributed synchronous SGD algorithm with global top-k sparsification, ICDCS 2019"
    Params = GTopkParams

    def plan(self, workload, topology):
        w, p = workload, self.params
        n = w.n_ranks
        if n < 2:
            raise NotApplicable("gtopk needs at least 2 ranks")
        d, k = n_elements(w), top_k(w, p.density)
        r_top = rate(w, "topk", p.elem_s)
        r_merge = rate(w, "merge_cpu")
        nbytes = k * entry_bytes(w)
        b = builder_for(w, n)
        ranks = list(range(n))
        ready = emit_compute_phase(b, w, lambda r: d * r_top * w.scale(r), "top-k select")
        for i, rnd in enumerate(tree_rounds(n)):
            for s, dst in rnd:
                t = b.transfer(s, dst, nbytes, after=[ready[s]], label=f"top-k up {i}")
                ready[dst] = b.compute(dst, 2 * k * r_merge, after=[t, ready[dst]], label="top-k merge",
                                       category="compression")
            # comm.Barrier() closes every round on every rank
            bar = b.collective("allreduce", ranks, 4.0, after=list(ready.values()), label=f"barrier {i}")
            ready = {r: bar for r in ranks}
        if p.down == "bcast":
            bc = b.collective("broadcast", ranks, nbytes, after=[ready[0]], label="top-k bcast")
            have = {r: bc for r in ranks}
        else:
            have = emit_tree_broadcast(b, ranks, ready[0], nbytes, "top-k")
        incl = {r: b.compute(r, k * r_merge, after=[have[r]], label="top-k intersect", category="compression")
                for r in ranks}
        emit_updates(b, w, lambda r: [incl[r]])
        return b.build(kind="sparse", k=k, assumed=(f"k = {k} of d = {d}",))
