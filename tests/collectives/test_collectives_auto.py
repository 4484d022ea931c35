"""MPICH default selection thresholds (simcomm.runtimes.mpi), and resolve()."""

from __future__ import annotations

import pytest

from simcomm.collectives import ALGORITHMS, COLLECTIVES
from simcomm.errors import UnknownNameError
from simcomm.runtimes.mpi import resolve, select


@pytest.mark.parametrize("coll,p,n,want", [
    ("allreduce", 64, 2047, "recursive-doubling"),
    ("allreduce", 64, 2048, "rabenseifner"),
    ("allreduce", 1024, 2048, "recursive-doubling"),      # count 512 < pof2 1024
    ("allreduce", 33, 1e8, "rabenseifner"),
    ("reduce", 64, 2048, "binomial"),
    ("reduce", 64, 2049, "rabenseifner"),
    ("reduce_scatter", 8, 524287, "recursive-halving"),
    ("reduce_scatter", 8, 524288, "pairwise"),
    ("allgather", 64, 524287, "recursive-doubling"),
    ("allgather", 64, 524288, "ring"),
    ("allgather", 33, 81919, "bruck"),
    ("allgather", 33, 81920, "ring"),
    ("broadcast", 7, 1e9, "binomial"),
    ("broadcast", 64, 12287, "binomial"),
    ("broadcast", 64, 12288, "scatter-recursive-doubling"),
    ("broadcast", 33, 12288, "scatter-allgather"),
    ("broadcast", 64, 524288, "scatter-allgather"),
    ("alltoall", 8, 2048, "bruck"),
    ("alltoall", 8, 2056, "pairwise"),
    ("alltoall", 4, 16, "pairwise"),
    ("gather", 5, 1, "binomial"), ("scatter", 5, 1, "binomial"), ("p2p", 2, 1, "direct"),
])
def test_collectives_auto_thresholds(coll, p, n, want):
    assert select(coll, p, n) == want
    assert resolve(coll, "auto", p, n).name == want


def test_collectives_auto_always_registered():
    for coll in COLLECTIVES:
        for p in (1, 2, 3, 8, 64, 1000):
            for n in (1, 3000, 1e5, 1e9):
                assert f"{coll}/{select(coll, p, n)}" in ALGORITHMS


def test_collectives_resolve_errors():
    with pytest.raises(UnknownNameError, match="valid choices: auto, binary-tree"):
        resolve("allreduce", "nope", 4, 1.0)
    with pytest.raises(UnknownNameError, match="collective 'allreducee'"):
        select("allreducee", 4, 1.0)
