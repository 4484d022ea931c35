"""How the engine runs a plan: one typed options object, one place for every default.

:class:`EngineOptions` is what :func:`simcomm.engine.simulate` takes (keyword
arguments are accepted too and become one); :class:`Pricer` is the protocol both
fidelities implement for the executor.  The resolution defaults live here only:
:data:`EXACT` for the engine (a library call is exact unless asked), and
:data:`SCENARIO_RESOLUTION`, the 1 % a scenario uses unless it says otherwise
(docs/engine.md, "Event resolution").
"""

from __future__ import annotations

import math
from collections.abc import Generator
from dataclasses import dataclass, fields
from typing import Any, Protocol

from simcomm.collectives.runtime import CollectiveRuntime, Prepared
from simcomm.engine.fluid.small import MAX_LIVE
from simcomm.errors import ConfigError

__all__ = ["EngineOptions", "Pricer", "FIDELITIES", "EXACT", "SCENARIO_RESOLUTION", "CLOSED_STEPS"]

FIDELITIES = ("flow", "analytic")
#: the engine's own default: every flow completion is its own event
EXACT = 0.0
#: transfers from which a step alone that carries one size per link is priced by its closed form (exact in the
#: model, docs/engine.md "Steps of one size per link"): NCCL's all-to-all over 1 024 GPUs (137 216 transfers
#: after PXN) and up; below it, where flows are cheap, the fluid run prices it and every stored hash and golden
#: output keeps its floats (2^15 takes steps of the 2 048-rank allreduce and gtopk check scenarios: their digests
#: would change)
CLOSED_STEPS = 1 << 16
#: a scenario's default: completions within 1 % of the finishing transfers' durations share one event
#: (keeps crossover-sgd at 1 024 GPUs under 10 s and moves its communication time by about 0.02 %)
SCENARIO_RESOLUTION = 0.01


@dataclass(frozen=True)
class EngineOptions:
    """Every engine option, typed and checked once (docs/engine.md).

    ``reference``: names of fast paths to turn off (:data:`simcomm.engine.paths.REFERENCES`:
    ``direct``, ``callbacks``, ``one_pass``, ``keep``, ``per_link``, ``coalesce``, ``scaling``,
    ``lean``, ``scalar``, ``incremental``, ``shapes``, ``closed_steps``, ``alike_steps``, ``rounds``); the
    reference paths the tests and benchmarks/check_hashes.py compare the fast ones with.  Empty: every fast path.
    ``closed_steps``: transfers from which a step alone on its links that carries one size per link (NCCL's
    all-to-all) is priced by its closed form, ``latency + max over links (bytes / capacity)``: the fluid
    model's own answer (docs/engine.md, "Steps of one size per link"); the ``closed_steps`` reference turns it off.
    ``max_live``: live flows up to which the fluid core keeps a scalar form (any value gives
    the same floats; it only moves where the core switches to numpy arrays).
    ``ppn``: ranks per machine given to hierarchical algorithms (None: from the topology).
    ``record_link_usage``: bytes/s per link family over time in ``meta["link_usage"]``.
    ``comm_cpu``: host CPU seconds per byte a rank sends or receives, charged to its compute.
    ``resolution``: merge flow completions within this fraction of their durations (0: exact).
    ``runtime``: how collectives run on the stack, handed in by the caller (simcomm.runtimes; the engine has
    no default: a plan with collective ops needs one).
    ``link_bytes``: count bytes per link family (False: the analytic fidelity needs no event loop).
    ``busiest_links``: report this many directed links that were busiest, i.e. longest at full rate
    (``meta["busiest_links"]``: ``(from, to, link class, bytes, bytes / capacity in seconds)``; 0: none,
    and no per-link counting).
    ``traffic_weights``: ``(stream, weight)`` pairs: the bytes per link family of ops on that stream
    count ``weight`` times (a plan that simulates one replica for several counts their traffic; the
    busiest-links list counts the simulated links only).  Empty: every op once.
    ``stop_after``: op ids whose times are all the caller reads: the run ends at the instant the last of them
    ends (that instant's events processed); ops not ended by then keep NaN times, and the makespan is the
    latest end reached.  Exact for what is read (nothing later moves an earlier end).  Empty: every op runs
    (so does the direct driver, which runs plans of computes and messages alone, whatever this says).
    """

    reference: frozenset[str] = frozenset()
    max_live: int = MAX_LIVE
    ppn: int | None = None
    record_link_usage: bool = False
    comm_cpu: float = 0.0
    resolution: float = EXACT
    runtime: CollectiveRuntime | None = None
    link_bytes: bool = True
    busiest_links: int = 0
    traffic_weights: tuple[tuple[str, float], ...] = ()
    closed_steps: int = CLOSED_STEPS
    stop_after: frozenset[int] = frozenset()

    def __post_init__(self) -> None:
        from simcomm.engine.paths import REFERENCES

        ref = self.reference
        if not isinstance(ref, (set, frozenset, list, tuple)) or not all(isinstance(x, str) for x in ref):
            raise ConfigError(f"reference: {ref!r} must be a set of names; valid choices: {', '.join(REFERENCES)}")
        unknown = sorted(set(ref) - set(REFERENCES))
        if unknown:
            raise ConfigError(f"reference: {unknown[0]!r} is unknown; valid choices: {', '.join(REFERENCES)}")
        object.__setattr__(self, "reference", frozenset(ref))  # any iterable of names, kept as one frozenset
        live = self.max_live
        if isinstance(live, bool) or not isinstance(live, int) or live < 1:
            raise ConfigError(f"max_live: {live!r} must be a positive integer")
        for name in ("record_link_usage", "link_bytes"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"{name}: {getattr(self, name)!r} must be True or False")
        cpu = self.comm_cpu
        if isinstance(cpu, bool) or not (isinstance(cpu, (int, float)) and math.isfinite(cpu) and cpu >= 0):
            raise ConfigError(f"comm_cpu: {cpu!r} must be a non-negative number of seconds per byte")
        res = self.resolution
        if isinstance(res, bool) or not (isinstance(res, (int, float)) and 0 <= res < 1):
            raise ConfigError(f"resolution: {res!r} must be a number in [0, 1) (0 = exact flow events)")
        big = self.closed_steps
        if isinstance(big, bool) or not isinstance(big, int) or big < 1:
            raise ConfigError(f"closed_steps: {big!r} must be a positive integer (transfers per step)")
        ppn = self.ppn
        if ppn is not None and (isinstance(ppn, bool) or not isinstance(ppn, int) or ppn < 1):
            raise ConfigError(f"ppn: {ppn!r} must be a positive integer")
        n = self.busiest_links
        if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= 1000:
            raise ConfigError(f"busiest_links: {n!r} must be an integer in [0, 1000]")
        for item in self.traffic_weights:
            ok = (isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str)
                  and isinstance(item[1], (int, float)) and not isinstance(item[1], bool)
                  and math.isfinite(item[1]) and item[1] > 0)
            if not ok:
                raise ConfigError(f"traffic_weights: {item!r} must be a (stream, positive finite weight) pair")
        streams = [item[0] for item in self.traffic_weights]
        if len(set(streams)) != len(streams):
            twice = sorted({x for x in streams if streams.count(x) > 1})
            raise ConfigError(f"traffic_weights: stream {twice[0]!r} is given more than one weight; give each once")
        stop = self.stop_after
        if not isinstance(stop, (set, frozenset, list, tuple)) or not all(
                isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in stop):
            raise ConfigError(f"stop_after: {stop!r} must be a set of op ids (non-negative integers)")
        object.__setattr__(self, "stop_after", frozenset(stop))
        if self.runtime is not None and not isinstance(self.runtime, CollectiveRuntime):
            raise ConfigError(f"runtime: {self.runtime!r} must be a runtime (simcomm.runtimes: placement() and "
                              "prepare(), simcomm.collectives.runtime.CollectiveRuntime)")

    @classmethod
    def of(cls, options: EngineOptions | None = None, **kwargs: Any) -> EngineOptions:
        """``options`` with ``kwargs`` on top; an unknown name is one line listing the valid ones."""
        valid = [f.name for f in fields(cls)]
        unknown = sorted(set(kwargs) - set(valid))
        if unknown:
            raise ConfigError(f"engine option {unknown[0]!r} is unknown; valid choices: {', '.join(valid)}")
        base = options or cls()
        if not kwargs:
            return base
        return cls(**{**{f: getattr(base, f) for f in valid}, **kwargs})


class Pricer(Protocol):
    """What a fidelity gives the executor (FlowPricer, AnalyticPricer).

    ``collective``/``transfer`` are SimPy process bodies that take as long as the op
    does; ``finish_stats`` folds the pricer's counters into the run's statistics;
    ``live_merged`` counts flows the shared network merged (event resolution);
    ``usage`` holds recorded link usage blocks (empty unless ``record_link_usage``).
    """

    live_merged: int

    @property
    def usage(self) -> list: ...

    def collective(self, op: Any, prepared: Prepared) -> Generator: ...

    def transfer(self, op: Any) -> Generator: ...

    def finish_stats(self) -> None: ...
