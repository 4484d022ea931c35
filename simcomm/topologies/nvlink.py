"""NVLink domains that span machines (multi-node NVLink: GB200/GB300 NVL72, NVL36, H100 NVL256).

A *domain* is a set of consecutive machines (compute trays) whose GPUs share
NVSwitches, so NCCL sees them as one node: its topology is fused over the
NVLink clique (``ncclTopoGetSystem`` with MNNVL; ``src/graph/topo.cc``) and its
rings, trees and NVLS run over the clique as over one server.  Racks need not
be full: 32 trays in two NVL72 racks are 18 + 14 (filled in order) or 16 + 16
(the scheduler's choice), and NCCL runs either (``src/init.cc``: nodes are the
cliques, ``minLocalRanks``/``maxLocalRanks`` may differ; docs/nccl.md).

The split is kept on the topology as ``meta["nvlink_domain"]``: an int ``D``
(domains of ``D`` machines filled in order, the last one partial) or a tuple
of machine counts, one per domain (``(18, 14)``).  :func:`domain_split` reads
either; :func:`resolve_split` turns the scenario keys ``nvl_domain`` (GPUs per
domain) and ``nvl_split`` (trays per domain) into it, checking them against
the cluster and the preset's hardware.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from simcomm.errors import ConfigError

__all__ = ["NvlinkSpec", "domain_split", "domain_of_machines", "resolve_split", "nvlink_notes"]


@dataclass(frozen=True)
class NvlinkSpec:
    """The NVLink-domain keys as the user gave them (None / (): the preset's).

    ``domain``: GPUs per NVLink domain (``nvl_domain``); ``split``: machines
    (trays) in each domain, in order (``nvl_split``).
    """

    domain: int | None = None
    split: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if self.domain is not None and (isinstance(self.domain, bool) or not isinstance(self.domain, int)
                                        or self.domain < 1):
            raise ConfigError(f"nvl_domain: {self.domain!r} must be a positive number of GPUs")
        if not isinstance(self.split, tuple) or any(isinstance(x, bool) or not isinstance(x, int) or x < 1
                                                    for x in self.split):
            raise ConfigError(f"nvl_split: {self.split!r} must be positive tray counts, e.g. 18,14")

    def any(self) -> bool:
        return self.domain is not None or bool(self.split)


def domain_split(meta: dict, nodes: int) -> tuple[int, ...]:
    """Machines per NVLink domain, in order, for a topology of ``nodes`` machines (one each by default)."""
    value = meta.get("nvlink_domain") or 1
    if isinstance(value, (tuple, list)):
        return tuple(int(x) for x in value)
    per = int(value)
    if per < 1:
        raise ConfigError(f"nvlink_domain must be >= 1, got {per}")
    return tuple([per] * (nodes // per) + ([nodes % per] if nodes % per else []))


def domain_of_machines(meta: dict, nodes: int) -> list[int]:
    """The domain index of each machine ``0 .. nodes-1``."""
    out: list[int] = []
    for k, count in enumerate(domain_split(meta, nodes)):
        out += [k] * count
    count = len(domain_split(meta, nodes))
    return out[:nodes] + list(range(count, count + nodes - len(out)))  # machines past the split: one each


def resolve_split(spec: NvlinkSpec, nodes: int, gpus_per_node: int, default_trays: int,
                  max_gpus: int, preset: str) -> tuple[int | tuple[int, ...], str | None]:
    """(``nvlink_domain`` for :func:`~simcomm.topologies.two_level.two_level`, the note saying how it was chosen).

    ``default_trays``: the preset's trays per domain (18 for an NVL72 rack);
    ``max_gpus``: the most GPUs the preset's NVLink hardware joins in one domain.
    A domain larger than the cluster or the hardware, a domain that is not whole
    trays, or a split that does not add up to the nodes: one error line each.
    """
    gpn = gpus_per_node
    cluster = nodes * gpn
    trays = default_trays
    if spec.domain is not None:
        if spec.domain > cluster:
            raise ConfigError(f"nvl_domain: {spec.domain} GPUs per NVLink domain is more than the cluster's {cluster} "
                              f"({nodes} nodes x {gpn}); give at most {cluster} or more --nodes")
        if spec.domain > max_gpus:
            raise ConfigError(f"nvl_domain: {spec.domain} GPUs is more than preset {preset}'s NVLink switches "
                              f"join in one domain ({max_gpus})")
        if spec.domain % gpn:
            raise ConfigError(f"nvl_domain: {spec.domain} GPUs is not a whole number of {gpn}-GPU trays; an "
                              f"NVLink domain holds whole trays (a multiple of {gpn})")
        trays = spec.domain // gpn
    if spec.split:
        if sum(spec.split) != nodes:
            raise ConfigError(f"nvl_split: {'+'.join(map(str, spec.split))} = {sum(spec.split)} trays, but the "
                              f"cluster has {nodes} nodes; the split must add up to --nodes")
        cap = trays if spec.domain is not None else max_gpus // gpn
        big = max(spec.split)
        if big > cap:
            raise ConfigError(f"nvl_split: a domain of {big} trays ({big * gpn} GPUs) is more than "
                              + (f"nvl_domain = {spec.domain} GPUs" if spec.domain is not None
                                 else f"preset {preset}'s NVLink switches join ({max_gpus} GPUs)"))
        return tuple(spec.split), None
    split = [trays] * (nodes // trays) + ([nodes % trays] if nodes % trays else [])
    note = None
    if len(split) > 1:  # one domain leaves nothing to choose
        how = "as given" if spec.domain is not None else f"preset {preset}'s {trays * gpn}-GPU domains"
        note = (f"NVLink domains: {' + '.join(map(str, split))} nodes (trays) of {gpn} GPUs ({how}, filled in order; "
                f"--nvl-split to change, --nvl-domain for the domain size)")
    return trays, note


def nvlink_notes(topology) -> list[str]:
    """The ``assumed:`` line of how a preset's machines were split into NVLink domains (empty if none)."""
    note = topology.meta.get("nvlink_note")
    return [note] if note else []


def check_split(split: Sequence[int], nodes: int) -> tuple[int, ...]:
    """A split given to the builder: positive counts adding up to ``nodes``."""
    counts = tuple(split)
    if not counts or any(isinstance(x, bool) or not isinstance(x, int) or x < 1 for x in counts):
        raise ConfigError(f"two-level: nvlink_domain {counts!r} must list positive machine counts")
    if sum(counts) != nodes:
        raise ConfigError(f"two-level: nvlink_domain {'+'.join(map(str, counts))} = {sum(counts)} machines, but "
                          f"the cluster has {nodes}")
    return counts
