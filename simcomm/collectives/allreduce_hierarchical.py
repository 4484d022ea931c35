"""Two-level (hierarchical) allreduce, as Horovod's ``NCCLHierarchicalAllreduce``.

Group-local ranks are node-major: rank ``r`` is local rank ``r mod L`` of node
``r // L`` with ``L = ppn`` ranks per node and ``N = p / L`` nodes.

1. intranode ring reduce-scatter (L-1 steps of n/L, reduced);
2. internode ring allreduce among the ranks with the same local index, on n/L
   bytes (2(N-1) steps of n/(LN)), all L rings at once;
3. intranode ring allgather (L-1 steps of n/L).

With intranode α_i, β_i and internode α_e, β_e (derived from the ring rows
of Thakur et al. 2005 and Horovod's nccl_operations.cc)::

    T = 2(L-1)α_i + 2(L-1)/L·nβ_i + (L-1)/L·nγ
      + 2(N-1)α_e + 2(N-1)/N·(n/L)β_e + (N-1)/N·(n/L)γ

``ppn = 1`` degenerates to the flat ring; ``ppn = p`` to one intranode ring.
"""

from __future__ import annotations

import numpy as np

from simcomm.collectives._patterns import ring
from simcomm.collectives.base import Algorithm, CostTerms, register


@register
class HierarchicalAllreduce(Algorithm):
    collective = "allreduce"
    name = "hierarchical"
    summary = "intranode ring reduce-scatter, internode ring allreduce on n/ppn, intranode ring allgather"
    reference = "Horovod horovod/common/ops/nccl_operations.cc (NCCLHierarchicalAllreduce); Thakur et al. IJHPCA 2005"
    hierarchical = True

    def supports(self, p: int, ppn: int = 1) -> bool:
        return p >= 1 and ppn >= 1 and p % ppn == 0

    def _steps(self, p, n, ppn):
        L, N = ppn, p // ppn
        grid = np.arange(p, dtype=np.int64).reshape(N, L)
        out = ring(L, n / L, True, L - 1, grid) if L > 1 else []
        if N > 1:
            cross = np.ascontiguousarray(grid.T)
            out += ring(N, n / (L * N), True, N - 1, cross) + ring(N, n / (L * N), False, N - 1, cross)
        if L > 1:
            out += ring(L, n / L, False, L - 1, grid)
        return out

    def _cost(self, p, n, a, b, g, ppn, a_inter, b_inter):
        L, N = ppn, p // ppn
        fi, fe, m = (L - 1) / L, (N - 1) / N, n / L
        return CostTerms(2 * (L - 1) * a + 2 * (N - 1) * a_inter,
                         2 * fi * n * b + 2 * fe * m * b_inter,
                         fi * n * g + fe * m * g)
