"""NCCL Tree's chains inside nodes, reordered once per pattern of the members' NICs
(``tree._node_chains``), are ``chain()`` of every node, array for array; and so are the tree's flows."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simcomm.nccl.algorithms import tree
from simcomm.nccl.channels import chain
from simcomm.nccl.layout import group_layout
from simcomm.topologies.presets import preset
from simcomm.topologies.two_level import two_level

TOPOLOGIES = {
    "dgx-a100-hdr": lambda: preset("dgx-a100-hdr", nodes=6, gpus_per_node=8),
    "dgx1-v100": lambda: preset("dgx1-v100", nodes=3, gpus_per_node=8),  # cube mesh: several ring orders
    "pcie-host": lambda: two_level(3, 4, intra="pcie-host", nics_per_node=2),
    "planes": lambda: two_level(4, 8, nics_per_node=4, planes=2, inter="fat-tree"),
    "uneven": lambda: two_level(4, [8, 8, 4, 8], nics_per_node=2),
    "one-nic": lambda: two_level(5, 4, nics_per_node=1),
}


@settings(max_examples=40, deadline=None)
@given(name=st.sampled_from(sorted(TOPOLOGIES)), seed=st.integers(0, 10_000),
       how=st.sampled_from(["whole", "per machine", "subset"]))
def test_chains_by_nic_pattern_are_each_nodes_chain(name, seed, how):
    topo = TOPOLOGIES[name]()
    rng = np.random.default_rng(seed)
    if how == "whole":
        ranks = tuple(range(topo.n_ranks))
    elif how == "per machine":  # as many members of each machine, other ones and in another order on each
        machine = topo.machines()
        on = [np.flatnonzero(machine == m) for m in range(int(machine.max()) + 1)]
        k = int(rng.integers(1, min(len(x) for x in on) + 1))
        ranks = tuple(int(r) for x in on for r in rng.permutation(rng.choice(x, size=k, replace=False)))
    else:  # a random subset, in a random order (nodes of unequal sizes)
        size = int(rng.integers(2, topo.n_ranks + 1))
        ranks = tuple(int(r) for r in rng.choice(topo.n_ranks, size=size, replace=False))
    layout = group_layout(topo, ranks)
    for c in range(max(1, layout.nics_per_node) + 1):
        want = tree._chain_pairs([chain(layout, node, c) for node in layout.nodes])
        got = tree._node_chains(layout, c)
        for a, b in zip(got, want, strict=True):
            assert a.dtype == b.dtype and a.tobytes() == b.tobytes()


@pytest.mark.parametrize("name", ["dgx-a100-hdr", "planes"])
def test_tree_flows_are_the_reference_chains_flows(name, monkeypatch):
    topo = TOPOLOGIES[name]()
    layout = group_layout(topo, tuple(range(topo.n_ranks)))
    got = tree.Tree()._flows(layout, 1e6)
    monkeypatch.setattr(tree, "_node_chains",
                        lambda layout, c: tree._chain_pairs([chain(layout, node, c) for node in layout.nodes]))
    want = tree.Tree()._flows(layout, 1e6)
    for a, b in zip(got, want, strict=True):
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes()
