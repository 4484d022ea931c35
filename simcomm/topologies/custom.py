"""Custom topologies from TOML or GraphML files.

TOML::

    name = "my-cluster"                 # optional
    ranks = ["g0", "g1", "g2", "g3"]     # placement: rank i is node ranks[i]
    [links.my-ib]                        # optional user link classes
    bandwidth = "90Gb/s"
    latency = "1.5us"
    [nodes]                              # node -> kind, or a table
    g0 = "rank"
    sw = "switch"
    g1 = { kind = "rank", machine = 0, gamma = 1e-12 }
    [[edges]]
    a = "g0"
    b = "sw"
    link = "ib-edr"

GraphML: node attribute ``kind`` (rank, nic, switch), optional ``machine``
(int), ``gamma`` (float) and ``rank`` (int: placement; when absent, rank
nodes are placed in file order); edge attribute ``link`` naming a preset.
Routing uses :class:`~simcomm.topologies.base.ShortestPathRouter` (BFS per
destination, ECMP among equal next hops).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from xml.etree.ElementTree import ParseError

import networkx as nx
import tomllib

from simcomm.errors import ConfigError, TopologyError, UnknownNameError
from simcomm.links.base import LINKS, LinkClass, link_class
from simcomm.links.toml_file import parse_link_table
from simcomm.topologies.base import TOPOLOGIES, ShortestPathRouter, Topology

__all__ = ["load_topology_file", "save_topology_toml", "MAX_TOPOLOGY_BYTES"]

#: a topology file larger than this is refused before it is read (64 MiB holds ~10^6 edges)
MAX_TOPOLOGY_BYTES = 64 << 20

_KINDS = ("nic", "rank", "switch")


def _resolve_links(names: set, user: dict[str, LinkClass], where: str) -> dict[str, LinkClass]:
    out = {}
    for n in sorted(names):
        if not isinstance(n, str):
            raise TopologyError(f"{where}: edge link must be a link-class name, got {n!r}")
        if n in user:
            out[n] = user[n]
        elif n in LINKS:
            out[n] = link_class(n)
        else:
            raise UnknownNameError("link class", n, [*LINKS.names(), *user])
    return out


def _node_attrs(name: str, spec, where: str) -> dict:
    if isinstance(spec, str):
        spec = {"kind": spec}
    if not isinstance(spec, dict):
        raise TopologyError(f"{where}: node {name!r} must be a kind string or a table")
    bad = sorted(set(spec) - {"kind", "machine", "gamma"})
    if bad:
        raise TopologyError(f"{where}: node {name!r} has unknown key {bad[0]!r}; valid keys: gamma, kind, machine")
    kind = spec.get("kind")
    if kind not in _KINDS:
        raise TopologyError(f"{where}: node {name!r} has kind {kind!r}; valid choices: {', '.join(_KINDS)}")
    machine = spec.get("machine")
    if machine is not None and (isinstance(machine, bool) or not isinstance(machine, int)):
        raise TopologyError(f"{where}: node {name!r} machine must be an integer")
    gamma = spec.get("gamma", 0.0)
    if isinstance(gamma, bool) or not isinstance(gamma, (int, float)) or not 0 <= gamma < float("inf"):
        raise TopologyError(f"{where}: node {name!r} gamma must be a non-negative number (s/byte)")
    return {"kind": kind, "machine": machine, "gamma": float(gamma)}


def _from_toml(text: str, where: str, stem: str) -> Topology:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{where}: malformed TOML ({exc})") from None
    bad = sorted(set(data) - {"name", "ranks", "links", "nodes", "edges"})
    if bad:
        raise TopologyError(f"{where}: unknown key {bad[0]!r}; valid keys: edges, links, name, nodes, ranks")
    for key in ("nodes", "edges", "ranks"):
        if key not in data:
            raise TopologyError(f"{where}: missing {key!r}")
    user = parse_link_table(data.get("links", {}), where)
    nodes, edges, ranks = data["nodes"], data["edges"], data["ranks"]
    if not isinstance(nodes, dict) or not nodes:
        raise TopologyError(f"{where}: [nodes] must be a non-empty table of node = kind")
    if not isinstance(edges, list) or not all(isinstance(e, dict) for e in edges):
        raise TopologyError(f"{where}: edges must be an array of tables [[edges]] with a, b, link")
    if not isinstance(ranks, list) or not all(isinstance(r, str) for r in ranks):
        raise TopologyError(f"{where}: ranks must be a list of node names")
    g = nx.Graph()
    for n, spec in nodes.items():
        g.add_node(n, **_node_attrs(n, spec, where))
    for i, e in enumerate(edges):
        if set(e) != {"a", "b", "link"}:
            raise TopologyError(f"{where}: edge {i} must have exactly the keys a, b, link")
        for end in (e["a"], e["b"]):
            if not isinstance(end, str) or end not in g:
                raise TopologyError(f"{where}: edge {i} names node {end!r}, which is not in [nodes]")
        if e["a"] == e["b"]:
            raise TopologyError(f"{where}: edge {i} is a self-loop on {e['a']!r}")
        if g.has_edge(e["a"], e["b"]):  # one link per node pair: a second would be silently merged
            raise TopologyError(f"{where}: edge {i} joins {e['a']!r} and {e['b']!r} again; give each pair one "
                                "edge (a faster link is another link class)")
        g.add_edge(e["a"], e["b"], link=e["link"])
    name = data.get("name", stem)
    if not isinstance(name, str):
        raise TopologyError(f"{where}: name must be a string")
    return _finish(name, g, ranks, user, where)


def _from_graphml(path: Path, where: str) -> Topology:
    try:
        g0 = nx.read_graphml(path)
    except (ParseError, nx.NetworkXError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ConfigError(f"{where}: malformed GraphML ({' '.join(str(exc).split())})") from None
    g = nx.Graph()
    placed = []
    for n, data in g0.nodes(data=True):
        rank = data.get("rank")
        attrs = _node_attrs(n, {k: v for k, v in data.items() if k != "rank"}, where)
        g.add_node(n, **attrs)
        if attrs["kind"] == "rank":
            try:
                placed.append((int(rank) if rank is not None else len(placed), n))
            except (TypeError, ValueError):
                raise TopologyError(f"{where}: node {n!r} rank must be an integer, got {rank!r}") from None
    for u, v, data in g0.edges(data=True):
        if u == v:
            raise TopologyError(f"{where}: self-loop on {u!r}")
        g.add_edge(u, v, link=data.get("link"))
    placed.sort()
    if [r for r, _ in placed] != list(range(len(placed))):
        raise TopologyError(f"{where}: rank attributes must number the rank nodes 0..{len(placed) - 1}")
    return _finish(path.stem, g, [n for _, n in placed], {}, where)


def _finish(name: str, g: nx.Graph, ranks: list, user: dict, where: str) -> Topology:
    if not ranks:
        raise TopologyError(f"{where}: no ranks placed")
    missing = [r for r in ranks if r not in g]
    if missing:
        raise TopologyError(f"{where}: rank {missing[0]!r} is not a node")
    links = _resolve_links({d for _, _, d in g.edges(data="link")}, user, where)
    return Topology(name, g, links, tuple(ranks), router=ShortestPathRouter(),
                    meta={"builder": "custom", "file": where})


@TOPOLOGIES.register('custom', summary='builder: a TOML or GraphML file of nodes, edges and ranks',
                     reference='docs/topologies.md')
def load_topology_file(path: str | Path) -> Topology:
    """Read a ``.toml`` or ``.graphml`` topology (any problem is one ``ConfigError`` line)."""
    p = Path(path)
    where = f"topology file {str(p)!r}"
    if p.suffix.lower() not in (".toml", ".graphml", ".xml"):
        raise ConfigError(f"{where}: unknown format {p.suffix!r}; valid choices: .toml, .graphml")
    try:
        st = os.stat(p)  # follows links: a link to /dev/zero is refused like /dev/zero
        if not stat.S_ISREG(st.st_mode):
            raise ConfigError(f"{where}: not a regular file (a directory, device or FIFO)")
        if st.st_size > MAX_TOPOLOGY_BYTES:
            raise ConfigError(f"{where}: {st.st_size:,} bytes; a topology file may be at most "
                              f"{MAX_TOPOLOGY_BYTES:,}")
        if p.suffix.lower() == ".toml":
            return _from_toml(p.read_text(encoding="utf-8"), where, p.stem)
        return _from_graphml(p, where)
    except OSError as exc:
        raise ConfigError(f"{where}: cannot read ({getattr(exc, 'strerror', None) or exc})") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{where}: not UTF-8 text") from None


def save_topology_toml(topo: Topology, path: str | Path) -> None:
    """Write ``topo`` in the TOML format above (preset links by name, others in [links])."""
    def q(s) -> str:
        return '"' + str(s).replace("\\", "\\\\").replace('"', '\\"') + '"'
    lines = [f"name = {q(topo.name)}", "ranks = [" + ", ".join(q(r) for r in topo.ranks) + "]", ""]
    for n, lc in sorted(topo.links.items()):
        if n not in LINKS or LINKS.get(n) != lc:
            lines += [f"[links.{q(n)}]", f"bandwidth = {lc.bandwidth!r}", f"latency = {lc.latency!r}",
                      f"family = {q(lc.family)}", ""]
    lines.append("[nodes]")
    for n, d in topo.graph.nodes(data=True):
        parts = [f"kind = {q(d['kind'])}"]
        if d.get("machine") is not None:
            parts.append(f"machine = {int(d['machine'])}")
        if d.get("gamma"):
            parts.append(f"gamma = {float(d['gamma'])!r}")
        lines.append(f"{q(n)} = {{ {', '.join(parts)} }}")
    for u, v, link in topo.graph.edges(data="link"):
        lines += ["", "[[edges]]", f"a = {q(u)}", f"b = {q(v)}", f"link = {q(link)}"]
    tmp = Path(path).with_suffix(Path(path).suffix + ".tmp")
    tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    tmp.replace(path)
