"""Linear alltoall (Open MPI ``ompi_coll_base_alltoall_intra_basic_linear``).

Every rank posts its ``p - 1`` receives and sends (blocks of ``n/p``) at once
and waits for all, so the whole exchange is one step::

    T = α + (n/p)·β

Open MPI's ``linear_sync`` with the default
``coll_tuned_alltoall_algorithm_max_requests`` = 0 posts all requests at once
too, so it is this schedule.  Each rank's ``p - 1`` messages share its link on
a real network; the flow engine charges that.
"""

from __future__ import annotations

import numpy as np

from simcomm.collectives.base import Algorithm, CostTerms, Step, register


@register
class LinearAlltoall(Algorithm):
    collective = "alltoall"
    name = "linear"
    summary = "every rank isends/irecvs all its blocks at once, one step (Open MPI basic_linear, linear_sync)"
    reference = "Open MPI ompi/mca/coll/base/coll_base_alltoall.c (alltoall_intra_basic_linear, linear_sync)"
    family = "openmpi"

    def _steps(self, p, n, ppn):
        r = np.arange(p, dtype=np.int64)
        src = np.repeat(r, p - 1)
        dst = (src + np.tile(np.arange(1, p, dtype=np.int64), p)) % p
        return [Step.make(src, dst, n / p)]

    def _cost(self, p, n, a, b, g, ppn, a_inter, b_inter):
        return CostTerms(a, n / p * b, 0.0)
