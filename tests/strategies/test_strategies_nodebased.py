"""node-based (seed 000) as its code runs: exchange rules, post-backward intranode all-reduce, per-epoch term."""

from __future__ import annotations

import networkx as nx
import pytest

from simcomm import engine
from simcomm.errors import ConfigError
from simcomm.links.base import LinkClass
from simcomm.ops import Collective, Compute
from simcomm.runtimes.mpi import MPICH
from simcomm.strategies.base import make_params
from simcomm.strategies.node_based import NodeBased, NodeBasedParams, auto_k_prime, exchanges_per_epoch
from simcomm.topologies.base import Topology
from simcomm.traces.schema import Layer, Trace
from simcomm.workload import build_workload

INTRA = LinkClass("nb-intra", 100e9, 1e-6, "nvlink")
INTER = LinkClass("nb-inter", 10e9, 2e-6, "infiniband")


def trace() -> Trace:
    """4 layers of 4 MB: forward 1 ms, backward 2 ms, update 0.1 ms each; batch 32."""
    layers = tuple(Layer(f"l{i}", "Conv2d", 1_000_000, 4_000_000, 1e-3, 2e-3, 1e-4, (16,), (16,)) for i in range(4))
    return Trace("toy", 32, "float32", "test", "gpu", "synthetic", layers, iteration_s=12.4e-3)


def cluster(nodes: int, gpus: int) -> Topology:
    """GPUs on a node switch (INTRA), one NIC per node on a core switch (INTER)."""
    g = nx.Graph()
    g.add_node("core", kind="switch", machine=None)
    ranks = []
    for m in range(nodes):
        g.add_node(f"sw{m}", kind="switch", machine=m)
        g.add_node(f"nic{m}", kind="nic", machine=m)
        g.add_edge(f"sw{m}", f"nic{m}", link=INTRA.name)
        g.add_edge(f"nic{m}", "core", link=INTER.name)
        for k in range(gpus):
            g.add_node(f"g{m}.{k}", kind="rank", machine=m)
            g.add_edge(f"g{m}.{k}", f"sw{m}", link=INTRA.name)
            ranks.append(f"g{m}.{k}")
    return Topology(f"nb-{nodes}x{gpus}", g, {INTRA.name: INTRA, INTER.name: INTER}, tuple(ranks))


# ---- which iterations exchange ---------------------------------------------------------------

@pytest.mark.parametrize("k, kp, alg2, footnote", [
    (100, 50, 2, 3),    # i = 50, 100 vs 1 + floor(100/50) = 3: K' divides K, they differ by one
    (100, 30, 4, 4),    # i = 30, 60, 90, 100 vs 1 + 3
    (100, 100, 1, 1),   # i = 100 only; footnote: K' >= K gives exactly 1
    (100, 200, 1, 1),   # K' > K: only the epoch's last iteration
    (10, 3, 4, 4),      # i = 3, 6, 9, 10
    (6, 2, 3, 4),       # i = 2, 4, 6 vs 1 + 3
    (8, 1, 8, 8),       # every iteration; footnote capped at K (1 + 8 = 9 -> 8)
])
def test_exchange_rules_hand_counted(k, kp, alg2, footnote):
    assert exchanges_per_epoch(k, kp) == alg2 == exchanges_per_epoch(k, kp, "alg2")
    assert exchanges_per_epoch(k, kp, "footnote") == footnote


@pytest.mark.parametrize("k", range(1, 40))
@pytest.mark.parametrize("kp", [1, 2, 3, 5, 7, 50])
def test_alg2_rule_counts_the_iterations_it_names(k, kp):
    named = [i for i in range(1, k + 1) if i % kp == 0 or i == k]
    assert exchanges_per_epoch(k, kp, "alg2") == len(named)
    # the footnote's count is the paper's stated maximum: never below Alg. 2's, at most one above
    assert 0 <= exchanges_per_epoch(k, kp, "footnote") - len(named) <= 1


def test_kinds_and_weights_follow_the_rule():
    # dataset 800, 4 ranks x 32: K = ceil(800 / 128) = 7; K' = 2 -> alg2 i = 2, 4, 6, 7 (4); footnote 1 + 3 = 4
    # dataset 768: K = 6; K' = 2 -> alg2 i = 2, 4, 6 (3); footnote 1 + 3 = 4
    w = build_workload(trace(), 4, dataset_size=768)
    topo = cluster(4, 1)
    for rule, x in (("alg2", 3), ("footnote", 4)):
        kinds = NodeBased(NodeBasedParams(k_prime=2, exchange_rule=rule)).iterations(w, topo)
        assert [(wt, p.info.kind) for wt, p in kinds] == [(6.0 - x, "local"), (float(x), "exchange")]
        assert f"{x} internode exchange(s) per epoch (rule {rule}" in kinds[0][1].info.assumed[0]


def test_auto_k_prime_is_the_codes_rule():
    # CIFAR/main.py:139-141: ceil(50000 / (bsz * worldsize)); 128 x 8 -> ceil(48.83) = 49 = K on CIFAR
    assert auto_k_prime(128, 8) == 49 and auto_k_prime(128, 4) == 98 and auto_k_prime(98, 20) == 26
    w = build_workload(trace(), 4, dataset_size=50_000)  # K = ceil(50000 / 128) = 391 = auto K'
    kinds = NodeBased(make_params(NodeBased, {"k-prime": "-1"})).iterations(w, cluster(4, 1))
    assert [(wt, p.info.kind) for wt, p in kinds] == [(390.0, "local"), (1.0, "exchange")]


# ---- the intranode all-reduce runs after backward ----------------------------------------------

def _intra(plan):
    return [op for op in plan.ops if isinstance(op, Collective) and op.label.startswith("intra")]


def test_intranode_allreduce_after_backward_one_flat_buffer():
    topo = cluster(2, 2)
    w = build_workload(trace(), 4, bucket_mb=4, dataset_size=1000)  # 4 buckets of 4 MB
    plan = NodeBased(NodeBasedParams(intra_algorithm="ring")).plan(w, topo)
    ops = _intra(plan)
    assert sorted(op.ranks for op in ops) == [(0, 1), (2, 3)] and {op.nbytes for op in ops} == {16e6}
    tl = engine.simulate(plan, topo, runtime=MPICH)
    # it starts when backward ends: 4 x 1 ms forward + 4 x 2 ms backward = 12 ms
    assert [tl.start[op.id] for op in ops] == pytest.approx([12e-3, 12e-3])
    # ring over 2 ranks: 2 steps of 8 MB, each 2 hops x 1 us + 8e6 / 100e9 s = 82 us -> 164 us; update 0.4 ms
    assert tl.makespan == pytest.approx(12e-3 + 2 * (2e-6 + 8e6 / 100e9) + 0.4e-3, rel=1e-9)


def test_overlapped_mode_kept_as_an_option():
    topo = cluster(2, 2)
    w = build_workload(trace(), 4, bucket_mb=4, dataset_size=1000)
    plan = NodeBased(NodeBasedParams(intra_algorithm="ring", overlap="backward")).plan(w, topo)
    ops = _intra(plan)
    assert len(ops) == 8 and {op.nbytes for op in ops} == {4e6}  # a bucket per layer, per node
    tl = engine.simulate(plan, topo, runtime=MPICH)
    # buckets ready at 6, 8, 10, 12 ms; each 4 MB ring: 2 x (2 us + 2e6 / 100e9 s) = 44 us; the last ends 12.044 ms
    assert sorted({round(tl.start[op.id], 9) for op in ops}) == [6e-3, 8e-3, 10e-3, 12e-3]
    assert tl.makespan == pytest.approx(12e-3 + 2 * (2e-6 + 2e6 / 100e9) + 0.4e-3, rel=1e-9)
    assert "overlapped with backward" in " ".join(NodeBasedParams(overlap="backward").assumed)
    assert "ColossalAI" in " ".join(NodeBasedParams().assumed) and "no overlap" in " ".join(NodeBasedParams().assumed)


# ---- per-epoch evaluation ----------------------------------------------------------------------

def test_per_epoch_evaluation_added_once_per_epoch():
    # K = ceil(1000 / 128) = 8, K' = 3: alg2 exchanges at i = 3, 6, 8; the last one also evaluates.
    # E = eval-s 0.1 s + ceil(256 / 128) = 2 forward passes x 4 ms = 0.108 s, on every rank after the update.
    topo = cluster(4, 1)
    w = build_workload(trace(), 4, dataset_size=1000)
    nb = NodeBased(NodeBasedParams(k_prime=3, eval_s=0.1, eval_samples=256))
    kinds = nb.iterations(w, topo)
    assert [(wt, p.info.kind) for wt, p in kinds] == [(5.0, "local"), (2.0, "exchange"), (1.0, "exchange+eval")]
    assert nb.eval_seconds(w) == pytest.approx(0.108)
    evals = [op for op in kinds[2][1].ops if isinstance(op, Compute) and op.label == "epoch evaluation"]
    assert [op.seconds for op in evals] == pytest.approx([0.108] * 4)
    t = {p.info.kind: engine.simulate(p, topo, runtime=MPICH).makespan for _, p in kinds}
    assert t["exchange+eval"] - t["exchange"] == pytest.approx(0.108, rel=1e-9)
    mean_with = sum(wt * t[p.info.kind] for wt, p in kinds) / 8
    plain = NodeBased(NodeBasedParams(k_prime=3)).iterations(w, topo)
    assert [wt for wt, _ in plain] == [5.0, 3.0]
    mean_without = sum(wt * engine.simulate(p, topo, runtime=MPICH).makespan for wt, p in plain) / 8
    assert mean_with - mean_without == pytest.approx(0.108 / 8, rel=1e-9)  # E / K = 13.5 ms
    assert "adds 13.5 ms to the mean iteration" in " ".join(kinds[0][1].info.assumed)


def test_evaluation_with_a_single_exchange_per_epoch():
    # K' >= K: the only exchange is the last iteration, which then carries the evaluation
    w = build_workload(trace(), 4, dataset_size=1000)
    kinds = NodeBased(NodeBasedParams(k_prime=50, eval_s=1.0)).iterations(w, cluster(4, 1))
    assert [(wt, p.info.kind) for wt, p in kinds] == [(7.0, "local"), (1.0, "exchange+eval")]
    assert "per-epoch evaluation 0 s" in " ".join(NodeBasedParams().assumed)


@pytest.mark.parametrize("opts, msg", [
    ({"k_prime": "0"}, "k-prime: 0 must be a positive integer"),
    ({"k_prime": "-2"}, "k-prime: -2 must be a positive integer"),
    ({"exchange_rule": "every"}, "exchange-rule: 'every' is not valid; valid choices: alg2, footnote"),
    ({"overlap": "backward+forward"}, "overlap: 'backward+forward' is not valid; valid choices: none, backward"),
    ({"eval_s": "-1"}, "eval-s: -1.0 must be a non-negative number of seconds per epoch"),
    ({"eval_samples": "-5"}, "eval-samples: -5 must be a non-negative integer"),
])
def test_bad_options_one_line(opts, msg):
    with pytest.raises(ConfigError) as err:
        make_params(NodeBased, opts)
    assert msg in str(err.value) and "\n" not in str(err.value)
