"""Dominated-link pruning (simcomm.engine.fluid.prune) leaves max-min rates unchanged."""

import numpy as np
import pytest
from flowcases import coo, flat, flow_instances, gossip_plan
from hypothesis import given, settings
from hypothesis import strategies as st

from simcomm.engine import simulate
from simcomm.engine.fluid.maxmin import REL_TOL, maxmin_rates, maxmin_rates_global
from simcomm.engine.fluid.prune import route_matrix
from simcomm.runtimes.mpi import MPICH
from simcomm.topologies.two_level import two_level


def _solve_pruned(caps, routes):
    rows = route_matrix(caps, *flat(routes))
    real = rows != len(caps)
    owner = np.repeat(np.arange(len(routes)), rows.shape[1])[real.ravel()]
    return rows, maxmin_rates(owner, rows[real], len(routes), caps)[0]


def test_prune_drops_looser_links_crossed_by_the_same_flows():
    # Link 0 (cap 5) and link 2 (cap 4) only carry flows that also cross link 1 (cap 3).
    rows = route_matrix(np.array([5.0, 3.0, 4.0]), *flat([[0, 1], [0, 1, 2]]))
    assert rows.tolist() == [[1], [1]]


def test_prune_keeps_one_of_two_equal_links_and_a_tighter_shared_link():
    assert route_matrix(np.array([1.0, 1.0]), *flat([[1, 0]])).tolist() == [[0]]
    # Link 0 is shared by two flows: not contained in link 1's flows, so both stay.
    rows = route_matrix(np.array([2.0, 1.0, 1.0]), *flat([[0, 1], [0, 2]]))
    assert rows.tolist() == [[0, 1], [0, 2]]


def test_prune_pads_short_rows_with_the_dummy_link():
    rows = route_matrix(np.array([1.0, 0.5, 9.0]), *flat([[0], [1, 0, 2]]))
    assert rows.tolist() == [[0, 3], [1, 0]]


def instances():
    caps = st.sampled_from([1.0, 2.0, 3.0, 0.5]) | st.floats(0.1, 50.0)
    return flow_instances(max_links=9, caps=caps, max_route=5, max_flows=25)


@settings(max_examples=300, deadline=None)
@given(instances())
def test_pruned_rates_equal_the_textbook_solver_on_full_routes(case):
    caps, routes = case
    ref, _ = maxmin_rates_global(*coo(routes), len(routes), caps)
    rows, got = _solve_pruned(caps, routes)
    np.testing.assert_allclose(got, ref, rtol=1e-12)
    # Every flow keeps at least one link, and pruned links are never the tightest of a route.
    assert (rows != len(caps)).any(axis=1).all()
    for r, row in zip(routes, rows, strict=False):
        assert caps[row[row < len(caps)]].min() == caps[r].min()


@pytest.mark.parametrize("seed", [0, 1])
def test_prune_on_nic_per_gpu_cluster_equals_plain_model(seed):
    # One NIC per GPU behind a faster PCIe attach (dgx-a100-hdr's shape): the attach links are pruned.
    topo = two_level(4, 4, nic_link="ib-hdr", nics_per_node=4, nic_attach="pcie4", inter="fat-tree")
    routes = [topo.route(0, b) for b in range(1, topo.n_ranks)]
    rows = route_matrix(topo.capacity, *flat(routes))
    assert (rows < len(topo.capacity)).sum() < sum(len(r) for r in routes)  # something was pruned
    plan = gossip_plan(topo.n_ranks, seed, stagger=1e-4, per_rank=4, sizes=[2e5, 7e5, 3e6])
    fast = simulate(plan, topo, runtime=MPICH)
    ref = simulate(plan, topo, reference={"incremental", "coalesce"}, runtime=MPICH)
    np.testing.assert_allclose(fast.start, ref.start, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(fast.end, ref.end, rtol=1e-12, atol=1e-15)
    assert fast.makespan == pytest.approx(ref.makespan, rel=1e-12)


def _dominated_by_definition(caps, routes):
    """Link x is dropped when another link, tighter by (capacity, id), is crossed by every route crossing x."""
    rank = {x: i for i, x in enumerate(sorted(range(len(caps)), key=lambda x: (caps[x], x)))}
    crossing = {x: {i for i, r in enumerate(routes) if x in r} for x in range(len(caps))}
    return {x for x in range(len(caps)) if crossing[x] and any(
        y != x and rank[y] < rank[x] and crossing[x] <= crossing[y] for y in range(len(caps)))}


simple_routes = st.integers(1, 9).flatmap(lambda n: st.tuples(
    st.lists(st.sampled_from([1.0, 2.0, 3.0]), min_size=n, max_size=n),
    st.lists(st.lists(st.integers(0, n - 1), min_size=1, max_size=5, unique=True), min_size=1, max_size=6)))


@settings(max_examples=300, deadline=None)
@given(simple_routes, st.booleans())
def test_route_matrix_keeps_exactly_the_undominated_links(case, give_rank):
    # Routes that cross no link twice (one or several; one alone takes a shortcut), with the link
    # ranks given once for the network (as the fluid core does) or computed on the spot.
    caps, routes = case
    caps = np.array(caps)
    from simcomm.engine.fluid.prune import link_rank

    rows = route_matrix(caps, *flat(routes), link_rank(caps) if give_rank else None)
    dropped = _dominated_by_definition(caps, routes)
    assert rows.dtype == np.int64 and rows.shape[0] == len(routes)
    for r, row in zip(routes, rows, strict=False):
        assert row[row < len(caps)].tolist() == [x for x in r if x not in dropped]


def test_one_route_keeps_its_tightest_link_or_all_of_a_route_that_repeats_one():
    assert route_matrix(np.array([3.0, 1.0, 2.0]), *flat([[0, 2, 1]])).tolist() == [[1]]
    # A link crossed twice by one route does not dominate itself: the general rule applies.
    assert route_matrix(np.array([3.0, 1.0]), *flat([[0, 1, 0]])).tolist() == [[1]]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 5), min_size=1, max_size=12), st.lists(st.floats(0.0, 10.0), min_size=6, max_size=6))
def test_one_link_per_flow_gives_each_link_its_share(links, caps):
    # maxmin_rates' shortcut when every flow crosses one link: one round, capacity / flows on the
    # link exactly (no flow joins two links, so no share moves).  The textbook solver agrees to its
    # tolerance: it saturates links whose shares lie within REL_TOL of the round's level together, at
    # that level (hypothesis found caps 10 and 10 - 2 ulp: 10 - 2 ulp for both there).
    caps = np.array(caps)
    n = len(links)
    rates, rounds = maxmin_rates(np.arange(n), np.array(links), n, caps)
    ref, _ = maxmin_rates_global(np.arange(n), np.array(links), n, caps)
    assert rounds == 1
    count = np.bincount(links, minlength=len(caps))
    np.testing.assert_array_equal(rates, [caps[x] / count[x] for x in links])
    np.testing.assert_allclose(rates, ref, rtol=REL_TOL, atol=0.0)


def test_unique_inverse_equals_numpy():
    from simcomm.engine.fluid.core import _unique_inverse

    rng = np.random.default_rng(0)
    for _ in range(500):
        a = rng.integers(0, rng.integers(1, 40), rng.integers(1, 30))
        u, inv = np.unique(a, return_inverse=True)
        u2, inv2 = _unique_inverse(a)
        np.testing.assert_array_equal(u2, u)
        np.testing.assert_array_equal(inv2, inv)


merges = st.integers(2, 12).flatmap(lambda n: st.tuples(
    st.lists(st.sampled_from([1.0, 2.0, 3.0]), min_size=n, max_size=n),
    st.lists(st.tuples(st.lists(st.lists(st.integers(0, n - 1), min_size=0, max_size=5), min_size=1, max_size=5),
                       st.sampled_from(["merge", "repeat", "compact", "other"])), min_size=1, max_size=8)))


@settings(max_examples=300, deadline=None)
@given(merges)
def test_kept_route_matrix_equals_route_matrix_over_every_slot(case):
    # The fluid core's merges (routes appended: a new concatenation; "repeat": routes already there again, as a
    # gossip pattern's next segment, which leaves the dominated links as they were), compactions (a subset of the
    # slots: a new array) and changes of form (an unrelated array): each time route_matrix's rows over every slot.
    from simcomm.engine.fluid.prune import KeptRouteMatrix, link_rank

    caps, steps = case
    caps = np.array(caps)
    rank = link_rank(caps)
    kept = KeptRouteMatrix()
    routes: list = []
    e_link = np.zeros(0, dtype=np.int64)
    for added, how in steps:
        if how == "compact":
            routes = routes[::2]
            e_link = np.array([x for r in routes for x in r], dtype=np.int64)
        elif how == "other":
            routes = []
            e_link = np.zeros(0, dtype=np.int64)
        elif how == "repeat" and routes:
            added = routes[-len(added):]
        prev = e_link
        routes = routes + added
        e_link = np.concatenate((prev, np.array([x for r in added for x in r], dtype=np.int64)))
        e_len = np.array([len(r) for r in routes], dtype=np.int64)
        got = kept.rows(caps, prev, e_link, e_len, rank)
        want = route_matrix(caps, e_link, e_len, rank)
        assert got.dtype == want.dtype and got.tolist() == want.tolist()
