"""Topology builders, presets and routers (see docs/topologies.md).

:data:`TOPOLOGIES` lists every builder and every preset for ``simcomm list
topologies``; :func:`preset` and :func:`load_topology_file` build them, and
:func:`resolve` turns a CLI argument (a preset name or a file path) into a
:class:`Topology`.
"""

from __future__ import annotations

from pathlib import Path

from simcomm.registry import scan as _scan
from simcomm.topologies.base import TOPOLOGIES, Topology
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

# Builders register themselves (@TOPOLOGIES.register in their module); the package scans itself,
# then lists every preset after them.
_scan(__name__, skip=("base", "presets"))
for _e in PRESETS.entries():
    TOPOLOGIES.add(_e.name, _e.obj, summary="preset: " + _e.summary, reference=_e.reference)


def resolve(target: str, *, nodes: int | None = None, gpus_per_node: int | None = None) -> Topology:
    """A preset name, or the path of a ``.toml``/``.graphml`` file."""
    p = Path(target)
    try:
        is_file = target not in PRESETS and (p.suffix.lower() in (".toml", ".graphml", ".xml") or p.exists())
    except (OSError, ValueError):  # a name too long for a path, or with a NUL byte: a (wrong) preset name
        is_file = False
    if is_file:
        return load_topology_file(p)
    return preset(target, nodes=nodes, gpus_per_node=gpus_per_node)
