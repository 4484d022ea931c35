"""Network overrides of a preset cluster: the network changes, nothing else does.

A user who types ``--inter roce-400g`` or ``--nics-per-node 8`` on a preset means "this machine, with the
network I really have".  :class:`NetworkOverrides` holds what was typed, as typed fields kept on the
Topology (``topology.network``) so that every run can echo them (header, ``assumed:`` line, ``--json``).
:func:`apply_network` rebuilds the preset from the arguments its builder was called with
(:class:`~simcomm.topologies.base.Recipe`), replacing the network's arguments only.  Everything else stays
the preset's: its NVLink domains (GB200 NVL72's 18-tray domain), its host path (PCIe switches, sockets,
host memory, no peer-to-peer), its PCIe tree, its GPU devices, and what the preset set after building
(the host CPU NCCL sees, a CPU server rank's device).

An override that contradicts the machine (an NVLink link class on a PCIe box, more NICs than GPUs, an
oversubscribed rail network) is one error line naming the field, never a silently different machine.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import TYPE_CHECKING

from simcomm.errors import ConfigError, UnknownNameError

if TYPE_CHECKING:
    from simcomm.topologies.base import Topology

__all__ = ["NetworkOverrides", "OVERRIDE_FIELDS", "apply_network"]

#: intranode fabric kind -> link families its links may be (a calibrated or custom class is any)
_INTRA_FAMILIES = {"nvswitch": {"nvswitch", "nvlink"}, "nvlink-mesh": {"nvlink"}, "nvlink-cube-mesh": {"nvlink"},
                   "pcie": {"pcie"}, "pcie-host": {"pcie"}, "shm": {"shm"}}


@dataclass(frozen=True)
class NetworkOverrides:
    """Changes to a two-level preset's network the user named (None keeps the preset's)."""

    inter: str | None = None  # link class of the NICs and the internode network
    intra: str | None = None  # link class inside a node (or an NVLink domain)
    nic: str | None = None  # link class attaching a GPU to its NIC (its PCIe link)
    nics_per_node: int | None = None
    topology: str | None = None  # internode network kind (``simcomm list fabrics``)
    oversubscription: float | None = None  # fat-tree uplink oversubscription

    def given(self) -> dict[str, object]:
        """The fields the user set, in field order."""
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}

    def any(self) -> bool:
        return bool(self.given())

    def label(self) -> str:
        """``inter=ib-ndr, nics_per_node=8`` (empty without overrides): how headers echo them."""
        return ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in self.given().items())


#: the scenario keys that are network overrides (``[network]`` section, ``--inter`` ...)
OVERRIDE_FIELDS = tuple(f.name for f in fields(NetworkOverrides))


def _link(key: str, name: str):
    from simcomm.links import link_class

    try:
        return link_class(name)
    except UnknownNameError as exc:
        raise ConfigError(f"{key}: {exc}") from None


def _check_links(over: NetworkOverrides, args: dict, cluster: str) -> None:
    """Each named link class exists and fits the place it goes (one line naming the field)."""
    from simcomm.links.base import INTRANODE_FAMILIES

    if over.inter is not None:
        lc = _link("inter", over.inter)
        if lc.family in INTRANODE_FAMILIES:
            raise ConfigError(f"inter: {over.inter!r} is a {lc.family} link inside a node; the internode network "
                              f"of cluster {cluster!r} needs a network link class (infiniband, roce, ethernet ...)")
    if over.intra is not None:
        lc = _link("intra", over.intra)
        kind = str(args["intra"])
        allowed = _INTRA_FAMILIES.get(kind, set())
        if lc.family in INTRANODE_FAMILIES - allowed or lc.family not in INTRANODE_FAMILIES | {"custom"}:
            raise ConfigError(f"intra: {over.intra!r} is a {lc.family} link, but cluster {cluster!r} joins the GPUs "
                              f"of a node by {kind} (its links are {' or '.join(sorted(allowed))}); name a "
                              f"{' or '.join(sorted(allowed))} link class, or another cluster")
    if over.nic is not None:
        lc = _link("nic", over.nic)
        if lc.family not in ("pcie", "custom"):
            raise ConfigError(f"nic: {over.nic!r} is a {lc.family} link; a GPU reaches its NIC over PCIe (name a "
                              "pcie link class such as pcie4 or pcie5)")


def _check_nics(over: NetworkOverrides, args: dict, cluster: str) -> None:
    if over.nics_per_node is None:
        return
    counts = args["gpus_per_node"]
    most = max(counts) if isinstance(counts, (list, tuple)) else int(counts)  # type: ignore[arg-type]
    if over.nics_per_node > most:
        raise ConfigError(f"nics_per_node: {over.nics_per_node} NICs per node but cluster {cluster!r} has "
                          f"{most} GPU(s) per node; each GPU sends through one NIC, so more NICs than GPUs would sit idle: "
                          f"give at most {most} (bonded NICs: a faster --inter link class)")
    planes = int(args.get("planes") or 1)  # type: ignore[call-overload]
    if over.nics_per_node % planes:
        raise ConfigError(f"nics_per_node: cluster {cluster!r} has {planes} network planes, which must divide "
                          f"the NICs per node ({over.nics_per_node}); give a multiple of {planes}")


def _network_args(over: NetworkOverrides, args: dict) -> dict:
    """The builder's network arguments with the overrides in place (only those)."""
    out: dict = {}
    inter = over.topology or args["inter"]
    opts = dict(args.get("inter_options") or {}) if inter == args["inter"] else {}  # type: ignore[call-overload]
    if over.oversubscription is not None:
        if over.topology is None and args["inter"] == "switch":
            inter, opts = "fat-tree", {}  # a one-switch network with oversubscribed uplinks is a two-level fat-tree
        if inter != "fat-tree":
            raise ConfigError(f"oversubscription: applies to topology fat-tree only, not {inter!r} (add --topology "
                              "fat-tree to change the network kind too)")
        opts["oversubscription"] = over.oversubscription
    if inter != args["inter"] or opts != (args.get("inter_options") or {}):
        out.update(inter=inter, inter_options=opts)
    for key, arg in (("inter", "nic_link"), ("intra", "intra_link"), ("nic", "nic_attach"),
                     ("nics_per_node", "nics_per_node")):
        if getattr(over, key) is not None:
            out[arg] = getattr(over, key)
    return out


def apply_network(base: Topology, over: NetworkOverrides, cluster: str) -> Topology:
    """``base`` (a two-level preset) with its network changed by ``over`` and everything else kept.

    The cluster is rebuilt from ``base.recipe`` with only the network arguments replaced; the ``meta`` keys
    the preset added after building (its host CPU, a server rank) and every rank's reduction cost (a CPU
    server's device) are carried over, so the machine is the preset's.  Returns ``base`` unchanged when
    ``over`` changes nothing.
    """
    if not over.any():
        return base
    recipe = base.recipe
    if recipe is None or recipe.builder != "two-level":
        raise ConfigError(f"{'/'.join(over.given())}: cluster {cluster!r} is not a two-level preset; network "
                          "overrides apply to two-level presets only")
    args = dict(recipe.args)
    _check_links(over, args, cluster)
    _check_nics(over, args, cluster)
    from simcomm.topologies.two_level import two_level

    topo = two_level(**{**args, **_network_args(over, args)})  # type: ignore[arg-type]
    topo.meta.update({k: v for k, v in base.meta.items() if k not in recipe.meta_keys})
    nodes = topo.graph.nodes
    for mine, theirs in zip(topo.ranks, base.ranks, strict=False):  # the same ranks, node-major: a server's own device
        if "gamma" in base.graph.nodes[theirs]:
            nodes[mine]["gamma"] = base.graph.nodes[theirs]["gamma"]
    topo.network = over
    return topo


def override_line(cluster: str, topo: Topology) -> str:
    """The ``assumed:`` line of a preset run with network overrides: what was given and what was kept."""
    meta = topo.meta
    kept = []
    domain = meta.get("nvlink_domain")
    if domain:  # a size, or the nodes of each domain in order (racks of unequal fill)
        kept.append(f"NVLink domains of {' + '.join(map(str, domain)) if isinstance(domain, (tuple, list)) else domain} "
                    "nodes")
    if meta.get("host"):
        host = meta["host"]
        kept.append(f"host path ({host['pcie_switches']} PCIe switch(es), {host['sockets']} socket(s)"
                    f"{', no GPU peer-to-peer' if meta.get('p2p') is False else ''})")
    if meta.get("cpu"):
        kept.append(f"{meta['cpu']} host CPU")
    if meta.get("device"):
        kept.append(f"{meta['device']} devices")
    keeps = f"; kept from the preset: {', '.join(kept)}" if kept else ""
    over = topo.network
    if over.oversubscription is not None and over.topology is None:  # what _network_args adds, said
        keeps += "; oversubscription is a fat-tree's (a preset on one switch gets a two-level fat-tree)"
    return f"network overrides (given): {over.label()} on {cluster}: only the network changes{keeps}"
