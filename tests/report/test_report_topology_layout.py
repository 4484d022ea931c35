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
    from simcomm.report.topology_plot import dragonfly_groups, draw_topology
    from simcomm.topologies import dragonfly

    topo = dragonfly(4, 3, 2)
    groups = dragonfly_groups(topo)
    assert list(groups) == [0, 1, 2, 3] and all(len(rs) == 3 for rs in groups.values())
    assert dragonfly_groups(__import__("simcomm.topologies", fromlist=["fat_tree"]).fat_tree(4)) == {}
    out = tmp_path / "df.png"
    draw_topology(topo, out)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_fat_tree_switches_stay_together_by_pod():
    """Each pod's edge and aggregation switches occupy one contiguous stretch of their layer, pods not interleaved."""
    from simcomm.report.topology_plot import pod_of

    topo = preset("dgx-h100-fat-tree", nodes=8)
    pos, _ = layout(topo)
    assert pod_of("edge3.1") == 3 and pod_of("agg0.2") == 0 and pod_of("core1.0") is None and pod_of("m0.nvsw") is None
    for layer in {pos[n][1] for n in pos if pod_of(n) is not None}:
        row = sorted((pos[n][0], pod_of(n)) for n in pos if pos[n][1] == layer and pod_of(n) is not None)
        pods = [pod for _, pod in row]
        # contiguous: once a pod's run ends it never reappears
        runs = [p for i, p in enumerate(pods) if i == 0 or pods[i - 1] != p]
        assert len(runs) == len(set(runs)) > 1


def test_link_classes_get_distinct_styles_and_a_torus_its_grid(tmp_path):
    from simcomm.report.topology_plot import link_styles, torus_coordinates
    from simcomm.topologies.torus import torus

    topo = preset("dgx-h100-ndr", nodes=2)
    styles = link_styles(topo)
    assert set(styles) == {name for _, _, name in topo.graph.edges(data="link")}
    assert len(set(styles.values())) == len(styles)  # no two classes look alike
    cube = torus((3, 3, 2))
    coords = torus_coordinates(cube)
    assert sorted(coords.values()) == [(x, y, z) for x in range(3) for y in range(3) for z in range(2)]
    assert torus_coordinates(topo) is None
    out = tmp_path / "torus.png"
    draw_topology(cube, out)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
