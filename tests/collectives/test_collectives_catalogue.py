"""Catalogue-wide checks: every registered algorithm, so a new one is tested automatically."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from simcomm.collectives import ALGORITHMS, default_ppn, ideal_time

PS = [2, 3, 4, 5, 7, 8, 16, 33, 64]
SIZES = [0.0, 1.0, 1000.0, 12345.0, 1e8 + 7]
NAMES = list(ALGORITHMS.names())


def _ppns(alg, p):
    return sorted({1, default_ppn(p), p}) if alg.hierarchical else [1]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("p", PS)
def test_collectives_ideal_time_equals_closed_form(name, p):
    alg = ALGORITHMS.get(name)
    for ppn in _ppns(alg, p):
        for n in SIZES:
            steps = alg.steps(p, n, ppn=ppn)
            for a, b, g in [(1e-6, 1e-9, 0.0), (2.5e-6, 3e-10, 2e-10), (0.0, 1e-9, 5e-10)]:
                want = alg.cost(p, n, a, b, g, ppn=ppn).total
                got = ideal_time(steps, a, b, g)
                assert got == pytest.approx(want, rel=1e-9, abs=1e-300), (name, p, ppn, n, a, b, g)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("p", PS)
def test_collectives_steps_well_formed(name, p):
    """Ranks in range, no self-sends, no ordered pair twice in a step (full-mesh exactness)."""
    alg = ALGORITHMS.get(name)
    for ppn in _ppns(alg, p):
        steps = alg.steps(p, 1e6 + 3, ppn=ppn)
        assert steps, name
        for s in steps:
            assert len(s) > 0 and s.repeat >= 1
            assert s.src.min() >= 0 and s.dst.min() >= 0 and s.src.max() < p and s.dst.max() < p
            assert (s.src != s.dst).all()
            key = s.src * p + s.dst
            assert len(np.unique(key)) == len(key)
            assert (s.nbytes >= 0).all() and (s.reduce >= 0).all() and (s.reduce <= s.nbytes).all()


@pytest.mark.parametrize("name", NAMES)
def test_collectives_single_rank_is_free(name):
    alg = ALGORITHMS.get(name)
    assert alg.steps(1, 1e6) == []
    assert alg.cost(1, 1e6, 1e-6, 1e-9, 1e-10).total == 0.0


def _reach(p, steps, root_know):
    """Boolean p×p matrix know[r, s]: has rank r (transitively) heard from rank s?"""
    know = root_know.copy()
    for s in steps:
        for _ in range(s.repeat):
            new = know.copy()
            np.logical_or.at(new, s.dst, know[s.src])
            know = new
    return know


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("p", [2, 3, 5, 6, 8, 12, 33])
def test_collectives_information_reaches_where_it_must(name, p):
    """A data-flow sanity check of each schedule: who must have heard from whom."""
    alg = ALGORITHMS.get(name)
    ppn = default_ppn(p) if alg.hierarchical else 1
    root = p // 2 if alg.rooted else 0
    know = _reach(p, alg.steps(p, 1000.0, root=root, ppn=ppn), np.eye(p, dtype=bool))
    kind = alg.collective
    if kind in ("allreduce", "allgather", "reduce_scatter", "alltoall"):
        assert know.all(), name
    elif kind in ("reduce", "gather"):
        assert know[root].all(), name
    elif kind in ("broadcast", "scatter"):
        assert know[:, root].all(), name
    elif kind == "p2p":
        assert know[(root + 1) % p, root]


@pytest.mark.parametrize("name", [n for n in NAMES if ALGORITHMS.get(n).rooted])
def test_collectives_cost_independent_of_root(name):
    alg = ALGORITHMS.get(name)
    base = ideal_time(alg.steps(7, 7000.0), 1e-6, 1e-9, 1e-10)
    for root in range(7):
        assert ideal_time(alg.steps(7, 7000.0, root=root), 1e-6, 1e-9, 1e-10) == pytest.approx(base, rel=1e-12)


def test_collectives_large_ring_schedule_is_compact():
    steps = ALGORITHMS.get("allreduce/ring").steps(16384, 1e8)
    assert len(steps) == 2 and steps[0].repeat == 16383 and len(steps[0]) == 16384


def test_collectives_catalogue_complete():
    want = {"allreduce/ring", "allreduce/recursive-doubling", "allreduce/rabenseifner", "allreduce/binomial",
            "allreduce/binary-tree", "allreduce/double-binary-tree", "allreduce/hierarchical",
            "reduce_scatter/ring", "reduce_scatter/recursive-halving", "reduce_scatter/bruck",
            "reduce_scatter/pairwise", "allgather/ring", "allgather/recursive-doubling", "allgather/bruck",
            "broadcast/binomial", "broadcast/scatter-allgather", "broadcast/scatter-recursive-doubling",
            "reduce/binomial", "reduce/rabenseifner", "gather/binomial", "scatter/binomial",
            "alltoall/pairwise", "alltoall/bruck", "p2p/direct"}
    assert want <= set(NAMES)
    for e in ALGORITHMS.entries():
        doc = sys.modules[type(e.obj).__module__].__doc__ or ""
        assert e.summary and e.reference
        assert "T =" in doc and "α" in doc, f"{e.name}: module docstring must give the closed form"
