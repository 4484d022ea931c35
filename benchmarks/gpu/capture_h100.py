"""Helpers for benchmarks/gpu/capture_h100.sh (run on a CUDA machine; CPU works as a dry run).

    python benchmarks/gpu/capture_h100.py env        --results R.json
    python benchmarks/gpu/capture_h100.py amp-capture --model resnet50 --batch 64 --out F.json [--iters 30 --warmup 5]
    python benchmarks/gpu/capture_h100.py throughput --results R.json [--quick]

``env`` records torch/CUDA/cuDNN versions, the device and torch's TF32 switches.
``amp-capture`` runs simcomm's own capture (simcomm.traces.capture.capture_trace) inside
``torch.autocast(dtype=bfloat16)``: the capture has no precision option, and autocast around it is
the cheapest way to time the same hooks with bf16 kernels (parameters and gradients stay fp32, so the
trace says dtype fp32; ``meta.autocast`` says bf16).
``throughput`` is the independent check: a plain training loop (zero_grad, forward, cross-entropy
on random labels, backward, SGD with momentum step) with no hooks, on synthetic data, warm-up then
timed with CUDA events around every iteration, for torchvision's ResNet-50 / VGG-16 and for simcomm's
zoo models (the modules the capture times, without the hooks). Only torch, torchvision and, for the
zoo models and amp-capture, simcomm.traces (which does not import simpy) are imported.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time


def _merge(path: str, key: str, value) -> None:
    data = {}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    data[key] = value
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=1, sort_keys=True)
        fh.write("\n")
    os.replace(tmp, path)


def _tf32(torch) -> dict:
    out = {}
    for label, get in (("cuda.matmul.allow_tf32", lambda: torch.backends.cuda.matmul.allow_tf32),
                       ("cudnn.allow_tf32", lambda: torch.backends.cudnn.allow_tf32),
                       ("cudnn.benchmark", lambda: torch.backends.cudnn.benchmark),
                       ("float32_matmul_precision", torch.get_float32_matmul_precision)):
        try:
            out[label] = get()
        except Exception as exc:  # noqa: BLE001 - report whatever this torch says
            out[label] = f"unavailable: {exc}"
    return out


def cmd_env(args) -> None:
    import torch
    info = {"python": platform.python_version(), "torch": torch.__version__, "cuda": str(torch.version.cuda),
            "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
            "cuda_available": torch.cuda.is_available(), "tf32": _tf32(torch),
            "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    try:
        import torchvision
        info["torchvision"] = torchvision.__version__
    except ImportError:
        info["torchvision"] = None
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        info["device"] = {"name": p.name, "total_memory": p.total_memory, "sms": p.multi_processor_count,
                          "capability": f"{p.major}.{p.minor}"}
    print(json.dumps(info, indent=1, sort_keys=True))
    _merge(args.results, "env", info)


def cmd_amp_capture(args) -> None:
    from dataclasses import replace

    import torch

    from simcomm.traces.capture import CaptureConfig, capture_trace
    from simcomm.traces.io import save_trace

    dev = args.device
    cfg = CaptureConfig(model=args.model, batches=(args.batch,), device=dev, iters=args.iters, warmup=args.warmup)
    with torch.autocast(device_type="cuda" if dev.startswith("cuda") else "cpu", dtype=torch.bfloat16):
        trace = capture_trace(cfg)
    trace = replace(trace, meta={**trace.meta, "autocast": "bf16",
                                 "note": "simcomm capture_trace run inside torch.autocast(bfloat16) by "
                                         "benchmarks/gpu/capture_h100.py; parameters and gradients fp32"})
    path = save_trace(trace, args.out)
    print(f"wrote {path}: {trace.model} bf16-autocast on {trace.device}, batch {trace.batch}, "
          f"{len(trace.layers)} layers, layer sum {trace.layer_sum_s * 1e3:.2f} ms, "
          f"iteration {trace.iteration_s * 1e3:.2f} ms")


def _build(torch, source: str, model: str):
    if source == "torchvision":
        import torchvision
        return getattr(torchvision.models, model)(weights=None)
    from simcomm.traces.zoo import build_model
    return build_model(model)


def _time_loop(torch, net, batch, dev, amp, warmup, iters, channels_last=False) -> dict:
    net = net.to(dev).train()
    if channels_last:
        net = net.to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(net.parameters(), lr=1e-4, momentum=0.9)
    gen = torch.Generator().manual_seed(batch)
    x = torch.randn((batch, 3, 224, 224), generator=gen).to(dev)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (batch,), generator=gen).to(dev)
    loss_fn = torch.nn.CrossEntropyLoss()
    cuda = dev.type == "cuda"

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device_type=dev.type, dtype=torch.bfloat16, enabled=amp):
            out = net(x)
            loss = loss_fn(out.float(), y)
        loss.backward()
        opt.step()

    for _ in range(warmup):
        step()
    if cuda:
        torch.cuda.synchronize()
        evs = [torch.cuda.Event(enable_timing=True) for _ in range(iters + 1)]
    t0 = time.perf_counter()
    for i in range(iters):
        if cuda:
            evs[i].record()
        step()
    if cuda:
        evs[iters].record()
        torch.cuda.synchronize()
    wall = time.perf_counter() - t0
    per = [evs[i].elapsed_time(evs[i + 1]) / 1e3 for i in range(iters)] if cuda else [wall / iters] * iters
    total = sum(per)
    return {"batch": batch, "amp_bf16": amp, "channels_last": channels_last, "warmup": warmup, "iters": iters,
            "iter_mean_s": total / iters, "iter_median_s": statistics.median(per),
            "iter_min_s": min(per), "iter_max_s": max(per), "images_per_s": batch * iters / total,
            "wall_images_per_s": batch * iters / wall, "iterations_s": per,
            "max_memory_allocated": torch.cuda.max_memory_allocated(dev) if cuda else None}


def cmd_throughput(args) -> None:
    import torch
    dev = torch.device(args.device)
    warmup, iters = (1, 2) if args.quick else (args.warmup, args.iters)
    b64, b32, b256 = (2, 2, 4) if args.quick else (64, 32, 256)
    # (label, source, model, batch, amp, channels_last, cudnn.benchmark); default switches first
    runs = [
        ("tv-resnet50-fp32-b64", "torchvision", "resnet50", b64, False, False, False),
        ("tv-resnet50-bf16amp-b64", "torchvision", "resnet50", b64, True, False, False),
        ("zoo-resnet50-fp32-b64", "zoo", "resnet50", b64, False, False, False),
        ("zoo-resnet50-bf16amp-b64", "zoo", "resnet50", b64, True, False, False),
        ("tv-vgg16-fp32-b32", "torchvision", "vgg16", b32, False, False, False),
        ("tv-vgg16-fp32-b64", "torchvision", "vgg16", b64, False, False, False),
        ("zoo-vgg16-fp32-b32", "zoo", "vgg16", b32, False, False, False),
        ("zoo-vgg16-fp32-b64", "zoo", "vgg16", b64, False, False, False),
        ("tv-resnet50-fp32-b256", "torchvision", "resnet50", b256, False, False, False),
        ("tv-resnet50-bf16amp-b256", "torchvision", "resnet50", b256, True, False, False),
        ("tv-resnet50-fp32-b64-cudnnbench", "torchvision", "resnet50", b64, False, False, True),
        ("tv-resnet50-bf16amp-b64-cudnnbench-cl", "torchvision", "resnet50", b64, True, True, True),
    ]
    results = {}
    for label, source, model, batch, amp, cl, bench in runs:
        torch.backends.cudnn.benchmark = bench
        torch.manual_seed(0)
        if dev.type == "cuda":
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats(dev)
        net = None
        try:
            net = _build(torch, source, model)
            r = _time_loop(torch, net, batch, dev, amp, warmup, iters, cl)
        except Exception as exc:  # noqa: BLE001 - one failed row must not lose the others
            r = {"error": f"{type(exc).__name__}: {exc}"}
        r.update(source=source, model=model, cudnn_benchmark=bench, tf32=_tf32(torch))
        results[label] = r
        del net
        if "error" in r:
            print(f"{label:40s} ERROR {r['error']}", flush=True)
        else:
            print(f"{label:40s} {r['iter_mean_s'] * 1e3:8.2f} ms/iter (median {r['iter_median_s'] * 1e3:.2f}) "
                  f"{r['images_per_s']:8.1f} img/s  mem {r['max_memory_allocated'] or 0:.3g} B", flush=True)
        _merge(args.results, "throughput", results)
    torch.backends.cudnn.benchmark = False


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("env")
    e.add_argument("--results", required=True)
    a = sub.add_parser("amp-capture")
    a.add_argument("--model", required=True)
    a.add_argument("--batch", type=int, required=True)
    a.add_argument("--out", required=True)
    a.add_argument("--device", default="cuda")
    a.add_argument("--iters", type=int, default=30)
    a.add_argument("--warmup", type=int, default=5)
    t = sub.add_parser("throughput")
    t.add_argument("--results", required=True)
    t.add_argument("--device", default="cuda")
    t.add_argument("--warmup", type=int, default=10)
    t.add_argument("--iters", type=int, default=30)
    t.add_argument("--quick", action="store_true", help="tiny batches and 2 iterations (CPU dry run)")
    args = ap.parse_args(argv)
    {"env": cmd_env, "amp-capture": cmd_amp_capture, "throughput": cmd_throughput}[args.cmd](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
