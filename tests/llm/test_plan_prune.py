"""``simcomm plan``'s pruning by lower bounds (:func:`simcomm.llm.simulate.simulate_best` with ``prune``).

A layout of the K best by estimate is not simulated when a lower bound on its step
(:func:`simcomm.engine.bound.makespan_bound` of its plan) exceeds a step simulated before it: it could not have
won.  So the winner is the one simulating all K gives, every simulated row keeps its floats, every row passed
over was (when simulated) at or above its bound, and the rows are the same in 1 or 2 processes.
"""

from __future__ import annotations

import json

import pytest

from simcomm.llm import search, simulate
from simcomm.traces.zoo.transformer import transformer_config

MODEL, CLUSTER, NODES, BATCH, K = "gpt2-small", "dgx-a100-hdr", 1, 16, 8
BASE = {"cluster": CLUSTER, "model": MODEL, "precision": "bf16"}


@pytest.fixture(scope="module")
def runs():
    cfg = transformer_config(MODEL)
    found = search.search(cfg, BASE, NODES, BATCH, search.Space(), "bf16")
    every = simulate.simulate_best(found, cfg, BASE, NODES, BATCH, K, "flow")
    pruned = simulate.simulate_best(found, cfg, BASE, NODES, BATCH, K, "flow", prune=True)
    return cfg, found, every, pruned


def _by_rank(rows):
    return {r.estimate_rank: r for r in rows}


def test_pruning_keeps_the_winner_and_every_simulated_float(runs):
    _, _, every, pruned = runs
    assert sum(r.simulated for r in every) == K
    sim = [r for r in pruned if r.simulated]
    passed = [r for r in pruned if r.note.startswith(simulate.PRUNED)]
    assert sim and passed and len(sim) + len(passed) == K  # this search passes some over, not all
    assert (sim[0].layout, sim[0].step_s) == (every[0].layout, every[0].step_s)
    full = _by_rank(every)
    for r in sim:
        assert (r.step_s, r.compute_s, r.exposed_s) == (full[r.estimate_rank].step_s, full[r.estimate_rank].compute_s,
                                                         full[r.estimate_rank].exposed_s)
        assert r.bound_s is None or r.bound_s <= r.step_s
    for r in passed:
        # its bound is above a step simulated before it by estimate, and at most its own simulated step
        assert sim[0].step_s < r.bound_s <= full[r.estimate_rank].step_s
        assert any(s.estimate_rank < r.estimate_rank and s.step_s < r.bound_s for s in sim)
        assert r.step_s == r.estimate.step  # an estimate-only row again


def test_the_note_says_how_many_and_the_flag(runs):
    _, _, _, pruned = runs
    passed = [r for r in pruned if r.note.startswith(simulate.PRUNED)]
    lines = simulate.bound_notes(pruned, simulate.MAX_OPS, None)
    assert len(lines) == 1
    assert lines[0].startswith(f"{len(passed)} of the best layouts by estimate not simulated: a lower bound")
    assert lines[0].endswith("--no-prune simulates them")
    low = min(passed, key=lambda r: (r.bound_s, r.estimate_rank))
    assert f"the lowest: {low.bound_s:.4g} s, est# {low.estimate_rank}" in lines[0]


def test_two_workers_prune_as_one_process(runs):
    cfg, found, _, pruned = runs
    two = simulate.simulate_best(found, cfg, BASE, NODES, BATCH, K, "flow", workers=2, parallel_from=0, prune=True)

    def key(r):
        return (r.layout, r.step_s, r.priced, r.compute_s, r.exposed_s, r.note, r.estimate_rank, r.bound_s)

    assert [key(r) for r in two] == [key(r) for r in pruned]


def test_analytic_fidelity_is_never_pruned(runs):
    cfg, found, _, _ = runs
    rows = simulate.simulate_best(found, cfg, BASE, NODES, BATCH, 3, "analytic", prune=True)
    assert sum(r.simulated for r in rows) == 3 and not any(r.bound_s for r in rows)


def test_cli_no_prune_simulates_all_k(cli):
    args = ("plan", "--model", MODEL, "--global-batch", str(BATCH), "--simulate", "3", "--json", "--quiet")
    rc, out, _ = cli(*args, "--no-prune")
    every = json.loads(out)
    rc2, out2, _ = cli(*args)
    pruned = json.loads(out2)
    assert rc == rc2 == 0
    assert every["simulated"] == 3 and pruned["simulated"] < 3
    assert pruned["winner"]["command"] == every["winner"]["command"]
    assert pruned["winner"]["step_s"] == every["winner"]["step_s"]
    assert any("--no-prune simulates them" in line for line in pruned["assumed"])
    assert not any("--no-prune" in line for line in every["assumed"])
