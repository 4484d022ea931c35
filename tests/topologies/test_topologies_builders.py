"""Hand-checked structure and routes of every builder."""

import pytest

from simcomm.errors import ConfigError, TopologyError, UnknownNameError
from simcomm.topologies import dragonfly, fat_tree, ring, star, torus, two_level
from simcomm.topologies.analysis import bisection_bandwidth, kind_counts, route_diameter
from simcomm.topologies.fat_tree import auto_k


def test_fat_tree_k4_counts_and_routes():
    t = fat_tree(4)
    assert kind_counts(t) == {"rank": 16, "nic": 0, "switch": 20}  # 8 edge + 8 agg + 4 core
    assert t.graph.number_of_edges() == 48
    assert len(t.route(0, 1)) == 2       # same edge switch
    assert len(t.route(0, 2)) == 4       # same pod
    assert len(t.route(0, 15)) == 6      # across pods through a core
    p = t.path(0, 15)
    kinds = [n.rstrip("0123456789.") for n in p[1:-1]]
    assert kinds == ["edge", "agg", "core", "agg", "edge"]  # up then down, never down-up-down


def test_fat_tree_ecmp_deterministic_and_spread():
    t = fat_tree(8)
    cores = {t.path(0, j)[3] for j in range(16, 128)}
    assert len(cores) == 16  # every core used by pod-0 -> other-pod traffic
    assert t.path(0, 100) == fat_tree(8).path(0, 100)


def test_fat_tree_oversubscription_and_leaf_spine():
    t = fat_tree(4, oversubscription=4)
    assert t.links["ib-edr-os4"].bandwidth == 12.5e9 / 4
    assert bisection_bandwidth(fat_tree(4))[0] == pytest.approx(8 * 12.5e9)
    assert bisection_bandwidth(t)[0] == pytest.approx(2 * 12.5e9)
    ls = fat_tree(4, levels=2)
    assert kind_counts(ls) == {"rank": 8, "nic": 0, "switch": 6}
    assert len(ls.route(0, 7)) == 4
    assert auto_k(16) == 4 and auto_k(17) == 6 and auto_k(2048) == 22


def test_fat_tree_bad_input():
    with pytest.raises(ConfigError, match="k must be even"):
        fat_tree(5)
    with pytest.raises(ConfigError, match="do not fit"):
        fat_tree(4, hosts=17)
    with pytest.raises(ConfigError, match="oversubscription"):
        fat_tree(4, oversubscription=0.5)


def test_dragonfly_counts_and_minimal_routes():
    t = dragonfly(3, 2, 2)
    assert kind_counts(t) == {"rank": 12, "nic": 0, "switch": 6}
    assert t.graph.number_of_edges() == 12 + 3 + 3  # host, local, global
    assert t.path(0, 1) == ["r0", "rt0.0", "r1"]
    assert t.path(0, 11) == ["r0", "rt0.0", "rt0.1", "rt2.0", "rt2.1", "r11"]
    assert route_diameter(t)[0] == 5  # local-global-local plus two host links


def test_torus_and_ring():
    t = torus((4, 4), "ib-edr")
    assert t.graph.number_of_edges() == 32
    assert t.path(0, 10) == ["r0", "r1", "r2", "r6", "r10"]  # x first, then y
    assert t.path(0, 15) == ["r0", "r3", "r15"]              # wrap-around both ways
    assert torus((4, 4, 4), "ib-edr").graph.number_of_edges() == 192
    assert route_diameter(torus((4, 4, 4), "ib-edr"))[0] == 6
    r = ring(5, "ib-edr")
    assert r.graph.number_of_edges() == 5 and r.path(0, 3) == ["r0", "r4", "r3"]
    assert bisection_bandwidth(ring(8, "ib-edr"))[0] == pytest.approx(2 * 12.5e9)


def test_star_bisection_and_routes():
    t = star(8, "ib-edr")
    assert t.path(2, 5) == ["r2", "sw0", "r5"]
    assert bisection_bandwidth(t) == (pytest.approx(4 * 12.5e9), "exact: min over all balanced halvings")


def test_two_level_nic_sharing_shows_in_routes():
    t = two_level(2, 4, nic_link="ib-edr")
    nic_link = t._edge_ids[("m0.nic0", "sw0")]
    for r in range(4):  # every rank of node 0 leaves through the same NIC link
        assert nic_link in t.route(r, 4 + r)
    assert t.path(0, 1) == ["r0", "m0.nvsw", "r1"]
    assert [t.machine_of(r) for r in range(8)] == [0, 0, 0, 0, 1, 1, 1, 1]


def test_two_level_multi_nic_and_mesh():
    t = two_level(2, 4, nics_per_node=2, intra="nvlink-mesh", intra_link="nvlink2", links_per_pair=2)
    assert t.path(0, 1) == ["r0", "r1"] and t.links["nvlink2x2"].bandwidth == 50e9
    assert t.path(0, 4)[1] == "m0.nic0" and t.path(2, 4)[1] == "m0.nic1"


@pytest.mark.parametrize("inter", ["switch", "fat-tree", "dragonfly", "torus", "ring"])
def test_two_level_every_internode_network(inter):
    t = two_level(6, 2, inter=inter, nic_link="ib-edr")
    for a in range(12):
        for b in range(12):
            p = t.path(a, b)
            assert p[0] == t.ranks[a] and p[-1] == t.ranks[b]
            assert all(t.graph.has_edge(u, v) for u, v in zip(p, p[1:], strict=False))
            # endpoints never forward: only switches appear inside a path, apart from NICs next to ranks
            assert all(t.graph.nodes[n]["kind"] != "rank" for n in p[1:-1])


def test_two_level_gamma_and_errors():
    assert two_level(2, 2, device="v100").gamma(0) == pytest.approx(3 / 900e9)
    assert two_level(2, 2, gamma=1e-12).gamma(3) == 1e-12
    with pytest.raises(UnknownNameError,
                       match="valid choices: nvlink-cube-mesh, nvlink-mesh, nvswitch, pcie, pcie-host, shm"):
        two_level(2, 2, intra="optical")
    with pytest.raises(UnknownNameError, match="internode network"):
        two_level(2, 2, inter="hypercube")
    with pytest.raises(ConfigError, match="bad inter_options"):
        two_level(2, 2, inter="fat-tree", inter_options={"kk": 4})
    with pytest.raises(ConfigError, match="nodes must be an integer >= 1"):
        two_level(0, 2)
    with pytest.raises(UnknownNameError, match="link class"):
        two_level(2, 2, nic_link="ib-gdr")  # (ib-xdr is a class now: XDR, 800 Gb/s)


def test_16k_ranks_build_and_ring_routes():
    t = two_level(2048, 8, inter="fat-tree")
    p = t.n_ranks
    assert p == 16384
    routes = [t.route(i, (i + 1) % p) for i in range(p)]
    # k = 22: 11 NICs per edge switch, 121 per pod
    assert len(routes[0]) == 2            # inside node 0, through its NVSwitch
    assert len(routes[7]) == 4            # nodes 0 -> 1 share an edge switch
    assert len(routes[8 * 11 - 1]) == 6   # nodes 10 -> 11: same pod, via an aggregation switch
    assert len(routes[8 * 121 - 1]) == 8  # nodes 120 -> 121: across pods, via a core


def test_disconnected_graph_is_rejected():
    import networkx as nx

    from simcomm.links import link_class
    from simcomm.topologies.base import Topology
    g = nx.Graph()
    g.add_nodes_from(["a", "b"], kind="rank")
    with pytest.raises(TopologyError, match="disconnected"):
        Topology("x", g, {"ib-edr": link_class("ib-edr")}, ("a", "b"))
