"""Non-overlapping reduce-scatter (Open MPI ``ompi_coll_base_reduce_scatter_intra_nonoverlapping``).

A reduce of the whole ``n``-byte buffer to rank 0 through the communicator's
reduce (whichever Open MPI 4.1's fixed rules pick for ``p`` and ``n``), then a
``scatterv`` of the ``p`` blocks from rank 0.  ``coll/tuned`` 4.1 has no
scatterv of its own, so ``coll/basic``'s linear one runs: the root sends each
block with a blocking send (``scatter/linear``)::

    T = T_reduce(p, n) + (p-1)·(α + (n/p)·β)

Variants fix the reduce, ``nonoverlapping-<reduce>+linear``; 4.1 picks
nonoverlapping only for tiny messages, where its reduce is the binary tree
(``4 ≤ p < 8``), binomial, or in-order binary (``p ≥ 4096``, 16-31 B).
"""

from __future__ import annotations

from typing import ClassVar

from simcomm.collectives._compose import sequence_cost, sequence_steps
from simcomm.collectives.base import ALGORITHMS, Algorithm, register_variant

#: reduces Open MPI 4.1 runs inside a nonoverlapping reduce-scatter
REDUCES = ("binary-tree", "binomial", "in-order-binary")


class NonoverlappingReduceScatter(Algorithm):
    collective = "reduce_scatter"
    reference = ("Open MPI ompi/mca/coll/base/coll_base_reduce_scatter.c "
                 "(ompi_coll_base_reduce_scatter_intra_nonoverlapping)")
    family = "openmpi"
    reduce_part: ClassVar[str] = "binomial"

    def parts(self) -> list[Algorithm]:
        return [ALGORITHMS.get(f"reduce/{self.reduce_part}"), ALGORITHMS.get("scatter/linear")]

    def _steps(self, p, n, ppn):
        return sequence_steps(self.parts(), p, n)

    def _cost(self, p, n, a, b, g, ppn, a_inter, b_inter):
        return sequence_cost(self.parts(), p, n, a, b, g)


for _r in REDUCES:
    register_variant(NonoverlappingReduceScatter, f"nonoverlapping-{_r}+linear", reduce_part=_r,
                     summary=f"reduce/{_r} to rank 0 then a linear scatter (Open MPI 4.1 nonoverlapping)")
