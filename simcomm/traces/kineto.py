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
  counts and the iteration is the layer sum; a step of zero duration is refused;
* parameters: a zoo ``--model``, else ``--module pkg.mod:factory`` (counted with
  torch), else the weight and bias shapes the profile recorded (``record_shapes``)
  for linear, convolution, norm and embedding ops; a layer with none of these is
  refused unless ``allow_zero_params`` (zero gradient bytes would silently make
  every communication estimate zero).

Robustness: only a regular file of at most :data:`PROFILE_MAX_BYTES` (also after
gunzip) is read; every complete event is validated once (:func:`_clean`) and a
malformed one is refused with its index and field; module nesting deeper than
:data:`MAX_MODULE_DEPTH` is refused.  Nothing but :class:`~simcomm.errors.SimcommError`
escapes :func:`import_profile` (``tests/traces/test_traces_kineto_fuzz.py``).
"""

from __future__ import annotations

import bisect
import json
import math
import zlib
from collections import Counter, defaultdict
from pathlib import Path

import simcomm
from simcomm.errors import ConfigError, TraceFormatError
from simcomm.traces.capture import _middle
from simcomm.traces.io import DTYPE_BYTES, DTYPES, read_regular
from simcomm.traces.schema import Layer, Trace

__all__ = ["PROFILE_MAX_BYTES", "MAX_MODULE_DEPTH", "import_profile", "parse_profile"]

_MOD = "nn.Module: "
_BWD = "autograd::engine::evaluate_function: "

#: The largest profile read, before and after gunzip: 512 MiB.  A profile of a few ResNet-50
#: training steps on an H100 with ``with_stack`` is 16 MB of JSON; parsed JSON takes ~10x its text in
#: memory, so this keeps an import within a few GiB and refuses a gzip bomb or ``/dev/zero``.
PROFILE_MAX_BYTES = 512 * 2**20
#: Modules nested deeper than this are refused (real models nest a few levels; ViT-B and ResNet-152
#: nest 4).  Bounds the work per layer name, which a crafted profile could otherwise make quadratic.
MAX_MODULE_DEPTH = 256
#: The largest element count of one parameter tensor taken from a profile's recorded shapes (2^48).
_MAX_ELEMS = 2**48

#: aten ops whose inputs at these positions are a module's parameters (weight, bias), as recorded in
#: a profile's "Input Dims" when it was recorded with ``record_shapes=True``.  Only the outermost op
#: inside a module call is read (``aten::conv2d`` calls ``aten::convolution`` with the same tensors).
_PARAM_INPUTS = {
    "aten::linear": (1, 2), "aten::bilinear": (2, 3),
    "aten::conv1d": (1, 2), "aten::conv2d": (1, 2), "aten::conv3d": (1, 2),
    "aten::conv_transpose1d": (1, 2), "aten::conv_transpose2d": (1, 2), "aten::conv_transpose3d": (1, 2),
    "aten::convolution": (1, 2), "aten::_convolution": (1, 2),
    "aten::batch_norm": (1, 2), "aten::instance_norm": (1, 2),
    "aten::layer_norm": (2, 3), "aten::group_norm": (2, 3), "aten::rms_norm": (2,),
    "aten::embedding": (0,), "aten::embedding_bag": (0,), "aten::prelu": (1,),
}
#: torch.nn leaf modules that own no parameters: 0 is their true count, not a missing one.
_PARAM_FREE = frozenset("""
    ReLU ReLU6 LeakyReLU RReLU GELU SiLU Mish ELU SELU CELU Sigmoid Tanh Hardtanh Hardswish Hardsigmoid
    Hardshrink Softshrink Tanhshrink Softplus Softsign LogSigmoid Threshold GLU Softmax Softmin LogSoftmax
    Softmax2d Dropout Dropout1d Dropout2d Dropout3d AlphaDropout FeatureAlphaDropout Identity Flatten
    Unflatten MaxPool1d MaxPool2d MaxPool3d AvgPool1d AvgPool2d AvgPool3d AdaptiveAvgPool1d
    AdaptiveAvgPool2d AdaptiveAvgPool3d AdaptiveMaxPool1d AdaptiveMaxPool2d AdaptiveMaxPool3d LPPool1d
    LPPool2d Upsample UpsamplingNearest2d UpsamplingBilinear2d PixelShuffle PixelUnshuffle ChannelShuffle
    ZeroPad1d ZeroPad2d ZeroPad3d ConstantPad1d ConstantPad2d ConstantPad3d ReflectionPad1d ReflectionPad2d
    ReflectionPad3d ReplicationPad1d ReplicationPad2d ReplicationPad3d CircularPad1d CircularPad2d
    CircularPad3d CosineSimilarity PairwiseDistance MSELoss L1Loss CrossEntropyLoss NLLLoss BCELoss
    BCEWithLogitsLoss SmoothL1Loss HuberLoss KLDivLoss
""".split())  # noqa: SIM905 (a word list reads better as text than as 100 quoted strings)


def _fail(source: str, msg: str) -> TraceFormatError:
    return TraceFormatError(f"profile {source!r}: {msg}")


def _show(v) -> str:
    text = repr(v)
    return text if len(text) <= 40 else text[:37] + "..."


def _gunzip(raw: bytes, limit: int, source: str) -> bytes:
    """Decompress (possibly multi-member) gzip, refusing output beyond ``limit`` bytes (a gzip bomb)."""
    parts, size, rest = [], 0, raw
    try:
        while rest.strip(b"\0"):  # gzip allows trailing zero padding
            d = zlib.decompressobj(16 + zlib.MAX_WBITS)
            buf = rest
            while buf and not d.eof:
                chunk = d.decompress(buf, limit + 1 - size)
                parts.append(chunk)
                size += len(chunk)
                if size > limit:
                    raise _fail(source, f"decompresses to more than {limit // 2**20} MiB, the limit for profiles")
                buf = d.unconsumed_tail
            if not d.eof:
                raise _fail(source, "is a truncated gzip file")
            rest = d.unused_data
    except zlib.error as exc:
        raise _fail(source, f"is not a valid gzip file: {exc}") from None
    return b"".join(parts)


def _read(path: Path) -> tuple[list[dict], str | None]:
    """The profile's complete ('X') events, validated, and the first GPU's name when the profile lists devices."""
    source = str(path)
    raw = read_regular(source, PROFILE_MAX_BYTES, "profile")
    if raw[:2] == b"\x1f\x8b":
        raw = _gunzip(raw, PROFILE_MAX_BYTES, source)
    try:
        data = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        what = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise TraceFormatError(f"profile {source!r} is not readable Chrome-trace JSON: {what}") from None
    if isinstance(data, dict):
        events, props = data.get("traceEvents"), data.get("deviceProperties")
    else:
        events, props = data, None
    if not isinstance(events, list):
        raise _fail(source, "traceEvents: expected a list of events (a torch.profiler export_chrome_trace file)")
    gpu = props[0].get("name") if isinstance(props, list) and props and isinstance(props[0], dict) else None
    return _clean(events, source), gpu if isinstance(gpu, str) else None


def _time(x) -> bool:
    """A finite number of microseconds (JSON's true/false and Infinity are not)."""
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _clean(events: list, source: str) -> list[dict]:
    """Validate every complete event and keep only the fields the import reads (types checked here once).

    A malformed event is refused with its index and field rather than skipped: dropping a module
    range with ``dur: Infinity`` or ``dur: true`` would silently move time between layers.
    """
    out = []
    for i, e in enumerate(events):
        if not isinstance(e, dict):
            raise _fail(source, f"traceEvents[{i}]: expected an event object, got {type(e).__name__}")
        if e.get("ph") != "X":
            continue  # instant, flow and metadata events carry no duration
        f = f"traceEvents[{i}]"
        name = e.get("name")
        if not isinstance(name, str):
            raise _fail(source, f"{f}.name: expected a string, got {_show(name)}")
        for key in ("ts", "dur"):
            if not _time(e.get(key)):
                raise _fail(source, f"{f}.{key}: expected a finite number of microseconds, got {_show(e.get(key))}")
        if e["dur"] < 0:
            raise _fail(source, f"{f}.dur: must be >= 0, got {e['dur']!r}")
        if not math.isfinite(e["ts"] + e["dur"]):
            raise _fail(source, f"{f}: ts + dur is not a finite number of microseconds")
        for key in ("tid", "pid"):
            v = e.get(key)
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, str))):
                raise _fail(source, f"{f}.{key}: expected an integer or a string, got {_show(v)}")
        cat = e.get("cat")
        if cat is not None and not isinstance(cat, str):
            raise _fail(source, f"{f}.cat: expected a string, got {_show(cat)}")
        args = e.get("args", {})
        if not isinstance(args, dict):
            raise _fail(source, f"{f}.args: expected an object, got {_show(args)}")
        kept = {}
        for key in ("Sequence number", "correlation"):
            if key in args:
                v = args[key]
                if isinstance(v, bool) or not isinstance(v, (int, str)):
                    raise _fail(source, f"{f}.args.{key}: expected an integer, got {_show(v)}")
                kept[key] = v
        for key in ("Input Dims", "Input type"):  # checked where read (_op_params)
            if key in args:
                kept[key] = args[key]
        out.append({"name": name, "cat": cat, "ts": float(e["ts"]), "dur": float(e["dur"]), "tid": e.get("tid"),
                    "args": kept, "index": i})
    return out


#: GPU activity categories Kineto records, and the runtime calls that launch them
_GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
_LAUNCH_CATS = ("cuda_runtime", "cuda_driver")


def _nesting(mods: list[dict]) -> dict[int, dict | None]:
    """Each module call's innermost enclosing module call on its thread (None at the top).

    Time containment with a stack yields a forest (a call's parent starts no later and is pushed
    earlier), so no call can be its own ancestor; :func:`parse_profile` still guards the walk.
    """
    parent: dict[int, dict | None] = {}
    by_tid = defaultdict(list)
    for e in mods:
        by_tid[e["tid"]].append(e)
    for evs in by_tid.values():
        stack: list[dict] = []
        for e in sorted(evs, key=lambda e: (e["ts"], -e["dur"], e["index"])):
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
            if e["cat"] in _GPU_CATS and "correlation" in e["args"]:
                gpu[e["args"]["correlation"]] = e
        self.any = bool(gpu)
        launches = defaultdict(list)
        for e in events:
            g = gpu.get(e["args"].get("correlation")) if e["cat"] in _LAUNCH_CATS else None
            if g is not None:
                launches[e["tid"]].append((e["ts"], g["ts"], g["dur"]))
        self.ts = {t: [x[0] for x in sorted(v)] for t, v in launches.items()}
        self.gpu = {t: [x[1:] for x in sorted(v)] for t, v in launches.items()}

    def _inside(self, e: dict, tid=None) -> list[tuple[float, float]]:
        tid = e["tid"] if tid is None else tid
        ts = self.ts.get(tid, [])
        lo, hi = bisect.bisect_left(ts, e["ts"]), bisect.bisect_right(ts, e["ts"] + e["dur"])
        return self.gpu[tid][lo:hi] if lo < hi else []

    def busy(self, e: dict) -> float:
        """Microseconds of GPU work launched inside ``e`` (on its thread)."""
        return sum(d for _, d in self._inside(e))

    def span(self, e: dict, threads: list) -> float | None:
        """First start to last end of the GPU work launched inside ``e``'s range on any of ``threads``."""
        work = [w for t in threads for w in self._inside(e, t)]
        return (max(s + d for s, d in work) - min(s for s, _ in work)) if work else None


def _op_params(op: dict, source: str) -> int | None:
    """Parameters among a recognised op's inputs, from its recorded shapes; None if not recognised or unrecorded."""
    positions = _PARAM_INPUTS.get(op["name"])
    dims, types = op["args"].get("Input Dims"), op["args"].get("Input type")
    if positions is None or dims is None:
        return None
    f = f"traceEvents[{op['index']}].args"
    if not isinstance(dims, list):
        raise _fail(source, f"{f}.Input Dims: expected a list of shapes, got {_show(dims)}")
    if types is not None and not isinstance(types, list):
        raise _fail(source, f"{f}.Input type: expected a list of type names, got {_show(types)}")
    n = 0
    for k in positions:
        if k >= len(dims):
            continue  # an optional argument that was not passed
        shape, kind = dims[k], (types[k] if types is not None and k < len(types) else None)
        if kind is not None and not isinstance(kind, str):
            raise _fail(source, f"{f}.Input type[{k}]: expected a string, got {_show(kind)}")
        if kind == "" or (kind or "").startswith("Scalar"):
            continue  # None (a Linear without bias) or a scalar argument
        if not isinstance(shape, list) or not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0
                                                  for x in shape):
            raise _fail(source, f"{f}.Input Dims[{k}]: expected a list of non-negative integers, got {_show(shape)}")
        if kind is None and not shape:
            continue  # no types recorded: an empty shape is an absent argument
        elems = math.prod(shape)
        if elems > _MAX_ELEMS:
            raise _fail(source, f"{f}.Input Dims[{k}]: {shape} is more than 2^48 parameters")
        n += elems
    return n


def _leaf_params(call: dict, ops: list[dict], source: str) -> int | None:
    """Parameters of a leaf module from the outermost recognised ops of one call (None: not determinable)."""
    t0, t1 = call["ts"], call["ts"] + call["dur"]
    inside = sorted((o for o in ops if t0 <= o["ts"] and o["ts"] + o["dur"] <= t1),
                    key=lambda o: (o["ts"], -o["dur"], o["index"]))
    counts, end = [], -math.inf
    for o in inside:
        if o["ts"] < end:
            continue  # inside an op already read (conv2d -> convolution -> _convolution)
        end = o["ts"] + o["dur"]
        n = _op_params(o, source)
        if n is not None:
            counts.append(n)
    return sum(counts) if counts else None


def parse_profile(events: list[dict], source: str = "<events>") -> dict:
    """Leaf layers of validated events (:func:`_clean`): names, types, mean forward/backward seconds, steps.

    Returns a dict with ``keys`` (the profile's own module names, ``Linear_0``), ``names``, ``types``,
    ``fwd``, ``bwd`` (seconds), ``steps`` (seconds), ``gpu`` (whether GPU time) and ``params`` (per
    layer, from recorded shapes, or None where the profile cannot tell).
    """
    mods = [e for e in events if e["cat"] == "python_function" and e["name"].startswith(_MOD)]
    if not mods:
        raise _fail(source, "no 'nn.Module:' events; record it with torch.profiler(with_stack=True)")
    nameless = next((e for e in mods if not e["name"][len(_MOD):].strip()), None)
    if nameless is not None:  # torch names every module event after its class: an empty one is not torch's
        raise _fail(source, f"traceEvents[{nameless['index']}] is an 'nn.Module:' event with no module name")
    parent = _nesting(mods)
    inner = {p["name"] for p in parent.values() if p is not None}  # ever seen around another module

    def path(e):
        parts, seen = [], set()
        while e is not None:
            if id(e) in seen:  # cannot happen with time containment; a guard, not a code path
                raise _fail(source, f"module {e['name'][len(_MOD):]!r} is its own ancestor")
            if len(parts) >= MAX_MODULE_DEPTH:
                raise _fail(source, f"modules are nested more than {MAX_MODULE_DEPTH} deep "
                                    f"(traceEvents[{e['index']}]); not a model's module tree")
            seen.add(id(e))
            parts.append(e["name"][len(_MOD):])
            e = parent[id(e)]
        return ".".join(reversed(parts))

    leaves = sorted((e for e in mods if e["name"] not in inner), key=lambda e: (e["ts"], e["index"]))
    if not leaves:
        raise _fail(source, "every module range encloses another module range of the same name; no leaf modules")
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
        if e["cat"] == "cpu_op" and "Sequence number" in e["args"] and not e["name"].startswith(_BWD):
            ops_by_tid[e["tid"]].append(e)
    bwd_by_seq = defaultdict(float)
    bwd_threads = set()
    for e in events:
        if e["name"].startswith(_BWD) and "Sequence number" in e["args"]:
            bwd_by_seq[e["args"]["Sequence number"]] += work.busy(e) if work.any else e["dur"]
            bwd_threads.add(e["tid"])
    all_ops = defaultdict(list)
    for e in events:
        if e["cat"] == "cpu_op":
            all_ops[e["tid"]].append(e)
    step_evs = sorted((e for e in events if e["name"].startswith("ProfilerStep#")
                       and e["cat"] != "gpu_user_annotation"), key=lambda e: (e["ts"], e["index"]))
    empty = next((e for e in step_evs if e["dur"] <= 0), None)
    if empty is not None:
        # refused, not skipped: a step of no duration is no iteration, and the profile is then not
        # what the user believes it is (an interrupted or hand-edited recording)
        raise _fail(source, f"{empty['name']} (traceEvents[{empty['index']}]) lasts 0 us; a profiler step must "
                            "span one training iteration: record the profile again or remove that step")
    steps = [e["dur"] * 1e-6 for e in step_evs]
    # Like a direct capture, average over the middle half of the steps by duration, so one
    # preempted iteration does not move the layer times (capture._middle).
    kept = [step_evs[k] for k in _middle(steps)] if steps else []

    def in_kept(e) -> bool:
        return not kept or any(k["ts"] <= e["ts"] <= k["ts"] + k["dur"] for k in kept)

    fwd, bwd, params = [], [], []
    for key in keys:
        evs = [e for e in calls[key] if in_kept(e)] or calls[key]
        params.append(_leaf_params(calls[key][0], all_ops[calls[key][0]["tid"]], source))
        seqs, span = set(), 0.0
        for e in evs:
            t0, t1 = e["ts"], e["ts"] + e["dur"]
            seqs.update(o["args"]["Sequence number"] for o in ops_by_tid[e["tid"]] if t0 <= o["ts"] <= t1)
            if work.any:
                span += work.busy(e)
                continue
            ops = [o for o in all_ops[e["tid"]] if t0 <= o["ts"] and o["ts"] + o["dur"] <= t1]
            # the ops' span excludes the profiler's own Python-tracing overhead around the call
            span += (max(o["ts"] + o["dur"] for o in ops) - min(o["ts"] for o in ops)) if ops else e["dur"]
        fwd.append(span / len(evs) * 1e-6)
        bwd.append(sum(bwd_by_seq[s] for s in seqs) / len(evs) * 1e-6)
    if kept:
        if work.any:
            threads = sorted({e["tid"] for e in kept} | bwd_threads, key=str)
            spans = [work.span(k, threads) for k in kept]
            steps = [x * 1e-6 for x in spans if x is not None]
        else:
            steps = [k["dur"] * 1e-6 for k in kept]
    if not all(math.isfinite(x) for x in (*fwd, *bwd, *steps, sum(fwd) + sum(bwd), sum(steps))):
        raise _fail(source, "durations too large: the layer or step times overflow")
    return {"keys": keys, "names": [shown[k] for k in keys], "types": [k[len(_MOD):].rsplit("_", 1)[0] for k in keys],
            "fwd": fwd, "bwd": bwd, "steps": steps, "gpu": work.any, "params": params}


def _from_module(spec: str, keys: list[str], types: list[str], shape_params: list, source: str):
    """Names and parameter counts of the profiled leaves from the user's factory (torch imported here only).

    The profile numbers modules per class in the order they are first called (``Linear_0`` is the
    first Linear to run); they are matched to the factory's leaf modules of that class in the order
    the model registers them, which is the order ``forward`` calls them in nearly every model.  The
    per-class counts must agree, and where the profile recorded shapes they must give the same count.
    """
    from simcomm.traces.capture import load_factory

    model = load_factory(spec)
    by_type = defaultdict(list)
    for name, mod in model.named_modules():
        if name and next(mod.children(), None) is None:
            by_type[type(mod).__name__].append((name, sum(p.numel() for p in mod.parameters())))
    wanted = Counter(types)
    for kind, count in sorted(wanted.items()):
        if len(by_type.get(kind, [])) != count:
            raise ConfigError(f"module: the profile holds {count} {kind} leaf module(s), {spec!r} has "
                              f"{len(by_type.get(kind, []))}; was the profile recorded from this model "
                              "(with every module called)?")
    taken = defaultdict(int)
    names, params = [], []
    for key, kind, recorded in zip(keys, types, shape_params, strict=False):
        name, n = by_type[kind][taken[kind]]
        taken[kind] += 1
        if recorded is not None and recorded != n:
            raise ConfigError(f"module: {key[len(_MOD):]} has {recorded} parameters by the profile's recorded "
                              f"shapes but {spec!r}'s {name!r} has {n}; the profile does not match this model "
                              "(or calls its modules out of registration order)")
        names.append(name)
        params.append(n)
    total = sum(p.numel() for p in model.parameters())
    return names, params, total


def import_profile(path: str, model: str | None = None, batch: int = 1, dtype: str = "fp32",
                   module: str | None = None, allow_zero_params: bool = False) -> Trace:
    """A ``kineto-import`` trace from a profile.

    Parameters come from, in order: ``model`` when it names a zoo model (names, shapes, FLOPs too);
    ``module`` (``pkg.mod:factory``, counted with torch); the profile's recorded input shapes.  A
    layer whose count none of these gives (and whose type is not a parameter-free one) makes the
    import fail, unless ``allow_zero_params``: a trace of zero gradient bytes would make every
    communication estimate silently zero.
    """
    if dtype not in DTYPES:
        raise ConfigError(f"dtype: {dtype!r} is not one of {', '.join(DTYPES)}")
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ConfigError(f"batch: must be a positive integer, got {batch}")
    specs = None
    if model is not None:
        from simcomm.traces.zoo import MODELS, model_spec

        if model in MODELS:
            if module is not None:
                raise ConfigError(f"module: --model {model!r} is a zoo model and already gives the parameters; "
                                  "omit --module or name the model differently")
            specs = model_spec(model).layers
    if module is not None and (module.count(":") != 1 or not all(module.split(":"))):
        raise ConfigError(f"module: {module!r} must look like pkg.mod:factory")
    p = Path(path)
    source = str(p)
    events, gpu_name = _read(p)
    prof = parse_profile(events, source)
    names, types, fwd, bwd, steps = prof["names"], prof["types"], prof["fwd"], prof["bwd"], prof["steps"]
    if specs is not None and [s.module_type for s in specs] != types:
        raise ConfigError(f"model: the profile's {len(types)} leaf modules do not match zoo model "
                          f"{model!r} ({len(specs)} layers); omit --model or pass another name")
    if specs is not None:
        params, how = [s.params for s in specs], "from zoo model"
    elif module is not None:
        names, params, total = _from_module(module, prof["keys"], types, prof["params"], source)
        how = f"counted with torch from {module}"
        if total != sum(params):
            how += (f" ({total - sum(params)} of its {total} parameters are not in any profiled leaf module: "
                    "unused modules or parameters held by non-leaf modules)")
    else:
        params = [n if n is not None else (0 if t in _PARAM_FREE else None) for n, t in zip(prof["params"], types, strict=False)]
        unknown = [names[i] for i, n in enumerate(params) if n is None]
        how = "from the profile's recorded input shapes (weights and biases of linear, convolution, norm and " \
              "embedding ops)"
        if unknown:
            if not allow_zero_params:
                shown = ", ".join(unknown[:3]) + (f" and {len(unknown) - 3} more" if len(unknown) > 3 else "")
                raise ConfigError(
                    f"params: {len(unknown)} of {len(types)} layers have no parameter count ({shown}); record "
                    "the profile with record_shapes=True, pass --module pkg.mod:factory or a zoo --model, or "
                    "--allow-zero-params to import them with 0 parameters (and 0 gradient bytes)")
            how = (f"UNKNOWN for {len(unknown)} of {len(types)} layers, set to 0 (--allow-zero-params); "
                   f"the rest {how}")
            params = [n or 0 for n in params]
    layers = []
    for i, (name, kind) in enumerate(zip(names, types, strict=False)):
        s = specs[i] if specs else None
        layers.append(Layer(name=s.name if s else name, module_type=kind, params=params[i],
                            grad_bytes=params[i] * DTYPE_BYTES[dtype], forward_s=fwd[i], backward_s=bwd[i],
                            input_shape=s.input_shape if s else (), output_shape=s.output_shape if s else (),
                            flops=s.flops * batch if s else None))
    layer_sum = sum(fwd) + sum(bwd)
    on_gpu = prof["gpu"]
    return Trace(
        model=model or module or p.name.split(".")[0], batch=batch, dtype=dtype,
        device=(gpu_name or "profiled GPU") if on_gpu else "profiled host",
        device_kind="gpu" if on_gpu else "cpu", method="kineto-import", layers=tuple(layers),
        iteration_s=sum(steps) / len(steps) if steps else layer_sum, iters=len(steps),
        frameworks={"simcomm": simcomm.__version__},
        meta={"source": p.name, "params": how,
              "times": ("GPU time of the kernels, copies and memsets each range launched" if on_gpu
                        else "host time of the ops in each range"),
              "iteration": (("GPU span of the work each of the middle half of the ProfilerStep ranges launched"
                             if on_gpu else "mean of the middle half of ProfilerStep durations")
                            if steps else "layer sum (no ProfilerStep ranges)")},
    )
