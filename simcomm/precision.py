"""Numeric precision: what the device computes in, and what travels on the wire.

Compute precision and wire precision are separate choices in real training
stacks: Apex AMP O1 and ``torch.autocast`` compute in fp16/bf16 while the
model's parameters, and therefore its gradients, stay fp32, so DDP, Horovod
and the seed papers' gossip code all-reduce or send fp32 tensors (seed 001's
code sends ``amp.master_params``; shared/reference/seed-code-facts.md A.2).
A *precision preset* names the pair; ``wire_dtype`` overrides the wire side
alone (e.g. fp16 gradient compression of an fp32 model).

========== ============ ========= ===================================================
preset     compute      wire      what runs it
========== ============ ========= ===================================================
fp32       fp32         fp32      plain fp32 training
amp-fp16   fp16         fp32      Apex AMP O1, torch.autocast(float16) + GradScaler
amp-bf16   bf16         fp32      torch.autocast(bfloat16): fp32 weights, fp32 reduction
fp16       fp16         fp16      a half model (Apex O2/O3-style, .half()): fp16 gradients
bf16       bf16         bf16      a bf16 model (model.to(bfloat16)): bf16 gradients
fp8        fp8          fp32      Megatron-core + Transformer Engine, --bf16 --fp8-format hybrid
                                  (--fp8-recipe delayed, its default)
fp8-       fp8-         fp32      the same with --fp8-recipe tensorwise (current scaling)
tensorwise tensorwise
mxfp8      mxfp8        fp32      the same with --fp8-recipe mxfp8 (Blackwell only)
========== ============ ========= ===================================================

The FP8 presets compute the transformer's linear layers in FP8 and the rest in bf16
(:mod:`simcomm.traces.transformer_cost` says which, and the cast passes); they run on a device
with FP8 tensor cores only, and price the zoo's transformers only.  Their wire is fp32 because
Megatron-LM with ``--bf16`` accumulates and all-reduces gradients in fp32 unless
``--grad-reduce-in-bf16`` (``megatron/training/arguments.py``, ``validate_args``: "bfloat16 requires
gradient accumulation and all-reduce to be done in fp32"); ``--wire-dtype bf16`` is that flag.
"""

from __future__ import annotations

from dataclasses import dataclass

from simcomm.errors import ConfigError

__all__ = ["Precision", "PRECISIONS", "WIRE_DTYPES", "DTYPE_BYTES", "get_precision", "check_wire_dtype",
           "dtype_bytes"]

#: bytes per element of every dtype simcomm understands (aliases included)
DTYPE_BYTES = {"fp64": 8, "float64": 8, "fp32": 4, "float32": 4, "fp16": 2, "float16": 2, "bf16": 2,
               "bfloat16": 2}
#: dtypes a gradient or model message can travel in
WIRE_DTYPES = ("fp32", "fp16", "bf16", "fp64")


@dataclass(frozen=True)
class Precision:
    """A named (compute dtype, wire dtype) pair."""

    name: str
    compute: str
    wire: str
    summary: str


PRECISIONS: dict[str, Precision] = {p.name: p for p in (
    Precision("fp32", "fp32", "fp32", "fp32 compute, fp32 gradients on the wire"),
    Precision("amp-fp16", "fp16", "fp32", "mixed precision (Apex AMP O1 / torch.autocast fp16): fp16 compute, "
                                          "fp32 master weights and fp32 gradients on the wire"),
    Precision("amp-bf16", "bf16", "fp32", "torch.autocast bf16: bf16 compute, fp32 weights and fp32 gradient "
                                          "reduction"),
    Precision("fp16", "fp16", "fp16", "pure fp16 model: fp16 compute and fp16 gradients on the wire"),
    Precision("bf16", "bf16", "bf16", "pure bf16 model: bf16 compute and bf16 gradients on the wire"),
    *(Precision(name, name, "fp32", f"{what}: QKV, attention-output, FC1 and FC2 GEMMs (fprop, dgrad, wgrad) in "
                "FP8 with their cast/transpose passes; attention core, norms, softmax, embedding and LM head "
                "in bf16; bf16 weights and activations, fp32 gradient reduction (Megatron-LM --bf16)")
      for name, what in (("fp8", "FP8 as Transformer Engine runs it, DelayedScaling (Megatron-core "
                                 "--fp8-format hybrid --fp8-recipe delayed)"),
                         ("fp8-tensorwise", "FP8 as Transformer Engine runs it, Float8CurrentScaling "
                                            "(--fp8-recipe tensorwise)"),
                         ("mxfp8", "MXFP8 as Transformer Engine runs it on Blackwell, MXFP8BlockScaling "
                                   "(--fp8-recipe mxfp8, one scale per 32 elements)"))),
)}


def get_precision(name: str) -> Precision:
    if name not in PRECISIONS:
        raise ConfigError(f"precision: {name!r} is not valid; valid choices: {', '.join(PRECISIONS)}")
    return PRECISIONS[name]


def check_wire_dtype(value: str, field: str = "wire_dtype") -> str:
    if value not in WIRE_DTYPES:
        raise ConfigError(f"{field}: {value!r} is not valid; valid choices: {', '.join(WIRE_DTYPES)}")
    return value


def dtype_bytes(dtype: str) -> int:
    """Bytes per element of ``dtype`` (a trace's dtype or a wire dtype); unknown names are errors."""
    if dtype not in DTYPE_BYTES:
        raise ConfigError(f"dtype: {dtype!r} is not valid; valid choices: {', '.join(DTYPE_BYTES)}")
    return DTYPE_BYTES[dtype]
