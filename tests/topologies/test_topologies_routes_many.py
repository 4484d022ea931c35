"""Batch routing (``Topology.routes``) gives exactly the routes of ``route(a, b)``.

The array path (two-level clusters over fat-trees, ``paths_many``) must agree
with the pair-by-pair router on every pair: same links, same order.  Fabrics
without an array path fall back to the pair-by-pair router.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simcomm.errors import TopologyError
from simcomm.topologies.base import ecmp_hash, ecmp_hash_many
from simcomm.topologies.fat_tree import fat_tree
from simcomm.topologies.star import star
from simcomm.topologies.two_level import two_level


@given(st.lists(st.tuples(st.integers(0, 2**20), st.integers(0, 2**20), st.integers(0, 2**20)),
                min_size=1, max_size=50))
def test_hash_many_is_the_scalar_hash_bit_for_bit(keys):
    cols = [np.array(c) for c in zip(*keys, strict=False)]
    assert ecmp_hash_many(*cols).tolist() == [ecmp_hash(*k) for k in keys]


def _pairs(topo, n, seed):
    rng = np.random.default_rng(seed)
    p = topo.n_ranks
    src, dst = rng.integers(0, p, n), rng.integers(0, p, n)
    src[:p], dst[:p] = np.arange(p) % p, np.arange(p)[::-1] % p  # self pairs and neighbours too
    return src, dst


def _one_by_one(topo, src, dst):
    routes = [topo.route(a, b) for a, b in zip(src.tolist(), dst.tolist(), strict=False)]
    return [len(r) for r in routes], [x for r in routes for x in r]


@settings(max_examples=25, deadline=None)
@given(nodes=st.integers(2, 40), gpn=st.integers(1, 8), nics=st.sampled_from([1, 2, 8]),
       intra=st.sampled_from(["nvswitch", "nvlink-mesh", "pcie"]), levels=st.sampled_from([2, 3]),
       seed=st.integers(0, 100))
def test_fat_tree_clusters_route_in_arrays_as_pair_by_pair(nodes, gpn, nics, intra, levels, seed):
    nics = min(nics, gpn)
    topo = two_level(nodes, gpn, intra=intra, nics_per_node=nics, inter="fat-tree",
                     inter_options={"levels": levels})
    src, dst = _pairs(topo, 600, seed)
    want_lens, want_links = _one_by_one(topo, src, dst)
    topo._routes_one_by_one = None  # the array path must not fall back
    lens, links = topo.routes(src, dst)
    assert lens.tolist() == want_lens and links.tolist() == want_links


@pytest.mark.parametrize("inter", ["dragonfly", "torus"])
def test_other_fabrics_fall_back_to_pair_by_pair(inter):
    topo = two_level(8, 2, inter=inter)
    src, dst = _pairs(topo, 400, 1)
    lens, links = topo.routes(src, dst)
    want_lens, want_links = _one_by_one(topo, src, dst)
    assert lens.tolist() == want_lens and links.tolist() == want_links


def test_a_router_returning_a_non_edge_is_an_error():
    topo = two_level(4, 2, inter="fat-tree")
    nodes = np.array([[0, 1, -1]] * 2)  # ranks 0 and 1 of machine 0 are not adjacent with a hub
    with pytest.raises(TopologyError, match="non-edge"):
        topo._links_of_paths(nodes)


@settings(max_examples=25, deadline=None)
@given(hosts=st.integers(2, 300), levels=st.sampled_from([2, 3]), routing=st.sampled_from(["ecmp", "d-mod-k"]),
       oversubscription=st.sampled_from([1.0, 2.0]), seed=st.integers(0, 100))
def test_standalone_fat_trees_route_in_arrays_as_pair_by_pair(hosts, levels, routing, oversubscription, seed):
    """Fat-trees whose hosts are the ranks (1 048 576-rank benchmarks) route in arrays: the same links."""
    topo = fat_tree(hosts=hosts, levels=levels, routing=routing, oversubscription=oversubscription)
    src, dst = _pairs(topo, 600, seed)
    want_lens, want_links = _one_by_one(topo, src, dst)
    topo._routes_one_by_one = None  # the array path must not fall back
    lens, links = topo.routes(src, dst)
    assert lens.tolist() == want_lens and links.tolist() == want_links


def test_a_standalone_star_routes_in_arrays_as_pair_by_pair():
    topo = star(300, "ib-edr")
    src, dst = _pairs(topo, 600, 3)
    want_lens, want_links = _one_by_one(topo, src, dst)
    topo._routes_one_by_one = None
    lens, links = topo.routes(src, dst)
    assert lens.tolist() == want_lens and links.tolist() == want_links


@pytest.mark.parametrize("build", [lambda: two_level(3, 4, inter="fat-tree"), lambda: fat_tree(hosts=20),
                                   lambda: star(5, "ib-edr")])
def test_rank_machines_and_gammas_in_one_pass_are_the_graphs(build):
    topo = build()
    nodes = topo.graph.nodes
    assert [topo.machine_of(r) for r in range(topo.n_ranks)] == [nodes[n].get("machine") for n in topo.ranks]
    assert topo.gammas().tolist() == [topo.gamma(r) for r in range(topo.n_ranks)]
    topo.graph.nodes[topo.ranks[-1]]["gamma"] = 1e-9  # a preset setting a server's gamma is read afresh
    assert topo.gammas()[-1] == 1e-9


def test_validation_names_the_first_edge_with_an_unknown_link():
    import networkx as nx

    from simcomm.links.base import link_class
    from simcomm.topologies.base import Topology

    g = nx.Graph()
    g.add_node("a", kind="rank")
    g.add_node("b", kind="rank")
    g.add_node("s", kind="switch")
    g.add_edge("a", "s", link="ib-edr")
    g.add_edge("s", "b", link="warp")
    with pytest.raises(TopologyError, match="edge 'b'-'s' uses unknown link 'warp'; valid choices: ib-edr"):
        Topology("t", g, {"ib-edr": link_class("ib-edr")}, ("a", "b"))


@pytest.mark.parametrize("budget,left", [(1 << 22, 6), (1, 4)])
def test_large_batches_are_kept_read_only_and_equal_to_fresh_routes(budget, left, monkeypatch):
    import simcomm.topologies.base as base

    monkeypatch.setattr(base, "_KEEP_LINKS", budget)
    topo = two_level(64, 8, inter="fat-tree")
    fresh = two_level(64, 8, inter="fat-tree")
    n = topo.n_ranks
    batches = [(np.arange(8 * n) % n, (np.arange(8 * n) * s + 1) % n) for s in range(1, 7)]  # 4 096 pairs
    for src, dst in batches:
        got = topo.routes(src, dst)
        assert topo.routes(src.copy(), dst.copy())[1] is got[1]  # asked again: the kept arrays
        assert not got[0].flags.writeable and not got[1].flags.writeable
        want = fresh._routes_of(src, dst)
        assert got[0].tolist() == want[0].tolist() and got[1].tolist() == want[1].tolist()
    # all six within the budget of link ids; over it, the last four only
    assert len(topo._batches) == left
    small = topo.routes(np.array([0]), np.array([9]))
    assert small[1].flags.writeable  # small batches are routed afresh


def test_primed_routes_are_the_routes_one_by_one():
    topo, fresh = two_level(40, 8, inter="fat-tree"), two_level(40, 8, inter="fat-tree")
    rng = np.random.default_rng(5)
    src, dst = rng.integers(0, 320, 3000), rng.integers(0, 320, 3000)
    topo.prime_routes(src, dst)
    assert len(topo._routes) >= 256  # routed in one batch
    assert all(topo._routes[(a, b)] == fresh.route(a, b) for a, b in zip(src.tolist(), dst.tolist(), strict=True))
    few = two_level(4, 2, inter="fat-tree")
    few.prime_routes(np.array([0, 1]), np.array([5, 6]))
    assert not few._routes  # a few pairs are left to route()


@pytest.mark.parametrize("needles", [1, 1 << 40])
def test_binary_search_in_key_order_finds_the_same_links(needles, monkeypatch):
    # graphs over _DENSE_NODES nodes look node pairs up by binary search; from _SORTED_NEEDLES keys on, in key order
    import simcomm.topologies.base as base

    monkeypatch.setattr(base, "_DENSE_NODES", 0)
    monkeypatch.setattr(base, "_SORTED_NEEDLES", needles)
    topo = two_level(24, 8, inter="fat-tree")
    src, dst = _pairs(topo, 5000, 3)
    want_lens, want_links = _one_by_one(topo, src, dst)
    assert topo._pair_keys[2] is None  # (no dense table: the binary search)
    lens, links = topo._routes_of(src, dst)
    assert lens.tolist() == want_lens and links.tolist() == want_links
    with pytest.raises(TopologyError, match="non-edge"):
        topo._links_of_paths(np.array([[0, 1, 2, -1]] * 5000))
