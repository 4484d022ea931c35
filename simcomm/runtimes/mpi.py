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

from dataclasses import dataclass

from simcomm.collectives.runtime import CatalogueRuntime
from simcomm.errors import ConfigError
from simcomm.runtimes.base import RUNTIMES

__all__ = ["MpiRuntime"]


@dataclass(frozen=True)
class MpiRuntime(CatalogueRuntime):
    """A catalogue runtime with its words: ``how`` names whose rules choose ``auto``."""

    how: str = "MPICH's rules"
    #: how the caller posts a pair exchange on a transport that serialises a send-first one (gloo's
    #: pair connection, :func:`simcomm.runtimes.transport.serialise_send_first`); None: MPI's protocols
    #: carry both directions at once (:func:`simcomm.runtimes.transport.mpi_tcp_exchange`)
    posting: str | None = None

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
        return ()

    def exchanges(self, plan):
        """The plan as this transport carries its point-to-point messages (gloo: a send-first pair in turn)."""
        if self.posting != "send-first":
            return plan
        from simcomm.runtimes.transport import serialise_send_first

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
