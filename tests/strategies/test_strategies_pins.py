"""Hand-computed pins for the workload stage, the baseline strategies and transport stacks."""

from __future__ import annotations

from dataclasses import replace

import pytest

from simcomm import engine
from simcomm.errors import ConfigError
from simcomm.ops import Collective, Transfer
from simcomm.result import iteration_time
from simcomm.runtimes.mpi import MPICH
from simcomm.stacks import apply_stack, get_stack
from simcomm.strategies import STRATEGIES, NotApplicable
from simcomm.strategies.base import make_params
from simcomm.strategies.node_based import NodeBased, NodeBasedParams, exchanges_per_epoch
from simcomm.strategies.ps import ParameterServer, PSParams
from simcomm.strategies.ps_layer_drop import LayerDrop, LayerDropParams, sent_fractions, threshold
from simcomm.traces.schema import Layer, Trace
from simcomm.workload import build_workload

MB4 = 4_000_000


# ---- workload --------------------------------------------------------------------------------

def test_weak_scaling_keeps_trace_batch(toy):
    w = build_workload(toy.make_trace(), 4, dataset_size=1000)
    assert w.batch == 32 and w.global_batch == 128
    assert w.forward_s == pytest.approx(4e-3) and w.backward_s == pytest.approx(8e-3)
    assert w.iterations_per_epoch == 8  # ceil(1000 / 128)


def test_strong_scaling_proportional_without_by_batch(toy):
    w = build_workload(toy.make_trace(), 4, scaling="strong", global_batch=64)
    assert w.batch == 16
    assert w.layers[0].forward_s == pytest.approx(0.5e-3) and w.layers[0].backward_s == pytest.approx(1e-3)


def test_strong_scaling_fits_line_through_by_batch():
    layer = Layer("fc", "Linear", 10, 40, 1.0e-3, 2.0e-3, by_batch=((16, 0.6e-3, 1.2e-3), (32, 1.0e-3, 2.0e-3)))
    tr = Trace("m", 32, "fp32", "d", "gpu", "synthetic", (layer,), 3e-3)
    w = build_workload(tr, 4, scaling="strong", global_batch=32)  # 8 per rank
    # t(b) = t0 + b t1: forward 0.2 ms + 8 x 0.025 ms, backward 0.4 ms + 8 x 0.05 ms
    assert w.layers[0].forward_s == pytest.approx(0.4e-3)
    assert w.layers[0].backward_s == pytest.approx(0.8e-3)


@pytest.mark.parametrize("mb, buckets", [(8, ((3, 2), (1, 0))), (5, ((3, 2), (1, 0))),
                                          (0, ((3, 2, 1, 0),)), (1, ((3,), (2,), (1,), (0,)))])
def test_buckets_in_gradient_ready_order(toy, mb, buckets):
    assert build_workload(toy.make_trace(), 2, bucket_mb=mb).buckets == buckets


@pytest.mark.parametrize("kwargs", [dict(compute_scale=[1.0]), dict(scaling="diagonal"),
                                    dict(scaling="strong", global_batch=2), dict(bucket_mb=-1),
                                    dict(dataload_s=-1.0), dict(global_batch=64)])
def test_workload_bad_input(toy, kwargs):
    with pytest.raises(ConfigError):
        build_workload(toy.make_trace(), 4, **kwargs)


def test_dataload_blocking_adds_and_overlap_hides(toy):
    topo = toy.two_level(1, 1)
    t = {}
    for overlap in (False, True):
        w = build_workload(toy.make_trace(), 1, dataload_s=5e-3, dataload_overlap=overlap)
        plan = STRATEGIES.get("allreduce")().plan(w, topo)
        t[overlap] = engine.simulate(plan, topo, runtime=MPICH).makespan
    assert t[False] == pytest.approx(12.4e-3 + 5e-3)  # fwd 4 + bwd 8 + update 0.4 + load 5 ms
    assert t[True] == pytest.approx(12.4e-3)  # loading the next batch is hidden


# ---- node-based ------------------------------------------------------------------------------

@pytest.mark.parametrize("k, kp, x, footnote", [(100, 50, 2, 3), (100, 100, 1, 1), (100, 200, 1, 1), (10, 3, 4, 4),
                                                 (8, 1, 8, 8)])
def test_node_based_exchange_count(k, kp, x, footnote):
    # default rule alg2: i mod K' = 0 or i = K (K = 100, K' = 50: i = 50, 100); footnote 1: 1 + floor(K/K')
    assert exchanges_per_epoch(k, kp) == x
    assert exchanges_per_epoch(k, kp, "footnote") == footnote


def test_node_based_iteration_kinds_weights(toy):
    w = build_workload(toy.make_trace(), 4, dataset_size=1000)  # K = 8
    kinds = NodeBased(NodeBasedParams(k_prime=3)).iterations(w, toy.two_level(4, 1))
    assert [(wt, p.info.kind) for wt, p in kinds] == [(5.0, "local"), (3.0, "exchange")]


def test_node_based_one_gpu_per_node_has_no_intranode_traffic(toy):
    topo = toy.two_level(4, 1)
    w = build_workload(toy.make_trace(), 4, dataset_size=1000)
    local, exchange = (p for _, p in NodeBased().iterations(w, topo))
    assert not any(isinstance(op, (Collective, Transfer)) for op in local.ops)
    assert engine.simulate(local, topo, runtime=MPICH).link_class_bytes.get("nvlink", 0.0) == 0.0
    coll = [op for op in exchange.ops if isinstance(op, Collective)]
    assert len(coll) == 1 and coll[0].ranks == (0, 1, 2, 3) and coll[0].nbytes == 4 * MB4


def test_node_based_intranode_groups_with_two_gpus(toy):
    topo = toy.two_level(2, 2)
    w = build_workload(toy.make_trace(), 4, bucket_mb=8, dataset_size=1000)
    local = NodeBased().plan(w, topo)
    groups = sorted({op.ranks for op in local.ops if isinstance(op, Collective)})
    assert groups == [(0, 1), (2, 3)]
    assert engine.simulate(local, topo, runtime=MPICH).link_class_bytes.get("infiniband", 0.0) == 0.0


def test_node_based_bad_k_prime():
    with pytest.raises(ConfigError, match="k-prime"):
        NodeBasedParams(k_prime=0)
    with pytest.raises(ConfigError, match="k-prime"):
        make_params(NodeBased, {"k_prime": "-3"})


# ---- parameter server ------------------------------------------------------------------------

def test_ps_incast_shows_on_server_link(toy):
    """4 workers x 4 tensors of 4 MB into one server behind one 10 GB/s NIC.

    FIFO (default): the server takes one message at a time, so each push runs
    alone (0.4 ms + route latency) and the 16 pushes take >= 16 x 0.4 = 6.4 ms.
    concurrent: the 4 pushes of a tensor share the server link, ~4 x 0.4 ms each.
    """
    topo = toy.two_level(5, 1)  # 4 workers + 1 server node
    w = build_workload(toy.make_trace(), 4)
    alone = MB4 / toy.INTER.bandwidth
    plan = ParameterServer().plan(w, topo)
    assert plan.meta["servers"] == (4,) and plan.meta["tensors"] == 4
    tl = engine.simulate(plan, topo, runtime=MPICH)
    pushes = sorted((op for op in plan.ops if isinstance(op, Transfer) and op.label.startswith("push")),
                    key=lambda op: tl.start[op.id])
    assert len(pushes) == 16 and all(op.dst == 4 and op.nbytes == MB4 for op in pushes)
    for a, b in zip(pushes, pushes[1:], strict=False):
        assert tl.start[b.id] >= tl.end[a.id] - 1e-12  # one message at a time
    assert tl.end[pushes[-1].id] - tl.start[pushes[0].id] >= 16 * alone
    an = engine.simulate(plan, topo, fidelity="analytic", runtime=MPICH)  # the closed form carries the incast too
    assert an.end[pushes[-1].id] - an.start[pushes[0].id] >= 16 * alone
    conc = ParameterServer(PSParams(queues="concurrent")).plan(w, topo)
    tc = engine.simulate(conc, topo, runtime=MPICH)
    first = [op for op in conc.ops if isinstance(op, Transfer) and op.label == "push[l3/weights]"]
    assert len(first) == 4
    for op in first:
        assert tc.duration(op.id) == pytest.approx(4 * alone, rel=0.02)


def test_ps_more_servers_than_ranks_or_tensors(toy):
    w = build_workload(toy.make_trace(), 4)
    with pytest.raises(ConfigError, match="servers"):
        ParameterServer(PSParams(servers=5, placement="colocated")).plan(w, toy.two_level(4, 1))
    with pytest.raises(ConfigError, match="more than the 4 parameter tensors"):
        ParameterServer(PSParams(servers=5, placement="own")).plan(w, toy.two_level(9, 1))
    with pytest.raises(ConfigError, match="servers"):
        PSParams(servers=0)
    with pytest.raises(ConfigError, match="queues"):
        PSParams(queues="lifo")


# ---- layer dropping --------------------------------------------------------------------------

def test_threshold_alg1():
    # sorted ascending: 0.1 (10 elements) then 0.2 (10): 20 > 0.4 x 40 after the second
    assert threshold([0.1, 0.2, 1.0], [10, 10, 20], 0.4) == 0.2
    assert threshold([0.1], [10], 1.0) == -1.0


def test_sent_fractions_replay_accumulators():
    l1 = [(1.0,) * 4, (2.0,) * 4, (20.0,) * 4]  # means 0.1, 0.2, 1.0
    assert sent_fractions(l1, [10, 10, 20], 0.4, 100) == [0.5, 1.0, 1.0]
    # a layer without parameters (a ReLU) carries one placeholder entry, not a history: it must not cut
    # the replay to one iteration (which would give a 0.0, never 0.5)
    l1 = [(1.0,) * 4, (0.0,), (2.0,) * 4, (20.0,) * 4]
    assert sent_fractions(l1, [10, 0, 10, 20], 0.4, 100) == [0.5, 0.0, 1.0, 1.0]


def test_layer_drop_sends_expected_bytes_from_l1():
    layers = tuple(Layer(n, "Linear", p, 4 * p, 1e-3, 2e-3, grad_l1=(l1,) * 4)
                   for n, p, l1 in (("a", 10, 1.0), ("b", 10, 2.0), ("c", 20, 20.0)))
    w = build_workload(Trace("m", 8, "fp32", "d", "gpu", "synthetic", layers, 9e-3), 2)
    s = LayerDrop(LayerDropParams(drop_ratio=0.4))
    # a: half of 40 B plus half a 4 B placeholder; b 40 B; c 80 B
    assert s.wire_bytes(w) == (pytest.approx(142.0), pytest.approx(142.0))


def test_layer_drop_sends_expected_bytes_from_ratio(toy):
    w = build_workload(toy.make_trace(), 4)
    push, pull = LayerDrop().wire_bytes(w)
    assert push == pull == pytest.approx(4 * (0.1 * MB4 + 0.9 * 4))


def test_layer_drop_overheads(toy):
    w = build_workload(toy.make_trace(), 4)
    ps, ld = ParameterServer(), LayerDrop()
    assert ld.worker_workload(w).scale(0) == pytest.approx(1.05)
    assert ld.server_seconds(w, 1e6) == pytest.approx(ps.server_seconds(w, 1e6) * 1.15)
    with pytest.raises(ConfigError, match="drop-ratio"):
        LayerDropParams(drop_ratio=1.5)


# ---- hierarchical, options, stacks -----------------------------------------------------------

def test_hierarchical_not_applicable_with_one_gpu_per_node(toy):
    w = build_workload(toy.make_trace(), 4)
    with pytest.raises(NotApplicable):
        STRATEGIES.get("hierarchical-allreduce")().plan(w, toy.two_level(4, 1))


def test_foreign_option_is_one_line_error():
    with pytest.raises(ConfigError, match="valid options: algorithm, bucket-mb, overlap"):
        make_params(STRATEGIES.get("allreduce"), {"k_prime": "5"})


def test_backward_forward_overlap_hides_more(toy):
    topo = toy.two_level(2, 2)
    w = build_workload(toy.make_trace(), 4, bucket_mb=4)
    cls = STRATEGIES.get("allreduce")
    t = {ov: iteration_time(*(lambda p: (p, engine.simulate(p, topo, runtime=MPICH)))(cls(make_params(cls, {"overlap": ov}))
                                                                      .plan(w, topo)))[0]
         for ov in ("none", "backward", "backward+forward")}
    assert t["backward+forward"] <= t["backward"] * (1 + 1e-9) and t["backward"] <= t["none"] * (1 + 1e-9)
    assert t["backward+forward"] >= 12.4e-3 - 1e-12


def test_stack_effective_links(toy):
    topo = toy.two_level(2, 1)
    eff = apply_stack(topo, get_stack("nccl"))
    inter = [lc for lc in eff.links.values() if lc.family == "infiniband"]
    assert [lc.bandwidth for lc in inter] == [pytest.approx(9.6e9)] * len(inter)
    # internode message: 3 us network overhead + 3 us intranode (two rank ends) on top of the wire
    assert eff.route_latency(0, 1) - topo.route_latency(0, 1) == pytest.approx(6e-6)
    capped = apply_stack(topo, get_stack("cpu-ps"))
    assert {lc.bandwidth for lc in capped.links.values() if lc.family == "infiniband"} == {0.42e9}
    assert apply_stack(topo, get_stack("ideal")) is topo
    with pytest.raises(ConfigError):
        replace(get_stack("nccl"), efficiency=1.5)
