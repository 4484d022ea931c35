"""Compression strategies (seed 002, seed 000 Table I): trees, bytes, closed forms, options."""

from __future__ import annotations

import math

import pytest

from simcomm.errors import ConfigError
from simcomm.ops import Collective, Compute, Transfer
from simcomm.strategies import STRATEGIES, NotApplicable
from simcomm.strategies._sparse import tree_rounds
from simcomm.strategies.base import make_params

D = 4_000_000          # elements of the toy model (4 layers x 4 MB fp32)
K = math.ceil(0.004 * D)  # default density


def transfers(plan, label=""):
    return [op for op in plan.ops if isinstance(op, Transfer) and label in op.label]


def colls(plan, kind):
    return [op for op in plan.ops if isinstance(op, Collective) and op.kind == kind]


def test_tree_rounds_small_cases():
    assert tree_rounds(2) == [[(1, 0)]]
    assert tree_rounds(3) == [[(1, 0)], [(2, 0)]]            # odd highest rank skips round 1
    assert tree_rounds(5) == [[(1, 0), (3, 2)], [(2, 0)], [(4, 0)]]
    assert tree_rounds(8) == [[(1, 0), (3, 2), (5, 4), (7, 6)], [(2, 0), (6, 4)], [(4, 0)]]


@pytest.mark.parametrize("p", list(range(2, 70)))
def test_tree_rounds_ceil_log2(p):
    rounds = tree_rounds(p)
    assert len(rounds) == math.ceil(math.log2(p))
    senders = [s for rnd in rounds for s, _ in rnd]
    assert sorted(senders) == list(range(1, p))               # everyone but the root sends once


@pytest.mark.parametrize("p", [2, 3, 5, 6, 8])
def test_gs_sgd_two_ceil_log2_rounds(p, make_workload, mesh):
    plan = STRATEGIES.get("gs-sgd")().plan(make_workload(p), mesh(p))
    sketch = 5 * K * 4
    ups = transfers(plan, "sketch up")
    downs = transfers(plan, "sketch down")
    rounds = {t.label for t in ups} | {t.label for t in downs}
    assert len(rounds) == 2 * math.ceil(math.log2(p))
    assert len(ups) == len(downs) == p - 1 and {t.nbytes for t in ups + downs} == {sketch}
    (second,) = colls(plan, "allreduce")
    assert second.nbytes == K * 4 and len(second.ranks) == p


def test_gs_sgd_time_on_mesh(make_workload, mesh):
    from simcomm.engine import simulate

    w = make_workload(4, trace=None)
    plan = STRATEGIES.get("gs-sgd")(make_params(STRATEGIES.get("gs-sgd"), {"elem-s": "0"})).plan(w, mesh(4))
    tl = simulate(plan, mesh(4))
    hop = 1e-6 + 5 * K * 4 / 1e9
    query = D * 5 * 2e-11
    first = 12e-3 + 4 * hop + query  # fwd+bwd, 2 rounds up and 2 down, HEAVYMIX
    ar = [op.id for op in colls(plan, "allreduce")][0]
    assert tl.start[ar] == pytest.approx(first, rel=1e-9)


def test_gtopk_time_on_mesh(make_workload, mesh):
    from simcomm.engine import simulate

    plan = STRATEGIES.get("gtopk")().plan(make_workload(4), mesh(4))
    assert {t.nbytes for t in transfers(plan)} == {K * 8}     # k values + k indices
    tl = simulate(plan, mesh(4))
    hop = 1e-6 + K * 8 / 1e9
    expect = 12e-3 + D * 1e-9 + 2 * (hop + 2 * K * 1e-9) + 2 * hop + 4e-4
    assert tl.makespan == pytest.approx(expect, rel=1e-9)


def test_gtopk_closed_form_bytes(make_workload, mesh):
    # seed 000 Table I: 4k(log2 R) words on the critical path = 2 log2 R messages of 2k words
    p = 8
    plan = STRATEGIES.get("gtopk")().plan(make_workload(p), mesh(p))
    rounds = {t.label for t in transfers(plan, "top-k")}
    assert len(rounds) == 2 * math.log2(p)
    msg = {t.nbytes for t in transfers(plan, "top-k")}
    assert msg == {K * 8} and len(rounds) * K * 8 == 4 * K * math.log2(p) * 4


def test_topka_bytes_match_formula(make_workload, mesh):
    p = 6
    plan = STRATEGIES.get("topka")().plan(make_workload(p), mesh(p))
    (ag,) = colls(plan, "allgather")
    # all-gather moves (R-1)/R of the gathered size per rank: 2k(R-1) words
    assert ag.nbytes * (p - 1) / p == pytest.approx(2 * K * (p - 1) * 4)


def test_gaussian_k_two_allgathers(make_workload, mesh):
    p = 4
    plan = STRATEGIES.get("gaussian-k")().plan(make_workload(p), mesh(p))
    counts, sparse = colls(plan, "allgather")
    assert counts.nbytes == 4 * p and sparse.nbytes * (p - 1) / p == pytest.approx(2 * K * (p - 1) * 4)
    assert sum(1 for op in plan.ops if isinstance(op, Compute) and op.label == "threshold") == p


@pytest.mark.parametrize("volume, words", [("6k", 6), ("2k", 2)])
def test_ok_topk_volume(volume, words, make_workload, mesh):
    p = 4
    cls = STRATEGIES.get("ok-topk")
    plan = cls(make_params(cls, {"volume": volume})).plan(make_workload(p), mesh(p))
    (a2a,) = colls(plan, "alltoall")
    (ag,) = colls(plan, "allgather")
    assert (a2a.nbytes + ag.nbytes) * (p - 1) / p == pytest.approx(words * K * (p - 1) / p * 4)


def test_sketched_sgd_incast_on_server(make_workload, mesh):
    p = 5
    cls = STRATEGIES.get("sketched-sgd")
    plan = cls(make_params(cls, {"server": "2"})).plan(make_workload(p), mesh(p))
    ins = transfers(plan, "sketch to server")
    assert sorted(t.src for t in ins) == [0, 1, 3, 4] and {t.dst for t in ins} == {2}
    assert len(transfers(plan)) == 4 * (p - 1)
    with pytest.raises(ConfigError, match="server: rank 9 is outside the 5 training ranks"):
        cls(make_params(cls, {"server": "9"})).plan(make_workload(p), mesh(p))


@pytest.mark.parametrize("name, opts, msg", [
    ("gtopk", {"density": "0"}, "density: 0.0 must be in (0, 1]"),
    ("topka", {"density": "1.5"}, "density: 1.5 must be in (0, 1]"),
    ("gs-sgd", {"sketch-rows": "0"}, "sketch-rows: 0 must be an integer >= 1"),
    ("ok-topk", {"volume": "3k"}, "volume: '3k' is not valid; valid choices: 6k, 2k"),
    ("gaussian-k", {"elem-s": "-1"}, "elem-s: -1.0 must be a non-negative number of seconds"),
    ("gtopk", {"segments": "3"}, "option 'segments' does not belong to strategy 'gtopk'"),
])
def test_bad_compression_options(name, opts, msg):
    with pytest.raises(ConfigError) as err:
        make_params(STRATEGIES.get(name), opts)
    assert msg in str(err.value) and "\n" not in str(err.value)


def test_density_changes_bytes(make_workload, mesh):
    cls = STRATEGIES.get("topka")
    plan = cls(make_params(cls, {"density": "0.01"})).plan(make_workload(4), mesh(4))
    assert colls(plan, "allgather")[0].nbytes == 4 * math.ceil(0.01 * D) * 8


def test_trace_rates_override(make_workload, mesh, traces):
    from dataclasses import replace

    t = traces.toy()
    t = replace(t, meta={"compression_rates": {"topk": 2e-9}})
    plan = STRATEGIES.get("gtopk")().plan(make_workload(2, t), mesh(2))
    sel = [op for op in plan.ops if isinstance(op, Compute) and op.label == "top-k select"]
    assert sel[0].seconds == pytest.approx(D * 2e-9)


@pytest.mark.parametrize("name", ["gs-sgd", "sketched-sgd", "gtopk", "topka", "ok-topk", "gaussian-k"])
def test_compression_single_rank_and_determinism(name, make_workload, mesh):
    with pytest.raises(NotApplicable):
        STRATEGIES.get(name)().plan(make_workload(1), mesh(1))
    a = STRATEGIES.get(name)().plan(make_workload(5), mesh(5))
    b = STRATEGIES.get(name)().plan(make_workload(5), mesh(5))
    assert a.ops == b.ops
