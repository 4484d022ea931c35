"""Non-overlapping allreduce (Open MPI ``ompi_coll_base_allreduce_intra_nonoverlapping``).

A reduce to rank 0 followed by a broadcast from rank 0, each through the
communicator's own collective – so Open MPI runs whatever reduce and
broadcast its fixed rules pick for the same ``p`` and ``n``.  Each registered
variant fixes the two parts, ``nonoverlapping-<reduce>+<broadcast>``, and
``auto`` picks the one matching Open MPI's sub-choices; its schedule is the
two schedules one after the other::

    T = T_reduce(p, n) + T_broadcast(p, n)

e.g. ``nonoverlapping-binomial+binary-tree`` (what 4.1 runs for 128 ≤ p < 256,
2 B ≤ n < 16 KiB) on ``p = 200``: ``T = 8·(α + n·β + n·γ) + 7·(α + n·β)``.

Only the combinations the rules can produce are registered: 4.1 picks
nonoverlapping for ``p ≥ 128`` and small ``n``, where its reduce is binomial
(or in-order binary in a few bands for ``p ≥ 2048``) and its broadcast is
binomial (gloo's schedule), binary tree, linear or knomial; 3.1 picks it only
for ``count ≤ p`` (so ``p ≥ 2500``), where its reduce is binomial in 1 KiB
segments and its broadcast the split binary tree in 1 KiB segments (``n <
370728``) or the 8 KiB pipeline.  Fixing the parts keeps each algorithm's cost
monotone in ``n`` (Open MPI's choices are not).
"""

from __future__ import annotations

from typing import ClassVar

from simcomm.collectives._compose import sequence_cost, sequence_steps
from simcomm.collectives.base import ALGORITHMS, Algorithm, register_variant

#: (reduce, broadcast) pairs Open MPI's rules run as nonoverlapping, by rules version
PARTS = {
    "4.1": (("binomial", "gloo"), ("binomial", "binary-tree"), ("binomial", "linear"), ("binomial", "knomial"),
            ("in-order-binary", "knomial")),
    "3.1": (("binomial-1k", "split-binary-tree-1k"), ("binomial-1k", "pipeline-8k")),
}


class NonoverlappingAllreduce(Algorithm):
    collective = "allreduce"
    reference = "Open MPI ompi/mca/coll/base/coll_base_allreduce.c (ompi_coll_base_allreduce_intra_nonoverlapping)"
    family = "openmpi"
    reduce_part: ClassVar[str] = "binomial"
    bcast_part: ClassVar[str] = "knomial"

    def parts(self) -> list[Algorithm]:
        return [ALGORITHMS.get(f"reduce/{self.reduce_part}"), ALGORITHMS.get(f"broadcast/{self.bcast_part}")]

    def _steps(self, p, n, ppn):
        return sequence_steps(self.parts(), p, n)

    def _cost(self, p, n, a, b, g, ppn, a_inter, b_inter):
        return sequence_cost(self.parts(), p, n, a, b, g)


for _version, _pairs in PARTS.items():
    for _r, _b in _pairs:
        register_variant(NonoverlappingAllreduce, f"nonoverlapping-{_r}+{_b}", reduce_part=_r, bcast_part=_b,
                         summary=f"reduce/{_r} to rank 0 then broadcast/{_b} (Open MPI {_version} nonoverlapping)")
