"""Import a torch.profiler Chrome/Kineto trace: module ranges become layers.

Record the profile with ``with_stack=True`` (torch.profiler then emits one
``python_function`` event named ``nn.Module: Conv2d_3`` per module call, with
``Python id``/``Python parent id`` links).  Mapping:

* layers are the *leaf* module instances (no module event below them), in the
  order of their first call; a layer is named by its chain of module events,
  e.g. ``Sequential_0.Conv2d_0`` (the profile does not hold attribute names;
  with ``--model`` of a zoo model whose types match, the zoo's names are used);
* forward time = the module event's duration, averaged over its calls in the
  middle half of the ``ProfilerStep#N`` ranges ranked by duration (the direct
  capture's rule: one preempted iteration must not move the layer times);
* backward time = the summed durations of the
  ``autograd::engine::evaluate_function: *Backward*`` events whose
  ``Sequence number`` matches an op launched inside that module's forward
  range (autograd gives a forward op and its backward node the same number);
* iteration time = mean duration of those steps when ``prof.step()`` was
  called, else the layer sum.

GPU kernels are not re-attributed: on CUDA profiles these are host-side times
(documented in docs/traces.md); use ``trace capture`` for device times.
"""

from __future__ import annotations

import gzip
import json
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


def _read(path: Path) -> list[dict]:
    try:
        raw = path.read_bytes()
        text = gzip.decompress(raw).decode("utf-8") if raw[:2] == b"\x1f\x8b" else raw.decode("utf-8")
        data = json.loads(text)
    except FileNotFoundError:
        raise TraceFormatError(f"profile {str(path)!r} does not exist") from None
    except (OSError, ValueError, EOFError, UnicodeDecodeError) as exc:
        raise TraceFormatError(f"profile {str(path)!r} is not readable Chrome-trace JSON: {exc}") from None
    events = data.get("traceEvents") if isinstance(data, dict) else data
    if not isinstance(events, list):
        raise TraceFormatError(f"profile {str(path)!r}: traceEvents: expected a list of events")
    return [e for e in events if isinstance(e, dict) and e.get("ph") == "X" and isinstance(e.get("dur"), (int, float))
            and isinstance(e.get("ts"), (int, float)) and isinstance(e.get("name"), str)]


def parse_profile(events: list[dict]) -> tuple[list[str], list[str], list[float], list[float], list[float]]:
    """Leaf layer names, module types, mean forward and backward seconds, and step durations."""
    mods = [e for e in events if e.get("cat") == "python_function" and e["name"].startswith(_MOD)]
    if not mods:
        raise TraceFormatError("profile: no 'nn.Module:' events; record it with torch.profiler(with_stack=True)")
    pyid = {}
    for e in events:
        if e.get("cat") == "python_function":
            pid = (e.get("args") or {}).get("Python id")
            if pid is not None:
                pyid[pid] = e

    def module_parent(e):
        seen = 0
        pid = (e.get("args") or {}).get("Python parent id")
        while pid in pyid and seen < 10_000:
            p = pyid[pid]
            if p["name"].startswith(_MOD):
                return p
            pid, seen = (p.get("args") or {}).get("Python parent id"), seen + 1
        return None

    parents = {id(e): module_parent(e) for e in mods}
    has_child = {id(p) for p in parents.values() if p is not None}

    def path(e):
        parts = []
        while e is not None:
            parts.append(e["name"][len(_MOD):])
            e = parents[id(e)]
        return ".".join(reversed(parts))

    leaves = sorted((e for e in mods if id(e) not in has_child), key=lambda e: e["ts"])
    calls: dict[str, list[dict]] = defaultdict(list)
    for e in leaves:
        calls[path(e)].append(e)
    names = list(calls)  # first-call order
    ops_by_tid = defaultdict(list)
    for e in events:
        if e.get("cat") == "cpu_op" and "Sequence number" in (e.get("args") or {}) and not e["name"].startswith(_BWD):
            ops_by_tid[e.get("tid")].append(e)
    bwd_by_seq = defaultdict(float)
    for e in events:
        if e["name"].startswith(_BWD) and "Sequence number" in (e.get("args") or {}):
            bwd_by_seq[e["args"]["Sequence number"]] += e["dur"]
    all_ops = defaultdict(list)
    for e in events:
        if e.get("cat") == "cpu_op":
            all_ops[e.get("tid")].append(e)
    step_evs = sorted((e for e in events if e["name"].startswith("ProfilerStep#")), key=lambda e: e["ts"])
    steps = [e["dur"] * 1e-6 for e in step_evs]
    # Like a direct capture, average over the middle half of the steps by duration, so one
    # preempted iteration does not move the layer times (capture._middle).
    kept = [step_evs[k] for k in _middle(steps)] if steps else []

    def in_kept(e) -> bool:
        return not kept or any(k["ts"] <= e["ts"] <= k["ts"] + k["dur"] for k in kept)

    fwd, bwd = [], []
    for name in names:
        evs = [e for e in calls[name] if in_kept(e)] or calls[name]
        seqs, span = set(), 0.0
        for e in evs:
            t0, t1 = e["ts"], e["ts"] + e["dur"]
            seqs.update(o["args"]["Sequence number"] for o in ops_by_tid[e.get("tid")] if t0 <= o["ts"] <= t1)
            inner = [o for o in all_ops[e.get("tid")] if t0 <= o["ts"] and o["ts"] + o["dur"] <= t1]
            # the ops' span excludes the profiler's own Python-tracing overhead around the call
            span += (max(o["ts"] + o["dur"] for o in inner) - min(o["ts"] for o in inner)) if inner else e["dur"]
        fwd.append(span / len(evs) * 1e-6)
        bwd.append(sum(bwd_by_seq[s] for s in seqs) / len(evs) * 1e-6)
    if kept:
        steps = [k["dur"] * 1e-6 for k in kept]
    types = [n.rsplit(".", 1)[-1].rsplit("_", 1)[0] for n in names]
    return names, types, fwd, bwd, steps


def import_profile(path: str, model: str | None = None, batch: int = 1, dtype: str = "fp32") -> Trace:
    """A ``kineto-import`` trace from a profile; ``model`` may name a zoo model to supply names and params."""
    from simcomm.errors import ConfigError

    if dtype not in DTYPES:
        raise ConfigError(f"dtype: {dtype!r} is not one of {', '.join(DTYPES)}")
    if batch < 1:
        raise ConfigError(f"batch: must be a positive integer, got {batch}")
    p = Path(path)
    names, types, fwd, bwd, steps = parse_profile(_read(p))
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
        model=model or p.name.split(".")[0], batch=batch, dtype=dtype, device="profiled host",
        device_kind="cpu", method="kineto-import", layers=tuple(layers),
        iteration_s=sum(steps) / len(steps) if steps else layer_sum, iters=len(steps),
        frameworks={"simcomm": simcomm.__version__},
        meta={"source": p.name, "params": "from zoo model" if specs else "unknown (profile holds no parameters)",
              "iteration": "mean of the middle half of ProfilerStep durations" if steps else "layer sum (no ProfilerStep ranges)"},
    )
