"""A Topology reads networkx's dicts directly (validate's placement and kinds, each rank's machine and gamma) and
searches connectivity itself: the same verdicts and values as networkx's views and ``nx.is_connected``, and the same
one-line errors."""

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simcomm.errors import TopologyError
from simcomm.links.base import link_class
from simcomm.topologies.base import Topology, _connected


@st.composite
def graphs(draw):
    n = draw(st.integers(2, 12))
    g = nx.Graph()
    g.add_nodes_from(draw(st.permutations(range(n))))
    g.add_edges_from(draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=20)))
    return g


@settings(max_examples=300, deadline=None)
@given(graphs())
def test_connected_is_networkx_is_connected(g):
    assert _connected(g) == nx.is_connected(g)


def _topology(ranks, kinds=None, edges=(("a", "b"),)):
    g = nx.Graph()
    for n, kind in (kinds or {"a": "rank", "b": "rank"}).items():
        g.add_node(n, **({} if kind is None else {"kind": kind}))
    g.add_edges_from(edges, link="pcie3")
    return Topology("t", g, {"pcie3": link_class("pcie3")}, ranks)


@pytest.mark.parametrize("ranks, kinds, match", [
    (("a", "z"), None, "placement names 'z'"),  # not a node
    (("a", ["b"]), None, r"placement names \['b'\]"),  # not even a node name (unhashable)
    (("a", "b"), {"a": "rank", "b": "nic"}, "placement names 'b'"),  # a node, not a rank
    (("a", "b"), {"a": "rank", "b": None}, "placement names 'b'"),  # a node without a kind
    (("a", "a"), None, "two ranks placed on the same node"),
    (("a", "b"), {"a": "rank", "b": "rank", "c": "router"}, "node 'c' has kind 'router'"),
    (("a", "b"), {"a": "rank", "b": "rank", "c": None}, "node 'c' has kind None"),
])
def test_bad_placements_and_kinds_are_one_line_errors(ranks, kinds, match):
    with pytest.raises(TopologyError, match=match):
        _topology(ranks, kinds, edges=[("a", "b"), ("b", "c")] if kinds and "c" in kinds else [("a", "b")])


def test_a_disconnected_graph_is_refused_with_its_parts():
    with pytest.raises(TopologyError, match=r"disconnected \(2 components\)"):
        _topology(("a", "b"), {"a": "rank", "b": "rank", "c": "switch", "d": "switch"}, edges=[("a", "b"), ("c", "d")])


@pytest.mark.parametrize("name, nodes", [("dgx-a100-hdr", 3), ("dgx1-v100", 2), ("aws-p4d", 2), ("gb200-nvl72", 19),
                                         ("dgx-h100-fat-tree", 2)])
@pytest.mark.parametrize("stack", [None, "nccl", "gloo"])
def test_machines_and_gammas_are_the_node_views(name, nodes, stack):
    from simcomm.stacks import apply_stack, get_stack
    from simcomm.topologies.base import DEFAULT_GAMMA
    from simcomm.topologies.presets import preset

    topo = preset(name, nodes=nodes)
    if stack is not None:
        topo = apply_stack(topo, get_stack(stack))
    g = topo.graph
    machine = dict(g.nodes(data="machine"))
    gamma = dict(g.nodes(data="gamma", default=DEFAULT_GAMMA))
    assert topo._machines == tuple(machine[n] for n in topo.ranks)
    assert topo.gammas().tobytes() == np.array([float(gamma[n]) for n in topo.ranks]).tobytes()
    assert [topo.gamma(r) for r in range(topo.n_ranks)] == [float(gamma[n]) for n in topo.ranks]
