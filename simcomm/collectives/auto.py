"""``auto``: pick an algorithm by message size and group size as MPICH (or Open MPI) does.

``rules`` selects whose choice: ``"mpich"`` (default, the table below),
``"openmpi"`` (Open MPI 4.1's ``coll/tuned`` fixed rules) or
``"openmpi-3.1"`` (the 3.1 rules; the Open MPI tables and their mapping to
this catalogue are in :mod:`simcomm.collectives.auto_openmpi`) or ``"gloo"``
(what torch's ProcessGroupGloo runs: :data:`GLOO`).

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

from simcomm.collectives import auto_openmpi
from simcomm.collectives.base import ALGORITHMS, COLLECTIVES, Algorithm
from simcomm.errors import ConfigError, UnknownNameError

__all__ = ["select", "resolve", "algorithms_for", "THRESHOLDS", "RULES"]

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
        return auto_openmpi.select(collective, p, nbytes, version)
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
