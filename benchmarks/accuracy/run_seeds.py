"""Every seed strategy on the emulated cluster vs simcomm, calibrated as a user would (issue 26).

    sudo .venv/bin/python benchmarks/accuracy/run_seeds.py [--repeats N] [--evaluate] [--suite TAG] [strategy ...]

1. The link: ``simcomm calibrate --emulate 4 --rate 50Mb/s --mtu 9000 --qdisc fq
   --out results/seeds/links-star-50.toml``, run beforehand exactly as a user
   would; this script reads the ``calib-inter`` link it wrote (goodput and
   latency) and nothing else about the network.
2. The runs: REPEATS runs of every strategy, round-robin (each strategy samples
   the machine's state alike), on a fresh 4-host star at 50 Mb/s (ps: a fifth
   host holds the server; node-based: 2 hosts x 2 ranks), e2e_worker.py ranks
   as the seed authors' code runs each strategy (pcnn: e2e_pcnn.py, seed 003's
   NU-CUCIS/pcnn with its communication thread); the 1-minute load average is
   stamped before and after every run.  Raw records:
   results/seeds/e2e-<strategy>-r<k>.json.
3. The prediction of each run: ``simcomm.pipeline.simulate`` on the emulated
   star carrying the calibrated link, the ideal stack plus the suite's host CPU
   cost per byte (the median of the stream probes of this suite's runs with
   one rank per host), the run's own compute scale and jitter from its
   compute-only probe, measured compression kernels for gtopk / gs-sgd, and for
   ps-layer-drop the trace's per-layer gradient L1 norms (captured here), for
   pcnn one unit per convolution layer (e2e.BUCKET_MB, as its authors' code
   posts); a case is the median of its runs.
4. The score: median and worst |error| over the strategies, and every pair
   whose measured medians differ by more than 5 % checked for order.

Duration: one run is ~20 s of start-up (namespaces, four torch imports, model build) plus 15 compute
passes of probes and 10 training iterations: pcnn took 37 s wall at load 5-6 (compute 0.66 s); at load
13-24 a run of the others took 50-80 s.  The full suite (11 strategies x REPEATS=2 = 22 runs) is then,
estimated, ~12 min on a quiet machine and ~25-30 min at load 15-20; ``--evaluate`` alone takes ~12 s CPU.  Records
are appended (run k of a strategy is the next free index) and every record tagged SUITE is scored: change
SUITE (or move the old e2e-*.json away) before a fresh full run, or old runs at another load mix in;
``--suite TAG`` records and scores under TAG instead (a smoke or loaded run kept apart from the suite's).

``--evaluate`` scores the saved records without running anything; the trace is captured once
(results/seeds/trace-resnet20-cifar.json) and reused unless ``--fresh-trace``.
"""

from __future__ import annotations

import itertools
import json
import statistics
import sys
from pathlib import Path
from typing import NoReturn

import tomllib
from e2e import E2ESpec, compute_scale, e2e_topology, measure, predict_e2e, probe_jitter, record_run
from run_e2e import BATCH, MODEL, MTU, QDISC

from simcomm.errors import ConfigError
from simcomm.units import parse_bandwidth, parse_time

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks/accuracy/results/seeds"
LINKS = RESULTS / "links-star-50.toml"
TRACE = RESULTS / "trace-resnet20-cifar.json"
RATE = "50Mb/s"
SUITE = "2026-11-28 seeds, quiet"
#: Short runs: on the shared 2-vCPU machine (1-minute load 12-16 from other sessions while this suite ran) a
#: compute pass takes ~2 s instead of ~0.3 s, so 8 measured iterations and 4 probe samples per half per worker
_SHORT = {"iters": 8, "probe": 4, "probe_warmup": 1}
SPECS = [E2ESpec("allreduce", **_SHORT), E2ESpec("node-based", per_host=2, **{**_SHORT, "iters": 10}),
         E2ESpec("ps", **_SHORT), E2ESpec("sgp", **_SHORT), E2ESpec("dpsgd", **_SHORT),
         E2ESpec("crossover-sgd", **_SHORT), E2ESpec("hierarchical-crossover-sgd", **_SHORT),
         E2ESpec("gtopk", **_SHORT), E2ESpec("gs-sgd", **{**_SHORT, "iters": 6}),
         E2ESpec("ps-layer-drop", **_SHORT), E2ESpec("pcnn", **_SHORT)]
REPEATS = 2
ORDER_GAP = 0.05  # pairs measured further apart than this must be ranked right


def _fail(message: str) -> NoReturn:
    """One ``error:`` line on stderr and exit status 2, as simcomm's own commands do with bad input."""
    print(message, file=sys.stderr)
    sys.exit(2)


def capture():
    """The suite's trace (one thread, as run_e2e) with per-layer gradient L1 norms of as many steps as a
    run's iterations: ps-layer-drop replays its sent fractions from them, as simcomm does with a user's trace."""
    from simcomm.traces.capture import CaptureConfig, capture_trace
    from simcomm.traces.io import load_trace, save_trace

    if TRACE.exists():  # captured once per suite pass (--fresh-trace recaptures), so scoring is repeatable
        return load_trace(TRACE)
    steps = max(s.warmup + s.iters for s in SPECS)
    trace = capture_trace(CaptureConfig(model=MODEL, batches=(BATCH,), threads=1, iters=20, warmup=3,
                                        grad_norms=steps))
    save_trace(trace, TRACE)
    return trace


def calibrated_link(path: Path = LINKS) -> tuple[float, float]:
    """(latency s, goodput B/s) of the ``calib-inter`` link ``simcomm calibrate`` wrote."""
    if not path.exists():
        _fail(f"error: {path} is missing; run simcomm calibrate --emulate 4 --rate {RATE} --mtu {MTU} "
              f"--qdisc {QDISC} --out {path}")
    link = tomllib.loads(path.read_text())["links"]["calib-inter"]
    return parse_time(link["latency"], "latency"), parse_bandwidth(link["bandwidth"], "bandwidth")


def train_compute(rec: dict) -> list[list[float]]:
    """Per worker, forward + backward of each measured training iteration (start to the worker's compute end).

    Measured in the same iterations as the time it normalises: under a load that moves minute to
    minute the compute-only probe before training stopped representing training (docs/accuracy.md).
    """
    spec = E2ESpec(**rec["spec"])
    out = []
    for r in rec["ranks"]:
        if r["rank"] < spec.workers:
            ends, done = r["ends"], r["compute_ends"]
            out.append([done[i - 1] - ends[i - 1] for i in range(spec.warmup + 1, len(ends)) if done[i - 1]])
    return out


def records(strategy: str) -> list[Path]:
    return sorted(RESULTS.glob(f"e2e-{strategy}-r*.json"), key=lambda p: int(p.stem.rsplit("-r", 1)[1]))


def run(specs, repeats: int, suite: str = SUITE) -> None:
    start = {s.strategy: len(records(s.strategy)) for s in specs}
    for k in range(repeats):
        for spec in specs:
            path = RESULTS / f"e2e-{spec.strategy}-r{start[spec.strategy] + k}.json"
            rec = record_run(spec, RATE, path, suite, limit=600, mtu=MTU, qdisc=QDISC)
            print(spec.strategy, f"run {k + 1}/{repeats}", f"load {rec['load'][0]:.1f}->{rec['load'][1]:.1f}",
                  file=sys.stderr, flush=True)


def evaluate(trace, specs=SPECS, suite: str = SUITE) -> list[dict]:
    alpha, bw = calibrated_link()
    recs = {s.strategy: [json.loads(p.read_text()) for p in records(s.strategy)] for s in specs}
    recs = {k: [r for r in v if r.get("suite") == suite and not r.get("failed")] for k, v in recs.items()}
    probes = [measure(r) for v in recs.values() for r in v if E2ESpec(**r["spec"]).per_host == 1]
    cpu = statistics.median(m.cpu_per_byte for m in probes if m.stream_probe_s is not None) if probes else 0.0
    rows = []
    for strategy, runs in recs.items():
        if not runs:
            continue
        meas, pred, flat, by_run, loads, ratios, cvs = [], [], [], [], [], [], []
        no_jitter = False
        for rec in runs:
            spec = E2ESpec(**rec["spec"])
            m = measure(rec)
            scale = compute_scale(trace, m.probe_s)
            topo = e2e_topology(spec, rec["cluster"], alpha, bw, 1.0)
            flat.append(predict_e2e(spec, topo, trace, scale, cpu, 0.0, m.rates).mean_s)  # no compute jitter
            try:
                pred.append(predict_e2e(spec, topo, trace, scale, cpu, m.jitter, m.rates).mean_s)
            except ConfigError:  # ps plans span two iterations: simcomm offers no compute jitter for them
                pred.append(flat[-1])
                no_jitter = True
            inrun = train_compute(rec)
            med = statistics.median(x for r in inrun for x in r)
            scale_run = med / sum(layer.forward_s + layer.backward_s for layer in trace.layers)
            cv_run = probe_jitter([{"probe": r} for r in inrun], med)
            try:
                by_run.append(predict_e2e(spec, topo, trace, scale_run, 0.0, cv_run, m.rates).mean_s)
            except ConfigError:
                by_run.append(predict_e2e(spec, topo, trace, scale_run, 0.0, 0.0, m.rates).mean_s)
            meas.append(m.mean_s)
            ratios.append(m.mean_s / m.probe_s)
            cvs.append(m.jitter)
            loads += rec["load"]
        mid = statistics.median(meas)
        rows.append({"strategy": strategy, "runs": len(runs), "measured": mid, "spread": (min(meas), max(meas)),
                     "predicted": statistics.median(pred), "error": statistics.median(pred) / mid - 1,
                     "predicted_flat": statistics.median(flat), "error_flat": statistics.median(flat) / mid - 1,
                     "predicted_run": statistics.median(by_run), "error_run": statistics.median(by_run) / mid - 1,
                     "per_compute": statistics.median(ratios), "cv": statistics.median(cvs), "no_jitter": no_jitter,
                     "load": (min(loads), max(loads))})
    return rows


def score(rows: list[dict], key: str = "predicted") -> dict:
    """Median and worst |error| of prediction ``key``, and the pairs apart by more than ORDER_GAP it misorders."""
    errs = [abs(r[key] / r["measured"] - 1) for r in rows]
    pairs, wrong = 0, []
    for a, b in itertools.combinations(rows, 2):
        if abs(a["measured"] / b["measured"] - 1) > ORDER_GAP:
            pairs += 1
            if (a["measured"] < b["measured"]) != (a[key] < b[key]):
                wrong.append(f"{a['strategy']} / {b['strategy']}")
    return {"median": statistics.median(errs) if errs else None, "worst": max(errs) if errs else None,
            "pairs": pairs, "misordered": wrong}


def table(rows: list[dict]) -> str:
    out = ["| strategy | runs | measured (ms) | runs' range (ms) | measured / compute probe | predicted (ms) | "
           "error | without jitter (ms) | error | in-run compute (ms) | error | cv | load (1 min) |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lo, hi = r["spread"]
        out.append(f"| {r['strategy']} | {r['runs']} | {r['measured'] * 1e3:.0f} | {lo * 1e3:.0f}-{hi * 1e3:.0f} | "
                   f"{r['per_compute']:.2f} | {r['predicted'] * 1e3:.0f} | {r['error']:+.1%} | "
                   f"{r['predicted_flat'] * 1e3:.0f} | {r['error_flat']:+.1%} | "
                   f"{r['predicted_run'] * 1e3:.0f} | {r['error_run']:+.1%} | {r['cv']:.2f} | "
                   f"{r['load'][0]:.1f}-{r['load'][1]:.1f} |")
    return "\n".join(out)


def main(argv: list[str]) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    repeats = REPEATS
    if "--repeats" in argv:
        i = argv.index("--repeats")
        repeats = int(argv[i + 1])
        del argv[i:i + 2]
    suite = SUITE
    if "--suite" in argv:
        i = argv.index("--suite")
        suite = argv[i + 1]
        del argv[i:i + 2]
    only = [a for a in argv if not a.startswith("--")]
    names = [s.strategy for s in SPECS]
    if any(a not in names for a in only):
        _fail(f"error: unknown strategy {next(a for a in only if a not in names)!r}; valid choices: "
              f"{', '.join(names)}")
    specs = [s for s in SPECS if not only or s.strategy in only]
    if "--evaluate" not in argv:
        run(specs, repeats, suite)
    if "--fresh-trace" in argv:
        TRACE.unlink(missing_ok=True)
    rows = evaluate(capture(), specs, suite)
    if not rows:
        _fail(f"error: --suite {suite!r}: no records of that suite in {RESULTS}; run without --evaluate to make "
              f"them, or give the suite of records there")
    print(table(rows))
    scores = {key: score(rows, key) for key in ("predicted", "predicted_flat", "predicted_run")}
    for key, s in scores.items():
        print(f"{key}: median |error| {s['median']:.1%}, worst {s['worst']:.1%}; {s['pairs']} pairs apart by more "
              f"than {ORDER_GAP:.0%}, misordered: {', '.join(s['misordered']) or 'none'}")
    if len(specs) == len(SPECS) and suite == SUITE:  # a subset (a smoke run of one strategy) leaves the suite's summary alone
        (RESULTS / "summary.json").write_text(json.dumps({"rows": rows, "scores": scores, "model": MODEL}, indent=1))


if __name__ == "__main__":
    main(sys.argv[1:])
