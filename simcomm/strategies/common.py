"""Shared plan fragments: one rank's forward, backward (by bucket) and update.

Strategies differ in what they communicate; the compute skeleton of an
iteration is the same, so it is emitted here once.  To keep plans small at
thousands of ranks, forward is one op per rank and backward one op per
bucket (the gradient-ready points that communication can hang on).

Also here: rank groups read from the topology's placement (ranks per machine,
ranks with the same local index) and option checks several strategies share.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from simcomm.errors import ConfigError
from simcomm.ops import PlanBuilder
from simcomm.workload import Workload

__all__ = ["IterationOps", "emit_forward_backward", "emit_backward", "emit_update", "machine_groups",
           "local_groups", "check_choice", "check_algorithm", "OVERLAPS"]

#: overlap modes of bucketed gradient communication (allreduce family)
OVERLAPS = ("none", "backward", "backward+forward")


@dataclass(frozen=True)
class IterationOps:
    """Op ids of one rank's iteration skeleton."""

    dataload: int | None
    forward: int
    bucket_ready: tuple[int, ...]  # op id after which bucket i's gradients are ready
    backward_end: int


def emit_backward(b: PlanBuilder, w: Workload, rank: int, *, buckets: tuple[tuple[int, ...], ...] | None = None,
                  after: Iterable[int] = (), stream: str = "compute", tag: str = "") -> tuple[int, ...]:
    """Emit backward split at bucket boundaries; returns the op id ending each bucket."""
    s = w.scale(rank)
    after = tuple(after)
    sums = w.bucket_backward_s if buckets is None else [w.backward_sum(bucket) for bucket in buckets]
    labels = _backward_labels(tag, len(sums))
    ready = []
    for i, secs in enumerate(sums):
        ready.append(b.compute(rank, secs * s, after=after if i == 0 else (), label=labels[i], stream=stream))
    return tuple(ready)


@lru_cache(maxsize=64)
def _backward_labels(tag: str, n: int) -> tuple[str, ...]:
    """``backward{tag}[i]`` for each of ``n`` buckets (made once, not per rank)."""
    return tuple(f"backward{tag}[{i}]" for i in range(n))


def emit_forward_backward(b: PlanBuilder, w: Workload, rank: int, *, after: Iterable[int] = (),
                          buckets: tuple[tuple[int, ...], ...] | None = None,
                          stream: str = "compute") -> IterationOps:
    """Emit data loading, forward, and backward split at bucket boundaries for ``rank``.

    ``buckets`` defaults to ``w.buckets``; pass ``(tuple(w.ready_order),)`` for a
    single gradient-ready point at the end of backward.
    """
    s = w.scale(rank)
    after = tuple(after)
    load = None
    if w.dataload_s > 0:
        if w.dataload_overlap:
            # Steady state of a prefetching loader: it fetches the *next* batch on its own
            # stream during this iteration, so nothing here waits for it, but the
            # iteration cannot end before it does (the op is part of the plan).
            load = b.compute(rank, w.dataload_s, after=after, label="dataload", stream="data",
                             category="dataload")
        else:
            load = b.compute(rank, w.dataload_s, after=after, label="dataload", stream=stream,
                             category="dataload")
            after = after + (load,)
    fwd = b.compute(rank, w.forward_s * s, after=after, label="forward", stream=stream)
    ready = emit_backward(b, w, rank, buckets=buckets, stream=stream)
    return IterationOps(load, fwd, ready, ready[-1] if ready else fwd)


def emit_update(b: PlanBuilder, w: Workload, rank: int, *, after: Iterable[int] = (),
                fraction: float = 1.0, stream: str = "compute", label: str = "update") -> int:
    """Optimizer step over ``fraction`` of the parameters (PCNN/PS shard it)."""
    return b.compute(rank, w.update_s * w.scale(rank) * fraction, after=after, label=label,
                     stream=stream, category="update")


def machine_groups(topology, n_ranks: int) -> list[tuple[int, ...]]:
    """Training ranks 0..n_ranks-1 grouped by physical machine, in rank order.

    A rank whose builder gives no machine is its own group.
    """
    groups: dict = {}
    for r in range(n_ranks):
        m = topology.machine_of(r)
        groups.setdefault(("m", m) if m is not None else ("r", r), []).append(r)
    return [tuple(g) for g in groups.values()]


def local_groups(machines: Sequence[tuple[int, ...]]) -> list[tuple[int, ...]]:
    """Ranks with the same local index on every machine (needs equal machine sizes)."""
    size = len(machines[0])
    return [tuple(m[i] for m in machines) for i in range(size)]


def check_choice(field: str, value: str, choices: Sequence[str]) -> None:
    if value not in choices:
        raise ConfigError(f"{field}: {value!r} is not valid; valid choices: {', '.join(choices)}")


def check_algorithm(field: str, collective: str, name: str) -> None:
    """Accept ``auto`` or any algorithm registered for ``collective`` (once any are registered)."""
    if name == "auto":
        return
    try:
        import simcomm.collectives as coll

        names = [k.split("/", 1)[1] for k in coll.ALGORITHMS.names() if k.startswith(collective + "/")]
    except Exception:  # collectives package unavailable: accept and let the engine decide
        return
    if names and name not in names:
        raise ConfigError(f"{field}: {name!r} is not a {collective} algorithm; valid choices: "
                          f"auto, {', '.join(sorted(names))}")
