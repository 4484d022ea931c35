"""Gossip strategies (seed 001): peer graphs, fair peer tables, segments, plans."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simcomm.errors import ConfigError
from simcomm.ops import Collective, Transfer
from simcomm.runtimes.mpi import MPICH
from simcomm.strategies import STRATEGIES, NotApplicable
from simcomm.strategies._gossip import exp_graph_exponents, exp_graph_peer, fair_peer_table, model_segments, split_segments
from simcomm.strategies.base import make_params
from simcomm.topologies.two_level import two_level


def transfers(plan):
    return [op for op in plan.ops if isinstance(op, Transfer)]


# ---- SGP ---------------------------------------------------------------------

def test_sgp_exponents_follow_graph_manager():
    assert exp_graph_exponents(8) == (0, 1, 2)      # floor(log2 7) = 2
    assert exp_graph_exponents(9) == (0, 1, 2, 3)   # floor(log2 8) = 3
    assert exp_graph_exponents(2) == (0,)
    assert exp_graph_exponents(1) == ()
    assert [exp_graph_peer(5, it, 8) for it in range(4)] == [6, 7, 1, 6]


def test_sgp_plans_cycle_directed_exponential_graph(make_workload, mesh):
    """mode=overlap is reference SGP: whole model + push-sum weight to rank + 2^i, i = 0..floor(log2 7)."""
    w = make_workload(8)
    strat = STRATEGIES.get("sgp")(make_params(STRATEGIES.get("sgp"), {"mode": "overlap"}))
    its = strat.iterations(w, mesh(8))
    assert len(its) == 3 and sum(wt for wt, _ in its) == pytest.approx(1.0)
    for i, (_, plan) in enumerate(its):
        pairs = sorted((t.src, t.dst) for t in transfers(plan))
        assert pairs == [(r, (r + 2 ** i) % 8) for r in range(8)]
        # whole model plus one push-sum element
        assert {t.nbytes for t in transfers(plan)} == {4 * 4_000_000 + 4}


def test_sgp_exchange_hides_behind_compute(make_workload, mesh):
    from simcomm.engine import simulate

    w = make_workload(4)
    plan = STRATEGIES.get("sgp")(make_params(STRATEGIES.get("sgp"), {"mode": "overlap"})).plan(w, mesh(4))
    tl = simulate(plan, mesh(4), runtime=MPICH)
    # 16 MB at 1 GB/s = 16 ms > fwd+bwd 12 ms: exposed 4 ms + 1 us latency; then update + mix (gamma 0)
    assert tl.makespan == pytest.approx(16e-3 + 1e-6 + 4e-4, rel=1e-6)


def test_dpsgd_ring_neighbours(make_workload, mesh):
    plan = STRATEGIES.get("dpsgd")().plan(make_workload(5), mesh(5))
    pairs = sorted((t.src, t.dst) for t in transfers(plan))
    assert pairs == sorted([(r, (r + 1) % 5) for r in range(5)] + [(r, (r - 1) % 5) for r in range(5)])
    plan2 = STRATEGIES.get("dpsgd")().plan(make_workload(2), mesh(2))
    assert sorted((t.src, t.dst) for t in transfers(plan2)) == [(0, 1), (1, 0)]


# ---- fair peer selection --------------------------------------------------------

@settings(max_examples=60, deadline=None)
@given(st.integers(2, 300), st.integers(0, 10_000), st.integers(0, 50), st.integers(0, 30))
def test_fair_peer_table_is_derangement(n, seed, it, seg):
    dest = fair_peer_table(n, seed, it, seg)
    assert sorted(dest.tolist()) == list(range(n))          # every rank receives exactly one copy
    assert not np.any(dest == np.arange(n))                  # nobody sends to itself


def test_fair_peer_table_shared_and_fresh():
    a = [fair_peer_table(64, 7, 0, s) for s in range(18)]
    b = [fair_peer_table(64, 7, 0, s) for s in range(18)]
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=False))   # one seed -> the same table on every rank
    assert len({tuple(x) for x in a}) == 18                    # fresh per segment
    assert not np.array_equal(fair_peer_table(64, 8, 0, 0), a[0])
    assert fair_peer_table(2, 3, 1, 4).tolist() == [1, 0]
    with pytest.raises(NotApplicable):
        fair_peer_table(1, 0, 0, 0)


# ---- segments -------------------------------------------------------------------

def test_split_segments_contiguous_and_balanced():
    assert split_segments([1] * 6, 3) == [(0, 1), (2, 3), (4, 5)]
    assert split_segments([10, 1, 1], 3) == [(0,), (1,), (2,)]
    assert split_segments([1, 1, 1, 1], 1) == [(0, 1, 2, 3)]


def test_resnet_block_segments(make_workload, toy):
    names = ("conv1", "bn1", "layer1.0.conv1", "layer1.0.bn1", "layer1.1.conv1", "layer2.0.conv1",
             "layer2.0.downsample.0", "layer2.1.conv1", "fc")
    w = make_workload(2, toy.toy_trace(names))
    segs, how = model_segments(w, 0)
    assert segs == [(0, 1), (2, 3), (4,), (5, 6), (7,), (8,)]   # stem, 4 blocks, head
    assert "block" in how
    segs3, _ = model_segments(w, 3)
    assert segs3 == [(0, 1, 2), (3, 4, 5), (6, 7, 8)]
    flat = make_workload(2, toy.toy_trace(tuple(f"l{i}" for i in range(20))))
    assert len(model_segments(flat, 0)[0]) == 18
    with pytest.raises(ConfigError, match="segments: 10 exceeds"):
        model_segments(w, 10)


def test_crossover_plan_structure(make_workload, mesh):
    """mode=overlap (Alg. 1): every segment on its own stream, no barrier."""
    w = make_workload(6)
    plan = STRATEGIES.get("crossover-sgd")(make_params(STRATEGIES.get("crossover-sgd"), {"mode": "overlap"})).plan(
        w, mesh(6))
    ts = transfers(plan)
    assert len(ts) == 4 * 6 and plan.meta["segments"] == 4
    for s in range(4):
        seg = [t for t in ts if t.label.startswith(f"segment {s} ")]
        assert sorted(t.dst for t in seg) == list(range(6)) and all(t.src != t.dst for t in seg)
        assert {t.stream for t in seg} == {f"seg{s}"}
    assert not [op for op in plan.ops if isinstance(op, Collective)]


def test_crossover_serial_has_barriers(make_workload, mesh):
    from simcomm.strategies.crossover_sgd import CrossoverParams

    strat = STRATEGIES.get("crossover-sgd")(CrossoverParams(mode="serial"))
    plan = strat.plan(make_workload(4), mesh(4))
    bars = [op for op in plan.ops if isinstance(op, Collective)]
    # the training code calls dist.barrier() after every segment's exchange, the last one included
    assert len(bars) == 4 and all(op.nbytes == 4 and op.ranks == (0, 1, 2, 3) for op in bars)
    assert CrossoverParams().mode == "serial"  # the authors' code is the default
    assert {t.stream for t in transfers(plan)} == {"comm"}


def test_crossover_serial_slower_than_overlap(make_workload, mesh):
    from simcomm.engine import simulate
    from simcomm.strategies.crossover_sgd import CrossoverParams

    w, topo = make_workload(4), mesh(4)
    cls = STRATEGIES.get("crossover-sgd")
    over = simulate(cls(CrossoverParams(mode="overlap")).plan(w, topo), topo, runtime=MPICH).makespan
    ser = simulate(cls(CrossoverParams(mode="serial")).plan(w, topo), topo, runtime=MPICH).makespan
    assert ser > over


def test_crossover_interval_weights(make_workload, mesh):
    from simcomm.strategies.crossover_sgd import CrossoverParams

    its = STRATEGIES.get("crossover-sgd")(CrossoverParams(interval=42)).iterations(make_workload(4), mesh(4))
    assert [wt for wt, _ in its] == [41.0, 1.0]
    assert not transfers(its[0][1]) and len(transfers(its[1][1])) == 16


def test_hierarchical_groups_by_machine(make_workload):
    topo = two_level(3, 2)
    w = make_workload(6)
    plan = STRATEGIES.get("hierarchical-crossover-sgd")().plan(w, topo)
    colls = [op for op in plan.ops if isinstance(op, Collective)]
    reduces = [c for c in colls if c.kind == "reduce"]
    bcasts = [c for c in colls if c.kind == "broadcast"]
    assert sorted(c.ranks for c in reduces) == [(0, 1), (2, 3), (4, 5)]
    assert all(c.nbytes == 16e6 for c in reduces)  # one flat reduce of the whole gradient
    # broadcast=segment (training code): each group's root broadcasts each of the 4 segments (4 MB)
    assert sorted({c.ranks for c in bcasts}) == [(0, 1), (2, 3), (4, 5)] and len(bcasts) == 3 * 4
    assert all(c.nbytes == 4e6 for c in bcasts)
    ts = transfers(plan)
    assert {t.src for t in ts} == {0, 2, 4} and {t.dst for t in ts} == {0, 2, 4}
    assert len(ts) == 3 * plan.meta["segments"]


def test_hierarchical_groups_option_and_errors(make_workload, mesh):
    from simcomm.strategies.hierarchical_crossover_sgd import HierarchicalCrossoverParams as P

    cls = STRATEGIES.get("hierarchical-crossover-sgd")
    plan = cls(P(groups=2)).plan(make_workload(4), mesh(4))
    assert sorted(c.ranks for c in plan.ops if isinstance(c, Collective) and c.kind == "reduce") == [(0, 1), (2, 3)]
    with pytest.raises(ConfigError, match="groups: 3 does not divide"):
        cls(P(groups=3)).plan(make_workload(4), mesh(4))
    with pytest.raises(NotApplicable):
        cls(P(groups=1)).plan(make_workload(4), mesh(4))


@pytest.mark.parametrize("name, opts, msg", [
    ("crossover-sgd", {"mode": "fast"}, "mode: 'fast' is not valid; valid choices: serial, blocking, overlap"),
    ("sgp", {"mode": "push"}, "mode: 'push' is not valid; valid choices: blocking, neuron, overlap"),
    ("dpsgd", {"mode": "neuron"}, "mode: 'neuron' is not valid; valid choices: overlap, blocking"),
    ("hierarchical-crossover-sgd", {"reduce": "early"},
     "reduce: 'early' is not valid; valid choices: after-backward, overlap"),
    ("hierarchical-crossover-sgd", {"broadcast": "layer"},
     "broadcast: 'layer' is not valid; valid choices: segment, model"),
    ("crossover-sgd", {"segments": "-1"}, "segments: -1 must be an integer >= 0"),
    ("crossover-sgd", {"interval": "0"}, "interval: 0 must be an integer >= 1"),
    ("sgp", {"interval": "0"}, "interval: 0 must be an integer >= 1"),
    ("sgp", {"density": "0.1"}, "option 'density' does not belong to strategy 'sgp'"),
])
def test_bad_gossip_options(name, opts, msg):
    with pytest.raises(ConfigError) as err:
        make_params(STRATEGIES.get(name), opts)
    assert msg in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("name", ["sgp", "dpsgd", "crossover-sgd"])
def test_single_rank_not_applicable(name, make_workload, mesh):
    with pytest.raises(NotApplicable):
        STRATEGIES.get(name)().plan(make_workload(1), mesh(1))


def test_gossip_plans_deterministic(make_workload, mesh):
    for name in ("sgp", "dpsgd", "crossover-sgd"):
        a = STRATEGIES.get(name)().plan(make_workload(7), mesh(7))
        b = STRATEGIES.get(name)().plan(make_workload(7), mesh(7))
        assert a.ops == b.ops


def test_crossover_compute_overlap_hides_the_exchange():
    """overlap=compute posts the segments at iteration start and averages before the update."""
    from simcomm import engine
    from simcomm.strategies.crossover_sgd import CrossoverParams, CrossoverSGD
    from simcomm.topologies.star import star
    from simcomm.traces.schema import Layer, Trace
    from simcomm.workload import build_workload

    layers = tuple(Layer(f"l{i}", "Linear", 250_000, 1_000_000, 0.01, 0.02, 0.001) for i in range(4))
    tr = Trace("toy", 8, "fp32", "cpu", "cpu", "synthetic", layers, 0.124)
    w = build_workload(tr, 4)
    topo = star(4, "eth-1g")
    t = {}
    for ov in ("none", "compute"):
        plan = CrossoverSGD(CrossoverParams(segments=2, overlap=ov)).plan(w, topo)
        t[ov] = engine.simulate(plan, topo, runtime=MPICH).makespan
    compute = 4 * (0.01 + 0.02 + 0.001)
    # 4 MB per rank over 1 Gb/s (125 MB/s): about 32 ms of exchange, longer than nothing but
    # shorter than forward+backward (120 ms), so overlapping hides all of it.
    assert t["none"] > compute + 0.03
    assert t["compute"] == pytest.approx(compute, rel=1e-6)
