"""Dragonfly (Kim, Dally, Scott, Abts, ISCA 2008) with minimal routing.

``groups`` groups of ``routers_per_group`` routers; the routers of a group are
joined all-to-all by ``local_link`` (Cray Aries uses a 2-D all-to-all; we
flatten it to one clique), and every pair of groups by exactly one
``global_link``.  Group ``i`` reaches group ``j`` through its router
``gw(i, j) = idx // h`` where ``idx`` is ``j`` (or ``j - 1`` when ``j > i``)
and ``h = ceil((groups-1)/routers_per_group)`` is the number of global ports
per router ("consecutive" arrangement).  Minimal routing: local hop to the
gateway if needed, the global link, local hop to the destination router if
needed, so at most local-global-local.  Hosts ``hosts_per_router`` per router,
placed in order.
"""

from __future__ import annotations

import math

import networkx as nx

from simcomm.links.base import LinkClass
from simcomm.topologies.base import DEFAULT_GAMMA, TOPOLOGIES, Topology
from simcomm.topologies.fabric import add_link, positive_int, rank_graph, standalone

__all__ = ["dragonfly", "add_dragonfly", "DragonflyFabric"]


class DragonflyFabric:
    """Minimal (at most local, global, local) routes from router coordinates."""

    def __init__(self, hosts: list, groups: int, a: int, p: int, h: int, routers: list):
        self.hosts, self.groups, self.a, self.p, self.h, self.routers = hosts, groups, a, p, h, routers

    def gateway(self, i: int, j: int) -> int:
        """Router (within group ``i``) that holds the global link to group ``j``."""
        return (j if j < i else j - 1) // self.h

    def path(self, i: int, j: int, key: int) -> list:
        a, rt = self.a, self.routers
        ri, rj = i // self.p, j // self.p  # global router indices
        gi, gj = ri // a, rj // a
        out = [self.hosts[i], rt[ri]]
        if gi != gj:
            gw_i, gw_j = gi * a + self.gateway(gi, gj), gj * a + self.gateway(gj, gi)
            if gw_i != ri:
                out.append(rt[gw_i])
            out.append(rt[gw_j])
            if gw_j != rj:
                out.append(rt[rj])
        elif ri != rj:
            out.append(rt[rj])
        out.append(self.hosts[j])
        return out


def add_dragonfly(g: nx.Graph, hosts: list, host_link: LinkClass, links: dict, *, groups: int | None = None,
                  routers_per_group: int = 4, hosts_per_router: int = 2,
                  local_link: str | LinkClass | None = None,
                  global_link: str | LinkClass | None = None) -> DragonflyFabric:
    """Add routers, local and global links for ``hosts``; ``groups`` defaults to just enough."""
    a = positive_int(routers_per_group, "dragonfly: routers_per_group")
    p = positive_int(hosts_per_router, "dragonfly: hosts_per_router")
    need = math.ceil(len(hosts) / (a * p))
    ng = need if groups is None else positive_int(groups, "dragonfly: groups")
    if ng < need:
        from simcomm.errors import ConfigError
        raise ConfigError(f"dragonfly: {len(hosts)} hosts do not fit {ng} groups x {a} routers x {p} hosts")
    loc = add_link(links, local_link if local_link is not None else host_link)
    glo = add_link(links, global_link if global_link is not None else loc)
    h = max(1, math.ceil((ng - 1) / a))
    routers = [f"rt{r // a}.{r % a}" for r in range(ng * a)]
    g.add_nodes_from(routers, kind="switch", machine=None)
    g.add_edges_from(((hn, routers[i // p]) for i, hn in enumerate(hosts)), link=host_link.name)
    g.add_edges_from(((routers[gr * a + x], routers[gr * a + y]) for gr in range(ng)
                      for x in range(a) for y in range(x + 1, a)), link=loc.name)
    fab = DragonflyFabric(hosts, ng, a, p, h, routers)
    g.add_edges_from(((routers[i * a + fab.gateway(i, j)], routers[j * a + fab.gateway(j, i)])
                      for i in range(ng) for j in range(i + 1, ng)), link=glo.name)
    return fab


@TOPOLOGIES.register('dragonfly', summary='builder: groups of all-to-all routers, one global link per group pair, minimal routing',
                     reference='Kim, Dally, Scott, Abts, ISCA 2008')
def dragonfly(groups: int, routers_per_group: int, hosts_per_router: int, *,
              local_link: str | LinkClass = "aries", global_link: str | LinkClass = "aries",
              host_link: str | LinkClass | None = None, gamma: float = DEFAULT_GAMMA) -> Topology:
    """A dragonfly whose every host port holds a rank."""
    n = positive_int(groups, "dragonfly: groups") * positive_int(routers_per_group, "dragonfly: routers_per_group") \
        * positive_int(hosts_per_router, "dragonfly: hosts_per_router")
    links: dict = {}
    hl = add_link(links, host_link if host_link is not None else local_link)
    g, names = rank_graph(n, gamma)
    fab = add_dragonfly(g, names, hl, links, groups=groups, routers_per_group=routers_per_group,
                        hosts_per_router=hosts_per_router, local_link=local_link, global_link=global_link)
    meta = {"builder": "dragonfly", "groups": groups, "routers_per_group": routers_per_group,
            "hosts_per_router": hosts_per_router, "global_ports_per_router": fab.h}
    return standalone(f"dragonfly-{groups}x{routers_per_group}x{hosts_per_router}", g, links, names, fab, meta)
