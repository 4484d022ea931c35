"""Import a torch.profiler Chrome/Kineto trace: module ranges become layers.

Record the profile with ``with_stack=True`` (torch.profiler then emits one
``python_function`` event named ``nn.Module: Conv2d_3`` per module call).
Mapping:

* a module call's parent is the innermost module call on the same thread whose
  range contains it (time containment: the profile's ``Python parent id`` links
  are not unique across profiling steps, so they are not used); layers are the
  *leaf* modules (never seen with a module inside), in the order of their first
  call, keyed by their own numbered name (``Conv2d_3``) and named by their chain
  of modules, e.g. ``Sequential_0.Conv2d_0`` (the profile does not hold
  attribute names; with ``--model`` of a zoo model whose types match, the zoo's
  names are used);
* host profiles (no GPU activity): forward time = the span of the CPU ops inside
  the module call; backward time = the summed durations of the
  ``autograd::engine::evaluate_function: *Backward*`` events whose ``Sequence
  number`` matches an op launched inside that module's forward range (autograd
  gives a forward op and its backward node the same number);
* CUDA profiles (``kernel``, ``gpu_memcpy``, ``gpu_memset`` events): the same
  ranges, but each is charged the GPU time of the work it launched: every GPU
  event is tied by its ``correlation`` id to the runtime call that launched it
  (``cudaLaunchKernel`` ...), and a range is charged the durations of the GPU
  events launched inside it on its thread.  The iteration is the span of the GPU
  work launched in each ``ProfilerStep`` range (first start to last end);
* layer and iteration times average the middle half of the host
  ``ProfilerStep#N`` ranges ranked by duration (the direct capture's rule: one
  preempted iteration must not move the layer times); without steps every call
  counts and the iteration is the layer sum.
"""

from __future__ import annotations

import bisect
import gzip
import json
import math
from collections import defaultdict
from pathlib import Path

import simcomm
from simcomm.errors import TraceFormatError
from simcomm.traces.capture import _middle
from simcomm.traces.io import DTYPE_BYTES, DTYPES
from simcomm.traces.schema import Layer, Trace

__all__ = ["import_profile", "parse_profile"]

_MOD = "nn.Module: "
_BWD = "autograd::engine::evaluate_function: "


def _read(path: Path) -> tuple[list[dict], str | None]:
    """The profile's complete ('X') events, and the first GPU's name when the profile lists devices."""
    try:
        raw = path.read_bytes()
        text = gzip.decompress(raw).decode("utf-8") if raw[:2] == b"\x1f\x8b" else raw.decode("utf-8")
        data = json.loads(text)
    except FileNotFoundError:
        raise TraceFormatError(f"profile {str(path)!r} does not exist") from None
    except (OSError, ValueError, EOFError, UnicodeDecodeError) as exc:
        raise TraceFormatError(f"profile {str(path)!r} is not readable Chrome-trace JSON: {exc}") from None
    events = data.get("traceEvents") if isinstance(data, dict) else data
    props = data.get("deviceProperties") if isinstance(data, dict) else None
    gpu = props[0].get("name") if isinstance(props, list) and props and isinstance(props[0], dict) else None
    if not isinstance(events, list):
        raise TraceFormatError(f"profile {str(path)!r}: traceEvents: expected a list of events")
    return [e for e in events if isinstance(e, dict) and e.get("ph") == "X" and _time(e.get("dur"))
            and e["dur"] >= 0 and _time(e.get("ts")) and isinstance(e.get("name"), str)
            and isinstance(e.get("args", {}), dict)], gpu if isinstance(gpu, str) else None


def _time(x) -> bool:
    """A finite number of microseconds (JSON's true/false and Infinity are not)."""
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


#: GPU activity categories Kineto records, and the runtime calls that launch them
_GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
_LAUNCH_CATS = ("cuda_runtime", "cuda_driver")


def _nesting(mods: list[dict]) -> dict[int, dict | None]:
    """Each module call's innermost enclosing module call on its thread (None at the top)."""
    parent: dict[int, dict | None] = {}
    by_tid = defaultdict(list)
    for e in mods:
        by_tid[e.get("tid")].append(e)
    for evs in by_tid.values():
        stack: list[dict] = []
        for e in sorted(evs, key=lambda e: (e["ts"], -e["dur"])):
            while stack and e["ts"] >= stack[-1]["ts"] + stack[-1]["dur"]:
                stack.pop()
            parent[id(e)] = stack[-1] if stack else None
            stack.append(e)
    return parent


class _GpuWork:
    """GPU time launched inside a host range: launches sorted per thread, each with its GPU event."""

    def __init__(self, events: list[dict]):
        gpu = {}
        for e in events:
            if e.get("cat") in _GPU_CATS and "correlation" in e.get("args", {}):
                gpu[e["args"]["correlation"]] = e
        self.any = bool(gpu)
        launches = defaultdict(list)
        for e in events:
            g = gpu.get(e.get("args", {}).get("correlation")) if e.get("cat") in _LAUNCH_CATS else None
            if g is not None:
                launches[e.get("tid")].append((e["ts"], g["ts"], g["dur"]))
        self.ts = {t: [x[0] for x in sorted(v)] for t, v in launches.items()}
        self.gpu = {t: [x[1:] for x in sorted(v)] for t, v in launches.items()}

    def _inside(self, e: dict) -> list[tuple[float, float]]:
        tid = e.get("tid")
        ts = self.ts.get(tid, [])
        lo, hi = bisect.bisect_left(ts, e["ts"]), bisect.bisect_right(ts, e["ts"] + e["dur"])
        return self.gpu[tid][lo:hi] if lo < hi else []

    def busy(self, e: dict) -> float:
        """Microseconds of GPU work launched inside ``e`` (on its thread)."""
        return sum(d for _, d in self._inside(e))

    def span(self, e: dict, threads: list) -> float | None:
        """First start to last end of the GPU work launched inside ``e``'s range on any of ``threads``."""
        work = [w for t in threads for w in self._inside({**e, "tid": t})]
        return (max(s + d for s, d in work) - min(s for s, _ in work)) if work else None


def parse_profile(events: list[dict]) -> tuple[list[str], list[str], list[float], list[float], list[float], bool]:
    """Leaf layer names, module types, mean forward and backward seconds, step durations, and whether GPU time."""
    mods = [e for e in events if e.get("cat") == "python_function" and e["name"].startswith(_MOD)]
    if not mods:
        raise TraceFormatError("profile: no 'nn.Module:' events; record it with torch.profiler(with_stack=True)")
    parent = _nesting(mods)
    inner = {p["name"] for p in parent.values() if p is not None}  # ever seen around another module

    def path(e):
        parts = []
        while e is not None and len(parts) < 1000:
            parts.append(e["name"][len(_MOD):])
            e = parent[id(e)]
        return ".".join(reversed(parts))

    leaves = sorted((e for e in mods if e["name"] not in inner), key=lambda e: e["ts"])
    calls: dict[str, list[dict]] = defaultdict(list)
    shown: dict[str, str] = {}
    for e in leaves:
        calls[e["name"]].append(e)
        full = path(e)
        if len(full) > len(shown.get(e["name"], "")):
            shown[e["name"]] = full
    keys = list(calls)  # first-call order
    work = _GpuWork(events)
    ops_by_tid = defaultdict(list)
    for e in events:
        if e.get("cat") == "cpu_op" and "Sequence number" in e.get("args", {}) and not e["name"].startswith(_BWD):
            ops_by_tid[e.get("tid")].append(e)
    bwd_by_seq = defaultdict(float)
    bwd_threads = set()
    for e in events:
        if e["name"].startswith(_BWD) and "Sequence number" in e.get("args", {}):
            bwd_by_seq[e["args"]["Sequence number"]] += work.busy(e) if work.any else e["dur"]
            bwd_threads.add(e.get("tid"))
    all_ops = defaultdict(list)
    for e in events:
        if e.get("cat") == "cpu_op":
            all_ops[e.get("tid")].append(e)
    step_evs = sorted((e for e in events if e["name"].startswith("ProfilerStep#")
                       and e.get("cat") != "gpu_user_annotation"), key=lambda e: e["ts"])
    steps = [e["dur"] * 1e-6 for e in step_evs]
    # Like a direct capture, average over the middle half of the steps by duration, so one
    # preempted iteration does not move the layer times (capture._middle).
    kept = [step_evs[k] for k in _middle(steps)] if steps else []

    def in_kept(e) -> bool:
        return not kept or any(k["ts"] <= e["ts"] <= k["ts"] + k["dur"] for k in kept)

    fwd, bwd = [], []
    for key in keys:
        evs = [e for e in calls[key] if in_kept(e)] or calls[key]
        seqs, span = set(), 0.0
        for e in evs:
            t0, t1 = e["ts"], e["ts"] + e["dur"]
            seqs.update(o["args"]["Sequence number"] for o in ops_by_tid[e.get("tid")] if t0 <= o["ts"] <= t1)
            if work.any:
                span += work.busy(e)
                continue
            ops = [o for o in all_ops[e.get("tid")] if t0 <= o["ts"] and o["ts"] + o["dur"] <= t1]
            # the ops' span excludes the profiler's own Python-tracing overhead around the call
            span += (max(o["ts"] + o["dur"] for o in ops) - min(o["ts"] for o in ops)) if ops else e["dur"]
        fwd.append(span / len(evs) * 1e-6)
        bwd.append(sum(bwd_by_seq[s] for s in seqs) / len(evs) * 1e-6)
    if kept:
        if work.any:
            threads = sorted({e.get("tid") for e in kept} | bwd_threads, key=str)
            spans = [work.span(k, threads) for k in kept]
            steps = [x * 1e-6 for x in spans if x is not None]
        else:
            steps = [k["dur"] * 1e-6 for k in kept]
    names = [shown[k] for k in keys]
    types = [k[len(_MOD):].rsplit("_", 1)[0] for k in keys]
    return names, types, fwd, bwd, steps, work.any


def import_profile(path: str, model: str | None = None, batch: int = 1, dtype: str = "fp32") -> Trace:
    """A ``kineto-import`` trace from a profile; ``model`` may name a zoo model to supply names and params."""
    from simcomm.errors import ConfigError

    if dtype not in DTYPES:
        raise ConfigError(f"dtype: {dtype!r} is not one of {', '.join(DTYPES)}")
    if batch < 1:
        raise ConfigError(f"batch: must be a positive integer, got {batch}")
    p = Path(path)
    events, gpu_name = _read(p)
    names, types, fwd, bwd, steps, on_gpu = parse_profile(events)
    specs = None
    if model is not None:
        from simcomm.traces.zoo import MODELS, model_spec

        if model in MODELS:
            specs = model_spec(model).layers
            if [s.module_type for s in specs] != types:
                raise ConfigError(f"model: the profile's {len(types)} leaf modules do not match zoo model "
                                  f"{model!r} ({len(specs)} layers); omit --model or pass another name")
    layers = []
    for i, (name, kind) in enumerate(zip(names, types)):
        s = specs[i] if specs else None
        params = s.params if s else 0
        layers.append(Layer(name=s.name if s else name, module_type=kind, params=params,
                            grad_bytes=params * DTYPE_BYTES[dtype], forward_s=fwd[i], backward_s=bwd[i],
                            input_shape=s.input_shape if s else (), output_shape=s.output_shape if s else (),
                            flops=s.flops * batch if s else None))
    layer_sum = sum(fwd) + sum(bwd)
    return Trace(
        model=model or p.name.split(".")[0], batch=batch, dtype=dtype,
        device=(gpu_name or "profiled GPU") if on_gpu else "profiled host",
        device_kind="gpu" if on_gpu else "cpu", method="kineto-import", layers=tuple(layers),
        iteration_s=sum(steps) / len(steps) if steps else layer_sum, iters=len(steps),
        frameworks={"simcomm": simcomm.__version__},
        meta={"source": p.name, "params": "from zoo model" if specs else "unknown (profile holds no parameters)",
              "times": ("GPU time of the kernels, copies and memsets each range launched" if on_gpu
                        else "host time of the ops in each range"),
              "iteration": (("GPU span of the work each of the middle half of the ProfilerStep ranges launched"
                             if on_gpu else "mean of the middle half of ProfilerStep durations")
                            if steps else "layer sum (no ProfilerStep ranges)")},
    )
