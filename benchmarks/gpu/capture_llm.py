"""Helpers for benchmarks/gpu/capture_llm.sh: transformer captures and their roofline comparison.

    python benchmarks/gpu/capture_llm.py capture --model megatron-1.7b --batch 4 --device cuda:0 \
        --iters 20 --warmup 5 --autocast bf16 --out F.json [--layers 2] [--seq 64] [--shrink]
    python benchmarks/gpu/capture_llm.py compare --device h100 --out-json C.json --out-md C.md F.json ...

``capture`` runs simcomm's own capture (``simcomm.traces.capture.capture_trace``, Adam, under
``torch.autocast`` when ``--autocast`` is given).  A whole zoo model is captured by name; ``--layers
N`` (the first N blocks), ``--seq`` (a shorter sequence) or ``--shrink`` (hidden 64, FFN 256, vocab
512: the dry run's tiny stand-in with the same norm, MLP, bias, tying and KV grouping) build the
module from a modified config through this file's :func:`factory` (``--module``), since the zoo
entry has the published shape.  If the GPU runs out of memory the capture is retried once at half
the batch, and the log says so.

``compare`` synthesises the same model on a roofline device (``transformer_trace``, bf16, Adam, the
captured batch) and writes, per trace, synthesised / captured forward+backward per leaf kind
(attention, MLP, embedding + head, matched by leaf name) and for the whole step.  Imports only
simcomm.traces (no simpy).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
from dataclasses import replace

KINDS = {"TransformerAttention": "attention", "TransformerMLP": "mlp", "TransformerEmbedding": "embed+head",
         "TransformerHead": "embed+head"}


def _config():
    """The config that ``SIMCOMM_LLM`` (JSON: model, layers, seq, shrink) describes."""
    from simcomm.traces.zoo.transformer import transformer_config

    spec = json.loads(os.environ["SIMCOMM_LLM"])
    cfg = transformer_config(spec["model"])
    if spec.get("shrink"):
        heads = 4
        kv = heads if cfg.kv_heads == cfg.heads else 2
        cfg = replace(cfg, hidden=64, ffn=256, heads=heads, kv_heads=kv, vocab=512,
                      positions=cfg.positions and cfg.seq, dense_ffn=0)
    if spec.get("layers"):
        cfg = replace(cfg, layers=spec["layers"])
    return cfg


def factory():
    """The torch module of ``SIMCOMM_LLM``'s config (capture's ``--module`` entry point)."""
    import torch

    from simcomm.traces.zoo.torchnet import build_transformer

    # parameters created on the capture device: a billion of them initialised on the host takes long
    with torch.device(json.loads(os.environ["SIMCOMM_LLM"]).get("device", "cpu")):
        return build_transformer(_config())


def cmd_capture(args) -> None:
    import torch

    from simcomm.traces.capture import CaptureConfig, capture_trace
    from simcomm.traces.io import save_trace

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    custom = bool(args.layers or args.shrink)
    batch = args.batch
    for attempt in (1, 2):
        base = dict(batches=(batch,), device=args.device, iters=args.iters, warmup=args.warmup, optimizer=args.optimizer,
                    autocast=args.autocast, input_shape=(args.seq,) if args.seq else None)
        if custom:
            dev = args.device if args.device != "cuda" else "cuda:0"
            os.environ["SIMCOMM_LLM"] = json.dumps({"model": args.model, "layers": args.layers,
                                                    "shrink": args.shrink, "device": dev})
            seq = args.seq or _config().seq
            cfg = CaptureConfig(module="capture_llm:factory", **{**base, "input_shape": (seq,)})
        else:
            cfg = CaptureConfig(model=args.model, **base)
        try:
            trace = capture_trace(cfg)
            break
        except torch.cuda.OutOfMemoryError as exc:
            first = str(exc).splitlines()[0]
        # outside the except block, so the failed attempt's frames (model, optimizer) can be freed
        gc.collect()
        torch.cuda.empty_cache()
        if attempt == 2 or batch == 1:
            sys.exit(f"OUT OF MEMORY at batch {batch}: {first}; no trace for {args.model}")
        print(f"out of memory at batch {batch} ({first}); retrying at batch {batch // 2}")
        batch //= 2
    label = args.model + (f"[{args.layers} layers]" if args.layers else "") + ("[shrunk]" if args.shrink else "")
    peak = torch.cuda.max_memory_allocated() if torch.cuda.is_available() and args.device != "cpu" else None
    trace = replace(trace, model=label if custom else trace.model,
                    meta={**trace.meta, "zoo_model": args.model, "layers_captured": args.layers or None,
                          "seq": cfg.input_shape[0] if cfg.input_shape else None, "peak_memory_bytes": peak,
                          "note": f"benchmarks/gpu/capture_llm.py: capture_trace with {args.optimizer}"
                                  + (f" under torch.autocast({args.autocast})" if args.autocast else "")})
    path = save_trace(trace, args.out)
    fwd = sum(x.forward_s for x in trace.layers)
    bwd = sum(x.backward_s for x in trace.layers)
    print(f"wrote {path}: {trace.model} on {trace.device}, batch {trace.batch}, {len(trace.layers)} layers, "
          f"forward {fwd * 1e3:.2f} ms, backward {bwd * 1e3:.2f} ms, layer sum {trace.layer_sum_s * 1e3:.2f} ms, "
          f"iteration {trace.iteration_s * 1e3:.2f} ms, peak memory "
          f"{'n/a' if peak is None else f'{peak / 2**30:.1f} GiB'}")


def _by_kind(trace, names) -> dict:
    out = {}
    for x in trace.layers:
        if x.name in names:
            k = KINDS.get(x.module_type, x.module_type)
            out[k] = out.get(k, 0.0) + x.forward_s + x.backward_s
    return out


def compare(trace, device: str) -> dict:
    """Synthesised / captured, per leaf kind and whole step, for one captured transformer trace."""
    from simcomm.traces.devices import get_device
    from simcomm.traces.zoo.transformer import transformer_trace

    model = trace.meta.get("zoo_model", trace.model)
    synth = transformer_trace(model, device, trace.batch, "bf16", "adam")
    names = {x.name for x in trace.layers} & {x.name for x in synth.layers}
    cap, syn = _by_kind(trace, names), _by_kind(synth, names)
    # forward + backward FLOPs per kind as the roofline counts them (backward = 2x forward)
    flops = {}
    for x in synth.layers:
        if x.name in names:
            k = KINDS.get(x.module_type, x.module_type)
            flops[k] = flops.get(k, 0.0) + 3 * (x.flops or 0.0)
    peak = get_device(device).peak_flops["bf16"]
    rows = {k: {"captured_s": cap[k], "roofline_s": syn[k], "roofline_over_captured": syn[k] / cap[k],
                "captured_tflops": flops[k] / cap[k] / 1e12, "captured_fraction_of_bf16_peak": flops[k] / cap[k] / peak}
            for k in sorted(cap) if cap[k] > 0}
    fb_cap, fb_syn = sum(cap.values()), sum(syn.values())
    whole = len(names) == len(synth.layers)
    short = trace.meta.get("seq") not in (None, synth.meta["transformer"]["seq"])
    return {"model": trace.model, "zoo_model": model, "batch": trace.batch, "device": trace.device,
            "autocast": trace.meta.get("autocast"), "seq": trace.meta.get("seq"), "layers_matched": len(names),
            "roofline_bf16_compute_eff": getattr(dict(get_device(device).fitted).get("bf16"), "compute", None),
            "by_kind": rows, **({"note": "captured at a shorter sequence than the roofline's: ratios "
                                          "are not comparable"} if short or "[shrunk]" in trace.model else {}),
            "forward_backward": {"captured_s": fb_cap, "roofline_s": fb_syn, "roofline_over_captured": fb_syn / fb_cap},
            "step": ({"captured_iteration_s": trace.iteration_s, "captured_layer_sum_s": trace.layer_sum_s,
                      "roofline_iteration_s": synth.iteration_s,
                      "roofline_over_captured_iteration": synth.iteration_s / trace.iteration_s}
                     if whole else "subset of the model's layers: no whole-step comparison")}


def cmd_compare(args) -> None:
    from simcomm.traces.io import load_trace

    results = []
    for path in args.traces:
        if not os.path.exists(path):
            print(f"skip {path}: not captured")
            continue
        results.append(compare(load_trace(path), args.device))
    with open(args.out_json, "w", encoding="utf-8") as fh:
        json.dump({"roofline_device": args.device, "dtype": "bf16", "optimizer": "adam", "results": results}, fh,
                  indent=1, sort_keys=True)
        fh.write("\n")
    lines = [f"Roofline ({args.device}, bf16, Adam) over captured forward+backward (ms), by leaf kind", "",
             "| model | batch | attention | mlp | embed+head | fwd+bwd | iteration (captured / roofline) |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        cells = []
        for k in ("attention", "mlp", "embed+head"):
            row = r["by_kind"].get(k)
            cells.append("-" if row is None else
                         f"{row['roofline_s'] * 1e3:.2f} / {row['captured_s'] * 1e3:.2f} = "
                         f"{row['roofline_over_captured']:.2f}")
        fb = r["forward_backward"]
        step = r["step"]
        it = ("subset" if isinstance(step, str) else
              f"{step['captured_iteration_s'] * 1e3:.2f} / {step['roofline_iteration_s'] * 1e3:.2f}")
        lines.append(f"| {r['model']} | {r['batch']} | {' | '.join(cells)} | "
                     f"{fb['roofline_s'] * 1e3:.2f} / {fb['captured_s'] * 1e3:.2f} = {fb['roofline_over_captured']:.2f}"
                     f" | {it} |")
    text = "\n".join(lines) + "\n"
    with open(args.out_md, "w", encoding="utf-8") as fh:
        fh.write(text)
    print(text)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("capture")
    c.add_argument("--model", required=True)
    c.add_argument("--batch", type=int, required=True)
    c.add_argument("--device", default="cuda:0")
    c.add_argument("--iters", type=int, default=20)
    c.add_argument("--warmup", type=int, default=5)
    c.add_argument("--autocast", default=None)
    c.add_argument("--layers", type=int, default=0)
    c.add_argument("--optimizer", default="adam", help="adam, or sgd where Adam's state would not fit")
    c.add_argument("--seq", type=int, default=0)
    c.add_argument("--shrink", action="store_true")
    c.add_argument("--out", required=True)
    m = sub.add_parser("compare")
    m.add_argument("--device", default="h100")
    m.add_argument("--out-json", required=True)
    m.add_argument("--out-md", required=True)
    m.add_argument("traces", nargs="+")
    args = p.parse_args(argv)
    {"capture": cmd_capture, "compare": cmd_compare}[args.cmd](args)


if __name__ == "__main__":
    main()
