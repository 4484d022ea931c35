"""Regenerate docs/accuracy.md: gloo collectives on the emulated cluster vs simcomm's predictions.

    sudo .venv/bin/python benchmarks/accuracy/run_accuracy.py [--quick] [--reuse] [--no-e2e]

``--reuse`` re-renders from the saved records in results/ without measuring
again; ``--no-e2e`` skips the end-to-end training runs (run_e2e.py).

Settings: 4 hosts, one rank each, at 100 and 200 Mb/s, on a star (one switch)
and on a two-tier network (2 leaves x 2 hosts, trunks at half the host rate),
MTU 9000 and per-host-pair queueing (see MTU, QDISC).
Each setting calibrates α, β from its own ping-pong sweep, then predicts the
collectives (never fitted to them).  Raw records go to benchmarks/accuracy/results/.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import sys
from pathlib import Path

from simcomm.calibrate.bench import BenchSpec
from simcomm.calibrate.check import check_record
from simcomm.calibrate.emulate import EmulatedCluster
from simcomm.calibrate.launch import fit_record, launch_emulated

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = [("star", 100), ("star", 200), ("two-tier", 100), ("two-tier", 200)]
#: Jumbo frames, as cluster Ethernet usually runs: the emulated network forwards in software on
#: the same 2 cores as the ranks, and at 1 500 bytes its per-packet work made 200 Mb/s rings
#: CPU-bound (both cores 95 % busy; docs/accuracy.md).
MTU = 9000
#: One round-robin class per host pair (emulate.py, qdisc "fq"), as a host's fq_codel would serve
#: flows: a receiver's small "ready" notice no longer waits behind its own bulk data.
QDISC = "fq"


def from_saved() -> list[dict]:
    """The collective results of the saved records (no measurement)."""
    out = []
    for topo, mbit in SETTINGS:
        rec = json.loads((ROOT / f"benchmarks/accuracy/results/{topo}-{mbit}.json").read_text())
        fits = fit_record(rec)[0]
        out.append({"topology": topo, "mbit": mbit, "fit": fits["inter"], "cross": fits.get("cross"),
                    "load": rec["load"], "rows": check_record(rec), "mtu": _mtu(rec), "qdisc": _qdisc(rec)})
    return out


def _qdisc(rec: dict) -> str:
    return str((rec.get("cluster") or {}).get("qdisc", "?")).split(" ")[0]


def _mtu(rec: dict) -> int:
    return int((rec.get("cluster") or {}).get("mtu", 1500))


def _overlap(a: tuple, b: tuple) -> bool:
    return a[0] <= b[1] and b[0] <= a[1]


def render_e2e(rows: list[dict]) -> str:
    """The end-to-end table: per strategy and setting, and whether each setting keeps the ranking."""
    failed = [r for r in rows if r.get("failed")]
    rows = [r for r in rows if not r.get("failed")]
    cpu = rows[0]["cpu_per_byte"] if rows else 0.0
    lines = ["", "## End-to-end training iterations", "",
             "resnet20-cifar (0.27 M parameters, 1.08 MB of fp32 gradients), batch 32 per rank, SGD, one",
             "compute thread per rank, 4 workers: one per host for allreduce, ps (+1 server host) and sgp,",
             "2 hosts x 2 ranks for node-based (K' = 4, epoch of 10 iterations: 3 exchange + 7 local).",
             "Each case ran `runs` times (round-robin over the strategies of a setting). `measured` is the",
             "median over the runs of the mean iteration (end of the slowest worker to the next such end,",
             "after warm-up; node-based weights its two kinds by the epoch), with the runs' range. `predicted`",
             "is the median over the runs of `simcomm.pipeline.simulate` (ideal stack on the calibrated",
             "topology, flow engine) with the trace scaled by that run's `scale` = co-located compute probe /",
             "trace compute (see below), that run's compute jitter `cv` (the probe's within-rank spread over",
             "its median; 16 chained iterations with fresh per-rank draws, docs/workload.md) and the stack's",
             f"host CPU cost of communication, {cpu * 1e9:.1f} ns/B: the median of the stream probes of this suite's",
             "runs with one rank per host (see below). `scale` and `cv` are medians over the runs.", "",
             "| topology | rate | strategy | measured (range) | predicted | error | per kind: measured / predicted "
             "| scale | cv | runs | load |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    errs = []
    for r in rows:
        m = r["measured"]
        err = r["predicted"] / m.mean_s - 1
        errs.append(abs(err))
        kinds = "; ".join(f"{k} {m.kinds[k] * 1e3:.0f} / {r['kinds'].get(k, float('nan')) * 1e3:.0f} ms"
                          for k in sorted(m.kinds)) if len(m.kinds) > 1 else "-"
        lo, hi = r.get("spread", (m.mean_s, m.mean_s))
        runs = f"{r.get('runs', 1)}" + (f" (+{len(r['failed_runs'])} failed)" if r.get("failed_runs") else "")
        lines.append(f"| {r['topology']} | {r['mbit']} Mb/s | {r['strategy']} | {m.mean_s * 1e3:.0f} ms "
                     f"({lo * 1e3:.0f}–{hi * 1e3:.0f}) | {r['predicted'] * 1e3:.0f} ms | {err:+.1%} | {kinds} | "
                     f"{r['scale']:.2f} | {r.get('jitter', 0.0):.3f} | {runs} | {r['load'][0]:.2f}/{r['load'][1]:.2f} |")
    lines += ["", "| topology | rate | measured ranking (fastest first) | predicted ranking | preserved "
                  "| measured neighbours whose run ranges overlap |",
              "|---|---|---|---|---|---|"]
    kept = separated = 0
    settings = sorted({(r["topology"], r["mbit"]) for r in rows})
    for topo, mbit in settings:
        rs = sorted((r for r in rows if (r["topology"], r["mbit"]) == (topo, mbit)),
                    key=lambda r: r["measured"].mean_s)
        meas = [r["strategy"] for r in rs]
        pred = [r["strategy"] for r in sorted(rs, key=lambda r: r["predicted"])]
        kept += meas == pred
        # Pairs the measurement itself orders (disjoint run ranges) must be predicted in that order.
        separated += all((a["predicted"] < b["predicted"]) == (a["measured"].mean_s < b["measured"].mean_s)
                         for a in rs for b in rs if a is not b
                         and not _overlap(a.get("spread", (0, 0)), b.get("spread", (1, 1))))
        close = [f"{a['strategy']} / {b['strategy']}" for a, b in zip(rs, rs[1:], strict=False)
                 if _overlap(a.get("spread", (0, 0)), b.get("spread", (1, 1)))]
        lines.append(f"| {topo} | {mbit} Mb/s | {' < '.join(meas)} | {' < '.join(pred)} | "
                     f"{'yes' if meas == pred else 'no'} | {', '.join(close) or '-'} |")
    if errs:
        lines += ["", f"End-to-end: median |error| {statistics.median(errs):.1%}; worst {max(errs):.1%}; "
                      f"{sum(e <= 0.08 for e in errs)}/{len(errs)} within 8%; ranking preserved in "
                      f"{kept}/{len(settings)} settings; every pair whose measured run ranges are disjoint "
                      f"ordered as measured in {separated}/{len(settings)} settings.", ""]
    for r in failed:
        lines.append(f"Failed case (every run failed; no row, not counted): {r['topology']} {r['mbit']} Mb/s "
                     f"{r['strategy']}: {r['failed']}")
    if failed:
        lines.append("")
    return "\n".join(lines)


def run(quick: bool) -> list[dict]:
    spec = BenchSpec(p2p_sizes=(1024, 16384, 65536, 262144, 1048576, 2097152),
                     coll_sizes=(1048576,) if quick else (1048576, 4194304), repeats=3)
    out = []
    resdir = ROOT / "benchmarks/accuracy/results"
    resdir.mkdir(parents=True, exist_ok=True)
    for topo, mbit in SETTINGS:
        kw = {"topology": topo, "leaves": 2, "trunk_rate": mbit * 1e6 / 16} if topo == "two-tier" else {}
        load0 = os.getloadavg()[0]
        # One measurement: the robust fit (median of repeats, Theil-Sen) absorbs a preempted ping-pong.
        with EmulatedCluster(4, f"{mbit}Mb/s", mtu=MTU, qdisc=QDISC, **kw) as cl:
            rec = launch_emulated(cl, spec, limit=300)
        rec["load"] = [load0, os.getloadavg()[0]]  # 1-min load average before and after the setting
        (resdir / f"{topo}-{mbit}.json").write_text(json.dumps(rec, indent=1, sort_keys=True))
        fit = fit_record(rec)[0]["inter"]
        fits = fit_record(rec)[0]
        out.append({"topology": topo, "mbit": mbit, "fit": fit, "cross": fits.get("cross"),
                    "load": rec["load"], "rows": check_record(rec), "mtu": _mtu(rec), "qdisc": _qdisc(rec)})
        print(topo, mbit, "done", file=sys.stderr)
    return out


def render(results: list[dict]) -> str:
    load = os.getloadavg()
    lines = ["# Accuracy: simcomm predictions vs gloo on the emulated cluster", "",
             "Generated by `benchmarks/accuracy/run_accuracy.py` "
             f"on {datetime.date.today()} ({platform.machine()}, {os.cpu_count()} CPUs, load average "
             f"{load[0]:.2f} at the end; torch gloo backend, Linux tbf shaping with ACK priority, BBR TCP, "
             f"MTU {results[0]['mtu'] if results else 1500}, qdisc {results[0]['qdisc'] if results else '?'}).", "",
             "Method: see docs/calibration.md. α, β come from each setting's own ping-pong sweep (the",
             "trunk goodput of two-tier from a cross-leaf ping-pong); the collective times are simcomm's",
             "flow engine running gloo's real algorithms (`allreduce/ring`, `allgather/ring`,",
             "`broadcast/gloo`, concurrent transfers for PS) on the emulated topology",
             "(simcomm/calibrate/predict.py), never fitted to the collectives. `closed form` is the",
             "catalogue's contention-free textbook formula (broadcast: MPICH's binomial). Error =",
             "(predicted - measured) / measured; the measured time is the median of 3 repeats, each the",
             "slowest rank's time. `load` is the machine's 1-minute load average before/after the setting.", "",
             "## Calibration", "",
             "| topology | shaped rate | fitted goodput | implied wire rate | α | R² | trunk goodput (cross-leaf fit) | load |",
             "|---|---|---|---|---|---|---|---|"]
    for r in results:
        f = r["fit"]
        lines.append(f"| {r['topology']} | {r['mbit']} Mb/s | {f.bandwidth / 1e6:.3f} MB/s | "
                     f"{f.bandwidth * 8 / 1e6 * (r['mtu'] + 14) / (r['mtu'] - 52):.1f} Mb/s | "
                     f"{f.alpha * 1e6:.0f} us | {f.r2:.5f} | "
                     + (f"{r['cross'].bandwidth / 1e6:.3f} MB/s" if r["cross"] else "-")
                     + f" | {r['load'][0]:.2f}/{r['load'][1]:.2f} |")
    lines += ["", "## Collectives", "",
              "| topology | rate | case | size | measured | predicted | error | closed form |",
              "|---|---|---|---|---|---|---|---|"]
    errs = []
    for r in results:
        for row in r["rows"]:
            errs.append(abs(row.error))
            cf = f"{row.closed * 1e3:.1f} ms" if row.closed is not None else "-"
            lines.append(f"| {r['topology']} | {r['mbit']} Mb/s | {row.case} | {row.nbytes / 1e6:.2f} MB | "
                         f"{row.measured * 1e3:.1f} ms | {row.predicted * 1e3:.1f} ms | {row.error:+.1%} | {cf} |")
    lines += ["", f"Median |error| {statistics.median(errs):.1%}; worst {max(errs):.1%}; "
                  f"{sum(e <= 0.10 for e in errs)}/{len(errs)} cases within 10%.", ""]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="one collective size")
    ap.add_argument("--reuse", action="store_true", help="render from saved records, measure nothing")
    ap.add_argument("--no-e2e", action="store_true", help="skip the end-to-end training runs")
    ap.add_argument("--out", default=str(ROOT / "docs/accuracy.md"))
    a = ap.parse_args()
    text = render(from_saved() if a.reuse else run(a.quick))
    if not a.no_e2e:
        sys.path.insert(0, str(Path(__file__).parent))
        import run_e2e

        if not a.reuse:
            for topo, mbit in SETTINGS:
                run_e2e.run_setting(topo, mbit)
        text += render_e2e(run_e2e.evaluate(run_e2e.capture()))
    notes = ROOT / "benchmarks/accuracy/notes.md"
    if notes.exists():
        text += "\n" + notes.read_text()
    tmp = Path(a.out + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, a.out)


if __name__ == "__main__":
    main()
