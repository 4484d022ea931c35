"""Parameter-server nodes on a cluster: where a server of ``placement own`` runs.

Server ranks are listed in ``topology.meta["server_ranks"]``, after every training rank:

* a preset that declares its own (``seed004-ps``) keeps them;
* other presets are built with more machines, whose first ranks serve (:func:`first_ranks_of_machines`);
* a cluster file (or a ready-made topology) gets each missing server as a new machine with one CPU rank
  (Haswell-class γ) wired to the network exactly as training rank 0 is (:func:`attach_servers`).
"""

from __future__ import annotations

from simcomm.errors import ConfigError
from simcomm.topologies.base import ShortestPathRouter, Topology

__all__ = ["attach_servers", "first_ranks_of_machines"]


def first_ranks_of_machines(topo: Topology, start: int, count: int) -> tuple[int, ...]:
    """The first rank of each of the first ``count`` machines whose ranks begin at ``start`` (a grown preset's
    extra machines: one server per machine)."""
    firsts: dict = {}
    for r in range(start, topo.n_ranks):
        firsts.setdefault(topo.machine_of(r) if topo.machine_of(r) is not None else ("r", r), r)
    return tuple(firsts.values())[:count]


def _path_to_switch(topo: Topology) -> list:
    """Rank 0's path to the first network switch it reaches over intranode links and NICs (never another rank).

    Breadth-first over node index order, so the same file gives the same path; a file whose rank 0 reaches
    no such switch (ranks wired only to each other) is refused in one line.
    """
    from simcomm.links.base import INTRANODE_FAMILIES

    g0, r0 = topo.graph, topo.ranks[0]
    idx = topo.node_index
    net = {name: lc.family not in INTRANODE_FAMILIES for name, lc in topo.links.items()}
    parent, queue, hit = {r0: None}, [r0], None
    while queue and hit is None:
        here = queue.pop(0)
        for n in sorted(g0.adj[here], key=idx.__getitem__):
            kind, link = g0.nodes[n]["kind"], g0.edges[here, n]["link"]
            if n in parent or kind == "rank":
                continue
            if net[link] and kind == "switch":
                parent[n], hit = here, n
                break
            if not net[link] or kind == "nic":
                parent[n] = here
                queue.append(n)
    if hit is None:
        raise ConfigError(f"cluster {topo.name!r}: placement 'own' needs a network switch to attach a "
                          f"parameter-server node to, and rank 0 ({r0!r}) reaches none without crossing another "
                          "rank; add a switch or use --placement colocated")
    path = [hit]
    while parent[path[-1]] is not None:
        path.append(parent[path[-1]])
    path.reverse()  # r0, ..., hit
    return path


def attach_servers(topo: Topology, need: int) -> Topology:
    """``topo`` with ``need`` more server machines, each one CPU rank wired as training rank 0 is.

    Rank 0's path to its first network switch (:func:`_path_to_switch`) is copied for each server, with the
    same link classes, and joined to that switch.  Routing becomes minimum-hop ECMP on the grown graph.
    """
    from simcomm.topologies.devices import device_gamma

    path = _path_to_switch(topo)
    hit, g0 = path[-1], topo.graph
    g = g0.copy()
    machines = [d.get("machine") for _, d in g.nodes(data=True) if isinstance(d.get("machine"), int)]
    new_m = max(machines, default=-1) + 1
    servers = list(topo.meta.get("server_ranks", ()))
    ranks = list(topo.ranks)
    for k in range(need):
        tag = f"ps-server{k}"
        while any(n == tag or str(n).startswith(tag + "/") for n in g):
            tag += "'"
        names = [tag] + [f"{tag}/{n}" for n in path[1:-1]]
        g.add_node(tag, kind="rank", machine=new_m + k, gamma=device_gamma("haswell", 1))
        for src, copy in zip(path[1:-1], names[1:], strict=False):
            g.add_node(copy, kind=g0.nodes[src]["kind"], machine=new_m + k)
        for a, b2, (u, v) in zip(names, names[1:] + [hit], zip(path, path[1:], strict=False), strict=False):
            g.add_edge(a, b2, link=g0.edges[u, v]["link"])
        servers.append(len(ranks))
        ranks.append(tag)
    return Topology(topo.name, g, dict(topo.links), tuple(ranks), router=ShortestPathRouter(),
                    meta={**topo.meta, "server_ranks": tuple(servers), "servers_attached": need},
                    network=topo.network)
