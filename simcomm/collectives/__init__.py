"""Collective algorithms: one module per algorithm, each with steps and a closed form.

Importing this package registers every algorithm in :data:`ALGORITHMS` under
``"<collective>/<name>"``; :mod:`simcomm.collectives.auto` picks one by
message size and group size as MPICH does, or as Open MPI's ``coll/tuned``
does (``rules="openmpi"``, :mod:`simcomm.collectives.auto_openmpi`).
"""

from simcomm.collectives.base import (ALGORITHMS, COLLECTIVES, Algorithm, CostTerms, Step, default_ppn,
                                      ideal_time, register, register_variant)

# Registration order is catalogue order (``simcomm list collectives``).
from simcomm.collectives import (  # noqa: E402,F401  (imported to register)
    allreduce_ring, allreduce_recursive_doubling, allreduce_rabenseifner, allreduce_binomial,
    allreduce_binary_tree, allreduce_double_binary_tree, allreduce_hierarchical,
    reduce_scatter_ring, reduce_scatter_recursive_halving, reduce_scatter_bruck, reduce_scatter_pairwise,
    allgather_ring, allgather_recursive_doubling, allgather_bruck,
    broadcast_binomial, broadcast_scatter_allgather, broadcast_scatter_recursive_doubling, broadcast_gloo,
    reduce_binomial, reduce_rabenseifner, gather_binomial, scatter_binomial,
    alltoall_pairwise, alltoall_bruck, p2p_direct,
    # Open MPI's algorithms (coll/base), for rules="openmpi"
    allreduce_nonoverlapping, allreduce_linear, allreduce_rabenseifner_ompi, allreduce_segmented_ring,
    reduce_scatter_butterfly, reduce_scatter_nonoverlapping, allgather_neighbor_exchange,
    broadcast_linear, broadcast_chain, broadcast_binary_tree, broadcast_split_binary_tree, broadcast_knomial,
    broadcast_scatter_recursive_doubling_ompi,
    reduce_linear, reduce_chain, reduce_binary_tree, reduce_in_order_binary, reduce_binomial_segmented,
    gather_linear, gather_linear_sync, scatter_linear, scatter_linear_nb, alltoall_linear,
)
from simcomm.collectives.auto import RULES, algorithms_for, resolve, select  # noqa: E402
from simcomm.collectives.auto_openmpi import Decision as OpenMPIDecision  # noqa: E402
from simcomm.collectives.auto_openmpi import decide as openmpi_decision  # noqa: E402

__all__ = ["ALGORITHMS", "COLLECTIVES", "Algorithm", "CostTerms", "Step", "default_ppn", "ideal_time",
           "register", "register_variant", "select", "resolve", "algorithms_for", "RULES",
           "OpenMPIDecision", "openmpi_decision"]
