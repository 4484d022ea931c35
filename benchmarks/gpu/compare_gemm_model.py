"""The GEMM model (simcomm.traces.gemm) against the GEMM times measured on an H200 (h200-2026-11-28-gemm).

A check of the model's *shape* dependence, not a fit: each row's model time is computed at compute
efficiency 1, the ratios model / measured are divided by their median (the one scale a calibration would
set), and the spread left is the model's error across shapes.  The same with no tiles (``sms = 0``: the
scalar model, FLOPs at one efficiency with the memory floor) for comparison.  The median ratio itself is the
fraction of the peak the GEMMs reached.

    python benchmarks/gpu/compare_gemm_model.py
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from simcomm.traces.devices import get_device
from simcomm.traces.gemm import GemmDevice, gemm_seconds

DATA = Path(__file__).resolve().parent / "h200-2026-11-28-gemm" / "gemm.json"


def main() -> None:
    rows = json.loads(DATA.read_text(encoding="utf-8"))["rows"]
    dev = get_device("h200")
    print("| dtype | GEMMs | model | fraction of peak (median) | median abs error | 90th percentile |")
    print("|---|---|---|---:|---:|---:|")
    for dtype in ("bf16", "fp8"):
        for label, floor in (("all", 0.0), (">= 100 GFLOP", 1e11)):
            sel = [r for r in rows if r["dtype"] == dtype and 2 * r["m"] * r["n"] * r["k"] >= floor]
            for name, sms in (("tiles + waves", dev.sms), ("scalar", 0)):
                g = GemmDevice(dev.peak_flops[dtype], sms, 1.0, dev.mem_bw, 0.7)
                ratio = [gemm_seconds(r["m"], r["n"], r["k"], g, 1 if dtype == "fp8" else 2, 2) / r["s"] for r in sel]
                med = statistics.median(ratio)
                err = sorted(abs(x / med - 1) for x in ratio)
                print(f"| {dtype} | {label} ({len(sel)}) | {name} | {med:.3f} | {100 * statistics.median(err):.1f} % | "
                      f"{100 * err[int(0.9 * len(err))]:.1f} % |")


if __name__ == "__main__":
    main()
