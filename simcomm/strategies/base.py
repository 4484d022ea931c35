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

Periodic strategies
-------------------
Some strategies do different things on different iterations (node-based
exchanges parameters across nodes only every K' iterations; a communication
interval gossips once per interval).  ``iterations(workload, topology)``
returns ``[(weight, CommPlan), ...]``: one plan per *kind* of iteration and
how many iterations of that kind an epoch (or period) holds.  The mean
iteration time is the weighted mean of the kinds.  Each plan's
``info.kind`` (:class:`~simcomm.ops.IterationInfo`) names the kind for reports.  The default is ``[(1, plan)]``.

Steady-state plans
------------------
A plan may hold more than one iteration to capture overlap with the *next*
iteration (seed 003's backward+forward overlap).  It then sets
``info.period = (a, b)`` (``PlanBuilder.build(period=...)``): the iteration time is
``end[b] - end[a]``, and ``info.iterations_in_plan`` so traffic is divided per iteration.
Without ``period`` the iteration time is the plan's makespan.

Baselines
---------
``paper_baseline`` names what the strategy's paper compared against (a
strategy, its options and why), so ``simcomm run`` reports "speedup vs" the
baseline the seed ran unless the user picks another (``--baseline``).
:meth:`Strategy.describe` prints a strategy with its options in words.

Extra ranks
-----------
A strategy that needs ranks outside the training ranks (parameter servers on
their own nodes) returns how many extra *nodes* it wants from
``extra_nodes()``; the pipeline builds the cluster with them appended, and the
workload's ``n_ranks`` still counts only the training ranks, which come first.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from simcomm.errors import ConfigError
from simcomm.registry import Registry

if TYPE_CHECKING:
    from simcomm.ops import CommPlan
    from simcomm.topologies.base import Topology
    from simcomm.workload import Workload

__all__ = ["Strategy", "STRATEGIES", "NotApplicable", "make_params", "option_names", "register"]


class NotApplicable(Exception):
    """Raised by ``plan`` when a strategy does not apply to a setting (reported, not dropped)."""


class Strategy:
    """Base class; subclasses set ``name``/``summary``/``reference`` and implement ``plan``."""

    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    reference: ClassVar[str] = ""
    #: (strategy, options, why): what this strategy's paper measured it against
    paper_baseline: ClassVar[tuple[str, tuple[tuple[str, Any], ...], str]] = (
        "allreduce", (), "the DDP-style data-parallel default (no paper baseline of its own)")
    #: wire dtypes the strategy's messages may travel in (None: any)
    wire_dtypes: ClassVar[tuple[str, ...] | None] = None
    #: op stream -> parallelism, for layouts whose exposed time is reported per parallelism ({}: not split)
    comm_streams: ClassVar[dict[str, str]] = {}

    @dataclass(frozen=True)
    class Params:
        pass

    def __init__(self, params: Any = None):
        self.params = params if params is not None else self.Params()

    def plan(self, workload: Workload, topology: Topology) -> CommPlan:
        raise NotImplementedError

    def iterations(self, workload: Workload, topology: Topology) -> list[tuple[float, CommPlan]]:
        """``[(weight, CommPlan), ...]``, one per kind of iteration (see module docstring)."""
        return [(1.0, self.plan(workload, topology))]

    def memory(self, workload: Workload):
        """This strategy's own peak GPU memory (a :class:`simcomm.memory.fit.Peak`), a line saying why it has
        none, or None for the generic estimate.

        Strategies that shard model state (a large-model layout) override this with their layout's
        peak; the pipeline checks it against the GPU (``simcomm.pipeline.memory_check``).  ``None``
        lets the pipeline check a full replica per GPU (:mod:`simcomm.memory.replicated`).
        """
        return None

    def memory_knob(self, workload: Workload):
        """For a strategy with its own peak: ``(key, value, peak_at)``, the key that sets its activations
        (``batch``, ``microbatch``), its value and the peak at another value, so that a refusal names the
        largest value that fits; None when nothing does (the pipeline knows a replica's: ``batch``)."""
        return None

    def extra_nodes(self) -> int:
        """Nodes this strategy needs beyond the training nodes (e.g. dedicated servers)."""
        return 0

    def assumed(self) -> tuple[str, ...]:
        """Human lines for every default a paper leaves open (printed as ``assumed: ...``)."""
        return tuple(getattr(self.params, "assumed", ()) or ())

    def describe(self) -> str:
        """The strategy and every option value, e.g. ``allreduce (algorithm auto, overlap none)``."""
        parts = []
        for f in dataclasses.fields(self.params):
            if f.init and f.name != "assumed":
                v = getattr(self.params, f.name)
                parts.append(f"{f.name.replace('_', '-')} {'default' if v is None else v}")
        return f"{self.name} ({', '.join(parts)})" if parts else self.name


_SKIP = {"base", "common"}


class _StrategyRegistry(Registry):
    """Registry that imports every module of :mod:`simcomm.strategies` on first use.

    Strategy modules register themselves on import; scanning the package here
    means neither ``simcomm list`` nor the pipeline needs a hand-kept list.
    """

    def _load_plugins(self) -> None:
        if self._plugins_loaded:
            return
        from simcomm.registry import scan

        scan("simcomm.strategies", skip=_SKIP)
        super()._load_plugins()


STRATEGIES: Registry[type[Strategy]] = _StrategyRegistry("strategy", "simcomm.strategies")


def register(cls: type[Strategy]) -> type[Strategy]:
    """Class decorator: add ``cls`` to :data:`STRATEGIES` under ``cls.name``."""
    STRATEGIES.add(cls.name, cls, summary=cls.summary, reference=cls.reference)
    return cls


def option_names(cls: type[Strategy]) -> tuple[str, ...]:
    """Option (Params field) names of a strategy class, in declaration order."""
    return tuple(f.name for f in dataclasses.fields(cls.Params) if f.init and f.name != "assumed")


def _coerce(name: str, value: Any, hint: Any) -> Any:
    value = _coerce_text(name, value, hint)
    # An option is a model input: inf or nan would be printed as a time or hang the plan (issue 15).
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"option {name}: {value!r} must be a finite number")
    return value


def _plain(hint: Any) -> Any:
    """``X`` of ``X | None`` / ``Optional[X]``; other hints unchanged."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return hint


def _coerce_text(name: str, value: Any, hint: Any) -> Any:
    """A text value (CLI, ``--opt``, sweep axis) converted by the option's real type (its resolved annotation)."""
    if not isinstance(value, str):
        return value
    kind = _plain(hint)
    try:
        if kind is bool:
            low = value.strip().lower()
            if low not in ("1", "0", "true", "false", "yes", "no", "on", "off"):
                raise ValueError
            return low in ("1", "true", "yes", "on")
        if kind is int:
            return int(value)
        if kind is float:
            return float(value)
    except ValueError:
        raise ConfigError(f"option {name}: cannot read {value!r} as {kind.__name__}") from None
    return value


def _hints(cls: type[Strategy]) -> dict[str, Any]:
    """The Params fields' annotations resolved to real types (``from __future__`` makes them strings)."""
    import sys

    module = sys.modules.get(cls.__module__)
    return typing.get_type_hints(cls.Params, globalns=vars(module) if module else None)


def make_params(cls: type[Strategy], options: dict | None = None):
    """Build ``cls.Params`` from a {name: value} dict (strings are converted by field type).

    An option the strategy does not have is a one-line error listing its options.
    """
    options = dict(options or {})
    names = option_names(cls)
    fields = {f.name: f for f in dataclasses.fields(cls.Params)}
    hints = _hints(cls)
    kwargs = {}
    for key, value in options.items():
        name = key.replace("-", "_")
        if name not in names:
            valid = ", ".join(n.replace("_", "-") for n in names) or "(none)"
            raise ConfigError(f"option {key!r} does not belong to strategy {cls.name!r}; valid options: {valid}")
        kwargs[name] = _coerce(key, value, hints.get(name, fields[name].type))
    try:
        return cls.Params(**kwargs)
    except TypeError as exc:  # a wrongly typed value reaching a comparison in __post_init__
        raise ConfigError(f"strategy {cls.name!r}: bad option value ({exc})") from None
