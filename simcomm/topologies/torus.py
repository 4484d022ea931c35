"""2-D and 3-D tori (any number of dimensions) with dimension-order routing.

Position ``x`` (mixed radix, first dimension fastest) joins ``x +- 1`` in
each dimension with wrap-around; a dimension of size 2 has a single link and
of size 1 none.  Dimension-order routing corrects the first dimension, then
the second, ..., each along the shorter way round (ties go the positive way),
so routes are deterministic and deadlock-free orderings are respected.

Standalone, the torus is a *direct* network: each rank is its own router (as
in TPU or BlueGene tori) and forwards traffic for others.  Inside
:func:`~simcomm.topologies.two_level.two_level` each node's NIC hangs off a
router switch instead, so the ranks of a node share the NIC link.
"""

from __future__ import annotations

import math

import networkx as nx

from simcomm.errors import ConfigError
from simcomm.links.base import LinkClass
from simcomm.topologies.base import DEFAULT_GAMMA, TOPOLOGIES, Topology
from simcomm.topologies.fabric import add_link, positive_int, rank_graph, standalone

__all__ = ["torus", "add_torus", "TorusFabric", "check_dims"]


def check_dims(dims: object) -> tuple[int, ...]:
    if isinstance(dims, int) and not isinstance(dims, bool):
        dims = (dims,)
    if not isinstance(dims, (tuple, list)) or not dims:
        raise ConfigError(f"torus: dims must be a list of sizes such as [4, 4], got {dims!r}")
    return tuple(positive_int(d, "torus: each dimension") for d in dims)


class TorusFabric:
    """Dimension-order shortest-way routes on a torus of routers."""

    def __init__(self, hosts: list, routers: list, dims: tuple[int, ...], direct: bool):
        self.hosts, self.routers, self.dims, self.direct = hosts, routers, dims, direct
        self.stride = [math.prod(dims[:d]) for d in range(len(dims))]

    def router_path(self, i: int, j: int) -> list[int]:
        out, here = [i], i
        for d, n in enumerate(self.dims):
            s = self.stride[d]
            xi, xj = (here // s) % n, (j // s) % n
            delta = (xj - xi) % n
            step = 1 if delta <= n - delta else -1
            for _ in range(delta if step == 1 else n - delta):
                xi_new = (((here // s) % n) + step) % n
                here += (xi_new - (here // s) % n) * s
                out.append(here)
        return out

    def path(self, i: int, j: int, key: int) -> list:
        nodes = [self.routers[r] for r in self.router_path(i, j)]
        return nodes if self.direct else [self.hosts[i], *nodes, self.hosts[j]]


def add_torus(g: nx.Graph, hosts: list, host_link: LinkClass | None, links: dict, *, dims,
              link: str | LinkClass | None = None, prefix: str = "t") -> TorusFabric:
    """Add a torus for ``hosts``; ``host_link=None`` makes the hosts the routers (direct)."""
    dims = check_dims(dims)
    size = math.prod(dims)
    if len(hosts) > size:
        raise ConfigError(f"torus: {len(hosts)} hosts do not fit dims {list(dims)} ({size} positions)")
    direct = host_link is None
    lc = add_link(links, link if link is not None else host_link)
    if direct:
        if len(hosts) != size:
            raise ConfigError(f"torus: a direct torus needs exactly {size} ranks")
        routers = list(hosts)
    else:
        routers = [f"{prefix}{r}" for r in range(size)]
        g.add_nodes_from(routers, kind="switch", machine=None)
        g.add_edges_from(((hn, routers[i]) for i, hn in enumerate(hosts)), link=host_link.name)
    stride = [math.prod(dims[:d]) for d in range(len(dims))]
    edges = []
    for r in range(size):
        for d, n in enumerate(dims):
            if n > 1:
                x = (r // stride[d]) % n
                nb = r + (((x + 1) % n) - x) * stride[d]
                if not (n == 2 and x == 1):  # size 2: one link, not a doubled pair
                    edges.append((routers[r], routers[nb]))
    g.add_edges_from(edges, link=lc.name)
    return TorusFabric(hosts, routers, dims, direct)


@TOPOLOGIES.register('torus', summary='builder: 2-D/3-D torus, dimension-order routing',
                     reference='docs/topologies.md')
def torus(dims=(4, 4), link: str | LinkClass = "nvlink4", *, gamma: float = DEFAULT_GAMMA) -> Topology:
    """A direct torus with one rank per position."""
    dims = check_dims(dims)
    n = math.prod(dims)
    links: dict = {}
    g, names = rank_graph(n, gamma)
    fab = add_torus(g, names, None, links, dims=dims, link=link)
    lc_name = link if isinstance(link, str) else link.name
    return standalone("torus-" + "x".join(map(str, dims)), g, links, names, fab,
                      {"builder": "torus", "dims": list(dims), "link": lc_name})
