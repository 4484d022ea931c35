"""Capture a per-layer trace with torch: forward/backward hooks on every leaf module.

Timing: on CPU each hook reads ``time.perf_counter`` (CPU kernels are
synchronous, so the interval between a layer's pre-hook and post-hook is that
layer's work); on GPU each hook records a CUDA event on the current stream and
the intervals are read after one synchronize per iteration; a GPU sleep before
each iteration lets the host enqueue it ahead of the GPU, so that hook overhead
on the host is not timed as GPU idle (:class:`_QueueFill`).  Forward uses
forward pre/post hooks; backward uses full backward pre/post hooks, whose
interval covers the layer's autograd node (input and weight gradients).
Per-layer times are means over the middle half of the measured iterations
(ranked by iteration time: an interquartile mean, robust like a median but
additive); per-layer medians and inter-quartile ranges are kept in
``Layer.spread``.  What hooks do not see (residual adds, reshapes, the loss,
zero_grad, autograd bookkeeping, hook overhead) is the gap between the layer
sum and the measured iteration; docs/traces.md quantifies it.

Inputs are random normal tensors, except for a model with ``vocab_size`` (the zoo's
dense transformers, :mod:`simcomm.traces.zoo.torchnet`), which gets int64 token
ids; a model with ``returns_loss`` is differentiated through its own loss, any
other through the mean of its squared output.  ``CaptureConfig.autocast`` runs
forward and backward under ``torch.autocast`` (bf16 or fp16; parameters keep
their dtype, ``meta.autocast`` records it).

Under ``torchrun`` each rank captures its own trace: LOCAL_RANK picks
``cuda:LOCAL_RANK`` and RANK is appended to the default output name.

Noise: the iteration times' coefficient of variation (all measured iterations,
sample standard deviation over mean) is kept as ``meta.compute_jitter``, the
value of the ``workload.compute_jitter`` scenario option that reproduces it,
with their spread and the 1-minute load average; :func:`capture_warning` gives
one line when the CV exceeds :data:`CV_WARN` or the load average exceeds the
CPU count.  Progress is reported through callbacks (the CLI draws it).
"""

from __future__ import annotations

import contextlib
import importlib
import os
import platform
import statistics
import time
import warnings
from dataclasses import dataclass

import simcomm
from simcomm.errors import ConfigError
from simcomm.traces.schema import Layer, Trace

__all__ = ["AUTOCAST", "CV_WARN", "CaptureConfig", "capture_trace", "capture_warning", "rank_suffix", "load_factory"]

#: Iteration-time coefficient of variation above which a capture warns (10 %): the emulated
#: cluster's ranks jitter by 0.10-0.18 on shared cores (docs/workload.md); an H100's unhooked steps spread
#: by at most 2 % from min to max (docs/traces.md), a CV below 0.01.
CV_WARN = 0.10


@dataclass(frozen=True)
class CaptureConfig:
    model: str | None = None
    module: str | None = None  # "pkg.mod:factory"
    batches: tuple[int, ...] = (32,)
    input_shape: tuple[int, ...] | None = None
    device: str = "cpu"
    iters: int = 10
    warmup: int = 3
    grad_norms: int = 0
    optimizer: str = "sgd"
    threads: int | None = None
    seed: int = 0
    # run forward and backward inside torch.autocast at this dtype (None: the parameters' dtype)
    autocast: str | None = None


#: ``CaptureConfig.autocast`` choices and their torch dtypes
AUTOCAST = {"bf16": "bfloat16", "fp16": "float16"}


def rank_suffix() -> str:
    """``-rankR`` under a multi-process launcher (torchrun sets RANK), else empty."""
    rank = os.environ.get("RANK")
    return f"-rank{rank}" if rank is not None and os.environ.get("WORLD_SIZE", "1") != "1" else ""


def _torch():
    try:
        import torch
    except ImportError:
        raise ConfigError("device: trace capture needs torch; install simcomm[capture] or torch>=2.1") from None
    return torch


def load_factory(spec: str):
    """Call ``pkg.mod:factory`` and return its nn.Module; every failure is one ConfigError line."""
    torch = _torch()
    if spec.count(":") != 1 or not all(spec.split(":")):
        raise ConfigError(f"module: {spec!r} must look like pkg.mod:factory")
    mod_name, func_name = spec.split(":")
    try:
        factory = getattr(importlib.import_module(mod_name), func_name)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"module: cannot import {spec!r}: {type(exc).__name__}: {exc}") from None
    try:
        model = factory()
    except Exception as exc:  # a user factory may raise anything; report it in one line
        raise ConfigError(f"module: factory {spec!r} raised {type(exc).__name__}: {exc}") from None
    if not isinstance(model, torch.nn.Module):
        raise ConfigError(f"module: factory {spec!r} returned {type(model).__name__}, not a torch.nn.Module")
    return model


def _device(torch, name: str):
    if name == "cpu":
        return torch.device("cpu")
    if not name.startswith("cuda"):
        raise ConfigError(f"device: {name!r} is not one of cpu, cuda, cuda:N")
    if not torch.cuda.is_available():
        raise ConfigError("device: cuda was requested but torch sees no CUDA device")
    try:
        if name == "cuda":
            # torch.cuda.set_device needs an index: a bare "cuda" is this process's GPU (torchrun's
            # LOCAL_RANK, else 0). Found on a real H100, 2026-11-26 (benchmarks/gpu/).
            name = f"cuda:{int(os.environ.get('LOCAL_RANK', 0))}"
        dev = torch.device(name)
        torch.cuda.set_device(dev)
    except (RuntimeError, ValueError) as exc:
        raise ConfigError(f"device: {name!r} is not usable: {exc}") from None
    return dev


def _inputs(torch, model, shape, gen=None):
    """Model inputs: int64 token ids below ``model.vocab_size`` for a language model, else normal floats.

    ``gen`` None gives the probe's zeros (a valid token id too).
    """
    vocab = getattr(model, "vocab_size", None)
    if vocab:
        if gen is None:
            return torch.zeros(shape, dtype=torch.long)
        return torch.randint(0, vocab, shape, generator=gen, dtype=torch.long)
    return torch.zeros(shape) if gen is None else torch.randn(shape, generator=gen)


def _loss(torch, model, out):
    """The scalar to differentiate: the model's own loss (zoo transformers), else the mean squared output."""
    out = _first_tensor(torch, out)
    return out.float() if getattr(model, "returns_loss", False) else out.float().square().mean()


def _first_tensor(torch, obj):
    if isinstance(obj, torch.Tensor):
        return obj
    if isinstance(obj, (tuple, list)):
        for x in obj:
            t = _first_tensor(torch, x)
            if t is not None:
                return t
    return None


class _Timer:
    """Per-layer interval accumulator using perf_counter (CPU) or CUDA events (GPU)."""

    def __init__(self, torch, cuda: bool):
        self.torch, self.cuda = torch, cuda
        self.open: dict = {}
        self.done: list = []  # (phase, index, start, end)

    def now(self):
        if self.cuda:
            ev = self.torch.cuda.Event(enable_timing=True)
            ev.record()
            return ev
        return time.perf_counter()

    def start(self, key):
        self.open[key] = self.now()

    def stop(self, key):
        t0 = self.open.pop(key, None)
        if t0 is not None:
            self.done.append((key[0], key[1], t0, self.now()))

    def collect(self, n: int) -> tuple[list[float], list[float], list[int]]:
        """Per-layer forward and backward seconds of this iteration, and the backward finish order."""
        if self.cuda:
            self.torch.cuda.synchronize()
        fwd, bwd, order = [0.0] * n, [0.0] * n, []
        for phase, i, t0, t1 in self.done:
            dt = t0.elapsed_time(t1) / 1e3 if self.cuda else t1 - t0
            (fwd if phase == "f" else bwd)[i] += dt
            if phase == "b" and i not in order:
                order.append(i)
        self.done.clear()
        self.open.clear()
        return fwd, bwd, order


def _probe(torch, model, leaves, x):
    """One forward to learn which leaves run, in what order, with which shapes."""
    seen: dict = {}
    handles = []
    for name, mod in leaves:
        def hook(m, args, out, name=name):
            if name not in seen:
                inp, o = _first_tensor(torch, args), _first_tensor(torch, out)
                seen[name] = (tuple(inp.shape[1:]) if inp is not None else (),
                              tuple(o.shape[1:]) if o is not None else ())
        handles.append(mod.register_forward_hook(hook))
    try:
        with torch.no_grad():
            model(x)
    except Exception as exc:  # wrong shapes surface here as RuntimeError from the first layer
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(f"input-shape: the model rejected an input of shape {tuple(x.shape[1:])}: {msg}") from None
    finally:
        for h in handles:
            h.remove()
    return seen


def _measure(torch, model, layers, cfg, dev, batch, in_shape, progress):
    """Run warm-up and measured iterations at one batch; return per-layer medians and stats."""
    cuda = dev.type == "cuda"
    timer = _Timer(torch, cuda)
    index = {id(mod): i for i, (_, mod) in enumerate(layers)}
    handles = []
    for _, mod in layers:
        i = index[id(mod)]
        handles.append(mod.register_forward_pre_hook(lambda m, a, i=i: timer.start(("f", i))))
        handles.append(mod.register_forward_hook(lambda m, a, o, i=i: timer.stop(("f", i))))
        handles.append(mod.register_full_backward_pre_hook(lambda m, g, i=i: timer.start(("b", i))))
        # a layer whose inputs need no grad (the first one) gets this hook before its weight
        # gradient is computed; leave it open and close it when backward() returns
        handles.append(mod.register_full_backward_hook(
            lambda m, gi, go, i=i: None if all(g is None for g in gi) else timer.stop(("b", i))))
    opt = (torch.optim.Adam(model.parameters(), lr=1e-4) if cfg.optimizer == "adam"
           else torch.optim.SGD(model.parameters(), lr=1e-4, momentum=0.9))
    gen = torch.Generator().manual_seed(cfg.seed + batch)
    x = _inputs(torch, model, (batch, *in_shape), gen).to(dev)
    rows, iters, steps, orders = [], [], [], []
    try:
        with warnings.catch_warnings():
            # the first layer's input needs no grad, so torch warns on every backward; expected here
            warnings.filterwarnings("ignore", message="Full backward hook is firing")
            _loop(torch, model, x, opt, timer, cfg, len(layers), cuda, rows, iters, steps, orders, progress)
    finally:
        for h in handles:
            h.remove()
    return rows, iters, steps, orders[0] if orders else [], opt


class _QueueFill:
    """On CUDA, a GPU sleep before each iteration so the host enqueues the whole iteration ahead of the GPU.

    Four Python hooks per layer can make the host slower than the GPU on a fast card
    (ResNet-50 on an H100: 60.6 ms hooked against 37.3 ms unhooked, 2026-11-26): the GPU then
    idles between a layer's start event and its kernels, and the idle time is counted as the
    layer's.  With the launch queue filled while the GPU sleeps, kernels run back to back and
    the events time the GPU's own work.  The sleep lasts 1.5x the host's enqueue time of the
    previous iteration (at least 5 ms) and lies before the iteration's start event.
    """

    def __init__(self, torch, cuda: bool):
        self.torch, self.cuda = torch, cuda
        self.cycles_per_s = 0.0
        self.host_s = 0.005
        if cuda:
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            torch.cuda._sleep(1_000_000)
            b.record()
            torch.cuda.synchronize()
            self.cycles_per_s = 1_000_000 / max(a.elapsed_time(b) / 1e3, 1e-9)

    def before(self) -> float:
        """Sleep the GPU (CUDA only); returns the host clock to time this iteration's enqueue from."""
        if self.cuda:
            self.torch.cuda._sleep(int(self.cycles_per_s * max(0.005, 1.5 * self.host_s)))
        return time.perf_counter()

    def after(self, t0: float) -> None:
        self.host_s = time.perf_counter() - t0


def _loop(torch, model, x, opt, timer, cfg, n_layers, cuda, rows, iters, steps, orders, progress):
    """Warm-up then measured iterations; appends per-iteration results to the given lists."""
    fill = _QueueFill(torch, cuda)
    for it in range(cfg.warmup + cfg.iters):
        host0 = fill.before()
        t_start = timer.now()
        opt.zero_grad(set_to_none=True)
        _loss(torch, model, model(x)).backward()
        for key in [k for k in timer.open if k[0] == "b"]:
            timer.stop(key)
        t_mid = timer.now()
        opt.step()
        t_end = timer.now()
        fill.after(host0)
        fwd, bwd, order = timer.collect(n_layers)
        if it >= cfg.warmup:
            span = (lambda a, b: a.elapsed_time(b) / 1e3) if cuda else (lambda a, b: b - a)
            rows.append((fwd, bwd))
            iters.append(span(t_start, t_end))
            steps.append(span(t_mid, t_end))
            orders.append(order)
        if progress:
            progress()


def _iqr(xs: list[float]) -> float:
    if len(xs) < 4:
        return max(xs) - min(xs)
    q = statistics.quantiles(xs, n=4)
    return q[2] - q[0]


def _middle(iters: list[float]) -> list[int]:
    """Indices of the middle half of iterations by total time (all of them when fewer than 4).

    Why not per-layer medians: medians are not additive, so under noisy
    neighbours the sum of per-layer medians drifts below the median iteration.
    Means over one common set of iterations keep layer sum and iteration
    comparable, and dropping the fastest and slowest quarter keeps them robust.
    """
    ranked = sorted(range(len(iters)), key=lambda k: (iters[k], k))
    q = len(iters) // 4
    return sorted(ranked[q:len(iters) - q])


def _mean(xs) -> float:
    xs = list(xs)
    return sum(xs) / len(xs)


def _layer_iqm(rows, iters, i) -> tuple[float, float]:
    keep = _middle(iters)
    return _mean(rows[k][0][i] for k in keep), _mean(rows[k][1][i] for k in keep)


def _grad_norms(torch, model, layers, opt, cfg, dev, batch, in_shape, progress) -> list[list[float]]:
    """Per-iteration L1 norms of each layer's gradients over ``cfg.grad_norms`` training steps."""
    gen = torch.Generator().manual_seed(cfg.seed + 7919 * batch)
    norms: list[list[float]] = [[] for _ in layers]
    for _ in range(cfg.grad_norms):
        x = _inputs(torch, model, (batch, *in_shape), gen).to(dev)
        opt.zero_grad(set_to_none=True)
        _loss(torch, model, model(x)).backward()
        for i, (_, mod) in enumerate(layers):
            grads = [p.grad for p in mod.parameters() if p.grad is not None]
            norms[i].append(float(sum(g.abs().sum().item() for g in grads)) if grads else 0.0)
        opt.step()
        if progress:
            progress()
    return norms


def _load_1m() -> float | None:
    try:
        return os.getloadavg()[0]
    except (OSError, AttributeError):  # not every platform has a load average
        return None


def _noise(iters: list[float], loads: list[float | None]) -> dict:
    """Spread of the measured iteration times, their CV (as ``compute_jitter``) and the machine's load."""
    mean = _mean(iters)
    cv = statistics.stdev(iters) / mean if len(iters) > 1 and mean > 0 else 0.0
    known = [x for x in loads if x is not None]
    # a normal distribution's IQR is 1.349 sigma: this CV ignores one preempted iteration, the plain one does not
    med = statistics.median(iters)
    robust = _iqr(iters) / 1.349 / med if len(iters) >= 4 and med > 0 else cv
    return {"compute_jitter": cv, "iteration_cv": cv, "iteration_cv_robust": robust,
            "iteration_min_s": min(iters), "iteration_max_s": max(iters),
            "iteration_spread_s": max(iters) - min(iters),
            "load_avg_1m": max(known) if known else None, "cpu_count": os.cpu_count()}


def capture_warning(trace: Trace) -> str | None:
    """One line when a capture was noisy (CV above :data:`CV_WARN`) or the machine overloaded, else None."""
    meta = trace.meta
    reasons = []
    cv = meta.get("iteration_cv")
    if isinstance(cv, (int, float)) and cv > CV_WARN:
        reasons.append(f"iteration times vary by CV {cv:.1%} over {trace.iters} iterations (threshold "
                       f"{CV_WARN:.0%})")
    load, cpus = meta.get("load_avg_1m"), meta.get("cpu_count")
    if isinstance(load, (int, float)) and isinstance(cpus, int) and load > cpus:
        reasons.append(f"the 1-minute load average {load:.2f} exceeded the {cpus} CPUs")
    if not reasons:
        return None
    return (f"capture of {trace.model}: {'; '.join(reasons)}; per-layer times are less certain (run again on an idle "
            "machine, or with more --iters); meta.compute_jitter records the spread")


def capture_trace(cfg: CaptureConfig, progress=None, stage=None) -> Trace:
    """Capture ``cfg`` (a zoo model or a factory) and return a ``cpu-timer``/``cuda-events`` trace.

    ``progress(total)`` may return a callback called once per iteration; ``stage(text)`` is told
    each slow step before the iterations (importing torch, building the model, probing shapes).
    """
    say = stage or (lambda text: None)
    loads = [_load_1m()]
    say("importing torch")
    torch = _torch()
    if cfg.optimizer not in ("sgd", "adam"):
        raise ConfigError(f"optimizer: {cfg.optimizer!r} is not one of sgd, adam")
    if cfg.autocast is not None and cfg.autocast not in AUTOCAST:
        raise ConfigError(f"autocast: {cfg.autocast!r} is not one of {', '.join(AUTOCAST)} (or none)")
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    dev = _device(torch, cfg.device)
    torch.manual_seed(cfg.seed)
    say("building the model")
    flops_by_name = {}
    if cfg.model is not None:
        from simcomm.traces.zoo import MODELS, build_model, model_spec
        from simcomm.traces.zoo.transformer import TRANSFORMERS
        entry = MODELS.get(cfg.model)
        # a transformer's parameters are created on the capture device: initialising 1-10 billion of them
        # on the host first would take longer than the capture itself
        with dev if cfg.model in TRANSFORMERS else contextlib.nullcontext():
            model = build_model(cfg.model)
        in_shape = cfg.input_shape or entry.input_shape
        if cfg.input_shape is None or tuple(cfg.input_shape) == tuple(entry.input_shape):
            flops_by_name = {x.name: x.flops for x in model_spec(cfg.model).layers}
    else:
        model = load_factory(cfg.module)
        if cfg.input_shape is None:
            raise ConfigError("input-shape: --module needs --input-shape, e.g. --input-shape 3,224,224")
        in_shape = cfg.input_shape
    for mod in model.modules():  # full backward hooks forbid in-place ops on hooked outputs
        if getattr(mod, "inplace", False) is True:
            mod.inplace = False
    model = model.to(dev).train()
    # autocast around probe, iterations and gradient norms alike: as benchmarks/gpu/capture_h100.py's
    # amp-capture does for CNNs (parameters, gradients and optimizer state stay in their own dtype)
    amp = (torch.autocast(device_type=dev.type, dtype=getattr(torch, AUTOCAST[cfg.autocast]))
           if cfg.autocast else contextlib.nullcontext())
    with amp:
        return _capture(torch, cfg, dev, model, in_shape, flops_by_name, loads, progress, say)


def _capture(torch, cfg, dev, model, in_shape, flops_by_name, loads, progress, say) -> Trace:
    """Probe, measure and assemble the trace of a built model (already on ``dev``)."""
    leaves = [(n, m) for n, m in model.named_modules() if n and next(m.children(), None) is None]
    say("probing layer shapes")
    seen = _probe(torch, model, leaves, _inputs(torch, model, (2, *in_shape)).to(dev))
    order = {name: i for i, name in enumerate(seen)}  # dicts keep first-call order
    layers = sorted(((n, m) for n, m in leaves if n in seen), key=lambda nm: order[nm[0]])
    if not layers:
        raise ConfigError("model: no leaf module ran during forward; nothing to time")
    total = len(cfg.batches) * (cfg.warmup + cfg.iters + cfg.grad_norms)
    tick = progress(total) if progress else None
    per_batch = {}
    for batch in cfg.batches:
        rows, iters, steps, border, opt = _measure(torch, model, layers, cfg, dev, batch, in_shape, tick)
        norms = _grad_norms(torch, model, layers, opt, cfg, dev, batch, in_shape, tick) if cfg.grad_norms else None
        per_batch[batch] = (rows, iters, steps, border, norms)
    loads.append(_load_1m())
    main = cfg.batches[0]
    rows, iters, steps, border, norms = per_batch[main]
    keep = _middle(iters)
    step_mid = _mean(steps[k] for k in keep)
    n_params = sum(p.numel() for _, m in layers for p in m.parameters())
    out_layers = []
    for i, (name, mod) in enumerate(layers):
        params = sum(p.numel() for p in mod.parameters())
        fwd = [r[0][i] for r in rows]
        bwd = [r[1][i] for r in rows]
        by_batch = ()
        if len(cfg.batches) > 1:
            by_batch = tuple((b, *_layer_iqm(per_batch[b][0], per_batch[b][1], i)) for b in cfg.batches)
        elem = next((p.element_size() for p in mod.parameters()), 4)
        f = flops_by_name.get(name)
        out_layers.append(Layer(
            name=name, module_type=type(mod).__name__, params=params, grad_bytes=params * elem,
            forward_s=_mean(fwd[k] for k in keep), backward_s=_mean(bwd[k] for k in keep),
            update_s=step_mid * params / n_params if n_params else 0.0,
            input_shape=seen[name][0], output_shape=seen[name][1],
            flops=None if f is None else f * main, grad_l1=tuple(norms[i]) if norms else (),
            by_batch=by_batch,
            spread={"forward_median_s": statistics.median(fwd), "forward_iqr_s": _iqr(fwd),
                    "backward_median_s": statistics.median(bwd), "backward_iqr_s": _iqr(bwd)}))
    missing = [i for i in reversed(range(len(layers))) if i not in border]
    ready = tuple(border) + tuple(missing)
    names = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16", "float64": "fp64"}
    dtype = names.get(str(next((p.dtype for p in model.parameters()), "float32")).replace("torch.", ""), "fp32")
    cuda = dev.type == "cuda"
    return Trace(
        model=cfg.model or cfg.module, batch=main, dtype=dtype,
        device=torch.cuda.get_device_name(dev) if cuda else _cpu_name(torch),
        device_kind="gpu" if cuda else "cpu", method="cuda-events" if cuda else "cpu-timer",
        layers=tuple(out_layers), iteration_s=_mean(iters[k] for k in keep), warmup=cfg.warmup, iters=cfg.iters,
        frameworks={"torch": torch.__version__, "python": platform.python_version(), "simcomm": simcomm.__version__,
                    **({"cuda": str(torch.version.cuda)} if cuda else {})},
        backward_order=() if ready == tuple(reversed(range(len(layers)))) else ready,
        meta={"iteration_iqr_s": _iqr(iters), "iterations_s": iters,
              "layer_sums_s": [sum(f) + sum(b) + s for (f, b), s in zip(rows, steps, strict=False)], "optimizer_step_s": step_mid,
              "iteration_median_s": statistics.median(iters), "kept_iterations": list(keep), "optimizer": cfg.optimizer,
              "threads": torch.get_num_threads(), "rank": int(os.environ.get("RANK", "0")),
              "input_shape": list(in_shape),
              "loss": ("the model's next-token cross-entropy on random token ids"
                       if getattr(model, "returns_loss", False) else "mean of squared outputs (synthetic random inputs)"),
              **({"autocast": cfg.autocast} if cfg.autocast else {}),
              "captured": "real measurement on this machine", **_noise(iters, loads)},
    )


def _cpu_name(torch) -> str:
    name = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    name = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"cpu: {name}, {torch.get_num_threads()} threads"
