"""A stack's effective topology (:func:`simcomm.stacks.apply_stack`): the raw cluster's graph with every edge's link
class replaced by the stack's effective one, built in one pass.

Link ids come from the graph's edge order, so the effective graph must list its nodes, adjacencies and edges
exactly as ``networkx.Graph.copy`` of the raw graph would (which is not always the raw graph's own adjacency
order: copy adds each edge from both ends); every float the engine computes on it depends on that.
"""

from __future__ import annotations

import numpy as np
import pytest

from simcomm.stacks import apply_stack, get_stack
from simcomm.topologies.base import Topology
from simcomm.topologies.presets import preset


def _edge_links(g):
    return [(u, v, d["link"]) for u, v, d in g.edges(data=True)]


def test_effective_graph_is_the_copy_of_the_raw_one_with_the_stack_classes():
    raw = preset("dgx1-v100", nodes=3)  # its NVLink hybrid cube mesh joins GPUs out of node order
    copy = raw.graph.copy()
    # the case the order matters in: some node's neighbours come in another order in the copy
    assert any(list(copy.adj[n]) != list(raw.graph.adj[n]) for n in raw.graph)
    stack = get_stack("nccl").with_overrides(reduce_per_byte=2e-10)
    eff = apply_stack(raw, stack)
    g = eff.graph
    assert list(g.nodes) == list(copy.nodes)
    assert all(list(g.adj[n]) == list(copy.adj[n]) for n in copy)
    assert [(u, v) for u, v, _ in _edge_links(g)] == list(copy.edges)
    # one attribute dict per edge, seen from both ends (as add_edges_from makes it), and none shared with the raw graph
    assert all(g.adj[u][v] is g.adj[v][u] and g.adj[u][v] is not raw.graph.adj[u][v] for u, v in g.edges)
    # each edge's class is the stack's derivation of the raw class for its ends
    for (_, _, name), (_, _, raw_name) in zip(_edge_links(g), _edge_links(copy), strict=True):
        assert name.startswith(f"{raw_name}@nccl/") and name in eff.links
    # the rank nodes reduce at the stack's rate on the effective graph only (node attributes are copies)
    r0 = raw.ranks[0]
    assert g.nodes[r0]["gamma"] == 2e-10 and raw.graph.nodes[r0]["gamma"] != 2e-10
    assert all(d["link"] in raw.links for _, _, d in raw.graph.edges(data=True))  # the raw graph untouched
    # what apply_stack gathered while copying (not checked again there) is what the graph says
    eff.validate()
    assert eff.link_names == Topology(eff.name, g, eff.links, eff.ranks, router=eff.router).link_names
    assert [eff.link_endpoints(2 * e) for e in range(g.number_of_edges())] == list(copy.edges)


def _reference_effective(raw, stack):
    """The effective topology made the plain way: ``Graph.copy`` of the raw graph, each edge's class renamed to the
    class apply_stack gave its (class, end kinds), checked by Topology's own validation."""
    eff = apply_stack(raw, stack)
    kinds = dict(raw.graph.nodes(data="kind"))
    renamed = {}
    for (u, v, name), (_, _, raw_name) in zip(_edge_links(eff.graph), _edge_links(raw.graph.copy()), strict=True):
        assert renamed.setdefault((raw_name, kinds[u], kinds[v]), name) == name  # one class per (class, ends)
    copy = raw.graph.copy()
    for u, v, data in copy.edges(data=True):
        data["link"] = renamed[(data["link"], kinds[u], kinds[v])]
    if stack.reduce_per_byte is not None:
        for r in raw.ranks:
            copy.nodes[r]["gamma"] = stack.reduce_per_byte
    return eff, Topology(eff.name, copy, eff.links, eff.ranks, router=raw.router, meta=eff.meta)


@pytest.mark.parametrize("name, nodes", [("dgx-a100-hdr", 64), ("gb200-nvl72", 36), ("aws-p4d", 16),
                                         ("dgx-h100-fat-tree", 16), ("dgx1-v100", 3)])
@pytest.mark.parametrize("stack", ["nccl", "gloo"])
def test_effective_topology_reads_as_the_plain_copy(name, nodes, stack):
    """Every array the engine reads of the effective topology, and routes of random pairs, as on the plain copy."""
    eff, ref = _reference_effective(preset(name, nodes=nodes), get_stack(stack))
    for arr in ("capacity", "latency"):
        assert getattr(eff, arr).tobytes() == getattr(ref, arr).tobytes()
    assert eff.link_names == ref.link_names
    assert eff.link_class_codes[0] == ref.link_class_codes[0]
    assert eff.link_class_codes[1].tobytes() == ref.link_class_codes[1].tobytes()
    assert eff._edge_list == ref._edge_list and eff._edge_ids == ref._edge_ids and eff.node_index == ref.node_index
    assert all(a.tobytes() == b.tobytes() for a, b in zip(eff._pair_keys[:2], ref._pair_keys[:2], strict=True))
    assert eff._machines == ref._machines and eff.gammas().tobytes() == ref.gammas().tobytes()
    rng = np.random.default_rng(7)
    src, dst = rng.integers(0, eff.n_ranks, 3000), rng.integers(0, eff.n_ranks, 3000)
    for a, b in zip(eff.routes(src, dst), ref.routes(src, dst), strict=True):
        assert a.tobytes() == b.tobytes()
    assert [eff.route(a, b) for a, b in zip(src[:50].tolist(), dst[:50].tolist(), strict=True)] == \
        [ref.route(a, b) for a, b in zip(src[:50].tolist(), dst[:50].tolist(), strict=True)]
