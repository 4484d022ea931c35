"""MPICH, Open MPI and gloo: a textbook algorithm from the catalogue, ``auto`` by the library's rule table.

The three libraries run a collective as bulk-synchronous steps of point-to-point
messages (the algorithms of :mod:`simcomm.collectives`), and choose the
algorithm of an unnamed (``auto``) one by message and group size from a fixed
table, all in this module (:func:`select`, :func:`resolve`):

* ``mpich``: MPICH's ``MPIR_<Coll>_intra_auto`` with its default CVARs (the table below);
* ``openmpi`` / ``openmpi-3.1``: Open MPI 4.1's / 3.1's ``coll/tuned`` fixed decision rules
  (``coll_tuned_decision_fixed.c``; their tables and their mapping to the catalogue are
  :mod:`simcomm.runtimes.openmpi_rules`);
* ``gloo``: what torch's ProcessGroupGloo runs (:data:`GLOO`), MPICH's choice otherwise.

:class:`MpiRuntime` prepares an op as the engine asks (the
:class:`~simcomm.collectives.runtime.CollectiveRuntime` protocol): the named algorithm, or the
one its rules choose, with the group's ranks per machine for a two-level one.  The engine
has no default runtime: the caller (setup, from the stack) hands it one.

The thresholds are MPICH's default CVARs and the branch order of its
``MPIR_<Coll>_intra_auto`` functions (src/mpi/coll/<coll>/<coll>.c, MPICH
3.x/4.x; Thakur, Rabenseifner & Gropp 2005, §4).  Sizes follow the
conventions of :mod:`simcomm.collectives.base`.  MPICH's allreduce and reduce
also need ``count >= pof2`` for the long-message algorithm; we take
``count = nbytes / 4`` (4-byte elements, float32), an assumption.

=============== ===================================================================
collective      rule (p ranks, n bytes, pof2 = 2^⌊lg p⌋)
=============== ===================================================================
allreduce       n < 2048 (ALLREDUCE_SHORT_MSG_SIZE) or count < pof2: recursive-doubling;
                else rabenseifner
reduce          n > 2048 (REDUCE_SHORT_MSG_SIZE) and count >= pof2: rabenseifner; else binomial
reduce_scatter  n < 512 KiB (REDUCE_SCATTER_COMMUTATIVE_LONG_MSG_SIZE): recursive-halving;
                else pairwise
allgather       n < 512 KiB (ALLGATHER_LONG_MSG_SIZE) and p = 2^k: recursive-doubling;
                n < 80 KiB (ALLGATHER_SHORT_MSG_SIZE): bruck; else ring
broadcast       n < 12 KiB (BCAST_SHORT_MSG_SIZE) or p < 8 (BCAST_MIN_PROCS): binomial;
                n < 512 KiB (BCAST_LONG_MSG_SIZE) and p = 2^k: scatter-recursive-doubling;
                else scatter-allgather
alltoall        block n/p <= 256 B (ALLTOALL_SHORT_MSG_SIZE) and p >= 8: bruck; else pairwise
                (MPICH's medium-size isend/irecv "scattered" variant is priced as pairwise)
gather, scatter binomial;  p2p: direct
=============== ===================================================================
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, replace
from typing import Any

from simcomm.collectives.base import ALGORITHMS, COLLECTIVES, Algorithm
from simcomm.collectives.runtime import Prepared, algorithm_steps, group_ppn, takes_ppn
from simcomm.errors import ConfigError, UnknownNameError
from simcomm.runtimes import openmpi_rules
from simcomm.runtimes.base import RUNTIMES
from simcomm.runtimes.transport import MPI_TCP_PROTOCOLS, MpiTcpProtocol

__all__ = ["MpiRuntime", "MPICH", "select", "resolve", "algorithms_for", "THRESHOLDS", "RULES", "GLOO"]

#: valid ``rules`` values -> Open MPI rules version (None: MPICH or gloo)
RULES: dict[str, str | None] = {"mpich": None, "openmpi": "4.1", "openmpi-3.1": "3.1", "gloo": None}
#: what gloo runs (torch's ProcessGroupGloo: gloo/allreduce.cc and allgather ring by default,
#: gloo/broadcast.cc's binomial, linear gather/scatter, pairwise all-to-all); MPICH's choice otherwise
GLOO = {"allreduce": "ring", "allgather": "gloo", "broadcast": "gloo", "gather": "linear", "scatter": "linear",
        "alltoall": "pairwise"}

#: MPICH default CVAR values, in bytes.
THRESHOLDS = {
    "ALLREDUCE_SHORT_MSG_SIZE": 2048,
    "REDUCE_SHORT_MSG_SIZE": 2048,
    "REDUCE_SCATTER_COMMUTATIVE_LONG_MSG_SIZE": 524288,
    "ALLGATHER_SHORT_MSG_SIZE": 81920,
    "ALLGATHER_LONG_MSG_SIZE": 524288,
    "BCAST_SHORT_MSG_SIZE": 12288,
    "BCAST_LONG_MSG_SIZE": 524288,
    "BCAST_MIN_PROCS": 8,
    "ALLTOALL_SHORT_MSG_SIZE": 256,
}
ELEMENT_BYTES = 4


def _check_collective(collective: str) -> None:
    if collective not in COLLECTIVES:
        raise UnknownNameError("collective", collective, COLLECTIVES)


def _check_rules(rules: str) -> str | None:
    if rules not in RULES:
        raise UnknownNameError("rules", rules, RULES)
    return RULES[rules]


def select(collective: str, p: int, nbytes: float, rules: str = "mpich") -> str:
    """The algorithm name MPICH's default selection (or Open MPI's, by ``rules``) would use."""
    _check_collective(collective)
    version = _check_rules(rules)
    if version is not None:
        return openmpi_rules.select(collective, p, nbytes, version)
    if rules == "gloo" and collective in GLOO:
        return GLOO[collective]
    t = THRESHOLDS
    pof2 = 1 << (max(int(p), 1).bit_length() - 1)
    is_pof2 = pof2 == p
    count = nbytes / ELEMENT_BYTES
    if collective == "allreduce":
        return "recursive-doubling" if nbytes < t["ALLREDUCE_SHORT_MSG_SIZE"] or count < pof2 else "rabenseifner"
    if collective == "reduce":
        return "rabenseifner" if nbytes > t["REDUCE_SHORT_MSG_SIZE"] and count >= pof2 else "binomial"
    if collective == "reduce_scatter":
        return "recursive-halving" if nbytes < t["REDUCE_SCATTER_COMMUTATIVE_LONG_MSG_SIZE"] else "pairwise"
    if collective == "allgather":
        if nbytes < t["ALLGATHER_LONG_MSG_SIZE"] and is_pof2:
            return "recursive-doubling"
        return "bruck" if nbytes < t["ALLGATHER_SHORT_MSG_SIZE"] else "ring"
    if collective == "broadcast":
        if nbytes < t["BCAST_SHORT_MSG_SIZE"] or p < t["BCAST_MIN_PROCS"]:
            return "binomial"
        if nbytes < t["BCAST_LONG_MSG_SIZE"] and is_pof2:
            return "scatter-recursive-doubling"
        return "scatter-allgather"
    if collective == "alltoall":
        return "bruck" if nbytes / max(p, 1) <= t["ALLTOALL_SHORT_MSG_SIZE"] and p >= 8 else "pairwise"
    return {"gather": "binomial", "scatter": "binomial", "p2p": "direct"}[collective]


def algorithms_for(collective: str, rules: str = "mpich") -> tuple[Algorithm, ...]:
    """The registered algorithms of one collective, in catalogue order, that ``rules`` compares.

    Open MPI's own implementations (``family == "openmpi"``) are listed only
    for the Open MPI rules, so MPICH-rule comparisons keep their catalogue;
    every algorithm stays resolvable by name either way.
    """
    _check_collective(collective)
    ompi = _check_rules(rules) is not None or rules == "gloo"
    return tuple(e.obj for e in ALGORITHMS.entries()
                 if e.obj.collective == collective and (ompi or e.obj.family != "openmpi"))


def resolve(collective: str, name: str, p: int, nbytes: float, rules: str = "mpich") -> Algorithm:
    """The :class:`Algorithm` called ``name`` (or chosen by ``auto`` under ``rules``) for ``collective``."""
    _check_collective(collective)
    _check_rules(rules)
    if name == "auto":
        name = select(collective, p, nbytes, rules)
    key = f"{collective}/{name}"
    if key not in ALGORITHMS:
        names = [a.name for a in algorithms_for(collective, "openmpi")] + ["auto"]
        raise UnknownNameError(f"{collective} algorithm", name, names)
    if p < 1:
        raise ConfigError(f"ranks: {p} is impossible; a collective needs at least 1 rank")
    return ALGORITHMS.get(key)


@dataclass(frozen=True)
class MpiRuntime:
    """MPICH, Open MPI or gloo: the named textbook algorithm, or for ``auto`` the one ``rules`` picks.

    ``rules`` is a key of :data:`RULES` (``mpich``, ``openmpi``, ``openmpi-3.1``, ``gloo``); ``how``
    names whose rules choose ``auto`` (for ``assumed:`` lines).  A two-level algorithm gets the
    group's ranks per machine (:func:`~simcomm.collectives.runtime.group_ppn`) unless the engine's
    ``ppn`` overrides it; nothing else about where the members sit changes the schedule.
    """

    rules: str = "mpich"
    how: str = "MPICH's rules"
    #: how the caller posts a pair exchange on a transport that serialises a send-first one (gloo's
    #: pair connection, :func:`simcomm.runtimes.transport.serialise_send_first`); None: MPI's protocols
    #: carry both directions at once (:func:`simcomm.runtimes.transport.mpi_tcp_exchange`)
    posting: str | None = None
    #: the TCP protocol between machines (a stack's ``tcp_protocol``): messages above its eager limit go by
    #: rendezvous (:func:`simcomm.runtimes.transport.rendezvous_steps`); None: one latency per message
    tcp: MpiTcpProtocol | None = None

    @property
    def name(self) -> str:
        return self.rules

    def algorithm(self, kind: str, name: str, p: int, nbytes: float) -> Algorithm:
        """The algorithm that runs a ``kind`` collective called ``name``; raises UnknownNameError."""
        import simcomm.collectives  # noqa: F401  (registers the catalogue)

        if name == "auto":
            return resolve(kind, name, p, nbytes, rules=self.rules)
        return ALGORITHMS.get(f"{kind}/{name}")

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

    def assumed(self, kind: str, topology: Any = None) -> tuple[str, ...]:
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
        base = ppn or group_ppn(topology, op.ranks)
        if self.tcp is None:
            return base
        # which messages cross machines decides where the rendezvous handshakes go
        return base, tuple(topology.machine_of(r) for r in op.ranks)

    def prepare(self, op: Any, topology: Any, ppn: int | None) -> Prepared:
        """Resolve and validate ``op`` before the run, so a user error is one line, not a failure inside it."""
        p = len(op.ranks)
        alg = self.algorithm(op.kind, op.algorithm, p, op.nbytes)
        ppn = (ppn or group_ppn(topology, op.ranks)) if takes_ppn(alg) else 1
        prepared = Prepared(alg, ppn, tuple(s for s in algorithm_steps(alg, p, op.nbytes, op.root, ppn) if len(s)),
                            label=alg.name)
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


#: MPICH's runtime (NCCL prices an op naming a textbook algorithm with it)
MPICH = MpiRuntime("mpich", "MPICH's rules")
_define(MPICH, "MPICH's choice by message and group size (MPIR_<Coll>_intra_auto)",
        "MPICH 3.x/4.x src/mpi/coll/*; Thakur, Rabenseifner & Gropp 2005")
_define(MpiRuntime("openmpi", "Open MPI's coll/tuned rules"), "Open MPI 4.1's coll/tuned fixed decision rules",
        "Open MPI v4.1 ompi/mca/coll/tuned/coll_tuned_decision_fixed.c")
_define(MpiRuntime("openmpi-3.1", "Open MPI 3.1's coll/tuned rules"),
        "Open MPI 3.1's coll/tuned fixed decision rules",
        "Open MPI v3.1 ompi/mca/coll/tuned/coll_tuned_decision_fixed.c")
_define(MpiRuntime("gloo", "gloo's fixed algorithms", posting="send-first"), "what torch's ProcessGroupGloo runs: ring all-reduce and "
        "all-gather, binomial broadcast, linear gather and scatter", "gloo/allreduce.cc, gloo/broadcast.cc; "
        "torch/csrc/distributed/c10d/ProcessGroupGloo.cpp")
