"""Trace schema v1: what one rank computes in one training iteration, layer by layer.

The field names here are a contract used by the workload stage and every
strategy; extend with new optional fields, never rename.  Times are seconds,
sizes bytes, shapes are per *sample* (batch dimension excluded).

Gradient-ready order: backward visits ``layers`` in reverse; a layer's
gradients are ready when its own backward time has elapsed, so the order in
which gradients become ready is ``reversed(layers)`` unless
``backward_order`` says otherwise (indices into ``layers``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["SCHEMA_VERSION", "CAPTURE_METHODS", "Layer", "Trace"]

SCHEMA_VERSION = 1
CAPTURE_METHODS = ("cuda-events", "cpu-timer", "kineto-import", "roofline-synth", "synthetic")


@dataclass(frozen=True)
class Layer:
    """One layer (a leaf module with parameters, or a parameter-free op worth timing)."""

    name: str
    module_type: str
    params: int
    grad_bytes: int
    forward_s: float
    backward_s: float
    update_s: float = 0.0
    input_shape: tuple[int, ...] = ()
    output_shape: tuple[int, ...] = ()
    flops: float | None = None  # forward FLOPs for the whole per-rank batch
    grad_l1: tuple[float, ...] = ()  # per-iteration gradient L1 norms (layer dropping)
    # (batch, forward_s, backward_s) at every captured batch size (strong scaling)
    by_batch: tuple[tuple[int, float, float], ...] = ()
    spread: dict = field(default_factory=dict, compare=False)  # e.g. {"forward_iqr_s": ..}


@dataclass(frozen=True)
class Trace:
    """A per-layer compute trace of one rank."""

    model: str
    batch: int
    dtype: str
    device: str
    device_kind: str  # "gpu" or "cpu"
    method: str  # one of CAPTURE_METHODS
    layers: tuple[Layer, ...]
    iteration_s: float  # measured whole-iteration time (fwd + bwd + update)
    warmup: int = 0
    iters: int = 0
    frameworks: dict = field(default_factory=dict, compare=False)
    backward_order: tuple[int, ...] = ()
    meta: dict = field(default_factory=dict, compare=False)

    @property
    def params(self) -> int:
        return sum(layer.params for layer in self.layers)

    @property
    def grad_bytes(self) -> int:
        return sum(layer.grad_bytes for layer in self.layers)

    @property
    def layer_sum_s(self) -> float:
        """Sum of per-layer forward, backward and update times."""
        return sum(layer.forward_s + layer.backward_s + layer.update_s for layer in self.layers)

    def ready_order(self) -> tuple[int, ...]:
        """Indices of layers in the order their gradients become ready."""
        return self.backward_order or tuple(reversed(range(len(self.layers))))
