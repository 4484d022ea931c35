"""``ps``'s worker fold (:mod:`simcomm.strategies._ps_fold`): windows of workers simulated by their last one.

The fold is an approximation with a stated bound: with one server and fifo queues, on a stack that carries
messages as planned (NCCL), the folded plan times like the full one up to float rounding with the exact engine
(:data:`BOUND`, relative: iteration, closed form, breakdown, bytes per link family), and within the event
resolution's own bound at the default resolution (a merged completion moves by at most 1 % of its transfer).
Checked against ``--opt fold=off`` on a rail-optimised DGX A100 cluster (workers of one window on different rails:
different route latencies) and a 4:1 fat-tree (workers on the server's leaf cross fewer, faster links: two route
classes, one merged message each).
"""

from __future__ import annotations

import functools
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simcomm.errors import ConfigError
from simcomm.pipeline import simulate
from simcomm.scenario.resolve import from_flat
from simcomm.strategies._ps_fold import BOUND, worker_groups
from tests.strategies.test_fold import setup_of

DGX = ({"cluster": "dgx-a100-hdr"}, 8, 8)  # 64 workers
FAT = ({"topology": "fat-tree", "oversubscription": 4.0, "inter": "roce-100g", "stack": "nccl"}, 16, 2)
RESOLUTION_BOUND = 1e-3  # the default resolution's merges, on either side (measured: 4.2e-5)


def _run(strategy, cluster, nodes, gpn, **keys):
    scn = from_flat({"strategy": strategy, "nodes": nodes, "gpus_per_node": gpn, **cluster, **keys})
    return simulate(scn, baseline=False)


def _close(a: float, b: float, rel: float) -> bool:
    return abs(a - b) <= rel * max(abs(a), abs(b))


@pytest.mark.parametrize("strategy,cluster", [("ps", DGX), ("ps-layer-drop", FAT)])
def test_the_fold_times_like_every_worker_within_its_bound(strategy, cluster):
    full = _run(strategy, *cluster, fold="off", resolution=0.0)
    folded = _run(strategy, *cluster, fold="on", fold_workers=8, resolution=0.0)
    assert any(f"ps fold: the {full.n_ranks} workers simulated in" in line for line in folded.assumed)
    assert not any("ps fold" in line for line in full.assumed)
    assert folded.mean_s != full.mean_s or folded.breakdown != full.breakdown  # not the same plan
    assert _close(folded.mean_s, full.mean_s, BOUND)
    assert _close(folded.analytic_mean_s, full.analytic_mean_s, BOUND)
    assert full.link_bytes.keys() == folded.link_bytes.keys()
    for fam, nbytes in full.link_bytes.items():
        assert _close(folded.link_bytes[fam], nbytes, BOUND), fam
    for part in ("compute", "comm_exposed", "server", "dataload"):
        assert abs(getattr(folded.breakdown, part) - getattr(full.breakdown, part)) <= BOUND * full.mean_s, part


def test_the_default_resolution_stays_within_its_own_bound():
    full = _run("ps", *FAT, fold="off")
    folded = _run("ps", *FAT, fold="on", fold_workers=8)
    assert _close(folded.mean_s, full.mean_s, RESOLUTION_BOUND)


def test_auto_folds_only_where_the_message_fold_may():
    strat, setup, w = setup_of("ps", {}, DGX[0], 3, 4)
    arrival = list(range(w.n_ranks))
    server = strat.server_ranks(w, setup.topology)[0]
    small = replace(strat.params, fold_workers=4)
    assert worker_groups(small, replace(w, fold_ranks=True), setup.topology, arrival, server) is None
    groups = worker_groups(small, replace(w, fold_ranks=True, fold_messages=True), setup.topology, arrival, server)
    # rank 0 alone, then windows of ceil(11 / 4) = 3 workers, each simulated by its last
    assert [g.rep for g in groups] == [0, 3, 6, 9, 11]
    assert [sum(n for _, n in g.push_parts) for g in groups] == [0, 2, 2, 2, 1]
    assert all(g.push_wait >= 0 and g.pull_wait >= 0 for g in groups)
    off = replace(small, fold="off")
    assert worker_groups(off, replace(w, fold_ranks=True, fold_messages=True), setup.topology, arrival, server) is None


@pytest.mark.parametrize("nodes,folds", [(31, False), (32, True)])
def test_auto_folds_from_fold_ranks_workers_through_the_pipeline(nodes, folds):
    # 248 workers: every one simulated; 256 (FOLD_RANKS): the worker fold and the exact rank fold both start
    from simcomm.strategies._fold import FOLD_RANKS

    assert FOLD_RANKS == 256
    res = _run("ps", {"cluster": "dgx-a100-hdr", "model": "rnn-mnist", "fidelity": "analytic"}, nodes, 8)
    (kind,) = res.kinds
    assert kind.engine["worker_fold"]["used"] is folds and kind.engine["rank_fold"]["used"] is folds
    assert kind.engine["worker_fold"]["workers"] == nodes * 8
    assert any("ps fold" in line for line in res.assumed) is folds


@pytest.mark.parametrize("options,words", [
    ({"queues": "concurrent"}, "fifo queues"),
    ({"servers": 2, "queues": "fifo"}, "one server"),
    ({"placement": "colocated"}, "placement own"),
])
def test_fold_on_is_refused_where_it_could_not_hold(options, words):
    with pytest.raises(ConfigError, match=words):
        strat, setup, w = setup_of("ps", {"fold": "on", **options}, DGX[0], 3, 4)
        strat.plan(w, setup.topology)


def test_fold_on_is_refused_with_unequal_workers():
    strat, setup, w = setup_of("ps", {"fold": "on", "fold_workers": 2}, DGX[0], 3, 4,
                            compute_scale=(1.0,) * 11 + (1.5,))
    with pytest.raises(ConfigError, match="compute alike"):
        strat.plan(w, setup.topology)


@pytest.mark.parametrize("value", [0, -3, True, 2.5])
def test_fold_workers_must_be_a_positive_integer(value):
    with pytest.raises(ConfigError, match="fold-workers"):
        setup_of("ps", {"fold_workers": value}, DGX[0], 3, 4)


def test_the_bound_fails_without_the_latency_wait(monkeypatch):
    import simcomm.strategies._ps_fold as fold

    full = _run("ps", *DGX, fold="off", resolution=0.0)
    parts = fold._parts
    monkeypatch.setattr(fold, "_parts", lambda *args: (parts(*args)[0], 0.0))
    folded = _run("ps", *DGX, fold="on", fold_workers=8, resolution=0.0)
    assert not _close(folded.mean_s, full.mean_s, 1e3 * BOUND)


@given(st.integers(1, 20), st.integers(2, 12))
@settings(max_examples=25, deadline=None)
def test_every_worker_is_simulated_or_merged_exactly_once(fold_workers, workers):
    strategy, setup, w = _small_setup()
    params = replace(strategy.params, fold="on", fold_workers=fold_workers)
    arrival = list(range(workers))
    server = strategy.server_ranks(w, setup.topology)[0]
    groups = worker_groups(params, w, setup.topology, arrival, server)
    if groups is None:  # windows of one worker: the full plan
        assert -(-(workers - 1) // fold_workers) <= 1
        return
    assert groups[0].rep == 0 and groups[-1].rep == workers - 1
    for parts in ("push_parts", "pull_parts"):
        merged = [n for g in groups for _, n in getattr(g, parts)]
        assert len(groups) + sum(merged) == workers
    reps = [g.rep for g in groups]
    assert reps == sorted(set(reps))


@functools.cache
def _small_setup():
    return setup_of("ps", {}, DGX[0], 3, 4)
