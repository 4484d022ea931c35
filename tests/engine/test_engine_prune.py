"""Dominated-link pruning (simcomm.engine.prune) leaves max-min rates unchanged."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simcomm.engine import simulate
from simcomm.engine.maxmin import maxmin_rates, maxmin_rates_global
from simcomm.engine.prune import route_matrix
from simcomm.ops import PlanBuilder
from simcomm.topologies.two_level import two_level


def _flat(routes):
    lens = np.array([len(r) for r in routes], dtype=np.int64)
    links = np.concatenate([np.asarray(r, dtype=np.int64) for r in routes])
    return links, lens


def _solve_pruned(caps, routes):
    rows = route_matrix(caps, *_flat(routes))
    real = rows != len(caps)
    owner = np.repeat(np.arange(len(routes)), rows.shape[1])[real.ravel()]
    return rows, maxmin_rates(owner, rows[real], len(routes), caps)[0]


def test_prune_drops_looser_links_crossed_by_the_same_flows():
    # Link 0 (cap 5) and link 2 (cap 4) only carry flows that also cross link 1 (cap 3).
    rows = route_matrix(np.array([5.0, 3.0, 4.0]), *_flat([[0, 1], [0, 1, 2]]))
    assert rows.tolist() == [[1], [1]]


def test_prune_keeps_one_of_two_equal_links_and_a_tighter_shared_link():
    assert route_matrix(np.array([1.0, 1.0]), *_flat([[1, 0]])).tolist() == [[0]]
    # Link 0 is shared by two flows: not contained in link 1's flows, so both stay.
    rows = route_matrix(np.array([2.0, 1.0, 1.0]), *_flat([[0, 1], [0, 2]]))
    assert rows.tolist() == [[0, 1], [0, 2]]


def test_prune_pads_short_rows_with_the_dummy_link():
    rows = route_matrix(np.array([1.0, 0.5, 9.0]), *_flat([[0], [1, 0, 2]]))
    assert rows.tolist() == [[0, 3], [1, 0]]


@st.composite
def instances(draw):
    n_links = draw(st.integers(1, 9))
    caps = draw(st.lists(st.sampled_from([1.0, 2.0, 3.0, 0.5]) | st.floats(0.1, 50.0),
                         min_size=n_links, max_size=n_links))
    routes = draw(st.lists(st.lists(st.integers(0, n_links - 1), min_size=1, max_size=5, unique=True),
                           min_size=1, max_size=25))
    return np.array(caps), routes


@settings(max_examples=300, deadline=None)
@given(instances())
def test_pruned_rates_equal_the_textbook_solver_on_full_routes(case):
    caps, routes = case
    flow = np.concatenate([np.full(len(r), i) for i, r in enumerate(routes)]).astype(np.int64)
    ref, _ = maxmin_rates_global(flow, _flat(routes)[0], len(routes), caps)
    rows, got = _solve_pruned(caps, routes)
    np.testing.assert_allclose(got, ref, rtol=1e-12)
    # Every flow keeps at least one link, and pruned links are never the tightest of a route.
    assert (rows != len(caps)).any(axis=1).all()
    for r, row in zip(routes, rows):
        assert caps[row[row < len(caps)]].min() == caps[r].min()


def _gossip(n, seed):
    rng = np.random.default_rng(seed)
    b = PlanBuilder(n)
    for r in range(n):
        prev = b.compute(r, float(rng.uniform(0, 1e-4)))
        for _ in range(4):
            peer = int((r + rng.integers(1, n)) % n)
            prev = b.transfer(r, peer, float(rng.choice([2e5, 7e5, 3e6])), after=[prev])
    return b.build()


@pytest.mark.parametrize("seed", [0, 1])
def test_prune_on_nic_per_gpu_cluster_equals_plain_model(seed):
    # One NIC per GPU behind a faster PCIe attach (dgx-a100-hdr's shape): the attach links are pruned.
    topo = two_level(4, 4, nic_link="ib-hdr", nics_per_node=4, nic_attach="pcie4", inter="fat-tree")
    routes = [topo.route(0, b) for b in range(1, topo.n_ranks)]
    rows = route_matrix(topo.capacity, *_flat(routes))
    assert (rows < len(topo.capacity)).sum() < sum(len(r) for r in routes)  # something was pruned
    plan = _gossip(topo.n_ranks, seed)
    fast = simulate(plan, topo)
    ref = simulate(plan, topo, incremental=False, coalesce=False)
    np.testing.assert_allclose(fast.start, ref.start, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(fast.end, ref.end, rtol=1e-12, atol=1e-15)
    assert fast.makespan == pytest.approx(ref.makespan, rel=1e-12)
