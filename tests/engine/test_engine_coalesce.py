"""The coalesced-repeat shortcut gives the plain flow model's answer, alone and
when other traffic interrupts it at any moment (including reduction tails)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simcomm.engine import simulate
from simcomm.links.base import LinkClass
from simcomm.ops import PlanBuilder
from simcomm.runtimes.mpi import MPICH
from simcomm.topologies.fat_tree import fat_tree
from simcomm.topologies.star import star

LINK = LinkClass("co-link", 1e9, 1e-6, "custom")


def _same(a, b):
    np.testing.assert_allclose(a.start, b.start, rtol=1e-9, atol=1e-15)
    np.testing.assert_allclose(a.end, b.end, rtol=1e-9, atol=1e-15)
    assert a.makespan == pytest.approx(b.makespan, rel=1e-9)
    assert a.link_class_bytes.keys() == b.link_class_bytes.keys()
    for k in a.link_class_bytes:
        assert a.link_class_bytes[k] == pytest.approx(b.link_class_bytes[k], rel=1e-12)


def _both(plan, topo, **kw):
    kw = {"runtime": MPICH, **kw}
    fast = simulate(plan, topo, **kw)
    plain = simulate(plan, topo, reference={"coalesce"}, **kw)
    _same(fast, plain)
    return fast, plain


@pytest.mark.parametrize("alg", ["ring", "recursive-doubling", "rabenseifner", "hierarchical"])
def test_isolated_collectives(alg):
    topo = fat_tree(4, link=LINK, levels=2, oversubscription=2, gamma=2e-10)
    b = PlanBuilder(8)
    b.collective("allreduce", range(8), 5e6, algorithm=alg)
    fast, plain = _both(b.build(), topo, ppn=2)
    if alg == "ring":
        assert fast.meta["steps_coalesced"] == 14 and fast.meta.get("steps_simulated", 0) == 0
        assert plain.meta["steps_simulated"] == 14


def _interrupted_plan(delay: float, size: float, second_ring: bool):
    b = PlanBuilder(6)
    b.collective("allreduce", range(4), 4e6, algorithm="ring")
    c = b.compute(4, delay)
    b.transfer(4, 1, size, after=[c])  # shares switch->rank1 with the ring's 0->1 flow
    if second_ring:
        c2 = b.compute(5, delay * 0.37)
        b.collective("allreduce", [5, 2, 0, 3], 1e6, algorithm="ring", after=[c2], stream="other")
    return b.build()


@pytest.mark.parametrize("delay", [0.0, 1e-6, 0.5e-3, 1.0e-3, 1.003e-3, 2.5e-3, 7e-3])
def test_foreign_transfer_interrupts_a_reservation(delay):
    topo = star(6, LINK, gamma=1e-9)
    fast, plain = _both(_interrupted_plan(delay, 2e6, False), topo)
    if delay < fast.end[0]:
        assert fast.meta["reservation_interrupts"] >= 1


@settings(max_examples=40, deadline=None)
@given(st.floats(0.0, 8e-3), st.floats(0.0, 5e6), st.booleans(), st.sampled_from([0.0, 1e-9, 5e-9]))
def test_coalesced_equals_plain_under_random_interruptions(delay, size, second, gamma):
    topo = star(6, LINK, gamma=gamma)
    _both(_interrupted_plan(delay, size, second), topo)


def test_two_collectives_started_together_share_uplinks():
    topo = star(4, LINK)
    b = PlanBuilder(4)
    b.collective("allreduce", range(4), 4e6, algorithm="ring")
    b.collective("allgather", [3, 2, 1, 0], 4e6, algorithm="ring", stream="other")
    fast, _ = _both(b.build(), topo)
    # On a star every rank sends in both rings, so its uplink carries two 1 MB flows at
    # B/2 while both run (3 steps of 2 hops + 2 ms); the allreduce then finishes its last
    # 3 steps alone at B (2 hops + 1 ms each).
    assert fast.duration(1) == pytest.approx(3 * (2e-6 + 2e-3), rel=1e-12)
    assert fast.duration(0) == pytest.approx(3 * (2e-6 + 2e-3) + 3 * (2e-6 + 1e-3), rel=1e-12)


def test_same_direction_rings_halve_each_other():
    topo = star(4, LINK)
    b = PlanBuilder(4)
    b.collective("allgather", range(4), 4e6, algorithm="ring")
    b.collective("allgather", range(4), 4e6, algorithm="ring", stream="other")
    fast, _ = _both(b.build(), topo)
    for op in (0, 1):
        assert fast.duration(op) == pytest.approx(3 * (2e-6 + 2e-3), rel=1e-12)
