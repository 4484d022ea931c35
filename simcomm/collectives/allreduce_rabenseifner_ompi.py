"""Open MPI's Rabenseifner allreduce (``ompi_coll_base_allreduce_intra_redscat_allgather``).

For ``p`` not a power of two the first ``2·rem`` ranks fold in halves: even
rank ``2i`` and odd rank ``2i+1`` swap halves (``n/2`` each way) and each
reduces its half, then the odd rank sends its reduced half back (``n/2``);
the even ranks carry on.  The ``p'`` ranks then run a reduce-scatter by
recursive halving with the distance *doubling* (masks 1, 2, …, sizes
``n/2, n/4, …``) and an allgather in the reverse order, and finally each even
rank sends the whole result to its odd partner.  With ``e = [p ≠ p']``::

    T = (2 lg p' + 3e)·α + (2(p'-1)/p' + 2e)·n·β + ((p'-1)/p' + e/2)·n·γ

So it differs from ``allreduce/rabenseifner`` (MPICH's whole-buffer fold)
only for non-powers of two: one more ``α``, half the fold's reduction.  Open
MPI falls back to the linear allreduce when ``count < p'``; ``auto`` applies
that.
"""

from __future__ import annotations

import numpy as np

from simcomm.collectives._doubling import exchange
from simcomm.collectives._patterns import fold_map, lg, pairs
from simcomm.collectives.base import Algorithm, CostTerms, Step, register


@register
class OmpiRabenseifnerAllreduce(Algorithm):
    collective = "allreduce"
    name = "rabenseifner-ompi"
    summary = "Rabenseifner with Open MPI's half-buffer fold and distance-doubling reduce-scatter"
    reference = ("Rabenseifner, ICCS 2004; Open MPI ompi/mca/coll/base/coll_base_allreduce.c "
                 "(allreduce_intra_redscat_allgather)")
    family = "openmpi"

    def _steps(self, p, n, ppn):
        pof2, rem, real = fold_map(p, keep_odd=False)
        odd, even = pairs(rem, keep_odd=False)
        out = []
        if rem:
            out.append(Step.make(np.concatenate([even, odd]), np.concatenate([odd, even]), n / 2, n / 2))
            out.append(Step.make(odd, even, n / 2))
        k = lg(pof2)
        masks = [1 << i for i in range(k)]
        out += exchange(real, masks, [n / (2 << i) for i in range(k)], reduce=True)
        out += exchange(real, masks[::-1], [n / (2 << i) for i in range(k)][::-1], reduce=False)
        if rem:
            out.append(Step.make(even, odd, n))
        return out

    def _cost(self, p, n, a, b, g, ppn, a_inter, b_inter):
        pof2 = 1 << lg(p)
        e = 1 if p != pof2 else 0
        f = (pof2 - 1) / pof2
        return CostTerms((2 * lg(pof2) + 3 * e) * a, (2 * f + 2 * e) * n * b, (f + e / 2) * n * g)
