"""Non-blocking linear scatter (Open MPI ``ompi_coll_base_scatter_intra_linear_nb``).

The root posts an ``isend`` of each rank's block of ``n/p`` and waits for all
(with the default ``coll_tuned_scatter_algorithm_max_requests`` = 0 it never
inserts a blocking send), so every transfer is in one step::

    T = α + (n/p)·β

The root's ``p - 1`` sends share its link on a real network (flow engine).
"""

from __future__ import annotations

import numpy as np

from simcomm.collectives.base import Algorithm, CostTerms, Step, register


@register
class LinearNbScatter(Algorithm):
    collective = "scatter"
    name = "linear-nb"
    summary = "the root isends every block at once and waits for all (Open MPI linear_nb)"
    reference = "Open MPI ompi/mca/coll/base/coll_base_scatter.c (ompi_coll_base_scatter_intra_linear_nb)"
    family = "openmpi"
    rooted = True

    def _steps(self, p, n, ppn):
        return [Step.make(np.zeros(p - 1, dtype=np.int64), np.arange(1, p), n / p)]

    def _cost(self, p, n, a, b, g, ppn, a_inter, b_inter):
        return CostTerms(a, n / p * b, 0.0)
