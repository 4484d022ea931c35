"""Does a peak fit in a GPU: the one check both memory models go through, its policy and its margin.

* **Peak** (:class:`Peak`): bytes one GPU needs at its fullest moment, by kind: weights,
  gradients, optimizer state, the activations of one micro-batch (plus, under
  recomputation, the one layer being recomputed), the other micro-batches a pipeline
  schedule holds in flight, and buffers/workspace (the CUDA context, a pipeline stage's
  embedding and logits buffers, ZeRO-3's gathered layers).
* **Margin**: PyTorch's caching allocator keeps freed blocks in pools sized by request
  (blocks under 1 MB in 2 MB segments, larger ones rounded to 512 bytes and split from
  20 MB or larger segments; ``torch/csrc/c10/cuda/CUDACachingAllocator.cpp``), so what a run
  *reserves* exceeds what it *allocates*: the peak is charged :data:`DEFAULT_MARGIN` more
  (``memory_margin``), stated as an ``assumed:`` line.  The figure is an assumption, not a fit.
* **Capacity**: the device's nominal memory, or ``gpu_memory`` (an H100 NVL has 94 GB, some
  H100s 96 GB).
* **Policy** (``memory``): ``refuse`` raises one :class:`~simcomm.errors.DoesNotFitError` line
  with the numbers; ``warn`` says the shortfall and runs; ``off`` checks nothing.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from simcomm.errors import ConfigError, DoesNotFitError
from simcomm.units import format_size

__all__ = ["POLICIES", "DEFAULT_MARGIN", "CONTEXT_BYTES", "Budget", "Peak", "check", "refuses", "largest_fitting"]

POLICIES = ("refuse", "warn", "off")
#: the caching allocator's fragmentation, as a fraction of the peak (see the module docstring)
DEFAULT_MARGIN = 0.05
#: CUDA context + framework allowance per process (781 MB measured in pytorch/pytorch#34323, rounded up)
CONTEXT_BYTES = 800_000_000


@dataclass(frozen=True)
class Budget:
    """How a peak is judged: the device's capacity (bytes), its label, the margin and the policy; ``given``:
    the capacity is the user's ``gpu_memory``, not a device's."""

    capacity: float
    label: str  # "H100 80GB", or for a given capacity "96 GB"
    margin: float = DEFAULT_MARGIN
    policy: str = "refuse"
    given: bool = False

    @property
    def what(self) -> str:
        """``a H100 80GB`` or ``the given 96 GB``."""
        return f"the given {self.label}" if self.given else f"a {self.label}"

    def has(self) -> str:
        """``a H100 80GB has 85.9 GB`` or ``the GPU has the given 96 GB``."""
        return f"the GPU has {self.what}" if self.given else f"{self.what} has {format_size(self.capacity)}"

    def of(self) -> str:
        """``the 85.9 GB of a H100 80GB`` or ``the given 96 GB``."""
        return self.what if self.given else f"the {format_size(self.capacity)} of {self.what}"

    def __post_init__(self) -> None:
        if isinstance(self.capacity, bool) or not isinstance(self.capacity, (int, float)) \
                or not math.isfinite(self.capacity) or self.capacity <= 0:
            raise ConfigError(f"gpu_memory: must be a finite size > 0 bytes, got {self.capacity!r}")
        if isinstance(self.margin, bool) or not isinstance(self.margin, (int, float)) \
                or not math.isfinite(self.margin) or not 0 <= self.margin < 1:
            raise ConfigError(f"memory_margin: must be a fraction in [0, 1), got {self.margin!r}")
        if self.policy not in POLICIES:
            raise ConfigError(f"memory: {self.policy!r} is not valid; valid choices: {', '.join(POLICIES)}")

    def assumed(self) -> str:
        if not self.margin:  # a data-parallel replica's default (docs/traces.md): said, as every default is
            return ("memory margin 0: no allowance for the caching allocator's fragmentation on this estimate "
                    "(a data-parallel replica's default; key memory_margin)")
        return (f"memory margin {self.margin:.0%} of the peak for the caching allocator's fragmentation (freed "
                f"blocks stay pooled by size, so reserved exceeds allocated; key memory_margin)")


@dataclass(frozen=True)
class Peak:
    """Bytes one GPU needs at its peak, by kind; ``what`` says whose (model, layout, stage)."""

    what: str
    weights: int
    gradients: int
    optimizer: int
    activations: int
    in_flight: int = 0
    buffers: int = 0
    #: a data-parallel replica's estimate (:mod:`simcomm.memory.replicated`), judged without the default margin
    replica: bool = False

    @property
    def total(self) -> int:
        return self.weights + self.gradients + self.optimizer + self.activations + self.in_flight + self.buffers

    def margin(self, budget: Budget) -> int:
        return math.ceil(self.total * budget.margin)

    def need(self, budget: Budget) -> int:
        return self.total + self.margin(budget)

    def parts(self) -> dict[str, int]:
        return {"weights": self.weights, "gradients": self.gradients, "optimizer": self.optimizer,
                "activations": self.activations, "in_flight": self.in_flight, "buffers": self.buffers}

    def breakdown(self, budget: Budget | None = None) -> str:
        """``weights 1.2 GB, gradients ..., buffers 800 MB[, margin ...]`` (in-flight only when held)."""
        parts = [(k.replace("_", "-"), v) for k, v in self.parts().items() if k != "in_flight" or v]
        if budget is not None and budget.margin:
            parts.append(("margin", self.margin(budget)))
        return ", ".join(f"{name} {format_size(v)}" for name, v in parts)

    def to_dict(self, budget: Budget | None = None) -> dict:
        d: dict = {"what": self.what, **self.parts(), "total": self.total}
        if budget is not None:
            d.update(margin=self.margin(budget), peak=self.need(budget), capacity=budget.capacity,
                     policy=budget.policy, fits=self.need(budget) <= budget.capacity)
        return d


def refuses(peak: Peak, budget: Budget) -> bool:
    """Whether :func:`check` refuses ``peak`` on ``budget`` (raises), without making its line."""
    return budget.policy == "refuse" and peak.need(budget) > budget.capacity


def check(peak: Peak, budget: Budget) -> str:
    """One line about ``peak`` on ``budget``; raises DoesNotFitError when it does not fit and the policy refuses."""
    if budget.policy == "off":
        return f"memory: not checked (memory = off); estimate {format_size(peak.total)} per GPU ({peak.breakdown()})"
    need = peak.need(budget)
    head = f"{peak.what} needs {format_size(need)} per GPU ({peak.breakdown(budget)}) but {budget.has()}"
    if need > budget.capacity:
        short = format_size(need - budget.capacity)
        if budget.policy == "refuse":
            raise DoesNotFitError(f"memory: {head} (short by {short}; --memory warn runs it anyway)")
        return f"memory: does not fit, running anyway (memory = warn): {head}, short by {short}"
    return f"memory: peak {format_size(need)} of {budget.of()} per GPU ({peak.what}: {peak.breakdown(budget)})"


def largest_fitting(peak_at: Callable[[int], Peak], budget: Budget, upto: int) -> int:
    """The largest ``n`` in ``1..upto`` whose ``peak_at(n)`` fits ``budget``, 0 when even 1 does not.

    ``peak_at`` must grow with ``n`` (a batch or micro-batch: every kind of bytes is constant or grows with
    it), so a bisection finds it in ``log2(upto)`` calls."""
    def fits(n: int) -> bool:
        return peak_at(n).need(budget) <= budget.capacity

    if upto < 1 or not fits(1):
        return 0
    low, high = 1, upto  # fits(low) holds; the answer is in low..high
    while low < high:
        mid = (low + high + 1) // 2
        if fits(mid):
            low = mid
        else:
            high = mid - 1
    return low
