"""The cost-model contract: price one collective algorithm on given links.

A cost model turns ``(algorithm, p, nbytes, link, gamma, ppn, intra)`` into
:class:`~simcomm.collectives.base.CostTerms` (latency, bandwidth and reduction
seconds).  ``link`` is the link class between nodes and ``intra`` the one
inside a node (``ppn`` group-local ranks per node, node-major); without
``ppn``/``intra`` every transfer uses ``link``.
"""

from __future__ import annotations

from dataclasses import dataclass

from simcomm.errors import ConfigError
from simcomm.registry import Registry

__all__ = ["CostModel", "COST_MODELS", "LinkParams"]


@dataclass(frozen=True)
class LinkParams:
    """α (s per message) and β (s per byte) of one link class, in SI units."""

    alpha: float
    beta: float

    @classmethod
    def of(cls, link) -> LinkParams:
        """From a :class:`~simcomm.links.LinkClass` (or anything with latency and bandwidth)."""
        return cls(float(link.latency), 1.0 / float(link.bandwidth))


class CostModel:
    """Base class: subclasses implement :meth:`price`."""

    name = ""
    summary = ""
    reference = ""

    def price(self, alg, p: int, nbytes: float, link, *, gamma: float = 0.0, ppn: int = 1,
              intra=None):
        raise NotImplementedError

    @staticmethod
    def _validate(gamma: float, ppn: int) -> None:
        if not gamma >= 0:
            raise ConfigError(f"gamma: {gamma} must be non-negative (seconds per byte)")
        if ppn < 1:
            raise ConfigError(f"ppn: {ppn} must be at least 1")


COST_MODELS: Registry[CostModel] = Registry("cost model", "simcomm.cost_models")
