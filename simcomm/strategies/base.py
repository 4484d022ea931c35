"""The strategy contract: ``plan(workload, topology) -> CommPlan``.

A strategy is a schedule: what every rank computes and communicates in one
training iteration (or one period of iterations), over which group of ranks,
and what may overlap with what.  It speaks only in ops (:mod:`simcomm.ops`)
and sees the topology read-only (placement, machines), never link parameters.

Each strategy is one module with a subclass of :class:`Strategy`, registered
in :data:`STRATEGIES` with a name, a one-line summary and its paper; its
docstring gives the pattern in a few lines and its closed form if any.
Options are a frozen ``Params`` dataclass validated in ``__post_init__``;
values a paper leaves open are listed in ``Params.assumed`` so runs print them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from simcomm.registry import Registry

__all__ = ["Strategy", "STRATEGIES", "NotApplicable"]


class NotApplicable(Exception):
    """Raised by ``plan`` when a strategy does not apply to a setting (reported, not dropped)."""


class Strategy:
    """Base class; subclasses set ``name``/``summary``/``reference`` and implement ``plan``."""

    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    reference: ClassVar[str] = ""

    @dataclass(frozen=True)
    class Params:
        pass

    def __init__(self, params: Any = None):
        self.params = params if params is not None else self.Params()

    def plan(self, workload, topology):  # -> CommPlan
        raise NotImplementedError


STRATEGIES: Registry[type[Strategy]] = Registry("strategy", "simcomm.strategies")
