"""The workload stage: trace + batch + placement -> what each rank computes.

A :class:`Workload` holds per-layer times at the per-rank batch actually used
(weak scaling keeps the trace's batch; strong scaling splits a global batch
over the ranks and interpolates), the gradient-ready order of backward,
DDP-style buckets, the data-loading term and per-rank compute scale factors
(heterogeneous or straggling nodes).  Strategies read it; they never read the
trace directly.  ``build_workload`` lives in this module too.
"""

from __future__ import annotations

from dataclasses import dataclass

from simcomm.traces.schema import Trace

__all__ = ["LayerWork", "Workload"]


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

    @property
    def global_batch(self) -> int:
        return self.batch * self.n_ranks

    @property
    def model_bytes(self) -> float:
        """Bytes of all gradients (= parameters) of the model."""
        return float(sum(layer.grad_bytes for layer in self.layers))

    @property
    def forward_s(self) -> float:
        return sum(layer.forward_s for layer in self.layers)

    @property
    def backward_s(self) -> float:
        return sum(layer.backward_s for layer in self.layers)

    @property
    def update_s(self) -> float:
        return sum(layer.update_s for layer in self.layers)

    def scale(self, rank: int) -> float:
        return self.compute_scale[rank] if self.compute_scale else 1.0

    def bucket_bytes(self, i: int) -> float:
        return float(sum(self.layers[j].grad_bytes for j in self.buckets[i]))

    @property
    def iterations_per_epoch(self) -> int | None:
        """K = N / (R·B), rounded up (a last partial batch still costs an iteration)."""
        if not self.dataset_size:
            return None
        return max(1, -(-self.dataset_size // self.global_batch))
