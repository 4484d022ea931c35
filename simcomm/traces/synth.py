"""Roofline synthesis: a trace from per-layer FLOPs and bytes over a device's documented peaks.

For one pass (forward, backward or update) of one layer::

    t = max(F / (P * e_c), Q / (W * e_m)) + t_launch             (CNNs and other zoo models)
    t = F / (P * e_c) + Q / (W * e_m) + t_launch                  (transformers: "additive")

with F the FLOPs, Q the bytes moved, P the device's peak FLOP/s for the dtype,
W its memory bandwidth, e_c and e_m the efficiency factors (the device's
calibrated factors for the dtype, see :mod:`simcomm.traces.devices`) and t_launch a
fixed per-pass overhead.  Forward: F = per-sample FLOPs x batch, Q = dtype
bytes x (params + batch x activation elements).  Backward: 2F for layers with
weights (gradient of input and of weights), F for parameter-free ones, and 2Q.
Update: the optimizer streams its state once (SGD with momentum reads/writes 5
fp32 words per parameter, Adam 7) and is memory-bound.  The trace's
``iteration_s`` is the layer sum: nothing was measured.

Why transformers add the two terms: a transformer leaf (an attention or MLP
block) is a few large GEMMs plus separate memory-bound kernels (norms, bias +
activation, residual adds, softmax) on the same stream, so their times add;
under ``max`` the memory-bound kernels hide behind the GEMMs and the roofline
misses that efficiency rises with the hidden size (their bytes grow as s·b·h,
the GEMMs' FLOPs as s·b·h²).  On the H100 captures (docs/traces.md,
"Transformer capture") the additive form cut the held-out error across hidden
sizes 2304–16384 from about 20 % to 2–10 %.  The CNN factors were fitted with
``max`` and keep it.

A transformer's attention core is priced as ``attention`` says
(:data:`~simcomm.traces.zoo.transformer.ATTENTIONS`): ``flash`` (default) or
``unfused`` (Megatron-LM 2021-22: the whole s×s core and the scores through
HBM); the option belongs to the zoo's decoder-only transformers, and any other
model refuses it (:func:`check_attention_for`).

A transformer's GEMMs are priced by their shapes (:mod:`simcomm.traces.gemm`: tensor-core tiles, waves
over the SMs, a memory floor) rather than as ``F / (P e_c)``, and the GEMM-bearing leaves through
:func:`simcomm.traces.transformer_cost.leaf_seconds`, which a parallel layout calls again at its own
tensor-parallel shapes; the trace's ``meta["gemm"]`` keeps what that needs.  ``dtype`` may then also be
one of :data:`FP8_DTYPES` (Transformer Engine's FP8 linear layers; the trace's dtype stays ``bf16``
and ``meta["compute_dtype"]`` names the FP8 choice), on a device with FP8 tensor cores only.
"""

from __future__ import annotations

from dataclasses import replace

import simcomm
from simcomm.errors import ConfigError
from simcomm.traces.devices import DeviceSpec, get_device
from simcomm.traces.io import DTYPE_BYTES, DTYPES
from simcomm.traces.schema import Layer, Trace
from simcomm.traces.transformer_cost import Fp8, LeafPricing, leaf_seconds
from simcomm.traces.zoo import MODELS, LayerSpec, model_spec
from simcomm.traces.zoo.transformer import TRANSFORMERS, TransformerConfig, check_attention, layer_specs

__all__ = ["OPTIMIZER_WORDS", "FP8_DTYPES", "check_attention_for", "check_fp8", "roofline_time", "synth_layers",
           "synth_trace", "transformer_layers"]

#: FP8 compute choices (a precision's compute dtype) -> Transformer Engine recipe
#: (simcomm.traces.transformer_cost.FP8_RECIPES); the format each needs on the device
FP8_DTYPES = {"fp8": "delayed", "fp8-tensorwise": "tensorwise", "mxfp8": "mxfp8"}

#: fp32 words read + written per parameter by one optimizer step (param, grad, state buffers)
OPTIMIZER_WORDS = {"sgd": 5, "adam": 7, "none": 0}


def roofline_time(flops: float, nbytes: float, dev: DeviceSpec, dtype: str, additive: bool = False) -> float:
    """Time of one kernel pass under the roofline with the device's efficiency factors.

    ``additive``: GEMM time plus memory-bound kernels' time (transformer blocks) instead of the larger.
    """
    compute = flops / (dev.flops_for(dtype) * dev.compute_eff)
    memory = nbytes / (dev.mem_bw * dev.memory_eff)
    return (compute + memory if additive else max(compute, memory)) + dev.launch_s


def _layer_times(spec: LayerSpec, batch: int, dev: DeviceSpec, dtype: str, optimizer: str, additive: bool = False):
    b = DTYPE_BYTES[dtype]
    f_flops = spec.flops * batch
    f_bytes = b * (spec.params + batch * spec.mem_elems)
    fwd = roofline_time(f_flops, f_bytes, dev, dtype, additive)
    bwd = roofline_time((2.0 if spec.params else 1.0) * f_flops, 2.0 * f_bytes, dev, dtype, additive)
    upd = 0.0
    if spec.params and OPTIMIZER_WORDS[optimizer]:
        upd = roofline_time(0.0, 4.0 * OPTIMIZER_WORDS[optimizer] * spec.params, dev, dtype)
    return fwd, bwd, upd, f_flops


def synth_layers(specs, batches: list[int], dev: DeviceSpec, dtype: str, optimizer: str,
                 additive: bool = False) -> tuple[Layer, ...]:
    """Roofline layers at ``batches[0]``; with several batches each layer keeps ``by_batch`` rows."""
    layers = []
    for spec in specs:
        fwd, bwd, upd, flops = _layer_times(spec, batches[0], dev, dtype, optimizer, additive)
        rows = ()
        if len(batches) > 1:
            rows = tuple((bb, *_layer_times(spec, bb, dev, dtype, optimizer, additive)[:2]) for bb in batches)
        layers.append(Layer(name=spec.name, module_type=spec.module_type, params=spec.params,
                            grad_bytes=spec.params * DTYPE_BYTES[dtype], forward_s=fwd, backward_s=bwd,
                            update_s=upd, input_shape=spec.input_shape, output_shape=spec.output_shape,
                            flops=flops, by_batch=rows))
    return tuple(layers)


def check_fp8(dtype: str, dev: DeviceSpec, model: str | None = None, field: str = "dtype") -> Fp8 | None:
    """The FP8 recipe for ``dtype`` on ``dev`` (None for a non-FP8 dtype); one line where it cannot run.

    A device without FP8 tensor cores (A100, V100, T4 ...) is refused naming the devices that have them;
    MXFP8 needs Blackwell's block-scaled tensor cores; FP8 prices the zoo's transformers only (TE's linear
    layers), so any other model is refused.
    """
    from simcomm.traces.devices import DEVICES

    if dtype not in FP8_DTYPES:
        return None
    fmt = "mxfp8" if dtype == "mxfp8" else "fp8"
    if fmt not in dev.fp8_formats:
        have = sorted(n for n in DEVICES.names() if fmt in DEVICES.get(n).fp8_formats)
        what = "MXFP8 (Blackwell) tensor cores" if fmt == "mxfp8" else "FP8 tensor cores"
        raise ConfigError(f"{field}: {dtype} needs {what}; device {dev.name!r} ({dev.label or dev.name}) has "
                          f"none; devices with them: {', '.join(have)}")
    if model is not None and model not in TRANSFORMERS:
        MODELS.get(model)
        raise ConfigError(f"{field}: {dtype} runs Transformer Engine's linear layers in FP8 and prices the zoo's "
                          f"transformers only; model {model!r} is not one (transformers: simcomm list models)")
    return Fp8(FP8_DTYPES[dtype], dev.peak_flops[fmt])


def transformer_layers(cfg, batches: list[int], dev: DeviceSpec, dtype: str, optimizer: str,
                       fp8: Fp8 | None = None) -> tuple[tuple[Layer, ...], dict]:
    """The layers of zoo transformer ``cfg`` with every GEMM priced by its shape, and ``{"gemm": ...}`` for meta.

    ``dtype`` is the activations' dtype (bf16 under FP8); the leaves without GEMMs (the embedding) keep the
    additive roofline.
    """
    layers = synth_layers(layer_specs(cfg), batches, dev, dtype, optimizer, additive=True)
    pricing = LeafPricing(dev.flops_for(dtype), dev.sms, dev.compute_eff, dev.memory_eff, dev.mem_bw, dev.launch_s,
                          DTYPE_BYTES[dtype], fp8)
    shape = cfg.meta()
    out = []
    for x in layers:
        now = leaf_seconds(x.module_type, shape, x.params, batches[0], pricing, flops=x.flops)
        if now is None:
            out.append(x)
            continue
        rows = tuple((b, *leaf_seconds(x.module_type, shape, x.params, b, pricing)) for b, _, _ in x.by_batch)
        out.append(replace(x, forward_s=now[0], backward_s=now[1], by_batch=rows))  # type: ignore[arg-type]
    return tuple(out), {"gemm": pricing.meta()}


def check_attention_for(model: str, attention: str | None, shaped: bool = False) -> str | None:
    """``attention`` checked for ``model``: a choice of ATTENTIONS, and given only for a zoo transformer.

    Any other model (a CNN, or BERT and ViT, whose attention is torch's ``nn.MultiheadAttention`` and is
    priced as PyTorch runs it) refuses the option in one line rather than ignoring it: a run that says
    ``unfused`` must have been priced unfused.  ``None`` (not given) passes for every model; ``shaped``: the
    model is a transformer shape given by the scenario (``[model]`` keys or a Hugging Face config).
    """
    if attention is None:
        return None
    check_attention(attention)
    if model not in TRANSFORMERS and not shaped:
        MODELS.get(model)  # an unknown model: the zoo's line listing the models, not this one
        raise ConfigError(f"attention: {attention!r} prices the zoo's decoder-only transformers only; model "
                          f"{model!r} is not one (drop attention for it; transformers: simcomm list models)")
    return attention


def synth_trace(model: str, device: str | DeviceSpec, batch: int | list[int] = 64, dtype: str = "fp32",
                optimizer: str = "sgd", compute_eff: float | None = None,
                memory_eff: float | None = None, attention: str | None = None,
                config: TransformerConfig | None = None) -> Trace:
    """A ``roofline-synth`` trace of zoo ``model`` on ``device`` (unknown names list the choices).

    ``attention`` (transformers only; None: ``flash``) says how the attention core is priced; ``config``
    is a transformer shape to synthesise instead of the zoo's (``model`` is then its name).
    ``dtype`` may be one of :data:`FP8_DTYPES` for a transformer on a device with FP8 tensor cores.
    """
    dev = get_device(device) if isinstance(device, str) else device
    if dtype not in DTYPES and dtype not in FP8_DTYPES:
        raise ConfigError(f"dtype: {dtype!r} is not one of {', '.join(DTYPES + tuple(FP8_DTYPES))}")
    fp8 = check_fp8(dtype, dev, None if config is not None else model)
    compute_dtype, dtype = dtype, ("bf16" if fp8 else dtype)
    if optimizer not in OPTIMIZER_WORDS:
        raise ConfigError(f"optimizer: {optimizer!r} is not one of {', '.join(OPTIMIZER_WORDS)}")
    batches = [batch] if isinstance(batch, int) else list(batch)
    if not batches or any(isinstance(b, bool) or not isinstance(b, int) or b < 1 for b in batches):
        raise ConfigError(f"batch: every batch size must be a positive integer, got {batch!r}")
    for label, eff in (("compute-eff", compute_eff), ("memory-eff", memory_eff)):
        if eff is not None and not 0 < eff <= 1:
            raise ConfigError(f"{label}: must be in (0, 1], got {eff}")
    attention = check_attention_for(model, attention, shaped=config is not None)
    shape = config if config is not None else (TRANSFORMERS[model][0] if model in TRANSFORMERS else None)
    dev.flops_for(dtype)  # unknown dtype for this device: one clear line before any work
    # the device's factors for this precision (fitted, borrowed or default: their source says), unless overridden
    transformer = shape is not None
    base = dev.efficiency(dtype, "transformer" if transformer else "cnn")
    source = base.source if compute_eff is None and memory_eff is None else "given on the command line"
    dev = replace(dev, compute_eff=compute_eff or base.compute, memory_eff=memory_eff or base.memory, fitted=())
    shape = replace(shape, attention=attention or "flash") if shape is not None else None
    extra: dict = {}
    if shape is not None:
        layers, extra = transformer_layers(shape, batches, dev, dtype, optimizer, fp8)
        extra["compute_dtype"] = compute_dtype
    else:
        layers = synth_layers(model_spec(model).layers, batches, dev, dtype, optimizer)
    return Trace(
        model=model, batch=batches[0], dtype=dtype, device=dev.name, device_kind=dev.kind,
        method="roofline-synth", layers=layers,
        iteration_s=sum(x.forward_s + x.backward_s + x.update_s for x in layers),
        frameworks={"simcomm": simcomm.__version__},
        meta={"compute_eff": dev.compute_eff, "memory_eff": dev.memory_eff, "efficiency_source": source,
              "optimizer": optimizer, **({"roofline": "additive"} if transformer else {}),
              "peak_flops": dev.flops_for(dtype), "mem_bw": dev.mem_bw, "launch_s": dev.launch_s,
              "note": "roofline synthesis; iteration_s is the layer sum, not a measurement",
              **({"transformer": shape.meta()} if shape is not None else {}),  # its shape, for the layouts
              **extra},
    )
