"""Runtimes: how a transport stack runs collectives, one registry, one protocol.

A stack names its runtime (:attr:`simcomm.stacks.Stack.collectives`); setup
turns the name into the object (:func:`get_runtime`) and hands it to the
engine, which asks it to prepare each collective op on the topology: the
steps or flows to run, a closed form and a label
(:class:`~simcomm.collectives.runtime.CollectiveRuntime`).  The engine imports
no runtime and has none of its own (the caller chooses); nothing outside a runtime
branches on a runtime's name.

* :mod:`~simcomm.runtimes.mpi`: MPICH, Open MPI (4.1 and 3.1) and gloo, with the rule
  tables that choose their ``auto`` algorithms (Open MPI's in :mod:`~simcomm.runtimes.openmpi_rules`);
* :mod:`~simcomm.runtimes.nccl`: NCCL (the package :mod:`simcomm.nccl`).
"""

from simcomm.registry import scan as _scan
from simcomm.runtimes.base import RUNTIMES, Runtime, get_runtime

# Every runtime module registers itself; the package scans itself, so a new runtime is one module.
_scan(__name__, skip=("base", "openmpi_rules"))

from simcomm.runtimes.mpi import MpiRuntime  # noqa: E402
from simcomm.runtimes.nccl import NcclRuntime  # noqa: E402

__all__ = ["RUNTIMES", "Runtime", "get_runtime", "MpiRuntime", "NcclRuntime"]
