"""The workload stage: trace + batch + placement -> what each rank computes.

A :class:`Workload` holds per-layer times at the per-rank batch actually used
(weak scaling keeps the trace's batch; strong scaling splits a global batch
over the ranks and interpolates), the gradient-ready order of backward,
DDP-style buckets, the data-loading term and per-rank compute scale factors
(heterogeneous or straggling nodes).  Strategies read it; they never read the
trace directly.  ``build_workload`` lives in this module too.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

from simcomm.errors import ConfigError
from simcomm.precision import DTYPE_BYTES
from simcomm.precision import dtype_bytes as dtype_bytes_of
from simcomm.traces.schema import Layer, Trace

__all__ = ["LayerWork", "Workload", "build_workload", "layer_times", "make_buckets", "SCALINGS"]

SCALINGS = ("weak", "strong")


@dataclass(frozen=True)
class LayerWork:
    """One layer's work on one rank at the per-rank batch (before compute_scale)."""

    name: str
    module_type: str
    params: int
    grad_bytes: float
    forward_s: float
    backward_s: float
    update_s: float
    input_shape: tuple[int, ...] = ()
    output_shape: tuple[int, ...] = ()
    grad_l1: tuple[float, ...] = ()


@dataclass(frozen=True)
class Workload:
    """Per-rank compute of one iteration, shared by every strategy.

    Attributes
    ----------
    layers: in forward execution order.
    ready_order: layer indices in the order their gradients become ready.
    buckets: DDP buckets, each a tuple of layer indices in ready order; the
        bucket is ready when its last layer's backward is done.  One bucket
        holding every layer means "communicate after backward".
    dataload_s: data-loading time per iteration per rank.
    dataload_overlap: True if loading the next batch overlaps the iteration
        (prefetch); False if it blocks before forward.
    compute_scale: per-rank multiplier on every compute time (1.0 = nominal).
    dataset_size: samples in one epoch (None if unknown).
    scaling: ``weak`` or ``strong``.
    dtype_bytes: bytes per element on the wire (what ``grad_bytes`` counts).
    """

    trace: Trace
    n_ranks: int
    batch: int
    layers: tuple[LayerWork, ...]
    ready_order: tuple[int, ...]
    buckets: tuple[tuple[int, ...], ...]
    dataload_s: float = 0.0
    dataload_overlap: bool = False
    compute_scale: tuple[float, ...] = ()
    dataset_size: int | None = None
    scaling: str = "weak"
    dtype_bytes: int = 4
    # cv of the per-iteration compute draws (simcomm.jitter): ranks then compute differently each iteration
    compute_jitter: float = 0.0
    # plans may fold identical ranks' computes onto rank 0 (simcomm.strategies._fold; the pipeline decides)
    fold_ranks: bool = False
    # ... and may stand a few ranks' messages for all (sgp's fold: only where messages travel as planned, NCCL)
    fold_messages: bool = False

    @property
    def global_batch(self) -> int:
        return self.batch * self.n_ranks

    # Sums over the layers are computed once (plans read them for every rank).
    @cached_property
    def model_bytes(self) -> float:
        """Bytes of all gradients (= parameters) of the model."""
        return float(sum(layer.grad_bytes for layer in self.layers))

    @cached_property
    def forward_s(self) -> float:
        return sum(layer.forward_s for layer in self.layers)

    @cached_property
    def backward_s(self) -> float:
        return sum(layer.backward_s for layer in self.layers)

    @cached_property
    def update_s(self) -> float:
        return sum(layer.update_s for layer in self.layers)

    @cached_property
    def bucket_backward_s(self) -> tuple[float, ...]:
        """:meth:`backward_sum` of each bucket (every rank's backward reads them: no bucket hashed per rank)."""
        return tuple(self.backward_sum(bucket) for bucket in self.buckets)

    def forward_sum(self, layers: Sequence[int]) -> float:
        """Forward seconds of ``layers`` (summed in the order given; cached per group)."""
        return self._layer_sum("forward_s", layers)

    def backward_sum(self, layers: Sequence[int]) -> float:
        """Backward seconds of ``layers`` (summed in the order given; cached per group)."""
        return self._layer_sum("backward_s", layers)

    def _layer_sum(self, attr: str, layers: Sequence[int]) -> float:
        key = (attr, tuple(layers))
        cache = self.__dict__.setdefault("_layer_sums", {})
        if key not in cache:
            cache[key] = sum(getattr(self.layers[j], attr) for j in key[1])
        return cache[key]

    def scale(self, rank: int) -> float:
        return self.compute_scale[rank] if self.compute_scale else 1.0

    def bucket_bytes(self, i: int) -> float:
        return float(sum(self.layers[j].grad_bytes for j in self.buckets[i]))

    def rebucketed(self, bucket_mb: float) -> Workload:
        """A copy with buckets rebuilt at ``bucket_mb`` MB (0 = one bucket after backward)."""
        from dataclasses import replace

        return replace(self, buckets=make_buckets(self.layers, self.ready_order, float(bucket_mb) * 1e6))

    @property
    def iterations_per_epoch(self) -> int | None:
        """K = N / (R·B), rounded up (a last partial batch still costs an iteration)."""
        if not self.dataset_size:
            return None
        return max(1, -(-self.dataset_size // self.global_batch))


# ---------------------------------------------------------------------------
# build_workload
# ---------------------------------------------------------------------------

def _fit(points: Sequence[tuple[int, float]]) -> tuple[float, float]:
    """Least-squares line t = t0 + b·t1 through (batch, seconds) points."""
    n = len(points)
    mb = sum(b for b, _ in points) / n
    mt = sum(t for _, t in points) / n
    sbb = sum((b - mb) ** 2 for b, _ in points)
    t1 = sum((b - mb) * (t - mt) for b, t in points) / sbb
    return mt - t1 * mb, t1


def layer_times(layer: Layer, trace_batch: int, batch: float) -> tuple[float, float]:
    """(forward_s, backward_s) of ``layer`` at per-rank ``batch``.

    The trace's own numbers are used at its own batch.  Elsewhere, with two or
    more distinct batch sizes in ``layer.by_batch`` each phase follows the
    fitted line t(b) = t0 + b·t1 (clamped at 0: a line fitted on large batches
    can go negative near b = 0); otherwise time is proportional to the batch,
    which overstates small-batch speed because it ignores fixed launch costs.
    """
    if batch == trace_batch:
        return layer.forward_s, layer.backward_s
    sizes = {b for b, _, _ in layer.by_batch}
    if len(sizes) >= 2:
        f0, f1 = _fit([(b, f) for b, f, _ in layer.by_batch])
        b0, b1 = _fit([(b, k) for b, _, k in layer.by_batch])
        return max(0.0, f0 + batch * f1), max(0.0, b0 + batch * b1)
    ratio = batch / trace_batch
    return layer.forward_s * ratio, layer.backward_s * ratio


def make_buckets(layers: Sequence[LayerWork], order: Sequence[int], bucket_bytes: float) -> tuple[tuple[int, ...], ...]:
    """Greedy DDP bucketing in gradient-ready order: close a bucket once it holds >= cap bytes."""
    if bucket_bytes <= 0:
        return (tuple(order),) if order else ()
    out: list[tuple[int, ...]] = []
    cur: list[int] = []
    size = 0.0
    for j in order:
        cur.append(j)
        size += layers[j].grad_bytes
        if size >= bucket_bytes:
            out.append(tuple(cur))
            cur, size = [], 0.0
    if cur:
        out.append(tuple(cur))
    return tuple(out)


def _positive_int(value, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{field}: {value!r} must be a positive integer")
    return value


def build_workload(trace: Trace, n_ranks: int, *, batch: int | None = None, global_batch: int | None = None,
                   scaling: str = "weak", bucket_mb: float = 25.0, dataload_s: float = 0.0,
                   dataload_overlap: bool = False, compute_scale: Sequence[float] | None = None,
                   dataset_size: int | None = None, wire_dtype: str | None = None,
                   compute_jitter: float = 0.0) -> Workload:
    """Turn a one-rank trace into the per-rank work of one iteration on ``n_ranks`` ranks.

    ``wire_dtype`` (default: the trace's dtype) is what gradients and models
    travel in: every layer's ``grad_bytes`` is rescaled to it (mixed precision
    computes in fp16 but sends fp32 gradients; simcomm.precision).

    weak scaling: the per-rank batch is ``batch`` (default: the trace's).
    strong scaling: ``global_batch`` (default: ``batch`` or the trace's batch) is
    split over the ranks; every rank is timed at ⌈global/R⌉ samples, the
    largest share, since the slowest rank sets a synchronous step.
    ``bucket_mb`` is in MB (10^6 bytes); 0 means one bucket after backward.
    """
    n_ranks = _positive_int(n_ranks, "ranks")
    if scaling not in SCALINGS:
        raise ConfigError(f"scaling: {scaling!r} is not valid; valid choices: {', '.join(SCALINGS)}")
    if not trace.layers:
        raise ConfigError(f"trace {trace.model!r} has no layers")
    if scaling == "weak":
        if global_batch is not None:
            raise ConfigError("global_batch: only valid with scaling 'strong'; use batch for weak scaling")
        per_rank = _positive_int(batch if batch is not None else trace.batch, "batch")
    else:
        total = _positive_int(global_batch if global_batch is not None else (batch or trace.batch), "global_batch")
        if total < n_ranks:
            raise ConfigError(f"global_batch: {total} is smaller than the {n_ranks} ranks it is split over")
        per_rank = -(-total // n_ranks)
    if not (isinstance(bucket_mb, (int, float)) and math.isfinite(bucket_mb) and bucket_mb >= 0):
        raise ConfigError(f"bucket_mb: {bucket_mb!r} must be a non-negative number (0 = one bucket)")
    if not (math.isfinite(dataload_s) and dataload_s >= 0):
        raise ConfigError(f"dataload_s: {dataload_s!r} must be a non-negative number of seconds")
    scale: tuple[float, ...] = ()
    if compute_scale is not None:
        scale = tuple(float(x) for x in compute_scale)
        if len(scale) != n_ranks:
            raise ConfigError(f"compute_scale: {len(scale)} factors given for {n_ranks} ranks")
        if any(not (math.isfinite(x) and x > 0) for x in scale):
            raise ConfigError("compute_scale: every factor must be a positive number")
    if dataset_size is not None:
        _positive_int(dataset_size, "dataset_size")

    trace_bytes = DTYPE_BYTES.get(trace.dtype, 4)
    dtype_bytes = trace_bytes if wire_dtype is None else dtype_bytes_of(wire_dtype)
    wire = dtype_bytes / trace_bytes
    layers = []
    for layer in trace.layers:
        fwd, bwd = layer_times(layer, trace.batch, per_rank)
        layers.append(LayerWork(layer.name, layer.module_type, layer.params, float(layer.grad_bytes) * wire, fwd, bwd,
                                layer.update_s, layer.input_shape, layer.output_shape, layer.grad_l1))
    order = trace.ready_order()
    if sorted(order) != list(range(len(layers))):
        raise ConfigError(f"trace {trace.model!r}: backward_order is not a permutation of its layers")
    return Workload(trace, n_ranks, per_rank, tuple(layers), tuple(order),
                    make_buckets(layers, order, float(bucket_mb) * 1e6), float(dataload_s), bool(dataload_overlap),
                    scale, dataset_size, scaling, dtype_bytes, float(compute_jitter))
