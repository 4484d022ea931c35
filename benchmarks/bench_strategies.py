"""Strategy speed: every registered strategy on ResNet-50 at 1 024 GPUs, and a full compare.

Part 1 runs each strategy as ``simcomm run`` would (plan + flow simulation of
the strategy, the allreduce baseline and the analytic estimate) on the
``dgx-a100-hdr`` cluster, 128 nodes x 8 GPUs, with the bundled ResNet-50 trace.
Each strategy runs in a fresh Python subprocess, so no cache (routes, trace)
carries over from another strategy: the time is what a user waits for.  It
runs ``--repeat`` times (default 3; other processes share the machine): the
table gives the min and median wall time and the median CPU time.
Part 2 times ``run_compare`` (the body of ``simcomm compare``) for all
strategies at nodes 8,16,32,64,128 x 8 GPUs in one process.

The table is printed and written into docs/performance.md between the markers
``<!-- bench_strategies:begin -->`` / ``<!-- bench_strategies:end -->``.

    python benchmarks/bench_strategies.py                # everything, writes the docs
    python benchmarks/bench_strategies.py --no-write --only pcnn,ok-topk --no-compare --repeat 1
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_engine import machine, write_doc  # noqa: E402  (same machine line and doc writer)

from simcomm.scenario import DEFAULT_RESOLUTION

DOC = Path(__file__).resolve().parents[1] / "docs" / "performance.md"
BEGIN, END = "<!-- bench_strategies:begin -->", "<!-- bench_strategies:end -->"
CLUSTER, NODES, GPN = "dgx-a100-hdr", 128, 8
COMPARE_NODES = (8, 16, 32, 64, 128)
TARGET_S, COMPARE_TARGET_S = 10.0, 120.0
NOTE = ("crossover-sgd was the hard case on 2026-11-22 (the V100 trace on every cluster): 18 432 concurrent "
        "point-to-point transfers whose routes collide on fat-tree links, 37.6 s with the exact engine and 5.3 s "
        "with the default 1 % event resolution (docs/engine.md, \"Event resolution\").  With compute following the "
        "cluster (the A100 trace here) and blocking segments, few of its transfers finish together and it runs in "
        "about a second.  What is slow now is the single-server parameter server: see the last paragraph.")

#: run (s) of the three strategies that the exact speed-ups of 2026-11-26 were for, measured here before them
BEFORE_S = {"sgp": "25.4", "ps": "122.6", "ps-layer-drop": "~220"}
#: ... and after them (bench_strategies of 2026-11-26, before the scalar core)
AFTER_S = {"sgp": "8.2", "ps": "68.6", "ps-layer-drop": "132.5"}
#: compare of all strategies before the scalar core (s)
COMPARE_BEFORE_S = 283.2
#: ps and ps-layer-drop with the scalar core, before the lean form and the direct loop
#: (bench_strategies of 2026-11-26): run min / median and CPU median (s); the compare then (s)
SCALAR_S = {"ps": ("18.1", "18.5", "18.1"), "ps-layer-drop": ("35.7", "39.7", "34.0")}
COMPARE_SCALAR_S = 94.3


def _listed(items) -> str:
    items = list(items)
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def speedup_note(rows: list[dict]) -> str:
    """What the first exact speed-ups of 2026-11-26 changed, with the times before and after them."""
    return (
        "Exact speed-ups (2026-11-26; no simulated number changed: every op's start and end, the statistics and "
        "link bytes of every engine run that reports them, and every mean iteration are the same floats as before).  "
        "sgp, ps and ps-layer-drop "
        f"took {_listed(f'{v} s' for v in BEFORE_S.values())} on this machine before them; "
        f"then {_listed(f'{v} s' for v in AFTER_S.values())}.  "
        "The closed-form estimate beside each flow run needs only op times, and is now one pass in op order "
        "without an event loop (docs/engine.md, \"The analytic fidelity\"; sgp's 10 kinds of iteration: "
        "~8.7 s -> 0.4 s); small collective preparations are kept with the topology, so sgp's 5 120 NCCL pair "
        "all-reduces are prepared once for both runs; the cyclic garbage collector is paused around plan building "
        "and engine runs (it kept traversing 10^5-10^6 live ops and events: ~30 % of sgp's flow runs); the fluid "
        "core sorts the links for pruning once per network instead of whenever flows are added (8 432 links "
        "at 1 024 GPUs), re-solves and updates only the links the re-solved flows cross, takes shortcuts for "
        "one-link max-min problems and a lone route, and groups finished flows by batch in linear time; plans "
        "reuse per-layer sums.")


def scalar_note(rows: list[dict], cmp: dict | None) -> str:
    """What the scalar fluid core (docs/engine.md) changed: ps, ps-layer-drop and the compare (as measured then)."""
    parts = [f"{k} {AFTER_S[k]} s -> {v[0]} s (median {v[1]} s of 3, CPU {v[2]} s)" for k, v in SCALAR_S.items()]
    parts.append(f"the compare {COMPARE_BEFORE_S:.1f} s -> {COMPARE_SCALAR_S:.1f} s")
    return (
        "Scalar fluid core (2026-11-26, exact: every engine run of 39 small and mid-size scenarios, every strategy "
        "among them, and of ps and ps-layer-drop at 1 024 GPUs gave the same op starts and ends, statistics and "
        "link bytes as before, bit for bit): while at most 16 flows are live the fluid "
        "core runs the same algorithm on Python floats instead of numpy arrays (docs/engine.md, \"The scalar core "
        "for few flows\"): " + (_listed(parts) if parts else "not measured") + ".  With one server and FIFO "
        "queues, per-tensor PS at 1 024 workers is 329 728 messages (161 tensors x 1 024 workers, push and pull) "
        "carried one or two at a time, about 10^6 fluid events (three per message); an event now costs a few "
        "microseconds of Python instead of tens of microseconds of numpy calls.  What remains is spread thin: "
        "running the plan's 659 617 ops as SimPy processes costs ~3 s even with every transfer a plain timeout, "
        "the network's SimPy wake-ups and the scalar core ~4 and ~7 s, building the plan 1.3 s, and ps-layer-drop "
        "runs ps again as its baseline (docs/engine.md, \"Limits\").")


#: What the lean form and the direct loop (docs/engine.md) changed, as measured then (a record: the table
#: above it is measured afresh by each run).
LEAN_NOTE = (
    'Lean form and direct loop (2026-11-26, exact: every engine run of ps and ps-layer-drop at 1 024 GPUs, and the '
    '354 engine runs of 108 small scenarios (17 strategies on dgx-a100-hdr 2 x 8 and 8 x 8, aws-g4dn 4 x 1, '
    'kisti-neuron 4 x 2 at resolution 1 %, the first and third also at 0), gave the same op starts and ends, '
    'statistics and link bytes as before, bit for bit; `simcomm run --json` of both is byte-identical): while no '
    'two live flows share a link the scalar core computes its closed form (every residual is a capacity, one round '
    'per solve; docs/engine.md, "The lean form for disjoint routes"), and a plan of computes and messages runs on a'
    ' heap that replays SimPy\'s events in SimPy\'s order instead of SimPy processes ("The direct loop"): ps 18.1 s '
    '-> 6.8 s (median 6.8 s of 3; CPU 18.1 s -> min 6.7 s, median 6.7 s) and ps-layer-drop 35.7 s -> 17.5 s (median'
    " 19.2 s of 3; CPU 34.0 s -> min 11.7 s, median 12.6 s).  ps's flow run went from ~14 s to ~4.5 s of CPU; what "
    'remains of a ps run is that flow run (~2.4 million events, ~10^6 network settles, each a few list operations '
    'on one or two flows), building the plan (~1.7 s: 659 617 ops through PlanBuilder) and the closed-form estimate'
    ' (~0.4 s).  ps-layer-drop pays the plan and the flow run twice (its baseline is a fresh ps run: no earlier '
    'simulation in the process to reuse), which keeps it above 10 s.  The ps and ps-layer-drop rows (only) were '
    're-measured after this change, 2026-11-26 13:45 UTC, on the same machine (AMD EPYC, 2 cores visible, Python '
    "3.11.7; load average ~3 from other sessions, hence ps-layer-drop's wall time well above its CPU time) with "
    '`python benchmarks/bench_strategies.py --no-write --only ps,ps-layer-drop --no-compare --repeat 3`; a quieter '
    'run two minutes earlier gave ps 7.14 / 7.18 s (CPU median 6.88 s) and ps-layer-drop 13.23 / 13.48 s (CPU '
    'median 12.65 s).  The other rows and the compare are from the earlier full run.  The ps-layer-drop row was '
    'measured again at 14:32 UTC on an idle machine (load 0.5, after the per-link reservations of "Large-model '
    'layouts"), one run: 12.57 s wall, 12.57 s CPU, exact engine 11.70 s.')

#: The plan builder's and the one-flow pass's changes, as measured then (helper session, 15:32 UTC).
SPEEDPATH_NOTE = (
    'Plan builder, one-flow pass and kick beside the heap (2026-11-26, exact: every engine run of ps-layer-drop at '
    '1 024 GPUs (its flow run, closed form and ps baseline), of ps at 1 024 GPUs at resolution 0 and on the default'
    ' cluster at 128 nodes, and of 30 small scenarios (ps and ps-layer-drop at 8 and 16 nodes on dgx-a100-hdr and '
    'the default cluster, resolution 0, 2-3 servers, greedy-bytes, co-located, after-update, data loading, a '
    'straggler, aws-g4dn, kisti-neuron; megatron, allreduce, node-based, sgp, gtopk, dpsgd, crossover-sgd, pcnn, '
    'topka) gave the same op starts and ends, statistics, link bytes and meta, and every op of every plan the same '
    'repr, hashed before and after; `simcomm run --json` of ps-layer-drop at 1 024 GPUs is byte-identical).  What '
    'went: building the plan, ~1.4 s -> ~0.88 s per ps plan: `PlanBuilder.compute`/`transfer` make their frozen ops'
    " through the slots' own descriptors (a frozen dataclass's `__init__` goes through `object.__setattr__` per "
    "field) and add the stream's previous op to the dependencies without a set for up to two given ones, and ps "
    'looks up once per tensor (label, bytes, stream, ready points) and per group (forward seconds, label) what its '
    "loops recomputed for each of the 1 024 workers.  The flow run, ~4.3 s -> ~2.6 s: 86 % of the run's ~10^6 "
    'settles find one live flow, which the lean core now handles in one pass (`LoneFlows._first_pass_of_one`: '
    "entering is a full solve of one round at the route's smallest capacity, finishing a solve of nothing, both as "
    '`step` computes them) and whose next instant it returns without a loop; `FluidCore.settle_next` takes its '
    'tolerance without `max`/`abs` calls; the direct loop keeps the one pending kick beside the heap with its '
    'sequence number (taken once no urgent or normal event due now, and no earlier wake-up at now, precedes it), '
    'settles inline and indexes waiting streams by op.  Measured 2026-11-26 15:32 UTC on the same machine (AMD '
    "EPYC, 2 cores visible, Python 3.11.7; load average ~1.4: another session's job held one core) with `python "
    'benchmarks/bench_strategies.py --no-write --only ps,ps-layer-drop --no-compare --repeat 3`: ps 4.35 / 5.15 s '
    '(min / median; CPU median 5.11 s; exact engine 4.67 s) and ps-layer-drop 7.71 / 7.87 s (CPU median 7.86 s; '
    'exact engine 8.48 s), from 6.99 s and 11.83 s (one run each, idle, 15:04 UTC, before the change).')

#: Plans with collectives without SimPy processes (docs/engine.md, "Plans with collectives: callbacks
#: instead of processes"); what it did to the strategies here is in the table.
CALLBACKS_NOTE = (
    "Callbacks instead of processes (2026-11-26, exact: every engine run of eleven scenarios hashed before "
    "and after, and tests/engine_speed/test_speed_callbacks.py bit for bit on drawn plans): plans with "
    "collectives keep SimPy's queue but drive their streams and collectives by callbacks (docs/engine.md, "
    "\"Plans with collectives: callbacks instead of processes\"); the table above was measured with it.")


_RUN = r"""
import json, sys, time
t0 = time.perf_counter()
c0 = time.process_time()
from simcomm.pipeline import simulate
from simcomm.scenario import Scenario
import simcomm.engine.flow.pricer, simcomm.collectives  # time the work, not the importer
t1 = time.perf_counter()
c1 = time.process_time()
scn = Scenario(strategy=sys.argv[1], cluster=sys.argv[2], nodes=int(sys.argv[3]),
               gpus_per_node=int(sys.argv[4]), resolution=float(sys.argv[5]))
r = simulate(scn)
t2 = time.perf_counter()
c2 = time.process_time()
merged = [a for a in r.assumed if "merged into one event" in a]
print(json.dumps({"strategy": sys.argv[1], "import_s": t1 - t0, "run_s": t2 - t1, "cpu_s": c2 - c1,
                  "mean_ms": None if r.not_applicable else r.mean_s * 1e3,
                  "merged": int(merged[0].split("(")[1].split()[0].replace(",", "")) if merged else 0,
                  "not_applicable": r.not_applicable}))
"""

_COMPARE = r"""
import json, sys, time
from simcomm.cli.compare_cmd import run_compare
from simcomm.scenario import Scenario
from simcomm.strategies.base import STRATEGIES
import simcomm.strategies  # noqa: F401
names = list(STRATEGIES.names())
nodes = [int(n) for n in sys.argv[3].split(",")]
t0, c0 = time.perf_counter(), time.process_time()
rows = run_compare(Scenario(cluster=sys.argv[1], gpus_per_node=int(sys.argv[2])), names, nodes)
print(json.dumps({"compare_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0, "strategies": len(names),
                  "runs": len(rows)}))
"""


def _child(code: str, *args: str) -> dict:
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True)
    if out.returncode != 0:
        return {"error": (out.stderr.strip().splitlines() or ["failed"])[-1]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def strategies() -> list[str]:
    import simcomm.strategies  # noqa: F401
    from simcomm.strategies.base import STRATEGIES

    return list(STRATEGIES.names())


def table(rows: list[dict]) -> str:
    lines = ["| strategy | run (s): min / median | CPU (s): median | mean iteration (ms) | flows merged "
             "| exact engine: run (s) | exact: mean (ms) | difference | under 10 s |",
             "|---|---:|---:|---:|---:|---:|---:|---:|:---:|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['strategy']} | – | – | error: {r['error']} | – | – | – | – | – |")
            continue
        mean = "n/a" if r["mean_ms"] is None else f"{r['mean_ms']:.3f}"
        ex = r.get("exact")
        if not r["merged"]:
            exact = "– | same (no merge) | 0"
        elif ex is None or "error" in ex:
            exact = f"– | {'not run' if ex is None else 'error: ' + ex['error']} | –"
        else:
            exact = f"{ex['run_s']:.2f} | {ex['mean_ms']:.3f} | {r['mean_ms'] / ex['mean_ms'] - 1:+.1e}"
        runs, cpus = r.get("runs", [r["run_s"]]), r.get("cpus", [r.get("cpu_s", float("nan"))])
        lines.append(f"| {r['strategy']} | {min(runs):.2f} / {statistics.median(runs):.2f} "
                     f"| {statistics.median(cpus):.2f} | {mean} | {r['merged']:,} | {exact} "
                     f"| {'yes' if min(runs) < TARGET_S else 'NO'} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="", help="comma-separated strategies (default: all registered)")
    ap.add_argument("--no-compare", action="store_true", help="skip the 5-scale compare")
    ap.add_argument("--no-write", action="store_true", help="print only; leave docs/performance.md alone")
    ap.add_argument("--repeat", type=int, default=3, help="runs per strategy (min and median are reported)")
    ap.add_argument("--no-exact", action="store_true",
                    help="skip re-running merged strategies with the exact engine (resolution 0)")
    args = ap.parse_args(argv)
    names = args.only.split(",") if args.only else strategies()
    rows = []
    for name in names:
        r = {"strategy": name, **_child(_RUN, name, CLUSTER, str(NODES), str(GPN), str(DEFAULT_RESOLUTION))}
        if "error" not in r:
            r["runs"], r["cpus"] = [r["run_s"]], [r["cpu_s"]]
            for _ in range(args.repeat - 1):  # the same run again: other processes' load varies
                again = _child(_RUN, name, CLUSTER, str(NODES), str(GPN), str(DEFAULT_RESOLUTION))
                if "error" not in again:
                    r["runs"].append(again["run_s"])
                    r["cpus"].append(again["cpu_s"])
            r["run_s"] = statistics.median(r["runs"])
        if r.get("merged") and not args.no_exact:
            r["exact"] = _child(_RUN, name, CLUSTER, str(NODES), str(GPN), "0")
        rows.append(r)
        print(f"{name:>28}: {r.get('runs', r.get('run_s', float('nan')))} s {r.get('error', '')}", flush=True)
    cmp = None if args.no_compare else _child(_COMPARE, CLUSTER, str(GPN), ",".join(map(str, COMPARE_NODES)))
    tab = table(rows)
    print(tab)
    parts = [
        "## Strategies: ResNet-50 at 1 024 GPUs (`benchmarks/bench_strategies.py`)",
        "",
        f"Measured {_dt.date.today().isoformat()} on {machine()}.  Each row is one `simcomm run "
        f"--strategy NAME --nodes {NODES} --gpus-per-node {GPN} --cluster {CLUSTER}` (the bundled default trace, ResNet-50) "
        "done in a fresh process (flow fidelity, the default): plan, flow simulation of the strategy, "
        "of its baseline and the analytic estimate, without imports.  Wall times on a shared "
        "2-core machine vary by about 2x with the load of other processes (other sessions ran tests and "
        f"benchmarks meanwhile): each strategy ran {args.repeat} times, *run* is the min / median wall time, "
        "*CPU* the median process time (less sensitive to the load).  The default event resolution "
        f"is {DEFAULT_RESOLUTION:g} (docs/engine.md, \"Event resolution\"); *flows merged* counts the flows "
        "whose completion it moved, and each strategy with a merge is run again with `--resolution 0` "
        "(the exact engine) to show what the merge costs in accuracy (*difference*: default / exact - 1).",
        "",
        tab,
    ]
    if cmp is not None:
        ok = "error" not in cmp
        line = (f"`run_compare` (the body of `simcomm compare`), all {cmp['strategies']} strategies at nodes "
                f"{','.join(map(str, COMPARE_NODES))} x {GPN} GPUs in one process: **{cmp['compare_s']:.1f} s** "
                f"(target {COMPARE_TARGET_S:.0f} s)." if ok else f"compare failed: {cmp['error']}")
        print(line)
        parts += ["", line]
    parts += ["", "Target (issue 4): every strategy under 10 s at 1 024 GPUs with the flow fidelity.", "", NOTE, "",
              speedup_note(rows), "", scalar_note(rows, cmp), "", LEAN_NOTE, "", SPEEDPATH_NOTE, "",
              CALLBACKS_NOTE]
    if not args.no_write:
        write_doc("\n".join(parts), BEGIN, END)
        print(f"wrote {DOC}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
