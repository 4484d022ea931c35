"""The fast paths give the plain model's answer: local-minimum max-min rounds
against the textbook solver, incremental re-solves against re-solving every
flow at every event, and cached step routing against fresh routing."""

import numpy as np
import pytest
from flowcases import coo, flow_instances, gossip_plan
from hypothesis import given, settings
from hypothesis import strategies as st

from simcomm.engine import simulate
from simcomm.engine.fluid.core import run_isolated
from simcomm.engine.fluid.maxmin import maxmin_rates, maxmin_rates_global
from simcomm.links.base import LinkClass
from simcomm.ops import PlanBuilder
from simcomm.runtimes.mpi import MPICH
from simcomm.topologies.fat_tree import fat_tree
from simcomm.topologies.two_level import two_level

LINK = LinkClass("fp-link", 1e9, 1e-6, "custom")


def instances(max_flows=30):
    # Few distinct capacities make ties (equal shares along different paths) common.
    caps = st.sampled_from([1.0, 2.0, 3.0, 7.5, 10.0, 0.25]) | st.floats(0.1, 100.0)
    return flow_instances(max_links=10, caps=caps, max_route=4, max_flows=max_flows)


@settings(max_examples=300, deadline=None)
@given(instances(), st.data())
def test_local_minimum_rounds_equal_the_textbook_solver(case, data):
    caps, routes = case
    flow, link = coo(routes)
    weight = None
    if data.draw(st.booleans()):
        weight = np.array(data.draw(st.lists(st.integers(1, 4), min_size=len(routes), max_size=len(routes))), float)
    if data.draw(st.booleans()):  # entries in any order
        perm = np.random.default_rng(len(routes)).permutation(len(flow))
        flow, link = flow[perm], link[perm]
    fast, r_fast = maxmin_rates(flow, link, len(routes), caps, weight)
    ref, r_ref = maxmin_rates_global(flow, link, len(routes), caps, weight)
    np.testing.assert_allclose(fast, ref, rtol=1e-12, atol=0)
    assert r_fast <= r_ref


def test_independent_bottlenecks_freeze_in_one_round():
    # Five links of different capacity, one flow each: five levels, one dependency level.
    routes = [[i] for i in range(5)]
    caps = np.array([5.0, 1.0, 4.0, 2.0, 3.0])
    fast, rounds = maxmin_rates(*coo(routes), 5, caps)
    ref, ref_rounds = maxmin_rates_global(*coo(routes), 5, caps)
    assert fast.tolist() == caps.tolist() and rounds == 1 and ref_rounds == 5


def test_a_chain_of_bottlenecks_needs_one_round_per_link():
    # Flow i crosses links i and i+1; shares rise along the chain, so each link
    # waits for the previous one: 0 (cap 1, 2 flows) -> 0.5 each, and so on.
    routes = [[0], [0, 1], [1, 2], [2]]
    rates, rounds = maxmin_rates(*coo(routes), 4, np.array([1.0, 2.0, 4.0]))
    assert rates.tolist() == [0.5, 0.5, 1.5, 2.5] and rounds == 3


@settings(max_examples=120, deadline=None)
@given(instances(max_flows=16), st.lists(st.sampled_from([0.0, 1.0, 2.0, 5.0]) | st.floats(0.0, 50.0),
                                          min_size=16, max_size=16),
       st.lists(st.sampled_from([0.0, 0.1]) | st.floats(0.0, 3.0), min_size=16, max_size=16))
def test_incremental_fluid_run_equals_full_re_solves(case, sizes, lats):
    caps, routes = case
    f = len(routes)
    nbytes, lat = np.array(sizes[:f]), np.array(lats[:f])
    flow, link = coo(routes)
    lens = np.array([len(r) for r in routes])
    fast = run_isolated(caps, nbytes, lat, lens, link)
    plain = run_isolated(caps, nbytes, lat, lens, link, form="plain")
    np.testing.assert_allclose(fast.finish, plain.finish, rtol=1e-12, atol=1e-15)
    mid = float(plain.finish.max()) * 0.37
    a = run_isolated(caps, nbytes, lat, lens, link, until=mid)
    b = run_isolated(caps, nbytes, lat, lens, link, until=mid, form="plain")
    np.testing.assert_allclose(a.finish, b.finish, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(a.rem, b.rem, rtol=1e-9, atol=1e-9)


def test_a_finishing_flow_only_re_solves_faster_flows():
    # Two independent links: the fast flow finishing must not touch the slow one.
    fast = run_isolated(np.array([10.0, 1.0]), np.array([10.0, 10.0]), np.zeros(2), np.array([1, 1]),
                        np.array([0, 1]))
    assert fast.finish.tolist() == [1.0, 10.0]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_engine_incremental_equals_reference_on_contended_traffic(seed):
    topo = two_level(4, 4, nic_link="ib-edr", inter="fat-tree") \
        if seed == 2 else fat_tree(4, link=LINK, levels=2, oversubscription=2)
    n = topo.n_ranks
    plan = gossip_plan(n, seed, stagger=2e-3, per_rank=3, sizes=[1e5, 4e5, 2e6], ring_bytes=3e6)
    fast = simulate(plan, topo, runtime=MPICH)
    ref = simulate(plan, topo, reference={"incremental", "coalesce"}, runtime=MPICH)
    np.testing.assert_allclose(fast.start, ref.start, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(fast.end, ref.end, rtol=1e-12, atol=1e-15)
    assert fast.link_class_bytes == pytest.approx(ref.link_class_bytes, rel=1e-12)
    assert fast.meta["maxmin_rounds"] < ref.meta["maxmin_rounds"]


def test_repeated_alltoalls_reuse_routing_and_match_the_reference():
    topo = fat_tree(4, link=LINK, levels=3)
    b = PlanBuilder(16)
    for size in (1.6e5, 3.2e5, 1.6e5):
        b.collective("alltoall", range(16), size, algorithm="pairwise")
    plan = b.build()
    fast = simulate(plan, topo, runtime=MPICH)
    ref = simulate(plan, topo, reference={"incremental", "coalesce"}, runtime=MPICH)
    np.testing.assert_allclose(fast.end, ref.end, rtol=1e-12, atol=1e-15)
    assert fast.link_class_bytes == pytest.approx(ref.link_class_bytes, rel=1e-12)
    # The third alltoall repeats the first one exactly; the second only its routes.
    assert fast.duration(2) == pytest.approx(fast.duration(0), rel=1e-12)


@pytest.mark.parametrize("frac", [0.0, 0.3, 0.77, 1.0])
def test_scaled_alltoall_steps_interrupted_by_a_transfer_match_the_reference(frac):
    topo = fat_tree(4, link=LINK, levels=3)
    b = PlanBuilder(16)
    a1 = b.collective("alltoall", range(8), 1.6e5, algorithm="pairwise")
    b.collective("alltoall", range(8), 4.8e5, algorithm="pairwise", after=[a1])
    plan0 = b.build()
    probe = simulate(plan0, topo, runtime=MPICH)
    assert probe.meta["isolated_scaled"] == 7  # the second all-to-all reuses the first's 7 patterns
    # A transfer into rank 0 starting somewhere inside the second all-to-all.
    t = probe.start[1] + frac * probe.duration(1)
    b.compute(8, t)
    b.transfer(8, 0, 3e5, after=[2])
    plan = b.build()
    fast = simulate(plan, topo, runtime=MPICH)
    ref = simulate(plan, topo, reference={"incremental", "coalesce"}, runtime=MPICH)
    np.testing.assert_allclose(fast.start, ref.start, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(fast.end, ref.end, rtol=1e-12, atol=1e-15)
    if 0.0 < frac < 1.0:
        assert fast.meta["reservation_interrupts"] >= 1
    # The scaled price of the second all-to-all alone equals running it plainly.
    solo = PlanBuilder(16)
    solo.collective("alltoall", range(8), 4.8e5, algorithm="pairwise")
    plain = simulate(solo.build(), topo, reference={"incremental", "coalesce"}, runtime=MPICH)
    assert probe.duration(1) == pytest.approx(plain.duration(0), rel=1e-12)
