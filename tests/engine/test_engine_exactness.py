"""Exactness: on a contention-free full mesh every registered algorithm's simulated
time equals its closed form (relative 1e-9), for awkward and power-of-two P.

Parametrized over the whole catalogue, so a newly registered algorithm is checked
without touching this file.
"""

import math

import pytest

import simcomm.collectives  # noqa: F401  (registers the catalogue)
from simcomm.collectives.base import ALGORITHMS, default_ppn
from simcomm.engine import simulate
from simcomm.links.base import LinkClass
from simcomm.ops import PlanBuilder
from simcomm.runtimes.mpi import MPICH
from simcomm.topologies.full_mesh import full_mesh

ALPHA, BANDWIDTH, GAMMA = 1.7e-6, 1.25e9, 3.0e-10
NBYTES = 1_234_567.0
SIZES = (2, 3, 4, 5, 7, 8, 16, 33, 64)
LINK = LinkClass("exact-link", BANDWIDTH, ALPHA, "custom")


def _case(key: str, p: int):
    alg = ALGORITHMS.get(key)
    ppn = default_ppn(p) if getattr(alg, "hierarchical", False) else 1
    return alg, ppn


@pytest.mark.parametrize("p", SIZES)
@pytest.mark.parametrize("key", ALGORITHMS.names())
def test_flow_equals_closed_form_on_full_mesh(key, p):
    alg, ppn = _case(key, p)
    if not alg.supports(p, ppn):
        pytest.skip(f"{key} does not support p={p}, ppn={ppn}")
    kind, name = key.split("/", 1)
    b = PlanBuilder(p)
    b.collective(kind, range(p), NBYTES, algorithm=name)
    tl = simulate(b.build(), full_mesh(p, LINK, gamma=GAMMA), ppn=ppn, runtime=MPICH)
    want = alg.cost(p, NBYTES, ALPHA, 1.0 / BANDWIDTH, GAMMA, ppn=ppn).total
    assert want > 0
    assert math.isclose(tl.duration(0), want, rel_tol=1e-9), (key, p, tl.duration(0), want)
    assert tl.makespan == tl.end[0]


@pytest.mark.parametrize("key", [k for k in ALGORITHMS.names() if ALGORITHMS.get(k).rooted])
def test_rooted_algorithms_are_exact_for_a_nonzero_root(key):
    p = 7
    alg, ppn = _case(key, p)
    kind, name = key.split("/", 1)
    b = PlanBuilder(p)
    b.collective(kind, range(p), NBYTES, algorithm=name, root=3)
    tl = simulate(b.build(), full_mesh(p, LINK, gamma=GAMMA), ppn=ppn, runtime=MPICH)
    want = alg.cost(p, NBYTES, ALPHA, 1.0 / BANDWIDTH, GAMMA, ppn=ppn).total
    assert math.isclose(tl.duration(0), want, rel_tol=1e-9)


def test_ring_allreduce_hand_computed():
    # p = 4, n = 4 MB: 6 steps of 1 MB at 1 GB/s + 1 us, plus 3 reductions of 1 MB at 1 ns/B.
    link = LinkClass("hand", 1e9, 1e-6, "custom")
    b = PlanBuilder(4)
    b.collective("allreduce", range(4), 4e6, algorithm="ring")
    for reference in ((), {"coalesce"}):
        tl = simulate(b.build(), full_mesh(4, link, gamma=1e-9), reference=reference, runtime=MPICH)
        assert math.isclose(tl.makespan, 6 * (1e-6 + 1e-3) + 3 * 1e-3, rel_tol=1e-12)
        assert tl.link_class_bytes == {"custom": pytest.approx(6 * 4 * 1e6)}
