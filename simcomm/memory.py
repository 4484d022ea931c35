"""GPU memory a data-parallel training rank needs: parameters, gradients, optimizer state, activations.

Rules (``docs/traces.md``, "GPU memory estimate"), for a model with N parameters,
compute dtype of ``b`` bytes (fp32 4, fp16/bf16 2) and per-rank batch B:

* **parameters**: ``N*b``; under mixed precision (fp16/bf16) plus the fp32
  master copy ``4N`` the optimizer updates;
* **gradients**: ``N*b`` (one gradient per parameter at the compute dtype);
* **optimizer state** (fp32): SGD with momentum ``4N`` (one buffer), Adam
  ``8N`` (two moments), none ``0``.  Mixed precision with Adam therefore costs
  ``2N + 4N + 2N + 8N = 16N`` bytes, the K = 12 accounting of ZeRO
  (Rajbhandari et al., SC 2020, section 3.1);
* **activations**: what backward keeps, ``B * b`` bytes per element of: the
  model input, **every layer's output** (the next layer's input and, for
  Tanh/Sigmoid/Softmax/GELU, the layer's own backward input) except ReLU and
  LeakyReLU, which frameworks run in place over their input (torchvision's
  ``ReLU(inplace=True)``: the kept tensor is the input's storage), and each
  layer's saved internals (attention probabilities ``heads * T^2``, twice with
  a one-byte mask when dropout follows the softmax; recurrent gates
  ``T * H * (gates + 1)``); plus the input of a layer fed by a structural op
  (a residual sum before a LayerNorm or ReLU, a concatenation), which no layer
  output accounts for; plus ``B`` bytes per element of a Dropout output
  (its boolean mask) and ``8 B`` per MaxPool output (int64 indices); plus, in
  flight during backward, the gradients of the largest layer output and input
  (``2 * max output``).  Other layer inputs are not counted separately: each
  is an earlier layer's output;
* **context**: :data:`CONTEXT_BYTES` for the CUDA context and framework
  (pytorch/pytorch#34323: "nvidia-smi shows usage of 781MB of memory" right
  after a process initializes CUDA); the caching allocator's fragmentation and
  cuDNN workspaces are not modelled.

:func:`estimate` takes a trace (layer parameters and per-sample shapes), a
:class:`~simcomm.traces.zoo.ModelSpec` or a zoo model name; for a trace of a
zoo model the zoo's saved internals are used, otherwise only outputs count.
:func:`check_fits` raises a one-line :class:`~simcomm.errors.ConfigError`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from simcomm.errors import ConfigError, DoesNotFitError
from simcomm.units import format_size

__all__ = ["CONTEXT_BYTES", "OPTIMIZER_STATE_BYTES", "DTYPE_BYTES", "MemoryEstimate", "estimate", "check_fits"]

#: CUDA context + framework allowance per process (781 MB measured in pytorch/pytorch#34323, rounded up)
CONTEXT_BYTES = 800_000_000
#: fp32 optimizer-state bytes per parameter
OPTIMIZER_STATE_BYTES = {"sgd": 4, "adam": 8, "none": 0}
#: compute dtypes and their bytes
DTYPE_BYTES = {"fp32": 4, "fp16": 2, "bf16": 2}
_MIXED = ("fp16", "bf16")
# extra bytes per output element kept by backward, by module type (why: masks and indices are not outputs)
_EXTRA_BYTES = {"Dropout": 1, "MaxPool2d": 8}
# activations frameworks run in place over their input (torchvision's ReLU(inplace=True)): no new tensor
_IN_PLACE = ("ReLU", "LeakyReLU")


@dataclass(frozen=True)
class MemoryEstimate:
    """Bytes one training rank needs, by kind; ``total`` adds them up."""

    model: str
    batch: int
    dtype: str
    optimizer: str
    parameters: int
    gradients: int
    optimizer_state: int
    activations: int
    context: int
    note: str = ""  # what could not be counted (e.g. attention internals of a non-zoo trace)

    @property
    def total(self) -> int:
        return self.parameters + self.gradients + self.optimizer_state + self.activations + self.context

    def breakdown(self) -> str:
        """``parameters 0.1 GB, gradients ..., context 800 MB``."""
        parts = (("parameters", self.parameters), ("gradients", self.gradients),
                 ("optimizer", self.optimizer_state), ("activations", self.activations), ("context", self.context))
        return ", ".join(f"{name} {format_size(v)}" for name, v in parts)

    def explain(self) -> str:
        """One line: what, how much, and of what."""
        note = f"; {self.note}" if self.note else ""
        return (f"memory: {self.model} at batch {self.batch} ({self.dtype}, {self.optimizer}) needs "
                f"{format_size(self.total)} per GPU ({self.breakdown()}){note}")


def _numel(shape) -> int:
    return math.prod(shape) if shape else 1


def _row(x):
    return x.module_type, x.params, x.output_shape, x.saved_elems, x.mask_elems, x.input_kept, x.input_shape


def _layers(source):
    """(model, input shape, [(type, params, out shape, saved, masks, input kept, in shape)], dtype, note)."""
    from simcomm.traces.schema import Trace
    from simcomm.traces.zoo import MODELS, ModelSpec, model_spec

    if isinstance(source, str):
        source = model_spec(source)  # unknown names list the choices
    if isinstance(source, ModelSpec):
        return source.name, source.input_shape, [_row(x) for x in source.layers], "fp32", ""
    if not isinstance(source, Trace):
        raise ConfigError(f"memory: expected a Trace, a ModelSpec or a zoo model name, got {type(source).__name__}")
    spec = model_spec(source.model) if source.model in MODELS else None
    if spec and [x.name for x in spec.layers] != [x.name for x in source.layers]:
        spec = None  # a modified model: do not borrow the zoo's internals
    if spec:  # the trace's own parameters and shapes, the zoo's knowledge of what backward keeps
        layers = [(x.module_type, x.params, x.output_shape, s.saved_elems, s.mask_elems, s.input_kept, s.input_shape)
                  for x, s in zip(source.layers, spec.layers)]
    else:
        layers = [(x.module_type, x.params, x.output_shape, 0.0, 0.0, False, x.input_shape) for x in source.layers]
    in_shape = spec.input_shape if spec else source.layers[0].input_shape
    internal = any(x[0] in ("ScaledDotProductAttention", "LSTM", "GRU", "RNN") for x in layers)
    note = "attention/recurrent internals not counted (not a zoo model)" if internal and not spec else ""
    return source.model, in_shape, layers, source.dtype, note


def estimate(trace_or_spec, batch: int, *, dtype: str | None = None, optimizer: str = "sgd",
             context_bytes: int = CONTEXT_BYTES) -> MemoryEstimate:
    """Memory one rank needs to train ``trace_or_spec`` at per-rank ``batch`` (see the module rules).

    ``dtype`` is the compute dtype (fp32, fp16, bf16; fp16/bf16 mean mixed
    precision with fp32 master weights); default: the trace's dtype, fp32 for
    a spec or name.  ``optimizer`` is ``sgd`` (with momentum), ``adam`` or ``none``.
    """
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ConfigError(f"batch: must be a positive integer, got {batch!r}")
    if optimizer not in OPTIMIZER_STATE_BYTES:
        raise ConfigError(f"optimizer: {optimizer!r} is not one of {', '.join(OPTIMIZER_STATE_BYTES)}")
    if context_bytes < 0:
        raise ConfigError(f"context_bytes: must be >= 0, got {context_bytes}")
    model, in_shape, layers, default_dtype, note = _layers(trace_or_spec)
    dtype = dtype or default_dtype
    if dtype not in DTYPE_BYTES:
        raise ConfigError(f"dtype: {dtype!r} is not one of {', '.join(DTYPE_BYTES)}")
    b = DTYPE_BYTES[dtype]
    n = sum(x[1] for x in layers)
    master = 4 * n if dtype in _MIXED else 0
    kept = _numel(in_shape) * b  # per sample
    largest = 0
    for kind, _, out, saved, masks, input_kept, inp in layers:
        elems = _numel(out)
        own = 0 if kind in _IN_PLACE else b  # an in-place ReLU's output is its input's storage
        kept += elems * (own + _EXTRA_BYTES.get(kind, 0)) + saved * b + masks
        if input_kept:  # a residual sum or concat no leaf produced
            kept += _numel(inp) * b
        largest = max(largest, elems)
    activations = batch * (kept + 2 * largest * b)
    return MemoryEstimate(model, batch, dtype, optimizer, parameters=n * b + master, gradients=n * b,
                          optimizer_state=OPTIMIZER_STATE_BYTES[optimizer] * n, activations=int(activations),
                          context=int(context_bytes), note=note)


def check_fits(estimate: MemoryEstimate, device_memory_bytes: float, what: str) -> None:
    """Raise a one-line ConfigError when ``estimate`` exceeds ``device_memory_bytes`` (``what``: "a T4")."""
    if device_memory_bytes <= 0:
        raise ConfigError(f"device memory: must be > 0 bytes, got {device_memory_bytes}")
    if estimate.total > device_memory_bytes:
        raise DoesNotFitError(f"memory: {estimate.model} at batch {estimate.batch} ({estimate.dtype}, "
                          f"{estimate.optimizer}) needs {format_size(estimate.total)} per GPU "
                          f"({estimate.breakdown()}) but {what} has {format_size(device_memory_bytes)}")
