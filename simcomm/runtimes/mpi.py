"""MPICH, Open MPI and gloo: a textbook algorithm from the catalogue, ``auto`` by the library's rule table.

The three libraries run a collective as bulk-synchronous steps of point-to-point
messages (the algorithms of :mod:`simcomm.collectives`), and choose the
algorithm of an unnamed one by message and group size from a fixed table:

* ``mpich``: MPICH's ``MPIR_<Coll>_intra_auto`` with its default CVARs
  (:mod:`simcomm.collectives.auto`);
* ``openmpi`` / ``openmpi-3.1``: Open MPI 4.1's / 3.1's ``coll/tuned`` fixed decision rules
  (``coll_tuned_decision_fixed.c``, :mod:`simcomm.collectives.auto_openmpi`);
* ``gloo``: what torch's ProcessGroupGloo runs (:data:`simcomm.collectives.auto.GLOO`).

How a schedule is prepared is :class:`~simcomm.collectives.runtime.CatalogueRuntime`'s
(below the engine, which runs a plan whose caller names no runtime on MPICH's
rules); this module adds what setup and reports ask and registers the four.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, replace
from typing import Any

from simcomm.collectives.runtime import CatalogueRuntime, Prepared
from simcomm.errors import ConfigError
from simcomm.runtimes.base import RUNTIMES
from simcomm.runtimes.transport import MPI_TCP_PROTOCOLS, MpiTcpProtocol

__all__ = ["MpiRuntime"]


@dataclass(frozen=True)
class MpiRuntime(CatalogueRuntime):
    """A catalogue runtime with its words: ``how`` names whose rules choose ``auto``."""

    how: str = "MPICH's rules"
    #: how the caller posts a pair exchange on a transport that serialises a send-first one (gloo's
    #: pair connection, :func:`simcomm.runtimes.transport.serialise_send_first`); None: MPI's protocols
    #: carry both directions at once (:func:`simcomm.runtimes.transport.mpi_tcp_exchange`)
    posting: str | None = None
    #: the TCP protocol between machines (a stack's ``tcp_protocol``): messages above its eager limit go by
    #: rendezvous (:func:`simcomm.runtimes.transport.rendezvous_steps`); None: one latency per message
    tcp: MpiTcpProtocol | None = None

    @property
    def settings(self) -> tuple[str, ...]:
        return ()  # no library setting changes the choice (the rule tables are fixed)

    @property
    def grouped_p2p(self) -> bool:
        return False  # MPI_Sendrecv: plain messages

    @property
    def reduces_on_host(self) -> bool:
        return True  # MPI_Op / gloo's opts.reduce run on the calling CPU thread over host buffers

    def configured(self, **settings: str | None) -> MpiRuntime:
        given = sorted(k for k, v in settings.items() if v is not None)
        if given:
            raise ConfigError(f"{given[0]}: {self.name}'s collectives take no settings; valid choices: none")
        return self

    def with_gpus_per_thread(self, gpus: int) -> MpiRuntime:
        return self  # one process per rank: nothing is launched per GPU

    def assumed(self, kind: str) -> tuple[str, ...]:
        if self.tcp is None:
            return ()
        return (f"{self.tcp.name} between machines: messages above its {self.tcp.eager_limit // 1024} KiB eager "
                f"limit go by rendezvous (request, ACK, data: 3 latencies; {self.tcp.reference})",)

    def with_tcp(self, protocol: str | None) -> MpiRuntime:
        """This runtime over the named TCP protocol between machines (None: as it is)."""
        if protocol is None:
            return self
        if protocol not in MPI_TCP_PROTOCOLS:
            raise ConfigError(f"tcp protocol {protocol!r} is not valid; valid choices: {', '.join(MPI_TCP_PROTOCOLS)}")
        tcp = MPI_TCP_PROTOCOLS[protocol]
        return replace(self, tcp=tcp, how=f"{self.how}; {tcp.name} between machines, rendezvous above "
                                          f"{tcp.eager_limit // 1024} KiB")

    def placement(self, op: Any, topology: Any, ppn: int | None) -> Hashable:
        base = super().placement(op, topology, ppn)
        if self.tcp is None:
            return base
        # which messages cross machines decides where the rendezvous handshakes go
        return base, tuple(topology.machine_of(r) for r in op.ranks)

    def prepare(self, op: Any, topology: Any, ppn: int | None) -> Prepared:
        prepared = super().prepare(op, topology, ppn)
        if self.tcp is None or prepared.algorithm is None:
            return prepared
        from simcomm.runtimes.transport import WithHandshakes, rendezvous_steps

        steps, rounds = rendezvous_steps(prepared.steps, op.ranks, topology, self.tcp)
        if not rounds:
            return prepared
        return replace(prepared, algorithm=WithHandshakes(prepared.algorithm, rounds), steps=steps,
                       key=f"{prepared.key}+rendezvous{rounds}")

    def exchanges(self, plan, topology=None):
        """The plan as this transport carries its point-to-point messages: gloo's send-first pair in turn,
        MPI over TCP's rendezvous between machines."""
        from simcomm.runtimes.transport import rendezvous_plan, serialise_send_first

        if self.tcp is not None and topology is not None:
            def crosses(a: int, b: int) -> bool:
                return topology.machine_of(a) != topology.machine_of(b)

            plan = rendezvous_plan(plan, self.tcp, crosses)
        if self.posting != "send-first":
            return plan
        return serialise_send_first(plan)


def _define(runtime: MpiRuntime, summary: str, reference: str) -> None:
    RUNTIMES.add(runtime.name, runtime, summary=summary, reference=reference)


_define(MpiRuntime("mpich", "MPICH's rules"), "MPICH's choice by message and group size (MPIR_<Coll>_intra_auto)",
        "MPICH 3.x/4.x src/mpi/coll/*; Thakur, Rabenseifner & Gropp 2005")
_define(MpiRuntime("openmpi", "Open MPI's coll/tuned rules"), "Open MPI 4.1's coll/tuned fixed decision rules",
        "Open MPI v4.1 ompi/mca/coll/tuned/coll_tuned_decision_fixed.c")
_define(MpiRuntime("openmpi-3.1", "Open MPI 3.1's coll/tuned rules"),
        "Open MPI 3.1's coll/tuned fixed decision rules",
        "Open MPI v3.1 ompi/mca/coll/tuned/coll_tuned_decision_fixed.c")
_define(MpiRuntime("gloo", "gloo's fixed algorithms", posting="send-first"), "what torch's ProcessGroupGloo runs: ring all-reduce and "
        "all-gather, binomial broadcast, linear gather and scatter", "gloo/allreduce.cc, gloo/broadcast.cc; "
        "torch/csrc/distributed/c10d/ProcessGroupGloo.cpp")
