"""The runtime contract beyond the engine's, and the one registry of runtimes.

The engine asks a runtime for two things (:class:`~simcomm.collectives.runtime.CollectiveRuntime`:
``placement`` and ``prepare``).  Setup, ``simcomm bench`` and the reports ask a
few more, here, so that no caller branches on a runtime's name:

* ``how``: what chooses the algorithm of ``auto`` ops, for ``assumed:`` lines;
* ``settings``: the scenario keys it takes (``nccl_algo``, ``nccl_proto``), and
  :meth:`Runtime.configured` to apply them;
* :meth:`Runtime.with_gpus_per_thread`: nccl-tests' ``-g`` (GPUs one host thread drives);
* ``grouped_p2p``: point-to-point messages of a send/receive benchmark run as one
  grouped collective (NCCL's ``ncclGroupStart``/``ncclSend``/``ncclRecv`` path) rather than as
  plain transfers;
* :meth:`Runtime.assumed`: the defaults behind its numbers for one collective kind;
* :meth:`Runtime.exchanges`: the plan as its transport carries point-to-point messages (gloo
  serialises a pair exchange posted send-first, :mod:`simcomm.runtimes.transport`);
* ``reduces_on_host``: its collectives reduce in host memory on the CPU (gloo, MPI), so a
  measured host rate replaces the device's (:mod:`simcomm.runtimes.host`).

A stack names its runtime (:attr:`simcomm.stacks.Stack.collectives`);
:func:`get_runtime` turns the name into the registered object.
"""

from __future__ import annotations

from typing import Any, Protocol

from simcomm.collectives.runtime import CollectiveRuntime
from simcomm.registry import Registry

__all__ = ["Runtime", "RUNTIMES", "get_runtime"]


class Runtime(CollectiveRuntime, Protocol):
    """How a stack runs collectives: the engine's two questions plus what setup and reports ask."""

    @property
    def how(self) -> str: ...

    @property
    def settings(self) -> tuple[str, ...]: ...

    @property
    def grouped_p2p(self) -> bool: ...

    @property
    def reduces_on_host(self) -> bool: ...

    def configured(self, **settings: str | None) -> Runtime:
        """This runtime with ``settings`` (keys of :attr:`settings`; None leaves one as it is)."""
        ...

    def with_gpus_per_thread(self, gpus: int) -> Runtime:
        """This runtime with ``gpus`` GPUs driven by one host thread (nccl-tests' ``-g``)."""
        ...

    def exchanges(self, plan: Any, topology: Any = None) -> Any:
        """The plan as this runtime's transport carries its point-to-point messages (simcomm.runtimes.transport)."""
        ...

    def with_tcp(self, protocol: str | None) -> Runtime:
        """This runtime over a stack's TCP protocol between machines (MPI's eager/rendezvous; None: as it is)."""
        ...

    def assumed(self, kind: str, topology: Any = None) -> tuple[str, ...]:
        """The defaults behind this runtime's numbers for a ``kind`` collective (on ``topology``, when given), one
        ``assumed:`` line each."""
        ...


#: every runtime, by the name a stack gives in ``collectives``
RUNTIMES: Registry[Runtime] = Registry("runtime", "simcomm.runtimes")


def get_runtime(name: str) -> Runtime:
    """The registered runtime called ``name`` (UnknownNameError lists the valid ones)."""
    import simcomm.runtimes  # noqa: F401  (registers the runtimes)

    return RUNTIMES.get(name)
