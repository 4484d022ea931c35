"""fabric.copy_relinked is ``Graph.copy`` with each edge's link class renamed (what apply_stack builds the effective
graph with): the same nodes, adjacency order, edges and attributes, each class renamed once per (class, end kinds)
in the order the edges first show it."""

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simcomm.topologies.fabric import copy_relinked

KINDS = ("rank", "nic", "switch", None)  # None: a node without a kind attribute


def _state(g):
    """Everything order-sensitive about ``g``: nodes with attributes, each node's neighbours in order with data."""
    return list(g.nodes(data=True)), [(u, list(nbrs.items())) for u, nbrs in g.adjacency()]


def _reference(src, rename):
    """``src.copy()``, then each edge's class renamed, walking ``copy.edges`` in order; the renames asked."""
    copy, asked, names = src.copy(), [], []
    for u, v, data in copy.edges(data=True):
        key = (data["link"], src.nodes[u].get("kind"), src.nodes[v].get("kind"))
        if key not in asked:
            asked.append(key)
        data["link"] = rename(*key)
        names.append(data["link"])
    return copy, asked, names


@st.composite
def graphs(draw, cls):
    n = draw(st.integers(1, 9))
    g = cls(name="g")
    for i in draw(st.permutations(range(n))):  # nodes in any order, some without a kind, some with more attributes
        kind = draw(st.sampled_from(KINDS))
        g.add_node(f"n{i}", **({} if kind is None else {"kind": kind}), **({"machine": i} if i % 2 else {}))
    pairs = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=24))  # self-loops too
    for a, b in pairs:  # joined in any order: a node's neighbours then come in another order in the copy
        g.add_edge(f"n{a}", f"n{b}", link=draw(st.sampled_from(("x", "y", "z"))),
                   **({"extra": a} if draw(st.booleans()) else {}))
    return g


@pytest.mark.parametrize("cls", [nx.Graph, nx.DiGraph])
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_copy_relinked_is_the_copy_with_renamed_classes(cls, data):
    src = data.draw(graphs(cls))
    before = _state(src)
    asked = []

    def rename(link, ku, kv):
        asked.append((link, ku, kv))
        return f"{link}/{ku}/{kv}"

    g, edges, names = copy_relinked(src, rename)
    ref, ref_asked, ref_names = _reference(src, lambda link, ku, kv: f"{link}/{ku}/{kv}")
    assert type(g) is cls and g.graph == src.graph
    assert _state(g) == _state(ref)
    assert edges == list(ref.edges) and names == ref_names
    assert asked == ref_asked  # once per (class, end kinds), in the order the edges first show it
    assert _state(src) == before  # the source untouched, no attribute dict shared with it
    assert all(g.nodes[n] is not src.nodes[n] for n in src)
    assert all(g.adj[u][v] is not src.adj[u][v] for u, v in src.edges)
    if cls is nx.Graph:  # one attribute dict per edge, seen from both ends
        assert all(g.adj[u][v] is g.adj[v][u] for u, v in g.edges)


def test_copy_relinked_of_a_preset_is_its_copy():
    from simcomm.topologies.presets import preset

    src = preset("dgx1-v100", nodes=3).graph  # its cube mesh joins GPUs out of node order
    g, edges, names = copy_relinked(src, lambda link, ku, kv: f"{link}@{ku}-{kv}")
    ref, _, ref_names = _reference(src, lambda link, ku, kv: f"{link}@{ku}-{kv}")
    assert any(list(ref.adj[n]) != list(src.adj[n]) for n in src)  # the case the order matters in
    assert _state(g) == _state(ref) and edges == list(ref.edges) and names == ref_names
