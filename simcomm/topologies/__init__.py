"""Topology builders, presets and routers (see docs/topologies.md).

:data:`TOPOLOGIES` lists every builder and every preset for ``simcomm list
topologies``; :func:`preset` and :func:`load_topology_file` build them, and
:func:`resolve` turns a CLI argument (a preset name or a file path) into a
:class:`Topology`.
"""

from __future__ import annotations

from pathlib import Path

from simcomm.registry import Registry
from simcomm.topologies.base import Topology
from simcomm.topologies.custom import load_topology_file
from simcomm.topologies.dragonfly import dragonfly
from simcomm.topologies.fat_tree import fat_tree
from simcomm.topologies.full_mesh import full_mesh
from simcomm.topologies.presets import PRESETS, preset
from simcomm.topologies.ring import ring
from simcomm.topologies.star import star
from simcomm.topologies.torus import torus
from simcomm.topologies.two_level import two_level

__all__ = ["TOPOLOGIES", "PRESETS", "Topology", "preset", "resolve", "load_topology_file", "full_mesh", "star",
           "fat_tree", "dragonfly", "torus", "ring", "two_level"]

TOPOLOGIES: Registry = Registry("topology", "simcomm.topologies")

for _name, _fn, _summary, _ref in (
    ("full-mesh", full_mesh, "builder: a dedicated link between every pair of ranks (contention free)",
     "closed-form exactness reference (docs/topologies.md)"),
    ("star", star, "builder: every rank on one non-blocking switch", "docs/topologies.md"),
    ("fat-tree", fat_tree, "builder: k-ary fat-tree (3 levels) or leaf-spine (2), oversubscription, ECMP",
     "Al-Fares, Loukissas, Vahdat, SIGCOMM 2008"),
    ("dragonfly", dragonfly, "builder: groups of all-to-all routers, one global link per group pair, minimal routing",
     "Kim, Dally, Scott, Abts, ISCA 2008"),
    ("torus", torus, "builder: 2-D/3-D torus, dimension-order routing", "docs/topologies.md"),
    ("ring", ring, "builder: bidirectional ring, shortest-direction routing", "docs/topologies.md"),
    ("two-level", two_level, "builder: M nodes x G ranks, intranode fabric, shared NICs, any internode network",
     "issue 2; docs/topologies.md"),
    ("custom", load_topology_file, "builder: a TOML or GraphML file of nodes, edges and ranks",
     "docs/topologies.md"),
):
    TOPOLOGIES.add(_name, _fn, summary=_summary, reference=_ref)
for _e in PRESETS.entries():
    TOPOLOGIES.add(_e.name, _e.obj, summary="preset: " + _e.summary, reference=_e.reference)


def resolve(target: str, *, nodes: int | None = None, gpus_per_node: int | None = None) -> Topology:
    """A preset name, or the path of a ``.toml``/``.graphml`` file."""
    p = Path(target)
    if target not in PRESETS and (p.suffix.lower() in (".toml", ".graphml", ".xml") or p.exists()):
        return load_topology_file(p)
    return preset(target, nodes=nodes, gpus_per_node=gpus_per_node)
