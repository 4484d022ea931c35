"""``simcomm plan``'s simulations in worker processes, and the op bounds that pass layouts over
(:mod:`simcomm.llm.simulate`).

The simulations are independent runs of the pipeline, so running them in 2 processes must give the same rows
in the same order with the same floats as running them in this one; a bound that passes a layout over says
so in one ``assumed:`` line naming the flag.
"""

from __future__ import annotations

import pytest

from simcomm.llm import search, simulate
from simcomm.llm.estimate import plan_ops
from simcomm.traces.zoo.transformer import transformer_config

MODEL, CLUSTER, NODES, BATCH = "gpt2-small", "dgx-a100-hdr", 1, 16
BASE = {"cluster": CLUSTER, "model": MODEL, "precision": "bf16"}


@pytest.fixture(scope="module")
def found():
    cfg = transformer_config(MODEL)
    return cfg, search.search(cfg, BASE, NODES, BATCH, search.Space(), "bf16")


def test_the_search_in_two_workers_gives_the_rows_one_process_gives(found):
    cfg, alone = found
    ticks: list = []

    def progress(stage, total):
        ticks.append((stage.split(" ")[0], total))
        return lambda: ticks.append("tick")

    two = search.search(cfg, BASE, NODES, BATCH, search.Space(), "bf16", progress, workers=2, parallel_from=0)
    assert (two.enumerated, two.fit) == (alone.enumerated, alone.fit)
    assert [(r.layout, r.memory_bytes, r.estimate, r.estimate_rank) for r in two.rows] == \
        [(r.layout, r.memory_bytes, r.estimate, r.estimate_rank) for r in alone.rows]
    # every layout ticked once per stage, whichever worker measured it
    assert ticks[0] == ("memory", alone.enumerated) and ticks.count("tick") == alone.enumerated + alone.fit
    assert ticks[alone.enumerated + 1] == ("estimating", alone.fit)


def test_the_smallest_layout_is_named_when_none_fits_in_workers():
    from simcomm.errors import ConfigError

    cfg = transformer_config("megatron-39b")
    msgs = []
    for workers in (1, 2):
        with pytest.raises(ConfigError) as exc:
            search.search(cfg, {**BASE, "model": "megatron-39b", "gpus_per_node": 1}, 1, 8, search.Space(), "bf16",
                          workers=workers, parallel_from=0)
        msgs.append(str(exc.value))
    assert msgs[0] == msgs[1] and "the smallest needs 660.4 GB per GPU" in msgs[0]


def _key(r):
    return (r.layout, r.step_s, r.priced, r.compute_s, r.exposed_s, r.note, r.estimate_rank)


def test_two_workers_give_the_rows_one_process_gives(found):
    cfg, f = found
    alone = simulate.simulate_best(f, cfg, BASE, NODES, BATCH, 4, "flow", workers=1)
    ticks: list = []

    def progress(stage, total):
        ticks.append((stage, total))
        return lambda: ticks.append("tick")

    two = simulate.simulate_best(f, cfg, BASE, NODES, BATCH, 4, "flow", progress=progress, workers=2,
                                 parallel_from=0)
    assert [_key(r) for r in two] == [_key(r) for r in alone]
    assert sum(r.simulated for r in two) == 4
    assert ticks == [("simulating 4 layout(s) (flow)", 4)] + ["tick"] * 4


def test_max_ops_passes_the_best_over_and_says_so(found):
    cfg, f = found
    ops = [plan_ops(cfg, r.layout, f.gpus, BATCH) for r in f.rows]
    bound = ops[0] - 1  # the best by estimate is just too large
    rows = simulate.simulate_best(f, cfg, BASE, NODES, BATCH, 1, "flow", max_ops=bound)
    first = next(r for r in rows if r.estimate_rank == 1)
    assert not first.simulated and first.note == f"not simulated: plan of ~{ops[0]:,} ops > --max-ops {bound:,}"
    sim = [r for r in rows if r.simulated]
    assert len(sim) == 1 and ops[sim[0].estimate_rank - 1] <= bound
    skipped = [r for r in rows if "--max-ops" in r.note]
    assert all(r.estimate_rank < sim[0].estimate_rank for r in skipped)
    lines = simulate.bound_notes(rows, bound, None)
    assert len(lines) == 1
    assert lines[0].startswith(f"--max-ops {bound:,} passed over {len(skipped)} of the best layouts by estimate "
                               f"(the best of them: est# 1, {first.layout.short()}, ")
    assert lines[0].endswith("raise --max-ops to simulate them")


def test_sim_ops_budget_keeps_the_first_and_stops_after(found):
    cfg, f = found
    ops = [plan_ops(cfg, r.layout, f.gpus, BATCH) for r in f.rows]
    budget = ops[0] + ops[1] - 1  # the first always runs; the second would pass the budget
    rows, todo = simulate.choose(f, cfg, BATCH, 3, simulate.MAX_OPS, budget)
    assert todo[0] == 0 and 1 not in todo
    assert rows[1].note == f"not simulated: ~{ops[1]:,} ops more would pass --sim-ops {budget:,}"
    assert sum(ops[i] for i in todo) <= budget
    # no bound: the k best, whatever their ops
    rows, todo = simulate.choose(f, cfg, BATCH, 3, simulate.MAX_OPS, None)
    assert todo == [0, 1, 2] and not any(r.note for r in rows)
    assert simulate.bound_notes(rows, simulate.MAX_OPS, None) == []


def test_default_workers_is_at_most_two():
    assert 1 <= simulate.default_workers() <= 2


def test_small_work_stays_in_this_process(found, monkeypatch):
    # below the thresholds no worker is started (their start costs more than the work)
    from simcomm.llm import search_parts, workers

    def refuse(*_args, **_kw):
        raise AssertionError("a worker was started")

    monkeypatch.setattr(workers, "run_parts", refuse)
    monkeypatch.setattr(simulate, "run_parts", refuse)
    monkeypatch.setattr(simulate, "run_chained", refuse)
    monkeypatch.setattr(search_parts, "run_parts", refuse)
    cfg, f = found
    assert len(f.rows) < search.PARALLEL_LAYOUTS
    search.search(cfg, BASE, NODES, BATCH, search.Space(), "bf16", workers=2)
    rows = simulate.simulate_best(f, cfg, BASE, NODES, BATCH, 2, "flow", workers=2)
    assert sum(r.simulated for r in rows) == 2
    rows = simulate.simulate_best(f, cfg, BASE, NODES, BATCH, 2, "flow", workers=2, prune=True)
    assert sum(r.simulated for r in rows) >= 1


def test_cli_workers_bad_value_is_one_error_line(cli):
    rc, out, err = cli("plan", "--model", MODEL, "--global-batch", "8", "--workers", "0", "--quiet")
    assert rc == 2 and out == ""
    assert err.strip().splitlines() == ["error: --workers: 0 must be >= 1"]
