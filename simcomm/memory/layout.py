"""GPU memory of one rank training a large transformer under tensor, pipeline and (sharded) data parallelism.

Rules (docs/strategies-llm.md, "Memory"), for a rank of a layout with tensor-parallel size
``t``, pipeline size ``p`` (``v`` virtual stages per device when interleaved), data-parallel
size ``d``, expert-parallel size ``e``, context-parallel size ``c``:

* **model state** (:mod:`simcomm.memory.state`): the rank's own parameters, its stage's blocks
  split ``t`` ways (weights and column-parallel biases; norms and row-parallel biases
  replicated, as Megatron-LM does), routed experts split ``t * e`` ways, the vocabulary-parallel
  embedding on the first stage and the output layer (or, tied, Megatron's copy of the embedding)
  on the last.  ZeRO shards over the ``d·c`` ranks that hold the same parameters
  (Megatron-core's distributed optimizer uses the DP×CP group), expert state over ``d·c / e``;
  with HSDP (``shard_group`` G, ZeRO-3 only) over the G ranks of a shard group.
* **activations** (:mod:`simcomm.memory.activations`): every block of the stage for one
  micro-batch, per attention kind and recomputation kind; under recomputation also the one
  block being recomputed during backward.
* **in flight**: the other micro-batches the schedule holds at the peak
  (:func:`~simcomm.memory.activations.in_flight`, Megatron-core's warm-up counts).
* **buffers/workspace**: the CUDA context (:data:`~simcomm.memory.fit.CONTEXT_BYTES`); the first
  stage's embedding dropout masks (one per micro-batch in flight) and the last stage's output
  layer and fp32 logits for the loss (one micro-batch: 1F1B runs its backward at once); under
  ZeRO-3 the gathered weights of two units (the one computing and the one prefetched, FSDP's
  default of one ahead) and one unit's unsharded gradients, the largest unit of the stage (a
  block, or the embedding/output layer); DeepSpeed gathers leaf modules instead (its largest
  leaf, its prefetch bucket, and the leaf's gradients plus its reduce bucket).

:func:`estimate` gives the fullest stage, :func:`estimate_stages` every stage; a
:class:`LLMMemory`'s :meth:`~LLMMemory.peak` is what :func:`simcomm.memory.fit.check` judges.
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from dataclasses import dataclass
from fractions import Fraction

from simcomm.errors import ConfigError
from simcomm.memory.activations import RECOMPUTE, SCHEDULES, embedding_bytes, head_bytes, in_flight, layer_bytes
from simcomm.memory.fit import CONTEXT_BYTES, Budget, Peak, check
from simcomm.memory.state import split as _split
from simcomm.memory.state import state_bytes_per_param, zero_state_bytes
from simcomm.units import format_size

__all__ = ["LLMMemory", "stage_blocks", "stage_params", "estimate", "estimate_stages", "device_budget", "check_fits"]


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
                 stage_layers: tuple[int, ...] | None = None, etp: int | None = None) -> tuple[int, int]:
    """(dense, expert) parameters a rank of pipeline stage ``k`` holds (Megatron-LM's placement; routed experts
    split over ``etp x e``, ``etp`` default ``t``)."""
    return _stage_params(cfg, t, p, k, v, e, None if stage_layers is None else tuple(stage_layers),
                         t if etp is None else etp)


@functools.lru_cache(maxsize=1 << 14)
def _stage_params(cfg, t: int, p: int, k: int, v: int, e: int,
                  stage_layers: tuple[int, ...] | None, etp: int) -> tuple[int, int]:
    # cached (the config is frozen): plan's memory check asks this of every stage of tens of thousands of layouts
    blocks = stage_blocks(cfg.layers, p, k, v, stage_layers)
    dense = expert = 0
    # a block's count depends on its index only through its kind (MoE or not): once per kind, times its blocks
    first = {cfg.is_moe(i): i for i in reversed(blocks)}
    for moe, n in Counter(cfg.is_moe(i) for i in blocks).items():
        d, x = cfg.rank_block_params(first[moe], t, e, etp)
        dense, expert = dense + n * d, expert + n * x
    word = _split(cfg.vocab * cfg.hidden, t)
    if k == 0:  # with a norm after the embedding (BLOOM) on the first stage too
        dense += word + cfg.positions * cfg.hidden + (cfg.norm_params() if cfg.embed_norm else 0)
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
    parameters: int  # weights
    gradients: int
    optimizer_state: int
    activations: int  # one micro-batch of the stage's blocks (+ the block being recomputed)
    in_flight: int = 0  # the other micro-batches the schedule holds
    buffers: int = 0  # context, embedding/logits buffers, ZeRO-3's gathered units

    @property
    def total(self) -> int:
        # Peak.total's sum, without building the Peak (and its label) that plan's search would ask for per stage
        return (self.parameters + self.gradients + self.optimizer_state + self.activations + self.in_flight
                + self.buffers)

    def peak(self) -> Peak:
        return Peak(f"{self.model} with {self.layout} (pipeline stage {self.stage})", self.parameters,
                    self.gradients, self.optimizer_state, self.activations, self.in_flight, self.buffers)

    def breakdown(self) -> str:
        return self.peak().breakdown()


def _positive(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{name}: must be a positive integer, got {value!r}")
    return value


def _check_layout(cfg, tp, pp, dp, ep, zero, micro_batch, microbatches, schedule, v, recompute, stage_layers,
                  cp=1, shard_group=None, seq=None, etp=None):
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
        raise ConfigError(f"recompute: {recompute!r} is not valid; valid choices: {', '.join(RECOMPUTE)}")
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
    etp = tp if etp is None else _positive("etp", etp)
    if ep > 1 and (not cfg.experts or cfg.experts % ep):
        raise ConfigError(f"ep: {ep} must divide the experts of {cfg.name} ({cfg.experts})")
    if (ep > 1 or etp != tp) and (tp * dp * cp) % (etp * ep):
        # Megatron-core's MoE parallel folding re-cuts a stage's tp x dp x cp ranks into etp x ep x expert-data
        raise ConfigError(f"ep: etp {etp} x ep {ep} must divide the tp x dp x cp = {tp * dp * cp} ranks of a "
                          "pipeline stage (Megatron-core re-cuts them into etp x ep x expert-data-parallel)")
    if schedule == "interleaved" and v > 1 and microbatches is not None and microbatches % pp:
        raise ConfigError(f"microbatches: interleaving needs a multiple of pp ({pp}), got {microbatches}")


def _config(model):
    from simcomm.traces.zoo.transformer import TransformerConfig, transformer_config

    return model if isinstance(model, TransformerConfig) else transformer_config(model)


#: ZeRO-3 gather units (the strategy's ``gather_unit``): a block for both ``layer`` and ``block`` (FSDP's wrapped
#: transformer block, Megatron-FSDP's layer), a leaf module for ``module`` (DeepSpeed)
GATHER_UNITS = ("layer", "block", "module")


def _largest_leaf(cfg, i: int) -> int | None:
    """Parameters of block ``i``'s largest leaf module (DeepSpeed's unit: the QKV projection, the output projection
    or one MLP matrix, with its bias); None where the block is not split so (latent attention, routed experts)."""
    if cfg.mla or cfg.is_moe(i):
        return None
    h, hd = cfg.hidden, cfg.head_dim
    cols = (cfg.heads + 2 * cfg.kv_heads) * hd
    qkv = h * cols + (cols if cfg.bias or cfg.qkv_bias else 0)
    out = cfg.heads * hd * h + (h if cfg.bias else 0)
    f = cfg.dense_ffn or cfg.ffn
    matrix = h * f + (f if cfg.bias and cfg.mlp != "swiglu" else 0)
    return max(qkv, out, matrix)


@functools.lru_cache(maxsize=1 << 14)
def _gathered(cfg, blocks: tuple[int, ...], t: int, e: int, first: bool, last: bool, dtype: str,
              optimizer: str, unit: str = "layer", prefetch_params: float = 0.0,
              bucket_params: float = 0.0, cp: int = 1, etp: int | None = None) -> int:
    """ZeRO-3's working set.

    Per block (``unit`` layer or block; FSDP, Megatron-FSDP): the largest unit's weights twice (computing, and the
    one prefetched) and its gradients once.  Per leaf module (``unit = "module"``, DeepSpeed's
    ``fetch_sub_module``; as the strategy, only without tensor or context parallelism): the largest leaf's weights
    plus what is prefetched (``prefetch_params``: DeepSpeed's prefetch bucket, 2.5e7 elements in 0.3, 5e7
    later), and its gradients plus the reduce bucket they are copied into (``bucket_params``:
    ``reduce_bucket_size``, 5e8), not a whole block's.
    """
    pb, gb, _ = state_bytes_per_param(dtype, optimizer)
    embed = _split(cfg.vocab * cfg.hidden, t) if first or last else 0
    if unit == "module" and t == 1 and cp == 1:
        leaves = [_largest_leaf(cfg, i) for i in blocks]
        if all(n is not None for n in leaves):
            leaf = max([embed, *leaves])  # type: ignore[list-item]
            return math.ceil(pb * (leaf + prefetch_params) + gb * (leaf + bucket_params))
    units = [sum(cfg.rank_block_params(i, t, e, etp)) for i in blocks]
    if embed:
        units.append(embed)
    return max(units, default=0) * (2 * pb + gb)


def estimate_stages(model, *, tp: int = 1, pp: int = 1, dp: int = 1, ep: int = 1, zero: int = 0,
                    micro_batch: int = 1, microbatches: int | None = None, seq: int | None = None,
                    sequence_parallel: bool = False, recompute: str = "none", schedule: str = "1f1b",
                    virtual_stages: int = 1, dtype: str = "bf16", optimizer: str = "adam",
                    stage_layers: tuple[int, ...] | None = None, cp: int = 1, etp: int | None = None,
                    shard_group: int | None = None, attention: str | None = None,
                    dropout: bool = True, context_bytes: int = CONTEXT_BYTES,
                    offload_layers: int = 0, gather_unit: str = "layer", prefetch_params: float = 0.0,
                    reduce_bucket_params: float = 0.0) -> list[LLMMemory]:
    """Memory of a rank of every pipeline stage (see the module rules); ``model``: a zoo name or a config.

    ``stage_layers`` gives uneven stages (Llama 3 405B: 126 layers on 16 stages, the first and last one layer
    short, The Llama 3 Herd of Models section 3.3.2); default ``layers / pp`` each.  With ``virtual_stages`` v
    each count must be a multiple of v (each of the stage's v chunks holds count / v blocks).  ``attention``
    (flash, unfused) defaults to the config's; ``dropout`` False for models trained without (torchtitan).
    ``offload_layers`` N (Megatron-core ``--cpu-offloading --cpu-offloading-num-layers``): the stage's first N
    blocks keep their activations in host memory for every micro-batch in flight, one block's worth staying
    on the GPU as the copy buffer (TransformerEngine's double-buffered offload); at most the stage's blocks - 1.
    ``gather_unit``, ``prefetch_params``, ``reduce_bucket_params``: ZeRO-3's gather unit and DeepSpeed's prefetch
    and reduce buckets (the framework's schedule, :func:`_gathered`).
    """
    if gather_unit not in GATHER_UNITS:
        raise ConfigError(f"gather_unit: {gather_unit!r} is not valid; valid choices: {', '.join(GATHER_UNITS)}")
    cfg = _config(model)
    _check_layout(cfg, tp, pp, dp, ep, zero, micro_batch, microbatches, schedule, virtual_stages, recompute,
                  stage_layers, cp, shard_group, seq, etp)
    etp = tp if etp is None else etp
    state_bytes_per_param(dtype, optimizer)  # unknown dtype or optimizer: one line before any work
    stage_layers = None if stage_layers is None else tuple(stage_layers)  # checked above; hashable for the caches
    s = _positive("seq", seq) if seq is not None else cfg.seq
    attention = attention or cfg.attention
    shards = shard_group if shard_group is not None else dp * cp  # ranks one parameter's state is split over
    layout = (f"tp {tp}{f', cp {cp}' if cp > 1 else ''}, pp {pp}"
              f"{f' (x{virtual_stages} virtual)' if virtual_stages > 1 else ''}, dp {dp}"
              f"{f', ep {ep}' if ep > 1 else ''}, ZeRO-{zero}"
              f"{f' (HSDP shard group {shard_group})' if shard_group is not None else ''}, micro-batch {micro_batch}, "
              f"seq {s}, {schedule}, recompute {recompute}{', sequence parallel' if sequence_parallel else ''}, "
              f"{attention} attention, {dtype}, {optimizer}"
              f"{f', {offload_layers} block(s) offloaded' if offload_layers else ''}")
    if isinstance(offload_layers, bool) or not isinstance(offload_layers, int) or offload_layers < 0:
        raise ConfigError(f"offload_layers: {offload_layers!r} must be an integer >= 0")
    fewest = min(len(stage_blocks(cfg.layers, pp, k, virtual_stages, stage_layers)) for k in range(pp)) \
        if offload_layers else 0
    if offload_layers and offload_layers >= fewest:
        raise ConfigError(f"offload_layers: {offload_layers} must be fewer than the {fewest} blocks of the "
                          f"smallest pipeline stage (TransformerEngine keeps at least one on the GPU)")
    out = []
    for k in range(pp):
        # the stage's model state and its activations depend on disjoint parts of the layout (a search's layouts
        # share each part with many others), so each is worked out once per stage and cached (exact: integers)
        params, state = _stage_state(cfg, tp, pp, k, virtual_stages, ep, etp, stage_layers, shards,
                                     tp * dp * cp // (etp * ep), zero, dtype, optimizer)
        activations, held_bytes, buffers = _stage_activations(
            cfg, pp, k, virtual_stages, stage_layers, offload_layers, s, micro_batch, recompute, attention, dropout,
            etp, tp, sequence_parallel, cp, microbatches, schedule, context_bytes)
        if zero >= 3:  # an integer: ceil(x + n) = ceil(x) + n
            blocks = _stage_kinds(cfg, pp, k, virtual_stages, stage_layers, offload_layers)[0]
            buffers += _gathered(cfg, blocks, tp, ep, k == 0, k == pp - 1, dtype, optimizer, gather_unit,
                                 prefetch_params, reduce_bucket_params, cp, etp)
        out.append(LLMMemory(cfg.name, layout, k, params, *state, activations, held_bytes, buffers))
    return out


@functools.lru_cache(maxsize=1 << 16)
def _stage_state(cfg, tp: int, pp: int, k: int, v: int, ep: int, etp: int, stage_layers: tuple[int, ...] | None,
                 shards: int, expert_shards: int, zero: int, dtype: str, optimizer: str
                 ) -> tuple[int, tuple[int, int, int]]:
    """(parameters, (weight, gradient, optimizer) bytes) of a rank of stage ``k``: its dense state sharded over
    ``shards`` ranks, its routed experts' over ``expert_shards`` (the stage's tp·dp·cp ranks over etp·ep,
    Megatron-core's expert-data-parallel group; dp·cp / ep when etp = tp)."""
    dense, expert = stage_params(cfg, tp, pp, k, v, ep, stage_layers, etp)
    (w, g, o), (we, ge, oe) = (zero_state_bytes(dense, shards, zero, dtype, optimizer),
                               zero_state_bytes(expert, expert_shards, zero, dtype, optimizer))
    return dense + expert, (w + we, g + ge, o + oe)


@functools.lru_cache(maxsize=1 << 16)
def _stage_activations(cfg, pp: int, k: int, v: int, stage_layers: tuple[int, ...] | None, offload_layers: int,
                       s: int, micro_batch: int, recompute: str, attention: str, dropout: bool, etp: int, tp: int,
                       sp: bool, cp: int, microbatches: int | None, schedule: str,
                       context_bytes: int) -> tuple[int, int, int]:
    """(activations, in flight, buffers but ZeRO-3's gathered units) bytes of a rank of stage ``k``."""
    _, kinds, counts, offloaded_kinds = _stage_kinds(cfg, pp, k, v, stage_layers, offload_layers)
    # a block's bytes depend on its index only through its kind (MoE or not): priced once per kind and summed
    # per kind (exact either way; plan asks this of every stage of tens of thousands of layouts)
    by_kind = {moe: layer_bytes(cfg, i, s, micro_batch, recompute=recompute, attention=attention,
                                dropout=dropout, etp=etp, tp=tp, sp=sp, cp=cp) for moe, i in kinds}
    one = sum((by_kind[moe].kept * n for moe, n in counts), Fraction(0))
    held = in_flight(pp, k, microbatches, schedule, v)
    working = max((x.working for x in by_kind.values()), default=Fraction(0))
    buffers = Fraction(context_bytes)
    if offload_layers:
        buffers += max(by_kind[moe].kept for moe in offloaded_kinds)  # the block being copied
    if k == 0:
        buffers += held * embedding_bytes(cfg, s, micro_batch, dropout=dropout, tp=tp, sp=sp, cp=cp)
    if k == pp - 1:
        buffers += head_bytes(cfg, s, micro_batch, tp=tp, sp=sp, cp=cp)
    return math.ceil(one + working), math.ceil(one * (held - 1)), math.ceil(buffers)


@functools.lru_cache(maxsize=1 << 14)
def _stage_kinds(cfg, pp: int, k: int, v: int, stage_layers: tuple[int, ...] | None, offload_layers: int):
    """(blocks, ((kind, its first block), ...), ((kind, blocks of it not offloaded), ...), kinds offloaded) of
    stage ``k`` (kind: MoE or not), in the order :func:`estimate_stages` always summed them; cached (the config is
    frozen; plan asks this of every stage of tens of thousands of layouts)."""
    blocks = tuple(stage_blocks(cfg.layers, pp, k, v, stage_layers))
    kinds = tuple({cfg.is_moe(i): i for i in reversed(blocks)}.items())
    counts = tuple(Counter(cfg.is_moe(i) for i in blocks[offload_layers:]).items())
    offloaded = tuple({cfg.is_moe(i) for i in blocks[:offload_layers]})
    return blocks, kinds, counts, offloaded


def estimate(model, **layout) -> LLMMemory:
    """The fullest stage's memory (the one that decides whether the layout fits); same arguments as
    :func:`estimate_stages`."""
    return max(estimate_stages(model, **layout), key=lambda m: (m.total, -m.stage))


def device_budget(device, *, gpu_memory: float | None = None, margin: float | None = None,
                  policy: str = "refuse") -> Budget:
    """The :class:`~simcomm.memory.fit.Budget` of ``device`` (a trace device name, or a number of bytes);
    ``gpu_memory`` overrides its capacity, ``margin`` None is the default margin."""
    from simcomm.memory.fit import DEFAULT_MARGIN

    margin = DEFAULT_MARGIN if margin is None else margin
    if gpu_memory is not None:
        return Budget(gpu_memory, format_size(gpu_memory), margin, policy, given=True)
    if isinstance(device, str):
        from simcomm.traces.devices import get_device

        dev = get_device(device)
        return Budget(dev.memory, dev.label, margin, policy)
    return Budget(device, format_size(device), margin, policy, given=True)


def check_fits(mem: LLMMemory, device, *, gpu_memory: float | None = None, margin: float | None = None,
               policy: str = "refuse") -> str:
    """:func:`simcomm.memory.fit.check` of ``mem`` on ``device`` (a trace device name or bytes): its line, or
    one DoesNotFitError line with the numbers."""
    return check(mem.peak(), device_budget(device, gpu_memory=gpu_memory, margin=margin, policy=policy))
