"""Compression strategies (seed 002, seed 000 Table I): trees, bytes, closed forms, options."""

from __future__ import annotations

import math

import pytest

from simcomm.errors import ConfigError
from simcomm.ops import Collective, Compute, Transfer
from simcomm.runtimes.mpi import MPICH
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


# gs-SGD's default sketch (Count-Sketch bound, module docstring of gs_sgd): eps 0.1, delta 0.01
# cols = ceil(8 / 0.1^2) = 800; rows = ceil(ln(d / 0.01) / (ln(16/7) / 2)), ln(16/7) / 2 = 0.413339
# toy d = 4e6: ln(4e8) = 19.806975 -> 47.92 -> 48 rows
ROWS, COLS = 48, 800
SKETCH = ROWS * COLS * 4


@pytest.mark.parametrize("d, eps, delta, dims", [
    (4_000_000, 0.1, 0.01, (48, 800)),     # ln(4e8) = 19.806975 / 0.413339 = 47.92
    (14_728_266, 0.1, 0.01, (52, 800)),    # CIFAR VGG-16: ln(1.4728e9) = 21.110448 / 0.413339 = 51.07
    (269_722, 0.1, 0.01, (42, 800)),       # ResNet-20: ln(2.697e7) = 17.110318 / 0.413339 = 41.40
    (4_000_000, 0.2, 0.01, (48, 200)),     # cols = 8 / 0.04
    (4_000_000, 0.1, 0.001, (54, 800)),    # ln(4e9) = 22.109560 / 0.413339 = 53.49
])
def test_sketch_size_formula(d, eps, delta, dims):
    from simcomm.strategies.gs_sgd import sketch_dims

    rows = math.ceil(math.log(d / delta) / (0.5 * math.log(16 / 7)))
    cols = math.ceil(round(8 / eps ** 2, 9))
    assert sketch_dims(d, eps, delta) == (rows, cols) == dims


def test_sketch_is_o_log_d_and_independent_of_k(make_workload, mesh):
    from simcomm.strategies.gs_sgd import ROW_EXPONENT, sketch_dims

    # squaring d adds ln(d) / D rows: O(log d) counters, never O(k) or O(d)
    r1, _ = sketch_dims(10 ** 6)
    r2, _ = sketch_dims(10 ** 12)
    assert r2 - r1 == pytest.approx(math.log(10 ** 6) / ROW_EXPONENT, abs=1)
    cls = STRATEGIES.get("gs-sgd")
    sizes = {cls(make_params(cls, {"density": dens})).plan(make_workload(4), mesh(4)).meta["sketch_bytes"]
             for dens in ("0.004", "0.01", "0.05")}
    assert sizes == {SKETCH}
    over = cls(make_params(cls, {"sketch-rows": "5", "sketch-cols": "100"})).plan(make_workload(4), mesh(4))
    assert over.meta["sketch_bytes"] == 5 * 100 * 4


@pytest.mark.parametrize("p", [2, 3, 5, 6, 8])
def test_gs_sgd_two_ceil_log2_rounds(p, make_workload, mesh):
    plan = STRATEGIES.get("gs-sgd")().plan(make_workload(p), mesh(p))
    ups = transfers(plan, "sketch up")
    downs = transfers(plan, "sketch down")
    rounds = {t.label for t in ups} | {t.label for t in downs}
    assert len(rounds) == 2 * math.ceil(math.log2(p))
    assert len(ups) == len(downs) == p - 1 and {t.nbytes for t in ups + downs} == {SKETCH}
    # second round: the k exact values up and down the same tree (a k-element tree all-reduce, C6)
    vals = transfers(plan, "top-k values")
    assert len(vals) == 2 * (p - 1) and {t.nbytes for t in vals} == {K * 4}
    assert not colls(plan, "allreduce")


def test_gs_sgd_time_on_mesh(make_workload, mesh):
    from simcomm.engine import simulate

    w = make_workload(4, trace=None)
    plan = STRATEGIES.get("gs-sgd")(make_params(STRATEGIES.get("gs-sgd"), {"elem-s": "0"})).plan(w, mesh(4))
    tl = simulate(plan, mesh(4), runtime=MPICH)
    hop = 1e-6 + SKETCH / 1e9                    # 1 us + 153.6 kB at 1 GB/s
    query = D * ROWS * 2e-11                     # HEAVYMIX over 48 rows: 3.84 ms
    first = 12e-3 + 4 * hop + query              # fwd+bwd, 2 rounds up and 2 down, HEAVYMIX
    second = [op.id for op in transfers(plan, "top-k values up 0")]
    assert min(tl.start[i] for i in second) == pytest.approx(first, rel=1e-9)
    vhop = 1e-6 + K * 4 / 1e9                    # 64 kB of values per hop
    assert tl.makespan == pytest.approx(first + 4 * vhop + 4e-4, rel=1e-9)


def test_gtopk_time_on_mesh(make_workload, mesh):
    from simcomm.engine import simulate

    cls = STRATEGIES.get("gtopk")
    for down in ("tree", "bcast"):
        plan = cls(make_params(cls, {"down": down})).plan(make_workload(4), mesh(4))
        assert {t.nbytes for t in transfers(plan, "top-k up")} == {K * 8}     # k values + k indices
        tl = simulate(plan, mesh(4), runtime=MPICH)
        hop = 1e-6 + K * 8 / 1e9
        merge = 2 * K * 2e-7           # host numpy merge of 2k entries per round: 6.4 ms
        barrier = 2 * (1e-6 + 4 / 1e9)  # 4-byte recursive doubling over 4 ranks: 2 steps
        # fwd+bwd 12 ms, GPU select d x 1 ns, 2 rounds (hop, merge, barrier), 2 hops down (tree, or a
        # binomial broadcast: the same 2 hops), intersect k x 0.2 us, update 0.4 ms
        expect = 12e-3 + D * 1e-9 + 2 * (hop + merge + barrier) + 2 * hop + K * 2e-7 + 4e-4
        assert tl.makespan == pytest.approx(expect, rel=1e-9)


def test_gtopk_closed_form_bytes(make_workload, mesh):
    # seed 000 Table I: 4k(log2 R) words on the critical path = 2 log2 R messages of 2k words
    p = 8
    cls = STRATEGIES.get("gtopk")
    plan = cls(make_params(cls, {"down": "tree"})).plan(make_workload(p), mesh(p))
    rounds = {t.label for t in transfers(plan, "top-k")}
    assert len(rounds) == 2 * math.log2(p)
    msg = {t.nbytes for t in transfers(plan, "top-k")}
    assert msg == {K * 8} and len(rounds) * K * 8 == 4 * K * math.log2(p) * 4
    bc = cls().plan(make_workload(p), mesh(p))
    (down,) = colls(bc, "broadcast")
    assert down.nbytes == K * 8 and down.ranks[down.root] == 0
    assert len(colls(bc, "allreduce")) == math.log2(p)   # one barrier per round


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
    ("gs-sgd", {"sketch-rows": "-1"}, "sketch-rows: -1 must be an integer >= 0"),
    ("gs-sgd", {"sketch-eps": "1.5"}, "sketch-eps: 1.5 must be in (0, 1)"),
    ("gtopk", {"down": "ring"}, "down: 'ring' is not valid; valid choices: bcast, tree"),
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


def test_trace_rates_override(make_workload, mesh, toy):
    from dataclasses import replace

    t = toy.toy_trace()
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
