"""Draw a topology with matplotlib (Agg): every node for small graphs, aggregated for large.

Each kind is laid out as what it is.  A dragonfly: groups on a circle, each
group's routers on a small circle with bold local links, thin global links
between groups.  A torus: its routers on the grid of their coordinates (a 3-D
torus as its z-slices side by side), wrap-around links as dashed stubs, hosts
beside their router.  Other small graphs (up to 300 nodes) are drawn node by
node in layers (ranks at the bottom, NICs above them, switches above those),
each node above the mean position of what it connects below; a fat tree's
switches stay together by pod, each pod shaded and named; switches on no route
between ranks (empty fat-tree pods) are left out and counted in the title.
Every drawing has a legend of its link classes (name, family, bandwidth), each
class its own colour and dash, and of its node kinds.  Larger graphs are aggregated: one box per (kind, machine-or-fabric)
level with the number of nodes and a line per link class between levels, so
a 16 384-rank cluster still gives a readable picture.
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from simcomm.report.png import save_png
from simcomm.topologies.base import Topology  # noqa: E402

__all__ = ["draw_topology", "layout", "dragonfly_groups", "link_styles", "pod_of", "torus_coordinates"]

_FAMILY_COLOR = {"nvlink": "tab:green", "nvswitch": "tab:green", "pcie": "tab:orange", "infiniband": "tab:blue",
                 "roce": "tab:cyan", "ethernet": "tab:red", "aries": "tab:purple", "shm": "tab:brown",
                 "custom": "tab:gray"}
_LEVEL = {"rank": 0, "nic": 1, "switch": 2}
_DASHES = ("-", "--", ":", "-.")
_POD = re.compile(r"^(?:edge|agg)(\d+)\.\d+$")


def link_styles(topo: Topology) -> dict[str, tuple[str, str]]:
    """Link class -> (colour, dash): the family's colour, and a different dash for each class of one family."""
    used = sorted({name for _, _, name in topo.graph.edges(data="link")})
    seen: Counter = Counter()
    out = {}
    for name in used:
        family = topo.links[name].family
        out[name] = (_FAMILY_COLOR.get(family, "gray"), _DASHES[seen[family] % len(_DASHES)])
        seen[family] += 1
    return out


def _legend(ax, topo: Topology, styles: dict[str, tuple[str, str]]) -> None:
    """One legend entry per link class (name, family, bandwidth) and per node kind drawn."""
    for name, (colour, dash) in styles.items():
        lc = topo.links[name]
        ax.plot([], [], color=colour, linestyle=dash, lw=1.5, label=f"{name} ({lc.family}, {lc.bandwidth / 1e9:.4g} GB/s)")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False)


def pod_of(node) -> int | None:
    """The pod of a 3-level fat tree's edge or aggregation switch (``edgeP.I``, ``aggP.I``), else None."""
    m = _POD.match(str(node))
    return int(m.group(1)) if m else None


def _switch_depth(topo: Topology) -> dict:
    """Switch layer = 2 + (BFS distance from the nearest non-switch node - 1)."""
    g = topo.graph
    depth = {n: _LEVEL[d] for n, d in g.nodes(data="kind") if d != "switch"}
    frontier = list(depth)
    while frontier:
        nxt = []
        for n in frontier:
            for m in g.adj[n]:
                if m not in depth:
                    depth[m] = max(2, depth[n] + 1)
                    nxt.append(m)
        frontier = nxt
    return depth


def _routed_nodes(topo: Topology, max_pairs: int = 4096) -> set:
    """Nodes on the routes between ranks (every ordered pair, or a deterministic sample).

    Switches on no route (e.g. the empty pods of a fat tree sized for more hosts)
    carry no traffic, so the drawing leaves them out.
    """
    n = topo.n_ranks
    pairs = [(a, b) for a in range(n) for b in range(n) if a != b]
    if len(pairs) > max_pairs:  # every rank to a spread of others: still reaches every used switch in practice
        step = max(1, len(pairs) // max_pairs)
        pairs = pairs[::step]
    used = set()
    for a, b in pairs:
        used.update(topo.path(a, b))
    return used


def layout(topo: Topology) -> tuple[dict, int]:
    """``(node -> (x, layer), idle switches left out)`` for the node-by-node drawing.

    Ranks sit evenly in rank order; every higher layer is ordered by the mean x of
    each node's neighbours below (barycentre) and then spread evenly, so a node
    sits roughly above what it connects and edges cross less than in insertion order.
    """
    g, depth = topo.graph, _switch_depth(topo)
    used = _routed_nodes(topo) if topo.n_ranks > 1 else set(g.nodes)
    keep = [n for n in g.nodes if n in used or g.nodes[n].get("kind") != "switch"]
    rows = defaultdict(list)
    for n in keep:
        rows[depth.get(n, 2)].append(n)
    rank_at = {r: i for i, r in enumerate(topo.ranks)}
    pos = {}
    for y in sorted(rows):
        if y == 0:
            order = sorted(rows[y], key=lambda n: (rank_at.get(n, len(rank_at)), str(n)))
        else:
            def bary(n, y=y):
                xs = [pos[m][0] for m in g.adj[n] if m in pos and pos[m][1] < y]
                return sum(xs) / len(xs) if xs else 0.5
            # a fat tree's switches stay together by pod: pods in the order of their members' mean position
            centre: dict = defaultdict(list)
            for n in rows[y]:
                if pod_of(n) is not None:
                    centre[pod_of(n)].append(bary(n))
            def group_centre(n, centre=centre, bary=bary):
                pod = pod_of(n)
                return bary(n) if pod is None else sum(centre[pod]) / len(centre[pod])
            order = sorted(rows[y], key=lambda n: (group_centre(n), bary(n), str(n)))
        for i, n in enumerate(order):
            pos[n] = ((i + 0.5) / len(order), y)
    return pos, g.number_of_nodes() - len(keep)


def _draw_full(ax, topo: Topology) -> int:
    """Draw every routed node in layers; returns how many idle switches were left out."""
    g = topo.graph
    pos, idle = layout(topo)
    styles = link_styles(topo)
    pods: dict = defaultdict(list)
    for n, (x, y) in pos.items():
        if pod_of(n) is not None:
            pods[pod_of(n)].append((x, y))
    for pod, pts in sorted(pods.items()):
        xs, ys = [p[0] for p in pts], [p[1] for p in pts]
        ax.add_patch(matplotlib.patches.Rectangle((min(xs) - 0.01, min(ys) - 0.3), max(xs) - min(xs) + 0.02,
                                                  max(ys) - min(ys) + 0.6, facecolor="0.93", edgecolor="0.7", zorder=0))
        ax.text((min(xs) + max(xs)) / 2, max(ys) + 0.32, f"pod {pod}", ha="center", va="bottom", fontsize=7)
    for u, v, name in g.edges(data="link"):
        if u in pos and v in pos:
            (x0, y0), (x1, y1) = pos[u], pos[v]
            colour, dash = styles[name]
            ax.plot([x0, x1], [y0, y1], color=colour, linestyle=dash, lw=0.6, alpha=0.6)
    _nodes(ax, g, pos)
    ax.set_yticks(sorted({y for _, y in pos.values()}))
    _legend(ax, topo, styles)
    return idle


def _nodes(ax, g, pos) -> None:
    for kind, marker in (("rank", "o"), ("nic", "s"), ("switch", "D")):
        pts = [pos[n] for n, k in g.nodes(data="kind") if k == kind and n in pos]
        if pts:
            ax.scatter(*zip(*pts, strict=False), marker=marker, s=18, label=kind, zorder=3)


def torus_coordinates(topo: Topology) -> dict | None:
    """Each torus router's (x, y, z) coordinates, or None when ``topo`` has no torus of at most 3 dimensions."""
    from simcomm.topologies.torus import TorusFabric

    fabric = getattr(topo.router, "fabric", None)
    if not isinstance(fabric, TorusFabric) or len(fabric.dims) > 3:
        return None
    dims = tuple(fabric.dims) + (1,) * (3 - len(fabric.dims))
    return {node: (r % dims[0], (r // dims[0]) % dims[1], r // (dims[0] * dims[1]))
            for r, node in enumerate(fabric.routers)}


def _draw_torus(ax, topo: Topology, coords: dict) -> None:
    """Routers on their grid (z-slices side by side), neighbour links straight, wrap-around links as dashed stubs
    out of each end, links between z-slices faint, hosts beside their router."""
    g = topo.graph
    width = max(x for x, _, _ in coords.values()) + 2.0
    grid = {n: (x + z * width, float(y)) for n, (x, y, z) in coords.items()}
    pos = dict(grid)
    frontier, depth = list(grid), 1
    while frontier:  # NICs and ranks hang below-right of the router they attach to, fanned out
        nxt = []
        for r in frontier:
            kids = sorted((m for m in g.adj[r] if m not in pos), key=str)
            for i, m in enumerate(kids):
                pos[m] = (pos[r][0] + 0.18 + 0.12 * i, pos[r][1] - 0.22 * depth / (depth + 1) - 0.08 * i)
                nxt.append(m)
        frontier, depth = nxt, depth + 1
    styles = link_styles(topo)
    for u, v, name in g.edges(data="link"):
        colour, dash = styles[name]
        (x0, y0), (x1, y1) = pos[u], pos[v]
        if u in coords and v in coords and coords[u][2] != coords[v][2]:
            ax.plot([x0, x1], [y0, y1], color=colour, linestyle=dash, lw=0.6, alpha=0.25)  # a z link
            continue
        if u in grid and v in grid and abs(x1 - x0) + abs(y1 - y0) > 1.01:
            # a wrap-around link: a short dashed stub out of each end, pointing away from the other end
            for (xa, ya), (xb, yb) in (((x0, y0), (x1, y1)), ((x1, y1), (x0, y0))):
                dx, dy = (xa > xb) - (xa < xb), (ya > yb) - (ya < yb)
                ax.plot([xa, xa + 0.35 * dx], [ya, ya + 0.35 * dy], color=colour, linestyle="--", lw=0.9)
            continue
        ax.plot([x0, x1], [y0, y1], color=colour, linestyle=dash, lw=1.2 if u in grid and v in grid else 0.5)
    _nodes(ax, g, pos)
    ax.plot([], [], color="black", linestyle="--", lw=0.9, label="wrap-around (dashed stub)")
    if len({z for _, _, z in coords.values()}) > 1:
        ax.plot([], [], color="black", lw=0.6, alpha=0.25, label="z link (slices side by side)")
    ax.set_aspect("equal")
    _legend(ax, topo, styles)


def _draw_aggregated(ax, topo: Topology) -> None:
    g, depth = topo.graph, _switch_depth(topo)
    nodes = Counter((depth.get(n, 2), k) for n, k in g.nodes(data="kind"))
    links = Counter((min(depth[u], depth[v]), max(depth[u], depth[v]), name) for u, v, name in g.edges(data="link"))
    styles = link_styles(topo)
    for i, ((a, b, name), n) in enumerate(sorted(links.items())):
        x = 0.45 + 0.1 * (i % 5)  # one column per link class, in sorted (deterministic) order
        top = b if a != b else a + 0.35
        colour, dash = styles[name]
        ax.plot([x, x], [a, top], color=colour, linestyle=dash, lw=2)
        ax.text(x + 0.01, (a + top) / 2, f"{n} x {name}" + (" (within layer)" if a == b else ""), fontsize=7)
    for (layer, kind), n in sorted(nodes.items()):
        plural = {"switch": "switches"}.get(kind, kind + "s") if n > 1 else kind
        ax.text(0.2, layer, f"{n} {plural} (layer {layer})", ha="center", va="center", fontsize=8,
                bbox={"boxstyle": "round", "fc": "white", "ec": "black"})
    ax.set_xlim(0, 1)
    ax.set_ylim(-0.5, max(d for d, _ in nodes) + 0.6)
    _legend(ax, topo, styles)


_ROUTER = re.compile(r"^rt(\d+)\.(\d+)$")


def dragonfly_groups(topo: Topology) -> dict[int, list]:
    """Group -> its routers (``rtG.R`` switches of a dragonfly), empty when the topology has none."""
    out: dict[int, list] = defaultdict(list)
    for n, k in topo.graph.nodes(data="kind"):
        m = _ROUTER.match(str(n)) if k == "switch" else None
        if m:
            out[int(m.group(1))].append((int(m.group(2)), n))
    return {gid: [n for _, n in sorted(rs)] for gid, rs in sorted(out.items())}


def _draw_dragonfly(ax, topo: Topology, groups: dict[int, list]) -> None:
    """Groups on a circle, each group's routers on a small circle of its own, hosts outside their router.

    A dragonfly's structure is its groups: all-to-all local links inside each group
    (drawn bold) and one global link per group pair (drawn thin, between groups).
    """
    g = topo.graph
    pos: dict = {}
    heading: dict = {}  # direction a node's hosts fan out in: away from its group's centre
    ng = len(groups)
    for gi, routers in enumerate(groups.values()):
        ga = 2 * math.pi * gi / ng
        cx, cy = math.cos(ga), math.sin(ga)
        for ri, r in enumerate(routers):
            ra = ga + 2 * math.pi * ri / max(1, len(routers))
            pos[r] = (cx + 0.22 * math.cos(ra), cy + 0.22 * math.sin(ra))
            heading[r] = ra
    # everything else (NICs, hosts) fans out beyond the router it hangs from
    frontier = list(pos)
    while frontier:
        nxt = []
        for r in frontier:
            kids = sorted((m for m in g.adj[r] if m not in pos), key=str)
            x, y = pos[r]
            for i, m in enumerate(kids):
                a = heading[r] + (i - (len(kids) - 1) / 2) * 0.35
                pos[m] = (x + 0.12 * math.cos(a), y + 0.12 * math.sin(a))
                heading[m] = heading[r]
                nxt.append(m)
        frontier = nxt
    group_of = {r: gid for gid, rs in groups.items() for r in rs}
    styles = link_styles(topo)
    for u, v, name in g.edges(data="link"):
        if u not in pos or v not in pos:
            continue
        colour = styles[name][0]
        both = u in group_of and v in group_of
        local = both and group_of[u] == group_of[v]
        lw, alpha = (1.6, 0.9) if local else (0.5, 0.45) if both else (0.5, 0.6)
        ax.plot([pos[u][0], pos[v][0]], [pos[u][1], pos[v][1]], color="black" if local else colour, lw=lw,
                alpha=alpha)
    for kind, marker in (("rank", "o"), ("nic", "s"), ("switch", "D")):
        pts = [pos[n] for n, k in g.nodes(data="kind") if k == kind and n in pos]
        if pts:
            ax.scatter(*zip(*pts, strict=False), marker=marker, s=18, label=kind, zorder=3)
    for gi, gid in enumerate(groups):
        ga = 2 * math.pi * gi / ng
        ax.text(1.5 * math.cos(ga), 1.5 * math.sin(ga), f"group {gid}", ha="center", va="center", fontsize=8)
    ax.plot([], [], color="black", lw=1.6, label="local (in group)")
    ax.plot([], [], color="gray", lw=0.5, label="global (between groups)")
    ax.set_aspect("equal")
    _legend(ax, topo, styles)


def draw_topology(topo: Topology, path: str | Path, *, max_nodes: int = 300) -> None:
    """Write a PNG of ``topo`` to ``path`` atomically (temp file, then rename)."""
    fig, ax = plt.subplots(figsize=(12, 5))
    try:
        idle = 0
        groups = dragonfly_groups(topo)
        grid = torus_coordinates(topo) if topo.graph.number_of_nodes() <= max_nodes else None
        special = grid is not None or (len(groups) > 1 and topo.graph.number_of_nodes() <= max_nodes)
        if grid is not None:
            _draw_torus(ax, topo, grid)
            ax.set_yticks([])
        elif special:
            _draw_dragonfly(ax, topo, groups)
            ax.set_yticks([])
        elif topo.graph.number_of_nodes() <= max_nodes:
            idle = _draw_full(ax, topo)
        else:
            _draw_aggregated(ax, topo)
        ax.set_title(f"{topo.name}: {topo.n_ranks} ranks" + (f" ({idle} idle switches not drawn)" if idle else ""))
        ax.set_xticks([])
        if not special:
            ax.set_ylabel("layer (0 = ranks)")
        fig.tight_layout()  # makes room for the legend beside the axes
        save_png(fig, path, dpi=100)
    finally:
        plt.close(fig)  # also when drawing failed (save_png closes it after writing)
