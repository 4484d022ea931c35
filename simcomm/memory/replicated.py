"""GPU memory a data-parallel training rank needs: a whole replica's state and one batch's activations.

Rules (``docs/traces.md``, "GPU memory estimate"), for a model with N parameters,
compute dtype of ``b`` bytes (fp32 4, fp16/bf16 2) and per-rank batch B:

* **weights, gradients, optimizer state**: :mod:`simcomm.memory.state`, replicated
  (``N*b`` weights, ``N*b`` gradients; fp32 optimizer state: SGD with momentum ``4N``,
  Adam ``8N``, plus the ``4N`` master copy under mixed precision: ``16N`` for mixed
  Adam, the K = 12 accounting of ZeRO, Rajbhandari et al., SC 2020, section 3.1);
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
* **context**: :data:`~simcomm.memory.fit.CONTEXT_BYTES` for the CUDA context and framework
  (pytorch/pytorch#34323: "nvidia-smi shows usage of 781MB of memory" right
  after a process initializes CUDA); cuDNN workspaces are not modelled; the
  caching allocator's fragmentation is the margin of :mod:`simcomm.memory.fit`.

:func:`estimate` takes a trace (layer parameters and per-sample shapes), a
:class:`~simcomm.traces.zoo.ModelSpec` or a zoo model name; for a trace of a
zoo model the zoo's saved internals are used, otherwise only outputs count.
:meth:`MemoryEstimate.peak` gives the :class:`~simcomm.memory.fit.Peak` that
:func:`simcomm.memory.fit.check` judges.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from simcomm.errors import ConfigError
from simcomm.memory.fit import CONTEXT_BYTES, Budget, Peak, check
from simcomm.memory.state import DTYPES, OPTIMIZERS, state_bytes_per_param, zero_state_bytes
from simcomm.units import format_size

__all__ = ["CONTEXT_BYTES", "MemoryEstimate", "estimate", "check_fits"]

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
    parameters: int  # weights at the compute dtype
    gradients: int
    optimizer_state: int  # moments, plus the fp32 master copy under mixed precision
    activations: int
    context: int
    note: str = ""  # what could not be counted (e.g. attention internals of a non-zoo trace)
    zero: int = 0  # ZeRO stage the state is sharded at, over ``shards`` ranks
    shards: int = 1

    @property
    def total(self) -> int:
        return self.peak().total

    def peak(self) -> Peak:
        """The estimate as the :class:`~simcomm.memory.fit.Peak` the fit check reads (context as buffers)."""
        sharded = f", ZeRO-{self.zero} over {self.shards} ranks" if self.zero and self.shards > 1 else ""
        return Peak(f"{self.model} at batch {self.batch} ({self.dtype}, {self.optimizer}{sharded})", self.parameters,
                    self.gradients, self.optimizer_state, self.activations, 0, self.context, replica=True)

    def breakdown(self) -> str:
        """``weights 0.1 GB, gradients ..., buffers 800 MB``."""
        return self.peak().breakdown()

    def explain(self) -> str:
        """One line: what, how much, and of what."""
        note = f"; {self.note}" if self.note else ""
        return f"memory: {self.peak().what} needs {format_size(self.total)} per GPU ({self.breakdown()}){note}"


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
                  for x, s in zip(source.layers, spec.layers, strict=False)]
    else:
        layers = [(x.module_type, x.params, x.output_shape, 0.0, 0.0, False, x.input_shape) for x in source.layers]
    in_shape = spec.input_shape if spec else source.layers[0].input_shape
    internal = any(x[0] in ("ScaledDotProductAttention", "LSTM", "GRU", "RNN") for x in layers)
    note = "attention/recurrent internals not counted (not a zoo model)" if internal and not spec else ""
    return source.model, in_shape, layers, source.dtype, note


def estimate(trace_or_spec, batch: int, *, dtype: str | None = None, optimizer: str = "sgd",
             context_bytes: int = CONTEXT_BYTES, zero: int = 0, shards: int = 1) -> MemoryEstimate:
    """Memory one rank needs to train ``trace_or_spec`` at per-rank ``batch`` (see the module rules).

    ``dtype`` is the compute dtype (fp32, fp16, bf16; fp16/bf16 mean mixed
    precision with fp32 master weights); default: the trace's dtype, fp32 for
    a spec or name.  ``optimizer`` is ``sgd`` (with momentum), ``adam`` or ``none``.
    ``zero`` (ZeRO stage 0-3) shards the state over ``shards`` data-parallel ranks
    (:func:`~simcomm.memory.state.zero_state_bytes`); stage 3 then gathers each layer's
    weights before it computes, so the largest layer's full weights count as a buffer.
    """
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ConfigError(f"batch: must be a positive integer, got {batch!r}")
    if optimizer not in OPTIMIZERS:
        raise ConfigError(f"optimizer: {optimizer!r} is not one of {', '.join(OPTIMIZERS)}")
    if context_bytes < 0:
        raise ConfigError(f"context_bytes: must be >= 0, got {context_bytes}")
    model, in_shape, layers, default_dtype, note = _layers(trace_or_spec)
    dtype = dtype or default_dtype
    if dtype not in DTYPES:
        raise ConfigError(f"dtype: {dtype!r} is not one of {', '.join(DTYPES)}")
    if zero not in (0, 1, 2, 3) or isinstance(zero, bool):
        raise ConfigError(f"zero: {zero!r} is not one of 0, 1, 2, 3")
    if isinstance(shards, bool) or not isinstance(shards, int) or shards < 1:
        raise ConfigError(f"shards: must be a positive integer, got {shards!r}")
    wb, gb, ob = state_bytes_per_param(dtype, optimizer)
    b = wb  # activations are kept at the compute dtype, as the weights
    n = sum(x[1] for x in layers)
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
    weights, gradients, state = zero_state_bytes(n, shards, zero, dtype, optimizer)
    gathered = wb * max((x[1] for x in layers), default=0) if zero >= 3 and shards > 1 else 0
    return MemoryEstimate(model, batch, dtype, optimizer, parameters=weights, gradients=gradients,
                          optimizer_state=state, activations=int(activations), context=int(context_bytes + gathered),
                          note=note, zero=zero, shards=shards)


def check_fits(estimate: MemoryEstimate, device_memory_bytes: float, label: str, *, margin: float = 0.0,
               policy: str = "refuse") -> str:
    """:func:`simcomm.memory.fit.check` of ``estimate`` on a device of ``device_memory_bytes`` (``label``:
    "T4"); its line."""
    return check(estimate.peak(), Budget(device_memory_bytes, label, margin, policy))
