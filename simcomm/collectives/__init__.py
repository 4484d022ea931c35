"""Collective algorithms: one module per algorithm, each with steps and a closed form.

Importing this package registers every algorithm in :data:`ALGORITHMS` under
``"<collective>/<name>"``; :mod:`simcomm.collectives.auto` picks one by
message size and group size as MPICH does.
"""

from simcomm.collectives.base import (ALGORITHMS, COLLECTIVES, Algorithm, CostTerms, Step, default_ppn,
                                      ideal_time, register)

# Registration order is catalogue order (``simcomm list collectives``).
from simcomm.collectives import (  # noqa: E402,F401  (imported to register)
    allreduce_ring, allreduce_recursive_doubling, allreduce_rabenseifner, allreduce_binomial,
    allreduce_binary_tree, allreduce_double_binary_tree, allreduce_hierarchical,
    reduce_scatter_ring, reduce_scatter_recursive_halving, reduce_scatter_bruck, reduce_scatter_pairwise,
    allgather_ring, allgather_recursive_doubling, allgather_bruck,
    broadcast_binomial, broadcast_scatter_allgather, broadcast_scatter_recursive_doubling, broadcast_gloo,
    reduce_binomial, reduce_rabenseifner, gather_binomial, scatter_binomial,
    alltoall_pairwise, alltoall_bruck, p2p_direct,
)
from simcomm.collectives.auto import algorithms_for, resolve, select  # noqa: E402

__all__ = ["ALGORITHMS", "COLLECTIVES", "Algorithm", "CostTerms", "Step", "default_ppn", "ideal_time",
           "register", "select", "resolve", "algorithms_for"]
