"""Contention against hand-computed answers: incast, a shared trunk, an
oversubscribed fat-tree and ranks sharing their node's NIC."""

import math

import networkx as nx
import pytest

from simcomm.engine import simulate
from simcomm.links.base import LinkClass
from simcomm.ops import PlanBuilder
from simcomm.runtimes.mpi import MPICH
from simcomm.topologies.base import Topology
from simcomm.topologies.fat_tree import fat_tree
from simcomm.topologies.star import star
from simcomm.topologies.two_level import two_level

B, LAT, N = 1e9, 2e-6, 3e6
LINK = LinkClass("c-link", B, LAT, "custom")


@pytest.mark.parametrize("senders", [1, 2, 5, 8])
def test_incast_on_a_star_takes_p_n_over_b(senders):
    # Every sender's flow enters rank 0 through the one switch->rank0 link: each gets B/P,
    # so all finish together after 2 hops of latency plus P*n/B.
    b = PlanBuilder(senders + 1)
    for s in range(1, senders + 1):
        b.transfer(s, 0, N)
    for reference in ((), {"coalesce"}):
        tl = simulate(b.build(), star(senders + 1, LINK), reference=reference, runtime=MPICH)
        want = 2 * LAT + senders * N / B
        for op in range(senders):
            assert math.isclose(tl.end[op], want, rel_tol=1e-12)
        assert tl.link_class_bytes["custom"] == pytest.approx(2 * senders * N)


def _dumbbell(trunk_bw: float) -> Topology:
    """a0,a1 - s0 == trunk == s1 - b0,b1 (host links B, trunk trunk_bw)."""
    g = nx.Graph()
    hosts = ["a0", "a1", "b0", "b1"]
    g.add_nodes_from(hosts, kind="rank")
    g.add_nodes_from(["s0", "s1"], kind="switch")
    g.add_edges_from([("a0", "s0"), ("a1", "s0"), ("b0", "s1"), ("b1", "s1")], link="c-link")
    trunk = LinkClass("trunk", trunk_bw, LAT, "ethernet")
    g.add_edge("s0", "s1", link="trunk")
    return Topology("dumbbell", g, {"c-link": LINK, "trunk": trunk}, tuple(hosts))


def test_two_flows_on_a_shared_trunk_each_get_half():
    b = PlanBuilder(4)
    b.transfer(0, 2, N)
    b.transfer(1, 3, N)
    tl = simulate(b.build(), _dumbbell(B), runtime=MPICH)
    for op in (0, 1):
        assert math.isclose(tl.end[op], 3 * LAT + N / (B / 2), rel_tol=1e-12)
    assert tl.link_class_bytes == {"custom": pytest.approx(4 * N), "ethernet": pytest.approx(2 * N)}


def test_opposite_directions_do_not_share_a_full_duplex_trunk():
    b = PlanBuilder(4)
    b.transfer(0, 2, N)
    b.transfer(3, 1, N)
    tl = simulate(b.build(), _dumbbell(B), runtime=MPICH)
    for op in (0, 1):
        assert math.isclose(tl.end[op], 3 * LAT + N / B, rel_tol=1e-12)


def test_a_short_flow_leaves_and_the_long_one_speeds_up():
    # Both start at B/2; the 1 MB flow ends at 3λ + 2 ms, after which the 3 MB flow has
    # 2 MB left at full rate: it ends 2 ms later.
    b = PlanBuilder(4)
    b.transfer(0, 2, 1e6)
    b.transfer(1, 3, 3e6)
    tl = simulate(b.build(), _dumbbell(B), runtime=MPICH)
    assert math.isclose(tl.end[0], 3 * LAT + 2e-3, rel_tol=1e-12)
    assert math.isclose(tl.end[1], 3 * LAT + 4e-3, rel_tol=1e-12)


@pytest.mark.parametrize("levels", [2, 3])
def test_oversubscribed_fat_tree_slows_a_cross_pod_ring_by_its_ratio(levels):
    # k = 4.  The group has one rank under each edge (leaf) switch, so every ring
    # transfer leaves its edge switch on an uplink and enters the next one on a
    # downlink, one flow per uplink direction: its rate is B / r, the uplink
    # bandwidth.  Each of the 2(p-1) steps moves n/p bytes, so with hop count h
    # (4 for 2 levels, 6 for 3 levels across pods):
    #     T(r) = 2(p-1) * (h λ + (n/p) r / B)
    # and the bandwidth term grows exactly r-fold.
    k = 4
    if levels == 2:
        group, hops = [0, 2, 4, 6], 4                 # leaves of 2 hosts
    else:
        group, hops = [0, 4, 8, 12], 6                # one host per pod
    p, n = len(group), 8e6
    times = {}
    for r in (1, 4):
        topo = fat_tree(k, link=LINK, levels=levels, oversubscription=r)
        b = PlanBuilder(topo.n_ranks)
        b.collective("allreduce", group, n, algorithm="ring")
        times[r] = simulate(b.build(), topo, runtime=MPICH).duration(0)
        assert math.isclose(times[r], 2 * (p - 1) * (hops * LAT + (n / p) * r / B), rel_tol=1e-9)
    lat = 2 * (p - 1) * hops * LAT
    assert math.isclose((times[4] - lat) / (times[1] - lat), 4.0, rel_tol=1e-9)


@pytest.mark.parametrize("gpus", [1, 2, 4, 8])
def test_ranks_of_one_node_share_their_nic(gpus):
    # Local rank l of node 0 sends n to local rank l of node 1.  All G flows cross
    # node 0's NIC uplink (and node 1's downlink) at B_nic: each gets B_nic / G.
    nic = LinkClass("nic", B, LAT, "infiniband")
    attach = LinkClass("attach", 100 * B, 0.5e-6, "pcie")
    topo = two_level(2, gpus, intra="nvswitch", nic_link=nic, nic_attach=attach, inter="switch")
    b = PlanBuilder(2 * gpus)
    for l in range(gpus):
        b.transfer(l, gpus + l, N)
    tl = simulate(b.build(), topo, runtime=MPICH)
    latency = 2 * 0.5e-6 + 2 * LAT
    for op in range(gpus):
        assert math.isclose(tl.end[op] - latency, gpus * N / B, rel_tol=1e-9)
