"""``run_compare``: each distinct run simulated once, and the same results from worker processes as from one."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

import simcomm.compare as compare_mod
from simcomm.compare import run_compare
from simcomm.pipeline import simulate
from simcomm.scenario import Scenario
from tests.pipeline.test_pipeline_run_cli import _toy_trace


def _rows(results) -> str:
    return json.dumps([r.to_dict() for r in results], sort_keys=True)


def test_baseline_run_serves_the_compared_allreduce(tmp_path, monkeypatch):
    """The baseline at a node count is the compared ``allreduce`` with its defaults: one run, not two; the
    other strategies' results are those of their own runs, float for float."""
    calls = []
    real = compare_mod._simulate_point

    def counted(base, key, ctx):
        calls.append(key)
        return real(base, key, ctx)

    monkeypatch.setattr(compare_mod, "_simulate_point", counted)
    base = Scenario(strategy="allreduce", nodes=2, trace=_toy_trace(tmp_path))
    results = run_compare(base, ["allreduce", "dpsgd", "allreduce:overlap=none"], [2, 4])
    assert calls == [(2, "allreduce", ()), (2, "dpsgd", ()), (2, "allreduce", (("overlap", "none"),)),
                     (4, "allreduce", ()), (4, "dpsgd", ()), (4, "allreduce", (("overlap", "none"),))]
    assert [(r.strategy, r.nodes) for r in results] == [
        ("allreduce", 2), ("dpsgd", 2), ("allreduce:overlap=none", 2),
        ("allreduce", 4), ("dpsgd", 4), ("allreduce:overlap=none", 4)]
    for r in results:
        assert r.baseline_s == results[0 if r.nodes == 2 else 3].mean_s
    assert results[0].speedup == 1.0 and results[3].speedup == 1.0
    alone = simulate(replace(base, strategy="dpsgd", nodes=4), baseline=False, analytic=False)
    assert results[4].mean_s == alone.mean_s and results[4].kinds == alone.kinds
    assert results[4].speedup == results[3].mean_s / alone.mean_s  # (the same global batch: a time ratio)


def test_workers_give_the_same_results_as_one_process(tmp_path):
    """Two processes, the runs largest first, n/a points and variants included: every result the same."""
    base = Scenario(strategy="allreduce", nodes=2, trace=_toy_trace(tmp_path))
    names = ["allreduce", "hierarchical-allreduce", "ps", "megatron:tp=3", "sgp"]
    one = run_compare(base, names, [1, 2, 4], workers=1)
    ticks = []
    two = run_compare(base, names, [1, 2, 4], workers=2, progress=lambda: ticks.append(1))
    assert _rows(one) == _rows(two)
    assert len(ticks) == len(names) * 3  # one per (strategy, nodes), the shared allreduce run counted once each
    assert any(r.not_applicable for r in two) and two[1].not_applicable  # hierarchical-allreduce at 1 node


def test_workers_keep_a_users_own_error(tmp_path, monkeypatch):
    """The error of the user's own options for the compared strategy is raised as in one process; with several
    node counts at the smallest, before any run goes to the workers."""
    from simcomm.errors import ConfigError

    base = Scenario(strategy="megatron", nodes=2, trace=_toy_trace(tmp_path), options={"tp": "3"})
    for workers in (1, 2):
        with pytest.raises(ConfigError) as err:
            run_compare(base, ["allreduce", "megatron"], [2], workers=workers)
        assert "tp" in str(err.value)

    def no_pool(*args, **kwargs):
        raise AssertionError("runs went to the workers before the smallest node count's error")

    monkeypatch.setattr(compare_mod, "_run_all", no_pool)
    with pytest.raises(ConfigError, match="tp"):
        run_compare(base, ["allreduce", "megatron"], [2, 4, 8], workers=2)
