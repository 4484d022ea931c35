"""End-to-end training iterations on the emulated cluster vs simcomm's pipeline (issue 6, item 3).

    sudo .venv/bin/python benchmarks/accuracy/run_e2e.py        # used by run_accuracy.py

For each setting of run_accuracy.py (star / two-tier, 100 / 200 Mb/s) it runs
allreduce, sgp and ps with 4 workers, one per host (ps: a fifth host holds the
server), and node-based on 2 hosts x 2 ranks; then predicts each with
``simcomm.pipeline.simulate`` on the emulated topology carrying that setting's
ping-pong fit (benchmarks/accuracy/results/<topology>-<rate>.json, written by
the collective suite) and a trace of the same model and batch captured here
with one thread.  Raw records: results/e2e-<topology>-<rate>-<strategy>.json.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from simcomm.calibrate.fit import CalibrationError
from simcomm.calibrate.e2e import (E2ESpec, compute_scale, e2e_topology, launch_e2e, measure, predict_e2e,
                                   trace_compute_s)
from simcomm.calibrate.emulate import EmulatedCluster
from simcomm.calibrate.launch import fit_record

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks/accuracy/results"
SETTINGS = [("star", 100), ("star", 200), ("two-tier", 100), ("two-tier", 200)]
# Iteration counts long enough that one preempted iteration moves a mean by ~2 %, and a
# 12-iteration probe on each side of the stream probe (the machine is shared by 4-5 ranks).
SPECS = [E2ESpec("allreduce", iters=24, probe=12), E2ESpec("node-based", per_host=2, iters=40, probe=12),
         E2ESpec("ps", iters=20, probe=12), E2ESpec("sgp", iters=24, probe=12)]
MODEL, BATCH = "resnet20-cifar", 32
MTU = 9000  # as the collective suite (run_accuracy.MTU): jumbo frames keep the emulation off the CPU limit
QDISC = "fq"  # as the collective suite (run_accuracy.QDISC): per host-pair round robin, like fq_codel


def capture():
    from simcomm.traces.capture import CaptureConfig, capture_trace

    return capture_trace(CaptureConfig(model=MODEL, batches=(BATCH,), threads=1, iters=20, warmup=3))


def link_fit(topo: str, mbit: int):
    """(alpha, goodput, trunk ratio) from the collective suite's ping-pong record of this setting."""
    path = RESULTS / f"{topo}-{mbit}.json"
    if not path.exists():
        sys.exit(f"error: {path} is missing; run benchmarks/accuracy/run_accuracy.py first")
    fits = fit_record(json.loads(path.read_text()))[0]
    f = fits["inter"]
    ratio = min(1.0, fits["cross"].bandwidth / f.bandwidth) if "cross" in fits else 1.0
    return f.alpha, f.bandwidth, ratio


def run_setting(topo: str, mbit: int, specs=SPECS) -> list[dict]:
    for spec in specs:
        kw = {"topology": topo, "leaves": 2, "trunk_rate": mbit * 1e6 / 16} if topo == "two-tier" else {}
        load0 = os.getloadavg()[0]
        try:
            with EmulatedCluster(spec.hosts, f"{mbit}Mb/s", mtu=MTU, qdisc=QDISC, **kw) as cl:
                rec = launch_e2e(cl, spec, limit=300)
        except CalibrationError as exc:
            # A crashed run (e.g. gloo aborting) is recorded as failed; the suite goes on, and
            # no stale measurement of this case survives to be rendered as if it were new.
            rec = {"failed": " ".join(str(exc).split()), "spec": {"strategy": spec.strategy}}
        rec["load"] = [load0, os.getloadavg()[0]]
        (RESULTS / f"e2e-{topo}-{mbit}-{spec.strategy}.json").write_text(json.dumps(rec, indent=1, sort_keys=True))
        print(topo, mbit, spec.strategy, "done", file=sys.stderr)


def evaluate(trace) -> list[dict]:
    """Prediction vs measurement for every saved e2e record."""
    rows = []
    for topo, mbit in SETTINGS:
        alpha, bw, ratio = link_fit(topo, mbit)
        for spec in SPECS:
            path = RESULTS / f"e2e-{topo}-{mbit}-{spec.strategy}.json"
            if not path.exists():
                continue
            rec = json.loads(path.read_text())
            if rec.get("failed"):
                rows.append({"topology": topo, "mbit": mbit, "strategy": rec["spec"]["strategy"],
                             "failed": rec["failed"], "load": rec["load"]})
                continue
            spec = E2ESpec(**rec["spec"])
            m = measure(rec)
            scale = compute_scale(trace, m.probe_s)
            res = predict_e2e(spec, e2e_topology(spec, rec["cluster"], alpha, bw, ratio), trace, scale,
                              m.cpu_per_byte)
            rows.append({"topology": topo, "mbit": mbit, "strategy": spec.strategy, "spec": spec,
                         "measured": m, "predicted": res.mean_s, "kinds": {k.label: k.time_s for k in res.kinds},
                         "scale": scale, "cpu_per_byte": m.cpu_per_byte, "load": rec["load"]})
    return rows


def main() -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    only = sys.argv[1:]  # optional "topology-rate" filters, e.g. star-100
    for topo, mbit in SETTINGS:
        if not only or f"{topo}-{mbit}" in only:
            run_setting(topo, mbit)
    trace = capture()
    for r in evaluate(trace):
        print(f"{r['topology']:8} {r['mbit']} {r['strategy']:10} measured {r['measured'].mean_s * 1e3:7.1f} ms "
              f"predicted {r['predicted'] * 1e3:7.1f} ms error {(r['predicted'] / r['measured'].mean_s - 1):+.1%} "
              f"scale {r['scale']:.2f} cpu {r['cpu_per_byte'] * 1e9:.1f} ns/B kinds {r['measured'].kinds} pred {r['kinds']}")
    print("trace compute", trace_compute_s(trace))


if __name__ == "__main__":
    main()
