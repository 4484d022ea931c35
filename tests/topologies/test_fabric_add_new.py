"""fabric.add_new_nodes/add_new_edges build the graph networkx's add_nodes_from/add_edges_from build."""

import networkx as nx
import pytest

from simcomm.topologies.fabric import add_new_edges, add_new_nodes, add_new_nodes_data


def _state(g: nx.Graph):
    """Everything order-sensitive about ``g``: nodes with attributes, each node's neighbours in order with data."""
    return list(g.nodes(data=True)), [(u, list(nbrs.items())) for u, nbrs in g.adjacency()]


def _ours(g, op, items, **attrs):
    if op == "nodes":
        add_new_nodes(g, items, **attrs)
    elif op == "node data":
        add_new_nodes_data(g, items)
    else:
        add_new_edges(g, items, attrs["link"])


def _networkx(g, op, items, **attrs):
    (g.add_edges_from(items, **attrs) if op == "edges" else g.add_nodes_from(items, **attrs))


STEPS = (
    ("nodes", ["a", "b", "c"], {"kind": "rank", "machine": 0}),
    ("nodes", ["b", "d"], {"kind": "switch"}),  # "b" is present: its attributes updated in place, order kept
    ("node data", [("g", {"kind": "nic"}), ("a", {"gamma": 1.0})], {}),  # each its own attributes
    ("edges", [("a", "d"), ("b", "d"), ("c", "c")], {"link": "x"}),  # with a self-loop
    ("edges", [("d", "a"), ("c", "e"), ("f", "a")], {"link": "y"}),  # a joined pair relabelled, missing nodes added
)


@pytest.mark.parametrize("cls", [nx.Graph, nx.DiGraph])
def test_same_graph_as_networkx_new_and_present_nodes_and_edges(cls):
    ours, theirs = cls(), cls()
    for op, items, attrs in STEPS:
        _ours(ours, op, items, **attrs)
        _networkx(theirs, op, items, **attrs)
    assert _state(ours) == _state(theirs)
    if cls is nx.Graph:  # one attribute dict per edge, seen from both ends, as networkx keeps it
        assert ours.adj["a"]["d"] is ours.adj["d"]["a"] and ours.adj["a"]["d"] == {"link": "y"}
        assert ours.nodes["b"] == {"kind": "switch", "machine": 0}
        assert ours.nodes["a"] == {"kind": "rank", "machine": 0, "gamma": 1.0}


def test_none_is_refused_as_networkx_refuses_it():
    with pytest.raises(ValueError):
        add_new_nodes(nx.Graph(), [None])
