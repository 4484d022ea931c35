"""Collective algorithms: one module per algorithm, each with steps and a closed form.

Importing this package registers every algorithm in :data:`ALGORITHMS` under
``"<collective>/<name>"``.  Which one runs an ``auto`` op is a runtime's
choice (MPICH's, Open MPI's and gloo's rule tables: :mod:`simcomm.runtimes.mpi`).
"""

from simcomm.collectives.base import (
                                      ALGORITHMS,
                                      COLLECTIVES,
                                      Algorithm,
                                      CostTerms,
                                      Step,
                                      default_ppn,
                                      ideal_time,
                                      register,
                                      register_variant,
)

# Every algorithm module registers itself (@register); the package scans itself, so a new
# algorithm is one module.  Catalogue order is module-name order.
from simcomm.registry import scan as _scan  # noqa: E402

_scan(__name__, skip=("base", "runtime"))

__all__ = ["ALGORITHMS", "COLLECTIVES", "Algorithm", "CostTerms", "Step", "default_ppn", "ideal_time",
           "register", "register_variant"]
