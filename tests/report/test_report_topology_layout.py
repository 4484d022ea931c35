"""The node-by-node topology drawing: nodes above what they connect, idle switches left out."""

from simcomm.links import LINKS
from simcomm.report.topology_plot import draw_topology, layout
from simcomm.topologies import preset, star


def test_node_switch_sits_above_its_own_ranks_and_empty_pods_are_dropped(tmp_path):
    topo = preset("dgx-h100-fat-tree", nodes=4)
    pos, idle = layout(topo)
    g = topo.graph
    assert idle > 0  # the preset's fat tree has pods with no host at 4 nodes
    assert all(n in pos for n in topo.ranks)
    xs = [pos[r][0] for r in topo.ranks]
    assert xs == sorted(xs)  # ranks left to right in rank order
    # each node-local switch (neighbours: ranks only) lies within the span of its ranks
    local = [n for n, k in g.nodes(data="kind") if k == "switch" and all(g.nodes[m]["kind"] == "rank" for m in g.adj[n])]
    assert local
    for sw in local:
        mine = [pos[r][0] for r in g.adj[sw]]
        assert min(mine) <= pos[sw][0] <= max(mine)
    png = tmp_path / "t.png"
    draw_topology(topo, png)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_star_keeps_every_node():
    topo = star(5, LINKS.get("eth-10g"))
    pos, idle = layout(topo)
    assert idle == 0 and len(pos) == topo.graph.number_of_nodes()


def test_dragonfly_is_drawn_as_groups(tmp_path):
    """A dragonfly's routers are found by group (not laid out as one line of switches) and the PNG is written."""
    from simcomm.report.topology_plot import draw_topology, dragonfly_groups
    from simcomm.topologies import dragonfly

    topo = dragonfly(4, 3, 2)
    groups = dragonfly_groups(topo)
    assert list(groups) == [0, 1, 2, 3] and all(len(rs) == 3 for rs in groups.values())
    assert dragonfly_groups(__import__("simcomm.topologies", fromlist=["fat_tree"]).fat_tree(4)) == {}
    out = tmp_path / "df.png"
    draw_topology(topo, out)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
