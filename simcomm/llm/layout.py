"""One large-model layout: :class:`Layout`, and the divisibility rules every layout obeys, written once.

A layout is the sizes a user (``simcomm run --strategy megatron --opt ...``) or ``simcomm plan``'s search
picks: tensor (``tp``), context (``cp``), pipeline (``pp``, ``virtual`` chunks per rank) and data (``dp``)
parallel sizes, expert parallelism (``ep``, carved out of the dp·cp replicas), the ZeRO stage (and HSDP's
``shard_group``), the micro-batch, sequence parallelism and recomputation.  The ``megatron`` strategy
resolves its options into one (:func:`simcomm.strategies.megatron.sizing.resolve_layout`), the search
enumerates them (:mod:`simcomm.llm.search`), the estimate prices them (:mod:`simcomm.llm.estimate`), and
:meth:`Layout.options` turns one back into the strategy's options, so the three cannot disagree on what a
layout is.  Where its ranks sit is :mod:`simcomm.llm.placement`'s.

The rules (each returns None or the one ``error:`` line the strategy prints) are Megatron-core's own
asserts: ``tp`` divides the query heads, the KV heads and the FFN (column-parallel splits; ``divide()`` in
``megatron/core/utils.py``); ``cp`` divides the sequence; ``pp · virtual`` divides the layers (or the
stages are given uneven counts); ``ep`` divides the experts and ``etp · ep`` a stage's ranks, ``etp``
the expert FFN (``expert_model_parallel_size``, ``expert_tensor_parallel_size``); the global batch
divides over the data replicas, the micro-batch over the samples per replica; the interleaved schedule
needs the micro-batches to be a multiple of ``pp``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from simcomm.llm.placement import Placement

__all__ = ["Layout", "divisors", "split_problem", "tp_problem", "cp_problem", "stages_problem", "ep_problem",
           "batch_problem"]


def divisors(n: int) -> list[int]:
    """Positive divisors of ``n``, ascending."""
    return [d for d in range(1, n + 1) if n % d == 0]


@functools.total_ordering
@dataclass(frozen=True)
class Layout:
    """One ``megatron`` layout (its fields are the strategy's options of the same names; ``ep`` is
    ``experts_parallel``).

    ``dp`` counts the data replicas proper (each takes its own samples), as the strategy's ``dp`` option
    does; with context parallelism the parameters have ``dp · cp`` replicas (:attr:`replicas`).
    ``shard_group`` None is plain ZeRO (sharded over all replicas), an int is HSDP (ZeRO-3 only).
    """

    tp: int
    pp: int
    dp: int
    schedule: str = "1f1b"
    virtual: int = 1
    zero: int = 0
    microbatch: int = 1
    sequence_parallel: bool = False
    recompute: str = "none"
    cp: int = 1
    shard_group: int | None = None
    ep: int = 1
    etp: int | None = None  # expert layers' tensor-parallel size (None: tp, Megatron-core's default)

    @property
    def expert_tp(self) -> int:
        return self.etp or self.tp

    @property
    def replicas(self) -> int:
        """Ranks holding the same parameters: gradients are reduced, and ZeRO shards, over them (dp · cp)."""
        return self.dp * self.cp

    @property
    def gpus(self) -> int:
        return self.tp * self.cp * self.pp * self.dp

    def _key(self) -> tuple:
        # the old nine fields first, so layouts without cp, HSDP or ep keep their order; None (plain) before HSDP
        return (self.tp, self.pp, self.dp, self.schedule, self.virtual, self.zero, self.microbatch,
                self.sequence_parallel, self.recompute, self.cp, self.shard_group or 0, self.ep, self.etp or 0)

    def __lt__(self, other):
        if not isinstance(other, Layout):
            return NotImplemented
        return self._key() < other._key()

    def microbatches(self, global_batch: int) -> int:
        return global_batch // (self.dp * self.microbatch)

    def placement(self, order: str = "tp-pp-dp") -> Placement:
        """Where the ranks sit (:class:`simcomm.llm.placement.Placement`: its ``dp`` is the dp·cp replicas)."""
        return Placement(self.tp, self.pp, self.replicas, self.ep, self.virtual, order, self.cp, self.etp)

    def options(self, global_batch: int) -> dict:
        """Flat ``megatron`` options (:func:`simcomm.scenario.from_flat`) that run exactly this layout."""
        out = {**self.to_dict(), "global_batch": global_batch}
        if self.shard_group is None:
            del out["shard_group"]
        ep, etp = out.pop("ep"), out.pop("etp")
        if ep > 1:
            out["experts_parallel"] = ep
        if etp is not None:
            out["etp"] = etp
        return out

    def to_dict(self) -> dict:
        return {"tp": self.tp, "pp": self.pp, "dp": self.dp, "schedule": self.schedule, "virtual": self.virtual,
                "zero": self.zero, "microbatch": self.microbatch, "sequence_parallel": self.sequence_parallel,
                "recompute": self.recompute, "cp": self.cp, "shard_group": self.shard_group, "ep": self.ep,
                "etp": self.etp}

    def short(self) -> str:
        """``tp4 cp2 pp4 dp4 v5 z1 mb1``: the plot's and the progress bar's label."""
        s = f"tp{self.tp}" + (f" cp{self.cp}" if self.cp > 1 else "") + f" pp{self.pp} dp{self.dp}"
        s += f" ep{self.ep}" if self.ep > 1 else ""
        s += f" etp{self.etp}" if self.etp is not None else ""
        s += f" v{self.virtual}" if self.virtual > 1 else ""
        return s + f" z{self.zero}" + (f" hsdp{self.shard_group}" if self.shard_group else "") + f" mb{self.microbatch}"


# -- the rules: None when the sizes divide, else the one line the strategy refuses them with --------------

def split_problem(n_gpus: int, tp: int, cp: int, pp: int, dp: int | None = None) -> str | None:
    """``tp · cp · pp`` (times ``dp`` when given) against the GPUs."""
    if n_gpus % cp:
        return f"cp: {cp} does not divide the {n_gpus} GPUs"
    inner = tp * pp * cp
    what = f"tp {tp} × pp {pp}" + (f" × cp {cp}" if cp > 1 else "")
    if dp is None:
        return None if n_gpus % inner == 0 else f"layout: {what} = {inner} does not divide the {n_gpus} GPUs"
    return None if inner * dp == n_gpus else f"layout: {what} × dp {dp} = {inner * dp} is not the {n_gpus} GPUs"


def tp_problem(tp: int, heads: int | None, kv_heads: int | None, ffn: int | None = None) -> str | None:
    """Tensor parallelism splits the query heads, the KV heads and the FFN (Megatron-core's ``divide``)."""
    for name, n in (("heads", heads), ("kv heads", kv_heads)):
        if n and n % tp:
            return f"tp: {tp} does not divide the {n} {name} (attention heads split over the tensor-parallel ranks)"
    if ffn and ffn % tp:
        return f"tp: {tp} does not divide the FFN size {ffn} (the MLP's columns split over the tensor-parallel ranks)"
    return None


def cp_problem(cp: int, seq: int | None) -> str | None:
    """Context parallelism splits the sequence (each rank holds seq / cp tokens)."""
    if cp > 1 and seq and seq % cp:
        return f"cp: {cp} does not divide the sequence length {seq} (each context-parallel rank holds seq / cp tokens)"
    return None


def stages_problem(layers: int, pp: int, virtual: int = 1) -> str | None:
    """Even stages: ``pp · virtual`` divides the layers."""
    if layers % (pp * virtual):
        return (f"layout: {layers} layers do not divide into pp {pp} × virtual {virtual} = {pp * virtual} stages "
                "(uneven stages: --opt first_stage_layers=N and/or last_stage_layers=N)")
    return None


def ep_problem(ep: int, etp: int, tp: int, replicas: int, experts: int | None, ffn: int | None = None,
               model: str = "", etp_given: bool = False) -> str | None:
    """Expert layers (Megatron-core's asserts): ``ep`` divides the experts, ``etp · ep`` the ``tp · dp·cp`` ranks
    of a pipeline stage (MoE parallel folding re-cuts them into etp × ep × expert-data-parallel), ``etp`` the
    expert FFN."""
    if experts and experts % ep:
        valid = ", ".join(str(k) for k in range(1, experts + 1) if experts % k == 0)
        return (f"experts-parallel: {ep} does not divide the {experts} experts of {model!r} "
                f"(each expert-parallel rank holds experts / ep of them); valid choices: {valid}")
    stage = tp * replicas
    if stage % (etp * ep):
        field = "etp" if etp_given else "experts-parallel"
        return (f"{field}: etp {etp} × experts-parallel {ep} = {etp * ep} does not divide the {stage} ranks of a "
                f"pipeline stage (tp {tp} × dp {replicas}; Megatron-core's MoE parallel folding re-cuts "
                "them into etp × ep × expert-data-parallel)")
    if ffn and ffn % etp:
        return (f"etp: {etp} does not divide the expert FFN size {ffn} (each expert's FFN is split over "
                "the expert tensor-parallel ranks)")
    return None


def batch_problem(global_batch: int, dp: int, microbatch: int, pp: int, schedule: str, src: str = "given") -> str | None:
    """The global batch over the dp replicas, the micro-batch over a replica's samples, and interleaving's
    micro-batches a multiple of pp (Megatron-LM's interleaved schedule)."""
    if global_batch % dp:
        return f"global-batch: {global_batch} ({src}) does not divide over dp {dp} replicas"
    per = global_batch // dp
    if per % microbatch:
        return (f"microbatch: {microbatch} does not divide the {per} samples per replica "
                f"(global batch {global_batch} ({src}) / dp {dp})")
    if schedule == "interleaved" and (per // microbatch) % pp:
        return (f"microbatches: {per // microbatch} is not a multiple of pp {pp} "
                "(Megatron-LM's interleaved schedule needs it)")
    return None
