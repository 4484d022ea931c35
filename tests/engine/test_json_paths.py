"""``simcomm run --json`` names every path its engine runs took, for every strategy of ``simcomm list strategies``.

Each run's record (each kind's ``engine``: :func:`simcomm.engine.paths.choose`'s driver, pricing, core, closed-step
threshold, resolution and ``stop_after``; ``taken``, the paths chosen op by op, :data:`simcomm.engine.paths.TAKEN`;
and the planning paths, the rank fold and the strategy's own folds) is checked against what the run was *seen*
doing: spies on the functions only a path runs (the direct loop, the callbacks driver, SimPy processes, the one
pass, a cut collective run alone, the fluid cores built and their form and resolution, the live network's
reservation rule), the run's own statistics, the NaN ends of ops not run and the ranks the plan gives computes.
A path seen but not recorded (or recorded but not seen) fails :func:`check_recorded`; the last tests show it
does, by dropping one record.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
from collections import Counter

import numpy as np
import pytest

from simcomm.strategies.base import STRATEGIES

GPT = ["--model", "gpt2-small", "--opt", "layers=4", "--opt", "global_batch=64", "--opt", "microbatch=1"]
BASE = ["run", "--cluster", "dgx-a100-hdr", "--nodes", "2", "--json", "--no-baseline"]
DRIVERS = ("direct", "callbacks", "processes", "one-pass")


@dataclasses.dataclass
class Run:
    """One engine run: its plan, options, Timeline and what the spies saw it do."""

    plan: object
    fidelity: str
    options: object
    timeline: object = None
    seen: Counter = dataclasses.field(default_factory=Counter)
    cores: set = dataclasses.field(default_factory=set)  # (form, resolution) of every fluid core it built
    per_link: set = dataclasses.field(default_factory=set)  # the live networks' reservation rule


@contextlib.contextmanager
def watched(monkeypatch, adjust=None, runtime=None):
    """Record every engine run of the block, with spies on what each path runs (``adjust(options)``: the options
    a run takes instead, a reference switch; ``runtime(runtime)``: the runtime it takes instead)."""
    import simcomm.engine as engine
    from simcomm.engine import events
    from simcomm.engine.drive import executor
    from simcomm.engine.flow import analytic, network, pricer, steps
    from simcomm.engine.fluid import core

    runs: list[Run] = []

    def spy(owner, name, what):
        real = getattr(owner, name)

        def wrapper(*a, **k):
            runs[-1].seen[what] += 1
            return real(*a, **k)
        monkeypatch.setattr(owner, name, wrapper)

    spy(executor, "_run_direct", "direct")
    spy(executor, "Driver", "callbacks")  # the executor's own; run_alone drives a cut with events.Driver
    spy(events.Environment, "process", "processes")
    spy(analytic, "longest_path", "one-pass")
    spy(executor, "run_alone", "cut_collectives")
    spy(pricer.FlowPricer, "_translated", "alike_steps")
    spy(pricer.FlowPricer, "reserved", "local_collectives")
    spy(core.FluidCore, "add_messages", "message_rounds")  # (only the direct loop's message rounds call it)
    real_core, real_net, real_counted = core.FluidCore.__init__, network.LiveNetwork.__init__, steps.counted_step

    def fluid(self, capacity, form="lean", family_of_link=None, resolution=0.0, *a, **k):
        runs[-1].cores.add((form, float(resolution)))
        real_core(self, capacity, form, family_of_link, resolution, *a, **k)

    def live(self, *a, per_link=False, **k):
        runs[-1].per_link.add(per_link)
        real_net(self, *a, per_link=per_link, **k)

    def counted(*a, **k):
        found = real_counted(*a, **k)
        if found is not None:
            runs[-1].seen["pair_counts_found"] += 1
        return found
    monkeypatch.setattr(core.FluidCore, "__init__", fluid)
    monkeypatch.setattr(network.LiveNetwork, "__init__", live)
    monkeypatch.setattr(steps, "counted_step", counted)
    real = engine.simulate

    def simulate(plan, topology, *, fidelity="flow", seed=0, options=None, **kw):
        opts = engine.EngineOptions.of(options, **kw)
        if adjust is not None:
            opts = adjust(opts)
        if runtime is not None:
            opts = dataclasses.replace(opts, runtime=runtime(opts.runtime))
        runs.append(Run(plan, fidelity, opts))
        runs[-1].timeline = real(plan, topology, fidelity=fidelity, seed=seed, options=opts)
        return runs[-1].timeline
    monkeypatch.setattr(engine, "simulate", simulate)
    yield runs


def _kind_runs(runs: list[Run], fidelity: str) -> list[Run]:
    """The runs of the kinds (not their closed-form estimates, analytic runs without link bytes)."""
    return [r for r in runs if fidelity == "analytic" or not (r.fidelity == "analytic" and not r.options.link_bytes)]


def check_recorded(kinds: list[dict], runs: list[Run], fidelity: str, n_train: int) -> None:
    """Every kind's ``engine`` record in ``--json`` names exactly the paths its run was seen taking."""
    from simcomm.ops import Compute

    mine = _kind_runs(runs, fidelity)
    assert len(mine) == len(kinds), (len(mine), len(kinds))
    for kind, run in zip(kinds, mine, strict=True):
        rec = kind["engine"]
        planned = check_engine(rec, run)
        # the planning paths: some training rank plans no compute of its own exactly when one of them folded
        computing = {op.rank for op in run.plan.ops if isinstance(op, Compute)}
        folded = any(r not in computing for r in range(n_train))
        assert "rank_fold" in planned and all(isinstance(v, dict) and "used" in v for v in planned.values()), planned
        assert folded == any(v["used"] for v in planned.values()), (planned, sorted(set(range(n_train)) - computing))


def check_engine(rec: dict, run: Run) -> dict:
    """One ``engine`` record names exactly the engine paths ``run`` was seen taking; returns the rest of the
    record (the planning paths)."""
    from simcomm.engine.paths import TAKEN

    tl, seen, meta = run.timeline, run.seen, run.timeline.meta
    planned = {k: v for k, v in rec.items() if k not in tl.paths}
    assert {k: rec[k] for k in tl.paths} == json.loads(json.dumps(tl.paths))  # the run's own record, whole
    # the driver: exactly the recorded one ran (a collective-free analytic plan may run no Driver at all)
    ran = [d for d in DRIVERS if seen[d]]
    assert ran in ([rec["driver"]], []) and (ran or rec["driver"] in ("callbacks", "processes")), (rec, seen)
    # the fluid cores: every one in the recorded form and resolution; the live network's reservation rule
    if run.fidelity == "flow":
        assert run.cores <= {(rec["core"], rec["resolution"])}, (rec, run.cores)
        assert run.per_link <= {rec["pricing"] == "per-link"}, (rec, run.per_link)
    else:
        assert not run.cores and (rec["core"], rec["pricing"], rec["resolution"]) == ("none", "closed-forms", 0.0)
    # the paths taken op by op, each against a witness of its own
    witness = {"cut_collectives": seen["cut_collectives"], "closed_steps": meta.get("steps_closed", 0),
               "coalesced_steps": meta.get("steps_coalesced", 0), "scaled_runs": meta.get("isolated_scaled", 0),
               "merged_flows": meta.get("merged_flows", 0), "sampled_schedules": meta.get("analytic_sampled", 0),
               "ops_not_run": int(np.isnan(tl.end).sum()), "alike_steps": seen["alike_steps"],
               "local_collectives": seen["local_collectives"],
               "message_rounds": seen["message_rounds"]}
    taken = rec["taken"]
    assert set(taken) <= set(TAKEN)
    assert {k: v for k, v in witness.items() if v} == {k: v for k, v in taken.items() if k != "pair_counts"}, \
        (taken, witness)
    assert taken.get("pair_counts", 0) <= taken.get("closed_steps", 0)
    assert not taken.get("pair_counts") or seen["pair_counts_found"]
    assert not taken.get("closed_steps") or rec["closed_from"] > 0
    assert not taken.get("scaled_runs") or rec["scaled"]
    assert not taken.get("alike_steps") or rec["alike_steps"]
    assert not taken.get("merged_flows") or rec["resolution"] > 0
    assert not taken.get("local_collectives") or rec["driver"] == "direct"
    return planned


def _run(cli, monkeypatch, argv, adjust=None, runtime=None) -> tuple[dict, list[Run]]:
    with watched(monkeypatch, adjust, runtime) as runs:
        rc, out, err = cli(argv)
    assert rc == 0, err
    return json.loads(out), runs


CASES = {s: [*BASE, "--strategy", s, *(GPT if s == "megatron" else [])] for s in sorted(STRATEGIES)}
CASES.update({
    # every planning fold, forced on at this size
    "allreduce fold_ranks on": [*BASE, "--strategy", "allreduce", "--fold-ranks", "on"],
    "ps fold on": [*BASE, "--strategy", "ps", "--opt", "fold=on", "--opt", "fold_workers=4"],
    "sgp fold on": [*BASE, "--nodes", "32", "--strategy", "sgp", "--opt", "fold=on"],  # 256 ranks: more than 64
    "megatron replicas one": [*BASE, "--strategy", "megatron", *GPT, "--opt", "tp=2", "--opt", "replicas=one"],
    "megatron ep4-moe": [*BASE, "--strategy", "megatron", "--model", "mixtral-8x7b", "--opt", "layers=2", "--opt",
                         "global_batch=64", "--opt", "microbatch=1", "--opt", "tp=2", "--opt", "experts_parallel=4"],
    # the other fidelity, the exact resolution and another stack
    "allreduce analytic": [*BASE, "--strategy", "allreduce", "--fidelity", "analytic"],
    "crossover-sgd exact": [*BASE, "--strategy", "crossover-sgd", "--resolution", "0"],
    "ps mpi-tcp stack-cpu": [*BASE, "--strategy", "ps", "--stack", "mpi-tcp", "--stack-cpu", "25ns"],
})


def _fidelity(argv) -> str:
    return argv[argv.index("--fidelity") + 1] if "--fidelity" in argv else "flow"


#: the planning folds each forced case takes (every fold of every strategy)
FOLDS = {"allreduce fold_ranks on": ("rank_fold",), "ps fold on": ("worker_fold",), "sgp fold on": ("message_fold",),
         "megatron replicas one": ("replica_fold", "lane_fold")}


@pytest.mark.parametrize("name", sorted(CASES))
def test_run_json_names_the_paths_each_run_took(cli, monkeypatch, name):
    argv = CASES[name]
    data, runs = _run(cli, monkeypatch, argv)
    check_recorded(data["kinds"], runs, _fidelity(argv), data["n_ranks"])
    for path in FOLDS.get(name, ()):
        assert all(k["engine"][path]["used"] for k in data["kinds"]), path


def test_every_strategy_and_every_fold_is_covered():
    # every strategy of simcomm list strategies, every planning path a strategy records (IterationInfo.paths)
    import re
    from pathlib import Path

    assert {argv[argv.index("--strategy") + 1] for argv in CASES.values()} == set(STRATEGIES)
    source = "".join(f.read_text() for f in (Path(__file__).parents[2] / "simcomm" / "strategies").rglob("*.py"))
    recorded = set(re.findall(r'paths=\{"(\w+)"', source)) | set(re.findall(r'^\s+"(\w+_fold)": \{', source, re.M))
    assert recorded | {"rank_fold"} == {p for folds in FOLDS.values() for p in folds}, recorded


@pytest.mark.parametrize(("name", "adjust", "want"), [
    # a reference switch moves the recorded path, and the spies see the other one run
    ("dpsgd", lambda o: dataclasses.replace(o, reference=o.reference | {"direct"}), {"driver": "callbacks"}),
    ("hierarchical-crossover-sgd", lambda o: dataclasses.replace(o, reference=o.reference | {"local_collectives"}),
     {"driver": "callbacks"}),
    ("allreduce", lambda o: dataclasses.replace(o, reference=o.reference | {"callbacks"}), {"driver": "processes"}),
    ("crossover-sgd exact", lambda o: dataclasses.replace(o, reference=o.reference | {"lean"}), {"core": "scalar"}),
    ("crossover-sgd exact", lambda o: dataclasses.replace(o, reference=o.reference | {"rounds"}), {"driver": "direct"}),
    ("allreduce", lambda o: dataclasses.replace(o, reference=o.reference | {"coalesce"}),
     {"pricing": "plain", "scaled": False}),
    ("allreduce", lambda o: dataclasses.replace(o, reference=o.reference | {"per_link"}), {"pricing": "whole-network"}),
    # every step of one size per link priced by its closed form
    ("megatron ep4-moe", lambda o: dataclasses.replace(o, closed_steps=1), {"closed_from": 1}),
])
def test_a_reference_switch_is_recorded_as_the_path_it_takes(cli, monkeypatch, name, adjust, want):
    argv = CASES[name]
    data, runs = _run(cli, monkeypatch, argv, adjust)
    check_recorded(data["kinds"], runs, _fidelity(argv), data["n_ranks"])
    for k in data["kinds"]:
        assert {key: k["engine"][key] for key in want} == want
    if "closed_from" in want:
        assert all(k["engine"]["taken"]["closed_steps"] > 0 for k in data["kinds"])


def test_pair_counts_are_recorded(cli, monkeypatch):
    """pcnn's all-to-alls as NCCL's PXN blocks of pairs (kept as blocks from any size here: the runtime's
    ``pair_blocks_from``), every step priced by its closed form: their link loads counted by classes
    (``pair_counts``), none routed."""
    data, runs = _run(cli, monkeypatch, CASES["pcnn"], lambda o: dataclasses.replace(o, closed_steps=1),
                      lambda r: dataclasses.replace(r, pair_blocks_from=1))
    check_recorded(data["kinds"], runs, "flow", data["n_ranks"])
    assert all(k["engine"]["taken"]["pair_counts"] == 5 for k in data["kinds"])  # its 5 all-to-alls


def test_stop_after_and_sampled_schedules_are_recorded(monkeypatch):
    """The two paths no ``simcomm run`` takes at a small size: ``stop_after`` (plan's estimate) and the analytic
    fidelity's sampled schedules (over ``PAIR_LIMIT`` transfers), on an engine run of their own."""
    from simcomm.engine import EngineOptions, simulate
    from simcomm.engine.flow import analytic
    from simcomm.links.base import LinkClass
    from simcomm.ops import PlanBuilder
    from simcomm.runtimes.mpi import MPICH
    from simcomm.topologies.fat_tree import fat_tree

    topo = fat_tree(4, link=LinkClass("json-paths-link", 1e9, 1e-6, "custom"), levels=2)
    b = PlanBuilder(topo.n_ranks)
    first = b.collective("allreduce", range(8), 1e6, algorithm="ring")
    b.collective("allreduce", range(8), 1e6, algorithm="ring", after=[first])
    plan = b.build()
    tl = simulate(plan, topo, runtime=MPICH, options=EngineOptions(stop_after=frozenset({first})))
    assert tl.paths["stop_after"] == 1 and tl.paths["taken"]["ops_not_run"] == int(np.isnan(tl.end).sum()) == 1
    monkeypatch.setattr(analytic, "PAIR_LIMIT", 4)
    tl = simulate(plan, topo, fidelity="analytic", runtime=MPICH)
    # (the second all-reduce reuses the first one's price: one schedule sampled)
    assert tl.paths["taken"] == {"sampled_schedules": 1} == {"sampled_schedules": tl.meta["analytic_sampled"]}


def test_a_path_taken_but_not_recorded_fails_the_check(cli, monkeypatch):
    from simcomm.engine.drive import executor

    real = executor.Context.took

    def forgetful(self, path, count=1):  # the direct loop's cut collectives, taken but not said
        if path != "cut_collectives":
            real(self, path, count)
    monkeypatch.setattr(executor.Context, "took", forgetful)
    data, runs = _run(cli, monkeypatch, CASES["crossover-sgd exact"])
    with pytest.raises(AssertionError, match="cut_collectives"):
        check_recorded(data["kinds"], runs, "flow", data["n_ranks"])


def test_a_planning_fold_not_recorded_fails_the_check(cli, monkeypatch):
    from simcomm.pipeline import run as pipeline_run

    real = pipeline_run.paths_record

    def forgetful(engine, setting, plan):  # the worker fold taken, its record dropped
        rec = real(engine, setting, plan)
        rec.pop("worker_fold")
        return rec
    monkeypatch.setattr(pipeline_run, "paths_record", forgetful)
    data, runs = _run(cli, monkeypatch, CASES["ps fold on"])
    with pytest.raises(AssertionError):
        check_recorded(data["kinds"], runs, "flow", data["n_ranks"])


def test_an_unlisted_path_fails_the_run():
    """``ctx.took`` of a name :data:`simcomm.engine.paths.TAKEN` does not list fails the run (a new path is listed
    and documented once, there)."""
    from simcomm.engine.drive.executor import Context, _paths
    from simcomm.engine.events import Environment
    from simcomm.engine.paths import Paths
    from simcomm.links.base import LinkClass
    from simcomm.topologies.fat_tree import fat_tree

    topo = fat_tree(4, link=LinkClass("json-paths-link2", 1e9, 1e-6, "custom"), levels=2)
    paths = Paths("direct", "per-link", True, "lean", True, 16)
    ctx = Context(Environment(), topo, paths=paths, ppn=None)
    ctx.took("closed_steps")
    assert _paths(paths, ctx)["taken"] == {"closed_steps": 1}
    ctx.took("a_new_fast_path")
    with pytest.raises(AssertionError, match="'a_new_fast_path' taken but not listed"):
        _paths(paths, ctx)


def test_compare_json_names_each_runs_paths_as_run_does(cli):
    """``compare --json``: every row carries its run's ``engine`` records, those ``run --json`` gives alone."""
    rc, out, err = cli("compare", "--cluster", "dgx-a100-hdr", "--nodes", "2", "--strategies", "dpsgd,crossover-sgd",
                       "--json")
    assert rc == 0, err
    rows = {row["strategy"]: row["engine"] for row in json.loads(out)}
    for s in ("dpsgd", "crossover-sgd"):
        rc, out, err = cli(*BASE, "--strategy", s)
        assert rc == 0, err
        assert rows[s] == [k["engine"] for k in json.loads(out)["kinds"]] and rows[s][0]["driver"] == "direct"
    assert rows["crossover-sgd"][0]["taken"]["cut_collectives"] > 0


def test_whatif_results_name_each_points_paths(cli, tmp_path):
    """A what-if sweep's results.json: each point's kinds carry their ``engine`` records, as ``run --json`` gives."""
    out = tmp_path / "o"
    rc, _, err = cli("whatif", "--cluster", "dgx-a100-hdr", "--vary", "nodes=2", "--strategies", "crossover-sgd",
                     "--sequential", "--no-report", "--out", str(out))
    assert rc == 0, err
    (row,) = json.loads((out / "results.json").read_text())["rows"]
    rc, alone, err = cli(*BASE, "--strategy", "crossover-sgd")
    assert rc == 0, err
    assert [k["engine"] for k in row["kinds"]] == [k["engine"] for k in json.loads(alone)["kinds"]]
    assert row["kinds"][0]["engine"]["taken"]["cut_collectives"] > 0


PLAN = ["plan", "--model", "gpt2-small", "--cluster", "dgx-a100-hdr", "--nodes", "1", "--global-batch", "32",
        "--simulate", "3", "--no-prune", "--workers", "1", "--json"]


def test_plan_json_names_each_simulated_rows_paths(cli, monkeypatch):
    """``plan --json``: each simulated row carries the ``engine`` record of each of its kinds (the layouts are
    simulated one after another in estimate order: the runs the spies saw, in that order), and the winner's
    records are those its ``simcomm run`` command gives alone."""
    import shlex

    data, runs = _run(cli, monkeypatch, PLAN)
    rows = sorted(data["rows"], key=lambda r: r["estimate_rank"])
    assert len(rows) == 3 and all(r["simulated"]["engine"] for r in rows)
    records = [rec for r in rows for rec in r["simulated"]["engine"]]
    # (not the search's pricing of message sizes, simcomm.llm.estimate_warmup's own engine runs)
    mine = [r for r in _kind_runs(runs, "flow") if not any(op.label == "plan-price" for op in r.plan.ops)]
    assert len(mine) == len(records), (len(mine), len(records))
    for rec, run in zip(records, mine, strict=True):
        planned = check_engine(rec, run)
        assert "rank_fold" in planned and all(isinstance(v, dict) and "used" in v for v in planned.values())
    command = shlex.split(data["winner"]["command"])
    assert command[:2] == ["simcomm", "run"]
    rc, out, err = cli([*command[1:], "--json"])
    assert rc == 0, err
    assert data["winner"]["simulated"]["engine"] == [k["engine"] for k in json.loads(out)["kinds"]]
    # an estimate-only row took no engine path
    assert all(r["simulated"] is None for r in data["estimates"])


BENCH = ["bench", "--cluster", "dgx-a100-hdr", "--nodes", "2", "--sizes", "8,1MB,64MB", "--json"]


@pytest.mark.parametrize("collective", ["all_reduce", "sendrecv"])
def test_bench_json_names_each_rows_paths(cli, monkeypatch, collective):
    """``bench --json``: each row carries the ``engine`` record of its size's engine run (no planning paths: the
    bench plans one collective itself); ``--csv``'s columns stay nccl-tests' own."""
    argv = [BENCH[0], collective, *BENCH[1:]]
    data, runs = _run(cli, monkeypatch, argv)
    assert len(runs) == len(data["rows"]) == 3
    for row, run in zip(data["rows"], runs, strict=True):
        assert check_engine(row["engine"], run) == {}
    assert any(row["engine"]["taken"] for row in data["rows"])
    rc, out, err = cli([*argv[:-1], "--csv"])
    assert rc == 0 and "engine" not in out.splitlines()[0], (err, out)


def test_a_bench_path_taken_but_not_recorded_fails_the_check(cli, monkeypatch):
    from simcomm.engine.drive import executor

    def forgetful(self, path, count=1):  # every path taken op by op, taken but not said
        pass
    monkeypatch.setattr(executor.Context, "took", forgetful)
    data, runs = _run(cli, monkeypatch, ["bench", "all_reduce", *BENCH[1:]])
    with pytest.raises(AssertionError):
        for row, run in zip(data["rows"], runs, strict=True):
            check_engine(row["engine"], run)


def test_bench_measured_json_names_each_predictions_paths(cli):
    """``bench --measured --json``: each compared row carries its prediction's ``engine`` record, the one the same
    size's plain ``bench --json`` row gives."""
    from pathlib import Path

    table = Path(__file__).parents[1] / "data" / "nccl_tests" / "all_reduce_1x8_v100_old_format.txt"
    argv = ["bench", "all_reduce", "--cluster", "dgx1-v100", "--json"]
    rc, out, err = cli([*argv, "--measured", str(table)])
    assert rc == 0, err
    measured = json.loads(out)["rows"]
    rc, out, err = cli([*argv, "--sizes", ",".join(str(r["size"]) for r in measured)])
    assert rc == 0, err
    plain = json.loads(out)["rows"]
    assert [r["engine"] for r in measured] == [r["engine"] for r in plain] and all(r["engine"] for r in plain)
