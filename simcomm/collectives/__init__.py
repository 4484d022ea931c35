"""Collective algorithms: one module per algorithm, each with steps and a closed form.

Importing this package registers every algorithm in :data:`ALGORITHMS` under
``"<collective>/<name>"``; :mod:`simcomm.collectives.auto` picks one by
message size and group size as MPICH does, or as Open MPI's ``coll/tuned``
does (``rules="openmpi"``, :mod:`simcomm.collectives.auto_openmpi`).
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

_scan(__name__, skip=("base", "auto", "auto_openmpi", "runtime"))

from simcomm.collectives.auto import RULES, algorithms_for, resolve, select  # noqa: E402
from simcomm.collectives.auto_openmpi import Decision as OpenMPIDecision  # noqa: E402
from simcomm.collectives.auto_openmpi import decide as openmpi_decision  # noqa: E402

__all__ = ["ALGORITHMS", "COLLECTIVES", "Algorithm", "CostTerms", "Step", "default_ppn", "ideal_time",
           "register", "register_variant", "select", "resolve", "algorithms_for", "RULES",
           "OpenMPIDecision", "openmpi_decision"]
