"""``Topology.pair_counts``: links crossed by every pair within groups, counted by classes, equal the routed
counts bit for bit (two-level clusters on a hub over rail fabrics with destination routing), and the routed
fallback elsewhere."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simcomm.collectives.pairs import all_pairs
from simcomm.topologies import preset
from simcomm.topologies.two_level import two_level


def _routed(topo, rows):
    src, dst = all_pairs(rows)
    return np.bincount(topo._routes_one_by_one(src, dst)[1], minlength=len(topo.capacity))


@settings(max_examples=40, deadline=None)
@given(nodes=st.integers(1, 30), gpn=st.integers(1, 8), nics=st.sampled_from([1, 2, 4, 8]),
       per_leaf=st.integers(1, 7), spines=st.one_of(st.none(), st.integers(1, 5)),
       intra=st.sampled_from(["nvswitch", "shm"]), domain=st.sampled_from([1, 2]), data=st.data())
def test_class_counts_equal_the_routed_counts(nodes, gpn, nics, per_leaf, spines, intra, domain, data):
    nics = min(nics, gpn)
    if gpn % nics or (domain > 1 and intra != "nvswitch"):
        domain = 1
    opts = {"nodes_per_leaf": per_leaf, "routing": "d-mod-k"}
    if spines is not None:
        opts["spines"] = spines
    topo = two_level(nodes, gpn, intra=intra, nics_per_node=nics, nic_link="ib-hdr", inter="rail",
                     inter_options=opts, nvlink_domain=domain)
    p = topo.n_ranks
    width = data.draw(st.integers(1, min(p, 12)))
    n_rows = data.draw(st.integers(1, 4))
    rng = np.random.default_rng(data.draw(st.integers(0, 1000)))
    rows = np.stack([rng.permutation(p)[:width] for _ in range(n_rows)])
    counted = topo.router.pair_counts(topo, rows)
    assert counted is not None  # the class count ran (no fallback)
    assert counted.dtype == np.int64 and counted.tobytes() == _routed(topo, rows).tobytes()



def _check_random_groups(topo, data, max_width: int) -> None:
    """1-3 random groups of up to ``max_width`` members: the class count runs and equals the routed count."""
    p = topo.n_ranks
    width = data.draw(st.integers(1, min(p, max_width)))
    rng = np.random.default_rng(data.draw(st.integers(0, 1000)))
    rows = np.stack([rng.permutation(p)[:width] for _ in range(data.draw(st.integers(1, 3)))])
    counted = topo.router.pair_counts(topo, rows)
    assert counted is not None and counted.tobytes() == _routed(topo, rows).tobytes()

@pytest.mark.parametrize("nodes", [2, 21, 41])
def test_pxn_blocks_on_the_superpod_preset(nodes):
    topo = preset("dgx-a100-hdr", nodes=nodes, gpus_per_node=8)
    members = np.arange(topo.n_ranks).reshape(nodes, 8)
    for rows in (members, members.T):
        assert topo.pair_counts(rows).tobytes() == _routed(topo, rows).tobytes()


@settings(max_examples=25, deadline=None)
@given(nodes=st.integers(1, 12), gpn=st.integers(1, 8), nics=st.sampled_from([1, 2, 8]), data=st.data())
def test_class_counts_on_one_switch_equal_the_routed_counts(nodes, gpn, nics, data):
    topo = two_level(nodes, gpn, intra="nvswitch", nics_per_node=min(nics, gpn), inter="switch")
    _check_random_groups(topo, data, 10)


@settings(max_examples=30, deadline=None)
@given(nodes=st.integers(1, 24), gpn=st.integers(1, 4), nics=st.sampled_from([1, 2, 4]), levels=st.sampled_from([2, 3]),
       k=st.sampled_from([None, 4, 6]), data=st.data())
def test_class_counts_on_fat_trees_equal_the_routed_counts(nodes, gpn, nics, levels, k, data):
    nics = min(nics, gpn)
    opts = {"levels": levels, "routing": "d-mod-k"}
    hosts = nodes * nics
    if k is not None and (k ** 3 // 4 if levels == 3 else k * k // 2) >= hosts:
        opts["k"] = k
    topo = two_level(nodes, gpn, intra="nvswitch", nics_per_node=nics, nic_link="ib-hdr", inter="fat-tree",
                     inter_options=opts)
    _check_random_groups(topo, data, 12)


@pytest.mark.parametrize("inter, opts", [("rail", {"routing": "ecmp"}), ("fat-tree", {"routing": "ecmp"}),
                                         ("torus", {})])
def test_other_fabrics_are_routed_and_counted(inter, opts):
    topo = two_level(6, 4, nics_per_node=4, nic_link="ib-hdr", inter=inter, inter_options=opts)
    rows = np.arange(24).reshape(6, 4).T
    assert topo.router.pair_counts(topo, rows) is None
    assert topo.pair_counts(rows).tobytes() == _routed(topo, rows).tobytes()


@pytest.mark.parametrize("opts", [{"planes": 2}, {"intra": "pcie"}, {"intra": "nvlink-mesh"}])
def test_clusters_the_class_count_leaves_out_are_routed_and_counted(opts):
    # PXN relays between planes, PCIe ports shared by peers and the NIC, NVLink meshes: routed and counted
    topo = two_level(5, 4, nics_per_node=4, nic_link="ib-hdr", inter="rail", **opts)
    rows = np.arange(20).reshape(5, 4)
    for r in (rows, rows.T, rows[:, ::-1]):
        assert topo.router.pair_counts(topo, r) is None
        assert topo.pair_counts(r).tobytes() == _routed(topo, r).tobytes()
