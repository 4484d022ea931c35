"""Linear broadcast (Open MPI ``ompi_coll_base_bcast_intra_basic_linear``).

The root posts one ``isend`` of the whole buffer to every other rank and
waits for all of them, so in the step model all ``p - 1`` transfers share
one step (each on its own link)::

    T = α + n·β

On a real network the root's ``p - 1`` sends share its link; the flow engine
charges that, the LogGP model adds ``(p - 2)·g`` of injection gap.
"""

from __future__ import annotations

import numpy as np

from simcomm.collectives.base import Algorithm, CostTerms, Step, register


def linear_bcast_steps(p: int, n: float) -> list[Step]:
    """One step: relative rank 0 sends ``n`` bytes to every other rank."""
    return [Step.make(np.zeros(p - 1, dtype=np.int64), np.arange(1, p), n)]


@register
class LinearBroadcast(Algorithm):
    collective = "broadcast"
    name = "linear"
    summary = "the root isends the whole buffer to every rank at once; Open MPI basic_linear"
    reference = "Open MPI ompi/mca/coll/base/coll_base_bcast.c (ompi_coll_base_bcast_intra_basic_linear)"
    family = "openmpi"
    rooted = True

    def _steps(self, p, n, ppn):
        return linear_bcast_steps(p, n)

    def _cost(self, p, n, a, b, g, ppn, a_inter, b_inter):
        return CostTerms(a, n * b, 0.0)
