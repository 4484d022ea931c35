"""The data-parallel schedule a framework runs: :class:`ZeroSchedule`, resolved from the options and the framework.

Every value comes from the option the user gave, else from the framework's default
(:mod:`simcomm.frameworks`), else from the generic schedule simcomm ran before frameworks were an input
(each layer gathered one layer ahead on its own stream, gradients in ``--bucket-mb`` buckets reduced as
they are ready).  :meth:`ZeroSchedule.notes` is what is printed: one ``assumed:`` line per framework
default, naming the framework, its version and the file it comes from.

ZeRO-3's parameters are gathered in *units* (a layer, a transformer block, or a layer's leaf modules);
the gather of unit ``u`` may start once unit ``u - 1 - prefetch`` has finished computing (and, with a
live-parameter limit, once enough units before it are released), on the all-gather stream in unit order;
the compute of a unit waits for its gather.  So ``prefetch = 1`` lets one gather run under the previous
unit's compute (FSDP's ``limit_all_gathers``: at most two gathered units not yet freed), and
``prefetch = 0`` fetches on demand, serial with compute.
"""

from __future__ import annotations

from dataclasses import dataclass

from simcomm.frameworks import Framework, get_framework
from simcomm.strategies.megatron.params import MegatronParams, reshard_policy

#: Megatron-core's default bucket: max(40M, 1M x dp) parameters (DistributedDataParallelConfig.bucket_size)
MCORE_BUCKET_MIN, MCORE_BUCKET_PER_DP = 40_000_000, 1_000_000


@dataclass(frozen=True)
class ZeroSchedule:
    """The resolved data-parallel schedule of one plan (frameworks' defaults under the user's options)."""

    framework: Framework | None
    unit: str  # layer, block, module
    prefetch: int
    prefetch_params: float  # DeepSpeed: each fetch prefetches up to this many parameters (0: ``prefetch`` units)
    max_live_params: float  # no prefetch while this many gathered parameters are live (0: no limit)
    reshard: str  # all, none, not-root, not-last
    reduce_bucket_params: float  # ZeRO-3 reduce-scatter bucket (0: one per unit)
    overlap_grad_reduce: bool
    reduce_stream: str  # separate, compute
    zero3_reduce_stream: str  # separate, compute
    grad_bucket_bytes: float | None  # zero 0-2 buckets (None: the workload's --bucket-mb)
    overlap_param_gather: bool
    notes: tuple[str, ...]


def resolve_schedule(p: MegatronParams, dp: int, dtype_bytes: float) -> ZeroSchedule:
    """The schedule ``p`` asks for on ``dp`` replicas (``dtype_bytes``: bytes per gradient on the wire)."""
    fw = get_framework(p.framework) if p.framework is not None else None
    given = {name: getattr(p, name) for name in ("prefetch", "gather_unit", "max_live_params", "reshard_after_forward",
                                                 "reduce_bucket_params", "grad_bucket_mb", "reduce_stream",
                                                 "overlap_param_gather", "overlap_grad_reduce")}
    if fw is None:
        bucket = None if p.grad_bucket_mb is None else p.grad_bucket_mb * 1e6
        sched = ZeroSchedule(None, p.gather_unit or "layer", 1 if p.prefetch is None else p.prefetch, 0.0,
                             p.max_live_params or 0.0, reshard_policy(p.reshard_after_forward or "all"),
                             p.reduce_bucket_params or 0.0,
                             True if p.overlap_grad_reduce is None else p.overlap_grad_reduce,
                             p.reduce_stream or "separate", p.reduce_stream or "separate", bucket,
                             bool(p.overlap_param_gather), ())
        return _with_notes(sched, p, given, dp)
    if fw.grad_bucket == "megatron":
        default_bucket = max(MCORE_BUCKET_MIN, MCORE_BUCKET_PER_DP * dp) * dtype_bytes
    elif fw.grad_bucket.startswith("MB:"):
        default_bucket = float(fw.grad_bucket[3:]) * 1e6
    else:
        default_bucket = float(fw.grad_bucket) * dtype_bytes
    serial = fw.grad_reduce == "serial"
    sched = ZeroSchedule(
        fw, p.gather_unit or fw.unit, fw.prefetch if p.prefetch is None else p.prefetch,
        (fw.prefetch_params or 0.0) if p.prefetch is None else 0.0,
        (fw.max_live_params or 0.0) if p.max_live_params is None else p.max_live_params,
        fw.reshard if p.reshard_after_forward is None else reshard_policy(p.reshard_after_forward),
        (fw.zero3_reduce_params or 0.0) if p.reduce_bucket_params is None else p.reduce_bucket_params,
        (fw.grad_reduce != "end") if p.overlap_grad_reduce is None else p.overlap_grad_reduce,
        p.reduce_stream or ("compute" if serial else "separate"),
        p.reduce_stream or ("compute" if fw.grad_reduce_zero3 == "serial" else "separate"),
        default_bucket if p.grad_bucket_mb is None else p.grad_bucket_mb * 1e6,
        fw.overlap_param_gather if p.overlap_param_gather is None else p.overlap_param_gather, ())
    return _with_notes(sched, p, given, dp)


def _with_notes(s: ZeroSchedule, p: MegatronParams, given: dict, dp: int) -> ZeroSchedule:
    """``s`` with its ``assumed`` lines: with a framework one line per default (what runs, the framework's version,
    the source it is read from, the option that changes it; or that the user gave it); without one, one line."""
    if dp < 2:
        return s
    fw = s.framework
    topics = _topics(s, p.zero)
    if fw is None:
        changed = [k for k, v in given.items() if v is not None]
        line = (f"framework: none named (--framework {', '.join(_names())}; simcomm list frameworks); the generic "
                "schedule: " + "; ".join(words for _, _, words in topics)
                + (f" (given: {', '.join(changed)})" if changed else ""))
        return ZeroSchedule(**{**s.__dict__, "notes": (line,)})
    lines = []
    for topic, options, words in topics:
        mine = [o for o in options if given.get(o) is not None]
        how = (f"given: --opt {', '.join(mine)}" if mine else
               f"{fw.sources.get(topic, fw.source)}; --opt {options[0]}=... changes it")
        lines.append(f"framework {fw.name} ({fw.label}): {words} ({how})")
    return ZeroSchedule(**{**s.__dict__, "notes": tuple(lines)})


def _topics(s: ZeroSchedule, zero: int) -> list[tuple[str, tuple[str, ...], str]]:
    """(topic, the options that set it, what runs) for each default that matters at this ZeRO stage."""
    if zero == 3:
        reduce = (f"in buckets of {s.reduce_bucket_params:.3g} parameters" if s.reduce_bucket_params else
                  "per gather unit")
        reduce += " on the compute stream (serialised)" if s.zero3_reduce_stream == "compute" else \
            " on their own stream"
        return [("unit", ("gather_unit",), f"ZeRO-3 parameters all-gathered per {_UNIT_WORDS[s.unit]}"),
                ("prefetch", ("prefetch",),
                 f"each fetch prefetching the next units up to {s.prefetch_params:.3g} parameters (one unit when "
                 "the next is larger)" if s.prefetch_params else _prefetch_words(s.prefetch)),
                ("live", ("max_live_params",),
                 f"no prefetch while {s.max_live_params:.3g} gathered parameters are live" if s.max_live_params
                 else "no limit on live gathered parameters"),
                ("reshard", ("reshard_after_forward",), _RESHARD_WORDS[s.reshard]),
                ("zero3_reduce", ("reduce_bucket_params", "reduce_stream"), f"gradients reduce-scattered {reduce}")]
    bucket = ("--bucket-mb buckets" if s.grad_bucket_bytes is None else
              "one bucket" if s.grad_bucket_bytes == 0 else f"buckets of {s.grad_bucket_bytes / 1e6:.4g} MB")
    out = [("buckets", ("grad_bucket_mb",), f"gradients in {bucket}"),
           ("grad_reduce", ("overlap_grad_reduce", "reduce_stream"),
            "gradients reduced " + ("as each bucket is ready" if s.overlap_grad_reduce else
                                    "after the whole backward")
            + (" on the compute stream (serialised)" if s.reduce_stream == "compute" else " on their own stream"))]
    if zero in (1, 2):
        out.append(("param_gather", ("overlap_param_gather",),
                    "updated parameters all-gathered during the next forward, each bucket before its first layer"
                    if s.overlap_param_gather else "updated parameters all-gathered after the step"))
    return out


def _names() -> tuple[str, ...]:
    from simcomm.frameworks import FRAMEWORK_NAMES

    return FRAMEWORK_NAMES


def _prefetch_words(n: int) -> str:
    return "each unit fetched on demand (serial with compute)" if n == 0 else \
        f"gathered {n} unit{'s' if n > 1 else ''} ahead on the all-gather stream"


_UNIT_WORDS = {"layer": "layer (attention or MLP)", "block": "transformer block (attention + MLP)",
               "module": "leaf module (QKV and output projections, each MLP matrix)"}
_RESHARD_WORDS = {"all": "parameters re-gathered for backward",
                  "none": "parameters kept from forward to backward (no backward gather)",
                  "not-root": "parameters re-gathered for backward except the root module's (embedding, head)",
                  "not-last": "parameters re-gathered for backward except the root module's and the last block's"}
