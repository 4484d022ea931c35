"""Link classes: per-direction bandwidth and per-hop latency of one kind of wire.

A :class:`LinkClass` is one axis of the model (SimGrid keeps topology, link
semantics and cost model apart; so do we).  Links are full duplex: the
bandwidth is available in each direction independently.  Presets live in one
module per family (``nvlink``, ``pcie``, ``infiniband`` ...) and register in
:data:`LINKS`; users add their own in a TOML file (:mod:`simcomm.links.toml_file`).
"""

from __future__ import annotations

from dataclasses import dataclass

from simcomm.errors import ConfigError
from simcomm.registry import Registry

__all__ = ["LinkClass", "LINKS", "link_class", "define"]


@dataclass(frozen=True)
class LinkClass:
    """One kind of link.

    Attributes
    ----------
    name: kebab-case identifier, e.g. ``ib-edr``.
    bandwidth: bytes per second, per direction.
    latency: seconds per hop (the α contribution of one traversal).
    family: ``nvlink``, ``nvswitch``, ``pcie``, ``infiniband``, ``roce``,
        ``ethernet``, ``aries``, ``shm`` or ``custom``; reports group bytes by it.
    measured: a calibrated class (``--links``): transport stacks leave it unscaled.
    socket_latency: the latency is TCP sockets' one-way small-message time, measured end to end
        through the socket stack (the ``eth-*`` classes, [M7]): a TCP stack's per-message overhead,
        taken from the same measurement, is already in it (:meth:`simcomm.stacks.Stack.derive`).
    """

    name: str
    bandwidth: float
    latency: float
    family: str = "custom"
    summary: str = ""
    reference: str = ""
    #: measured end to end (simcomm calibrate): the stack's efficiency and overhead are already in it
    measured: bool = False
    #: the latency already holds TCP sockets' per-message software cost (see the class docstring)
    socket_latency: bool = False

    def __post_init__(self) -> None:
        if not self.bandwidth > 0 or self.bandwidth == float("inf"):
            raise ConfigError(f"link class {self.name!r}: bandwidth must be positive and finite")
        if not self.latency >= 0 or self.latency == float("inf"):
            raise ConfigError(f"link class {self.name!r}: latency must be non-negative and finite")

    @property
    def beta(self) -> float:
        """Seconds per byte (1 / bandwidth)."""
        return 1.0 / self.bandwidth

    def scaled(self, factor: float, suffix: str | None = None) -> LinkClass:
        """A copy with ``bandwidth * factor`` (used for tapered/oversubscribed uplinks)."""
        name = f"{self.name}{suffix if suffix is not None else f'x{factor:g}'}"
        return LinkClass(name, self.bandwidth * factor, self.latency, self.family,
                         f"{self.summary} (bandwidth x{factor:g})", self.reference,
                         socket_latency=self.socket_latency)


LINKS: Registry[LinkClass] = Registry("link class", "simcomm.links")
#: link families inside one machine (the others carry traffic between machines)
INTRANODE_FAMILIES = frozenset({"nvlink", "nvswitch", "pcie", "shm"})


def define(name: str, *, bandwidth: float, latency: float, family: str, summary: str, reference: str,
           socket_latency: bool = False) -> LinkClass:
    """Create a preset and register it in :data:`LINKS`."""
    lc = LinkClass(name, bandwidth, latency, family, summary, reference, socket_latency=socket_latency)
    LINKS.add(name, lc, summary=summary, reference=reference)
    return lc


def link_class(name: str | LinkClass) -> LinkClass:
    """Look up a preset by name (a :class:`LinkClass` passes through)."""
    if isinstance(name, LinkClass):
        return name
    from simcomm import links as _presets  # noqa: F401  (importing registers the presets)

    return LINKS.get(name)
