"""``TwoLevelRouter.links_many`` (link ids from tables) gives exactly the links of the node paths.

Two references for every pair: ``paths_many`` + ``Topology._links_of_paths`` (the array path it replaces) and
``Topology.path`` + the edge dict (the pair-by-pair router), on random clusters (every intranode kind, every
fabric with an array path, planes, NVLink domains, unequal machines) and on presets, at random pairs plus
self pairs, machine-local pairs and every rank's neighbours.
"""

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from simcomm.errors import ConfigError
from simcomm.topologies.presets import preset
from simcomm.topologies.two_level import two_level


def _pairs(topo, n, seed):
    rng = np.random.default_rng(seed)
    p = topo.n_ranks
    src, dst = rng.integers(0, p, n), rng.integers(0, p, n)
    ranks = np.arange(p)
    local = np.minimum(ranks + rng.integers(0, 4, p), p - 1)  # mostly on the same machine
    return np.concatenate([src, ranks, ranks, ranks]), np.concatenate([dst, ranks, ranks[::-1], local])


def _check(topo, src, dst):
    got = topo.router.links_many(topo, src, dst)
    assert got is not None  # (the tables cover these clusters: a fall back would test nothing)
    lens, links = got
    assert lens.dtype == np.int64 and links.dtype == np.int64
    want = topo._links_of_paths(topo.router.paths_many(topo, src, dst))
    assert lens.tolist() == want[0].tolist() and links.tolist() == want[1].tolist()
    ids = topo._edge_ids
    ref = [[ids[(u, v)] for u, v in zip(path, path[1:], strict=False)]
           for path in (topo.path(a, b) for a, b in zip(src.tolist(), dst.tolist(), strict=True))]
    assert lens.tolist() == [len(r) for r in ref] and links.tolist() == [x for r in ref for x in r]


_INTER = [("fat-tree", {"levels": 2}), ("fat-tree", {"levels": 3}), ("fat-tree", {"routing": "ecmp"}),
          ("fat-tree", {"levels": 2, "routing": "d-mod-k", "oversubscription": 2}), ("switch", {}),
          ("rail", {"nodes_per_leaf": 3}), ("rail", {"nodes_per_leaf": 2, "routing": "ecmp", "spines": 3}),
          ("rail", {"nodes_per_leaf": 64})]


@settings(max_examples=150, deadline=None)
@given(nodes=st.integers(2, 24), gpn=st.integers(1, 8), nics=st.sampled_from([1, 2, 4, 8]),
       intra=st.sampled_from(["nvswitch", "nvlink-mesh", "pcie", "pcie-host", "shm", "nvlink-cube-mesh"]),
       inter=st.sampled_from(_INTER), planes=st.sampled_from([1, 2, 4]), seed=st.integers(0, 1000))
def test_links_from_tables_are_the_links_of_the_paths(nodes, gpn, nics, intra, inter, planes, seed):
    nics = min(nics, gpn)
    planes = min(planes, nics)
    try:
        topo = two_level(nodes, gpn, intra=intra, nics_per_node=nics, inter=inter[0], inter_options=inter[1],
                         planes=planes)
    except ConfigError:  # (planes that do not divide the NICs, a host path's NICs leaving a plane without GPU)
        assume(False)
    _check(topo, *_pairs(topo, 400, seed))


@settings(max_examples=20, deadline=None)
@given(counts=st.lists(st.integers(1, 6), min_size=2, max_size=12), intra=st.sampled_from(["nvswitch", "pcie"]),
       domain=st.integers(1, 3), seed=st.integers(0, 1000))
def test_unequal_machines_and_nvlink_domains(counts, intra, domain, seed):
    topo = two_level(len(counts), counts, intra=intra, inter="fat-tree",
                     nvlink_domain=domain if intra == "nvswitch" else 1)
    _check(topo, *_pairs(topo, 300, seed))


@pytest.mark.parametrize("name,nodes", [("dgx-a100-hdr", 45), ("dgx-h100-fat-tree", 12), ("l40s-pcie", 6),
                                        ("dgx1-v100", 5), ("gbe-4gpu", 4), ("seed004-ps", 3), ("aws-p4d", 5),
                                        ("gcp-a3-high", 3), ("gb200-nvl72", 40), ("hgx-h800", 40)])
def test_presets(name, nodes):
    topo = preset(name, nodes=nodes)
    _check(topo, *_pairs(topo, 3000, 7))


def test_multi_plane_relays_cross_inside_the_machine():
    topo = two_level(6, 8, nics_per_node=8, planes=4, inter="fat-tree", inter_options={"levels": 2})
    src, dst = np.arange(48), (np.arange(48) * 7 + 9) % 48
    assert (topo.router.nic_of[0] % 4) != (topo.router.nic_of[10] % 4)  # (rank 0 -> 10 is relayed)
    _check(topo, np.concatenate([src, [0]]), np.concatenate([dst, [10]]))


def test_fabrics_without_link_numbers_and_single_pairs_fall_back():
    for inter in ("dragonfly", "torus"):
        topo = two_level(8, 2, inter=inter)
        assert topo.router.links_many(topo, np.array([0, 1]), np.array([5, 9])) is None
        # machine-local pairs need no fabric
        assert topo.router.links_many(topo, np.array([0, 1]), np.array([1, 0])) is not None
    topo = two_level(4, 2, inter="fat-tree")
    assert topo.router.links_many(topo, np.array([0]), np.array([5])) is None
    lens, links = topo.router.links_many(topo, np.array([0, 0]), np.array([5, 5]))
    assert topo.route(0, 5) == tuple(links[:lens[0]].tolist())


def test_a_few_new_pairs_come_from_the_tables_and_cached_ones_from_routes_cache(monkeypatch):
    topo = two_level(6, 4, nics_per_node=2, inter="rail", inter_options={"nodes_per_leaf": 2})
    calls = []
    many = topo.router.links_many
    monkeypatch.setattr(topo.router, "links_many", lambda *args: calls.append(len(args[1])) or many(*args))
    src, dst = np.array([0, 1, 2, 3, 0, 23, 7, 7]), np.array([5, 9, 2, 22, 1, 0, 12, 13])
    lens, links = topo.routes(src, dst)
    assert calls == [8]  # eight new pairs: one batch from the tables
    ids = topo._edge_ids
    ref = [[ids[(u, v)] for u, v in zip(p, p[1:], strict=False)] for p in map(topo.path, src.tolist(), dst.tolist())]
    assert lens.tolist() == [len(r) for r in ref] and links.tolist() == [x for r in ref for x in r]
    for a, b in zip(src.tolist(), dst.tolist(), strict=True):
        topo.route(a, b)
    calls.clear()
    again = topo.routes(np.concatenate([src, [4, 4]]), np.concatenate([dst, [8, 20]]))  # two new: route() each
    assert calls == [1, 1] and again[1].tolist()[:len(links)] == links.tolist()
