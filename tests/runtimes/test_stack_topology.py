"""A stack's effective topology (:func:`simcomm.stacks.apply_stack`): the raw cluster's graph with every edge's link
class replaced by the stack's effective one, built in one pass.

Link ids come from the graph's edge order, so the effective graph must list its nodes, adjacencies and edges
exactly as ``networkx.Graph.copy`` of the raw graph would (which is not always the raw graph's own adjacency
order: copy adds each edge from both ends); every float the engine computes on it depends on that.
"""

from __future__ import annotations

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
