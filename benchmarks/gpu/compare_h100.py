"""Compare the H100 CUDA captures and whole-step times with the calibrated roofline (no GPU needed).

    python benchmarks/gpu/compare_h100.py [benchmarks/gpu/h100-2026-11-26]

Reads what benchmarks/gpu/capture_h100.sh brought back (the capture traces and results.json) and
prints, per model: the roofline's iteration (the bundled ``*-h100-roofline`` trace, or a synthesis
with the same calibrated factors at another batch or precision), the captured per-layer sum and the
captured (hooked) iteration, the plain-loop whole step, and the per-layer agreement between roofline
and capture (Pearson r of forward+backward per layer, and of their logarithms; sums per module type;
the largest per-layer misses).  docs/traces.md, "Measured on an H100 (CUDA capture)", quotes it.
"""

from __future__ import annotations

import json
import math
import sys
from collections import defaultdict
from pathlib import Path

from simcomm.traces import load_bundled
from simcomm.traces.io import load_trace
from simcomm.traces.synth import synth_trace

CASES = [
    # (label, capture file, plain-loop row of results.json, roofline: bundled name or (model, batch, dtype))
    ("ResNet-50 b64 fp32", "resnet50-h100-capture.json", "tv-resnet50-fp32-b64", "resnet50-h100-roofline"),
    ("ResNet-50 b64 bf16 AMP", "resnet50-h100-bf16amp-capture.json", "tv-resnet50-bf16amp-b64",
     ("resnet50", 64, "bf16")),
    ("VGG-16 b32 fp32", "vgg16-h100-capture.json", "tv-vgg16-fp32-b32", ("vgg16", 32, "fp32")),
    ("VGG-16 b64 fp32", "vgg16-h100-b64-capture.json", "tv-vgg16-fp32-b64", "vgg16-h100-roofline"),
]


def _pearson(xs, ys) -> float:
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=False))
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    return sxy / math.sqrt(sxx * syy) if sxx and syy else float("nan")


def _roofline(spec):
    if isinstance(spec, str):
        return load_bundled(spec), f"bundled {spec}"
    model, batch, dtype = spec
    return synth_trace(model, "h100", batch, dtype), f"synthesized h100 {model} b{batch} {dtype}"


def ms(x: float) -> str:
    return f"{x * 1e3:.2f}"


def main(folder: str = "benchmarks/gpu/h100-2026-11-26") -> int:
    root = Path(folder)
    results = json.loads((root / "results.json").read_text(encoding="utf-8"))
    plain = results["throughput"]
    print("| model | roofline | captured layer sum (fwd + bwd + upd) | captured iteration (hooked) "
          "| plain loop step (img/s) | roofline vs plain | layer sum vs plain |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    details = []
    for label, cap_file, plain_row, spec in CASES:
        cap = load_trace(root / cap_file)
        roof, how = _roofline(spec)
        p = plain[plain_row]
        step = p["iter_mean_s"]
        fwd = sum(x.forward_s for x in cap.layers)
        bwd = sum(x.backward_s for x in cap.layers)
        upd = sum(x.update_s for x in cap.layers)
        print(f"| {label} | {ms(roof.iteration_s)} | {ms(cap.layer_sum_s)} ({ms(fwd)} + {ms(bwd)} + {ms(upd)}) "
              f"| {ms(cap.iteration_s)} | {ms(step)} ({p['images_per_s']:.0f}) "
              f"| {roof.iteration_s / step - 1:+.0%} | {cap.layer_sum_s / step - 1:+.0%} |")
        details.append((label, cap, roof, how))
    for label, cap, roof, how in details:
        rl = {x.name: x for x in roof.layers}
        common = [x for x in cap.layers if x.name in rl]
        c = [x.forward_s + x.backward_s for x in common]
        r = [rl[x.name].forward_s + rl[x.name].backward_s for x in common]
        print(f"\n{label}: roofline = {how}; {len(common)} of {len(cap.layers)} captured layers matched by name")
        print(f"  per-layer fwd+bwd: Pearson r {_pearson(c, r):.3f}, "
              f"on logs {_pearson([math.log(v) for v in c], [math.log(v) for v in r]):.3f}")
        by_type = defaultdict(lambda: [0.0, 0.0, 0])
        for x, cv, rv in zip(common, c, r, strict=False):
            by_type[x.module_type][0] += cv
            by_type[x.module_type][1] += rv
            by_type[x.module_type][2] += 1
        for t, (cv, rv, n) in sorted(by_type.items(), key=lambda kv: -kv[1][0]):
            print(f"  {t:20s} n={n:3d} captured {ms(cv):>7s} ms roofline {ms(rv):>7s} ms  ratio {rv / cv:.2f}")
        misses = sorted(zip(common, c, r, strict=False), key=lambda t: -abs(t[2] - t[1]))[:5]
        for x, cv, rv in misses:
            print(f"  miss {x.name:28s} {x.module_type:12s} captured {cv * 1e6:8.0f} us roofline {rv * 1e6:8.0f} us "
                  f"({rv / cv - 1:+.0%})")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
