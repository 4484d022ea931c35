"""Ring: ``n`` ranks in a cycle (a 1-D torus), routed the shorter way round.

Standalone it is direct (neighbouring ranks share a link, ranks forward), so a
ring all-reduce on it is contention free; ties (exactly half way) go the
positive direction.
"""

from __future__ import annotations

from simcomm.links.base import LinkClass
from simcomm.topologies.base import DEFAULT_GAMMA, TOPOLOGIES, Topology
from simcomm.topologies.fabric import positive_int
from simcomm.topologies.torus import torus

__all__ = ["ring"]


@TOPOLOGIES.register('ring', summary='builder: bidirectional ring, shortest-direction routing',
                     reference='docs/topologies.md')
def ring(n: int, link: str | LinkClass = "nvlink4", *, gamma: float = DEFAULT_GAMMA) -> Topology:
    """``n`` ranks on a bidirectional ring of ``link`` links."""
    topo = torus((positive_int(n, "ring: n"),), link, gamma=gamma)
    topo.name = f"ring-{n}"
    topo.meta = {"builder": "ring", "ranks": n, "link": link if isinstance(link, str) else link.name}
    return topo
