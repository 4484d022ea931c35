"""GPU memory of one rank training a large transformer under tensor, pipeline and (sharded) data parallelism.

Rules (docs/transformers.md, "Memory model"), for a rank of a layout with
tensor-parallel size ``t``, pipeline size ``p`` (``v`` virtual stages per
device when interleaved), data-parallel size ``d``, expert-parallel size ``e``:

* **model state** (Rajbhandari et al., SC 2020, "ZeRO", section 3.1): with
  mixed precision (bf16/fp16) and Adam, 2 bytes of parameters, 2 of gradients
  and K = 12 of optimizer state (fp32 master copy, momentum, variance) per
  parameter, 16 in all; fp32 training 4 + 4 + 8.  SGD with momentum keeps 4
  (+ 4 master under mixed precision).  The parameters counted are the rank's
  own: its stage's blocks split ``t`` ways (weights and column-parallel
  biases; norms and row-parallel biases replicated, as Megatron-LM does),
  routed experts split ``t * e`` ways, the vocabulary-parallel embedding on the
  first stage and the output layer (or, tied, Megatron's copy of the
  embedding) on the last.  ZeRO stage 1 shards the optimizer state over the
  ``d`` data-parallel ranks, stage 2 also the gradients, stage 3 also the
  parameters (expert state over ``d / e``, its own data-parallel group);
  shards are rounded up to whole elements as ZeRO pads its partitions.
  With context parallelism (``c`` ranks per sequence) the state is sharded over
  the ``d·c`` ranks that hold the same parameters (Megatron-core's distributed
  optimizer uses the DP×CP group); with HSDP (``shard_group`` G, ZeRO-3 only) over
  the G ranks of a shard group instead, replicated across the ``d·c / G`` groups.
* **activations** per layer and micro-batch of ``b`` sequences of ``s``
  tokens, hidden ``h``, ``a`` heads (Korthikanti et al. 2022, "Reducing
  Activation Recomputation in Large Transformer Models", Table 2, bytes):
  ``sbh(10 + 24/t + 5as/(ht))`` with tensor parallelism (``t = 1``: ``34 +
  5as/h``), ``sbh(34/t + 5as/(ht))`` with sequence parallelism; selective
  recomputation drops the ``5as/(ht)`` term; full recomputation keeps
  ``2sbh``, the layer's input.  The constants are the paper's, derived for
  GPT's multi-head attention and 4h GELU MLP with dropout, and are applied
  unchanged to GQA, SwiGLU and MoE models (an approximation, stated).
  Embedding, final-norm, logits and loss activations are not counted (the
  paper's section 4.3 shows them small next to the blocks').  Context
  parallelism keeps ``s / c`` tokens per rank, so every term is divided by
  ``c`` (the ring's K/V buffers in flight are not counted); Ulysses' all-to-all CP holds the same
  elements split by head instead of by token, so the same ``/ c`` holds (its buffers are not counted).
* **pipeline in-flight micro-batches**: stage ``k`` (0 = first) of 1F1B holds
  ``min(p - k, m)`` micro-batches' activations of its ``L/p`` layers; GPipe
  holds all ``m``; interleaved 1F1B (Narayanan et al. 2021, Megatron-LM's
  schedule) holds ``min(2(p - k - 1) + (v - 1)p + 1, m v)`` model chunks of
  ``L/(pv)`` layers, which for the first stage is Korthikanti's
  ``L (1 + (p - 1)/(pv))`` layers' worth; without pipelining one micro-batch.  Uneven stages
  (``stage_layers``) give stage ``k`` chunks of ``stage_layers[k] / v`` layers (Megatron-core's split).

:func:`estimate` gives the fullest stage, :func:`estimate_stages` every stage,
:func:`check_fits` raises a one-line :class:`~simcomm.errors.ConfigError` with
the numbers.  The CUDA context, allocator fragmentation and communication
buffers are not included (``reserve_bytes`` in :func:`check_fits` adds them).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from simcomm.errors import ConfigError, DoesNotFitError
from simcomm.units import format_size

__all__ = ["RECOMPUTE", "SCHEDULES", "STATE_BYTES", "LLMMemory", "state_bytes_per_param", "zero_state_bytes", "layer_activation_bytes",
           "in_flight", "stage_blocks", "stage_params", "estimate", "estimate_stages", "check_fits"]

RECOMPUTE = ("none", "selective", "full")
SCHEDULES = ("1f1b", "interleaved", "gpipe")
#: (parameter, gradient, optimizer-state) bytes per parameter: mixed precision vs fp32, per optimizer
STATE_BYTES = {("mixed", "adam"): (2, 2, 12), ("mixed", "sgd"): (2, 2, 8), ("mixed", "none"): (2, 2, 0),
               ("fp32", "adam"): (4, 4, 8), ("fp32", "sgd"): (4, 4, 4), ("fp32", "none"): (4, 4, 0)}
_DTYPES = {"bf16": "mixed", "fp16": "mixed", "fp32": "fp32"}


def state_bytes_per_param(dtype: str = "bf16", optimizer: str = "adam") -> tuple[int, int, int]:
    """(parameter, gradient, optimizer) bytes per parameter; unknown choices are one-line errors."""
    if dtype not in _DTYPES:
        raise ConfigError(f"dtype: {dtype!r} is not one of {', '.join(_DTYPES)}")
    if (_DTYPES[dtype], optimizer) not in STATE_BYTES:
        raise ConfigError(f"optimizer: {optimizer!r} is not one of adam, sgd, none")
    return STATE_BYTES[(_DTYPES[dtype], optimizer)]


def zero_state_bytes(n: int, dp: int = 1, zero: int = 0, dtype: str = "bf16",
                     optimizer: str = "adam") -> tuple[int, int, int]:
    """(parameter, gradient, optimizer) bytes per rank of ``n`` parameters replicated over ``dp`` ranks at ZeRO
    stage ``zero`` (ZeRO paper, Figure 1: stage 1 shards the optimizer state, 2 also gradients, 3 also
    parameters; a shard is ``ceil(n / dp)`` elements)."""
    pb, gb, ob = state_bytes_per_param(dtype, optimizer)
    shard = _split(n, dp)
    return (pb * (shard if zero >= 3 else n), gb * (shard if zero >= 2 else n), ob * (shard if zero >= 1 else n))


def layer_activation_bytes(s: int, b: int, h: int, a: int, t: int = 1, sp: bool = False,
                           recompute: str = "none") -> Fraction:
    """Korthikanti et al. 2022 Table 2: activation bytes one transformer layer keeps for one micro-batch."""
    if recompute not in RECOMPUTE:
        raise ConfigError(f"recompute: {recompute!r} is not one of {', '.join(RECOMPUTE)}")
    sbh = Fraction(s * b * h)
    if recompute == "full":
        return 2 * sbh
    base = Fraction(34, t) if sp else 10 + Fraction(24, t)
    scores = 0 if recompute == "selective" else Fraction(5 * a * s, h * t)
    return sbh * (base + scores)


def in_flight(p: int, k: int, m: int | None, schedule: str = "1f1b", v: int = 1) -> Fraction:
    """Micro-batches' worth of stage ``k``'s layers held at the peak (``m`` None: unbounded micro-batches)."""
    if p == 1:
        return Fraction(1)
    cap = math.inf if m is None else m
    if schedule == "gpipe":
        if m is None:
            raise ConfigError("microbatches: GPipe holds every micro-batch; give their number")
        return Fraction(m)
    if schedule == "1f1b" or v == 1:
        return Fraction(min(p - k, cap))
    chunks = min(2 * (p - k - 1) + (v - 1) * p + 1, cap * v)
    return Fraction(chunks, v)


def _split(n: int, t: int) -> int:
    return -(-n // t)


def _block_params(cfg, i: int, t: int, e: int) -> tuple[int, int]:
    """(dense, expert) parameters of block ``i`` on one rank: matrices split, norms and row biases replicated."""
    h, q, kv, norm = cfg.hidden, cfg.heads * cfg.head_dim, cfg.kv_heads * cfg.head_dim, cfg.norm_params()
    attn = _split(h * (q + 2 * kv) + q * h + ((q + 2 * kv) if cfg.bias else 0), t) + (h if cfg.bias else 0) + norm
    row_bias = h if cfg.bias and cfg.mlp == "gelu" else 0

    def mlp(f):
        return _split(cfg.expert_params(f) - row_bias, t) + row_bias

    if not cfg.is_moe(i):
        return attn + mlp(cfg.dense_ffn or cfg.ffn) + norm, 0
    shared = cfg.shared_experts * mlp(cfg.ffn)
    routed = _split(cfg.experts * (cfg.expert_params() - row_bias), t * e) + cfg.experts // e * row_bias
    return attn + shared + h * cfg.experts + norm, routed


def stage_blocks(layers: int, p: int, k: int, v: int = 1, stage_layers: tuple[int, ...] | None = None) -> list[int]:
    """Indices of the blocks stage ``k`` holds: ``v`` chunks ``k, k + p, ...`` of ``layers / (pv)`` blocks
    (Megatron-LM's placement), or with ``stage_layers`` ``v`` chunks of ``stage_layers[k] / v`` blocks, chunk c
    starting at ``c·layers/v + sum(stage_layers[:k]) / v`` (Megatron-core's ``get_transformer_layer_offset``
    with uneven first/last stages; consecutive blocks when ``v = 1``)."""
    if stage_layers is not None:
        n = stage_layers[k] // v
        start = sum(stage_layers[:k]) // v
        return [c * (layers // v) + start + j for c in range(v) for j in range(n)]
    per_chunk = layers // (p * v)
    return [c * per_chunk + j for c in range(k, p * v, p) for j in range(per_chunk)]


def stage_params(cfg, t: int, p: int, k: int, v: int = 1, e: int = 1,
                 stage_layers: tuple[int, ...] | None = None) -> tuple[int, int]:
    """(dense, expert) parameters a rank of pipeline stage ``k`` holds (Megatron-LM's placement)."""
    blocks = stage_blocks(cfg.layers, p, k, v, stage_layers)
    dense = expert = 0
    for i in blocks:
        d, x = _block_params(cfg, i, t, e)
        dense, expert = dense + d, expert + x
    word = _split(cfg.vocab * cfg.hidden, t)
    if k == 0:
        dense += word + cfg.positions * cfg.hidden
    if k == p - 1:
        # untied: the output layer; tied across stages: Megatron's copy of the embedding on the last stage
        dense += cfg.norm_params() + (word if not cfg.tied or p > 1 else 0)
    return dense, expert


@dataclass(frozen=True)
class LLMMemory:
    """Bytes one rank of pipeline stage ``stage`` needs, and the layout that gave them."""

    model: str
    layout: str
    stage: int
    params: int  # parameters this rank owns before ZeRO sharding
    parameters: int
    gradients: int
    optimizer_state: int
    activations: int

    @property
    def total(self) -> int:
        return self.parameters + self.gradients + self.optimizer_state + self.activations

    def breakdown(self) -> str:
        return (f"parameters {format_size(self.parameters)}, gradients {format_size(self.gradients)}, "
                f"optimizer {format_size(self.optimizer_state)}, activations {format_size(self.activations)}")


def _positive(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{name}: must be a positive integer, got {value!r}")
    return value


def _check_layout(cfg, tp, pp, dp, ep, zero, micro_batch, microbatches, schedule, v, recompute, stage_layers,
                  cp=1, shard_group=None, seq=None):
    for name, value in (("tp", tp), ("pp", pp), ("dp", dp), ("ep", ep), ("micro_batch", micro_batch),
                        ("virtual_stages", v), ("cp", cp)):
        _positive(name, value)
    if cp > 1 and (seq or cfg.seq) % cp:
        raise ConfigError(f"cp: {cp} does not divide the sequence length {seq or cfg.seq} of {cfg.name}")
    if shard_group is not None:
        _positive("shard_group", shard_group)
        if zero != 3:
            raise ConfigError(f"shard_group: {shard_group} (HSDP) needs zero 3, not zero {zero}")
        if (dp * cp) % shard_group:
            raise ConfigError(f"shard_group: {shard_group} does not divide the {dp * cp} data-parallel replicas "
                              f"(dp {dp} × cp {cp})")
    if microbatches is not None:
        _positive("microbatches", microbatches)
    if zero not in (0, 1, 2, 3) or isinstance(zero, bool):
        raise ConfigError(f"zero: {zero!r} is not one of 0, 1, 2, 3")
    if schedule not in SCHEDULES:
        raise ConfigError(f"schedule: {schedule!r} is not one of {', '.join(SCHEDULES)}")
    if recompute not in RECOMPUTE:
        raise ConfigError(f"recompute: {recompute!r} is not one of {', '.join(RECOMPUTE)}")
    if v > 1 and (schedule != "interleaved" or pp == 1):
        raise ConfigError(f"virtual_stages: {v} needs the interleaved schedule and pp > 1")
    for what, n in (("heads", cfg.heads), ("kv_heads", cfg.kv_heads), ("ffn", cfg.ffn)):
        if n % tp:
            raise ConfigError(f"tp: {tp} does not divide the {what} of {cfg.name} ({n})")
    if stage_layers is not None:
        ok = (isinstance(stage_layers, (tuple, list)) and len(stage_layers) == pp
              and all(isinstance(n, int) and not isinstance(n, bool) and n >= 1 and n % v == 0 for n in stage_layers)
              and sum(stage_layers) == cfg.layers)
        if not ok:
            raise ConfigError(f"stage_layers: must be {pp} positive layer counts summing to the {cfg.layers} layers "
                              f"of {cfg.name}" + (f", each a multiple of virtual_stages {v}" if v > 1 else "")
                              + f", got {stage_layers!r}")
    elif cfg.layers % (pp * v):
        raise ConfigError(f"pp: {pp} x virtual_stages {v} does not divide the {cfg.layers} layers of {cfg.name}")
    if ep > 1 and (not cfg.experts or cfg.experts % ep or (dp * cp) % ep):
        raise ConfigError(f"ep: {ep} must divide the experts of {cfg.name} ({cfg.experts}) and dp x cp "
                          f"({dp * cp})")
    if schedule == "interleaved" and v > 1 and microbatches is not None and microbatches % pp:
        raise ConfigError(f"microbatches: interleaving needs a multiple of pp ({pp}), got {microbatches}")


def _config(model):
    from simcomm.traces.zoo.transformer import TransformerConfig, transformer_config

    return model if isinstance(model, TransformerConfig) else transformer_config(model)


def estimate_stages(model, *, tp: int = 1, pp: int = 1, dp: int = 1, ep: int = 1, zero: int = 0,
                    micro_batch: int = 1, microbatches: int | None = None, seq: int | None = None,
                    sequence_parallel: bool = False, recompute: str = "none", schedule: str = "1f1b",
                    virtual_stages: int = 1, dtype: str = "bf16", optimizer: str = "adam",
                    stage_layers: tuple[int, ...] | None = None, cp: int = 1,
                    shard_group: int | None = None) -> list[LLMMemory]:
    """Memory of a rank of every pipeline stage (see the module rules); ``model``: a zoo name or a config.

    ``stage_layers`` gives uneven stages (Llama 3 405B: 126 layers on 16 stages, the first and last one layer
    short, The Llama 3 Herd of Models section 3.3.2); default ``layers / pp`` each.  With ``virtual_stages`` v
    each count must be a multiple of v (each of the stage's v chunks holds count / v blocks).
    """
    cfg = _config(model)
    _check_layout(cfg, tp, pp, dp, ep, zero, micro_batch, microbatches, schedule, virtual_stages, recompute,
                  stage_layers, cp, shard_group, seq)
    state_bytes_per_param(dtype, optimizer)  # unknown dtype or optimizer: one line before any work
    s = _positive("seq", seq) if seq is not None else cfg.seq
    per_layer = layer_activation_bytes(s, micro_batch, cfg.hidden, cfg.heads, tp, sequence_parallel, recompute) / cp
    shards = shard_group if shard_group is not None else dp * cp  # ranks one parameter's state is split over
    layout = (f"tp {tp}{f', cp {cp}' if cp > 1 else ''}, pp {pp}"
              f"{f' (x{virtual_stages} virtual)' if virtual_stages > 1 else ''}, dp {dp}"
              f"{f', ep {ep}' if ep > 1 else ''}, ZeRO-{zero}"
              f"{f' (HSDP shard group {shard_group})' if shard_group is not None else ''}, micro-batch {micro_batch}, {schedule}, "
              f"recompute {recompute}{', sequence parallel' if sequence_parallel else ''}, {dtype}, {optimizer}")
    out = []
    for k in range(pp):
        dense, expert = stage_params(cfg, tp, pp, k, virtual_stages, ep, stage_layers)
        layers = len(stage_blocks(cfg.layers, pp, k, virtual_stages, stage_layers))  # L / pp when even

        # expert state has its own data-parallel group of dp / ep ranks
        state = [a + b for a, b in zip(zero_state_bytes(dense, shards, zero, dtype, optimizer),
                                       zero_state_bytes(expert, dp * cp // ep, zero, dtype, optimizer))]
        acts = per_layer * layers * in_flight(pp, k, microbatches, schedule, virtual_stages)
        out.append(LLMMemory(cfg.name, layout, k, dense + expert, *state, math.ceil(acts)))
    return out


def estimate(model, **layout) -> LLMMemory:
    """The fullest stage's memory (the one that decides whether the layout fits); same arguments as
    :func:`estimate_stages`."""
    return max(estimate_stages(model, **layout), key=lambda m: (m.total, -m.stage))


def check_fits(mem: LLMMemory, device, reserve_bytes: int = 0) -> None:
    """Raise one ConfigError line when ``mem`` plus ``reserve_bytes`` exceeds the device's memory.

    ``device`` is a trace device name (``h100``: its nominal capacity) or a number of bytes.
    """
    if isinstance(device, str):
        from simcomm.traces.devices import get_device

        dev = get_device(device)
        capacity, what = dev.memory, f"a {dev.label}"
    else:
        capacity, what = device, "the device"
    if isinstance(capacity, bool) or not isinstance(capacity, (int, float)) or capacity <= 0:
        raise ConfigError(f"device memory: must be > 0 bytes, got {capacity!r}")
    if reserve_bytes < 0:
        raise ConfigError(f"reserve_bytes: must be >= 0, got {reserve_bytes}")
    need = mem.total + reserve_bytes
    if need > capacity:
        extra = f", reserve {format_size(reserve_bytes)}" if reserve_bytes else ""
        raise DoesNotFitError(f"memory: {mem.model} with {mem.layout} needs {format_size(need)} per GPU on pipeline "
                          f"stage {mem.stage} ({mem.breakdown()}{extra}) but {what} has {format_size(capacity)}")
