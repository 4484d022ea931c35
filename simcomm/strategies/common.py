"""Shared plan fragments: one rank's forward, backward (by bucket) and update.

Strategies differ in what they communicate; the compute skeleton of an
iteration is the same, so it is emitted here once.  To keep plans small at
thousands of ranks, forward is one op per rank and backward one op per
bucket (the gradient-ready points that communication can hang on).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from simcomm.ops import PlanBuilder
from simcomm.workload import Workload

__all__ = ["IterationOps", "emit_forward_backward", "emit_update"]


@dataclass(frozen=True)
class IterationOps:
    """Op ids of one rank's iteration skeleton."""

    dataload: int | None
    forward: int
    bucket_ready: tuple[int, ...]  # op id after which bucket i's gradients are ready
    backward_end: int


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
        # A prefetching loader runs on its own stream, so only its first use blocks.
        load_stream = "data" if w.dataload_overlap else stream
        load = b.compute(rank, w.dataload_s, after=after, label="dataload", stream=load_stream,
                         category="dataload")
        after = after + (load,)
    fwd = b.compute(rank, w.forward_s * s, after=after, label="forward", stream=stream)
    ready = []
    for i, bucket in enumerate(buckets if buckets is not None else w.buckets):
        secs = sum(w.layers[j].backward_s for j in bucket) * s
        ready.append(b.compute(rank, secs, label=f"backward[{i}]", stream=stream))
    return IterationOps(load, fwd, tuple(ready), ready[-1] if ready else fwd)


def emit_update(b: PlanBuilder, w: Workload, rank: int, *, after: Iterable[int] = (),
                fraction: float = 1.0, stream: str = "compute", label: str = "update") -> int:
    """Optimizer step over ``fraction`` of the parameters (PCNN/PS shard it)."""
    return b.compute(rank, w.update_s * w.scale(rank) * fraction, after=after, label=label,
                     stream=stream, category="update")
