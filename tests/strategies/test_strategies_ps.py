"""``ps`` and ``ps-layer-drop``: per-tensor timelines computed by hand, sharding, presets, bad input.

Hand cases run on a star: every rank behind one switch, 1 GB/s full-duplex
links with no latency, so a message of n MB alone takes n ms and two messages
sharing a link direction get 0.5 GB/s each (max-min).
"""

from __future__ import annotations

import networkx as nx
import pytest

from simcomm import engine
from simcomm.errors import ConfigError
from simcomm.links.base import LinkClass
from simcomm.ops import Compute, Transfer
from simcomm.result import iteration_time
from simcomm.runtimes.mpi import MPICH
from simcomm.strategies.ps import ParameterServer, PSParams, ready_groups, shard, split_layer, tensors
from simcomm.strategies.ps_layer_drop import LayerDrop, LayerDropParams, union_fraction
from simcomm.topologies.base import Topology
from simcomm.traces.io import save_trace
from simcomm.traces.schema import Layer, Trace
from simcomm.workload import build_workload

MB = 1_000_000
LINK = LinkClass("ps-gbyte", 1e9, 0.0, "ethernet")


def _trace(mb=(1, 2, 3)) -> Trace:
    """Layers L0..L2 in forward order, forward 1 ms and backward 2 ms each, one tensor each (no shapes)."""
    layers = tuple(Layer(f"L{i}", "Linear", m * MB // 4, m * MB, 1e-3, 2e-3, 0.0) for i, m in enumerate(mb))
    return Trace("hand", 8, "fp32", "test", "gpu", "synthetic", layers, iteration_s=9e-3)


def _star(workers: int, servers: int) -> Topology:
    g = nx.Graph()
    g.add_node("sw", kind="switch", machine=None)
    names = [f"w{i}" for i in range(workers)] + [f"ps{k}" for k in range(servers)]
    for m, n in enumerate(names):
        g.add_node(n, kind="rank", machine=m)
        g.add_edge(n, "sw", link=LINK.name)
    return Topology("star", g, {LINK.name: LINK}, tuple(names),
                    meta={"server_ranks": tuple(range(workers, workers + servers))})


def _run(servers: int, **kw):
    w = build_workload(_trace(), 2)
    topo = _star(2, servers)
    plan = ParameterServer(PSParams(servers=servers, server_s_per_byte=1e-10, **kw)).plan(w, topo)
    tl = engine.simulate(plan, topo, runtime=MPICH)
    ops = {(op.label, op.src, op.dst) if isinstance(op, Transfer) else (op.label, op.rank): op.id
           for op in plan.ops}
    return plan, tl, ops


def _end(tl, ops, *key) -> float:
    return float(tl.end[ops[key]]) * 1e3  # ms


def test_one_server_timeline_by_hand():
    """2 workers, 3 tensors (1, 2, 3 MB), server rank 2, FIFO queues, server 1e-10 s/B x (2+1) x n.

    Iteration 1: forward 0-3 ms; backward L2 3-5, L1 5-7, L0 7-9 (gradient-ready order L2, L1, L0).
    Pushes, one at a time into the server, order (tensor, worker):
      L2: w0 5-8, w1 8-11            update L2 11-11.9   (3 x 3 MB x 1e-10 = 0.9 ms)
      L1: w0 11-13 (ready at 7, waits for the queue), w1 13-15    update L1 15-15.6
      L0: w0 15-16, w1 16-17         update L0 17-17.3
    Pulls, one at a time out of the server, overlapping the pushes on the full-duplex link:
      L2: w0 11.9-14.9 (while L1/L0 are pushed), w1 14.9-17.9
      L1: w0 17.9-19.9, w1 19.9-21.9;   L0: w0 21.9-22.9, w1 22.9-23.9
    Iteration 2, w1: forward waits for L0 (23.9), runs 23.9-26.9, backward 26.9-32.9.
    Steady-state iteration = w1's backward end to backward end = 32.9 - 9 = 23.9 ms (w0: 22.9).
    """
    plan, tl, ops = _run(1)
    assert plan.meta["servers"] == (2,) and plan.meta["tensors"] == 3
    push = {(t, r): _end(tl, ops, f"push[{t}/weights]", r, 2) for t in ("L0", "L1", "L2") for r in (0, 1)}
    assert push == pytest.approx({("L2", 0): 8, ("L2", 1): 11, ("L1", 0): 13, ("L1", 1): 15,
                                  ("L0", 0): 16, ("L0", 1): 17})
    assert _end(tl, ops, "update[L2/weights]", 2) == pytest.approx(11.9)
    assert _end(tl, ops, "update[L1/weights]", 2) == pytest.approx(15.6)
    assert _end(tl, ops, "update[L0/weights]", 2) == pytest.approx(17.3)
    pull = {(t, r): _end(tl, ops, f"pull[{t}/weights]", 2, r) for t in ("L0", "L1", "L2") for r in (0, 1)}
    assert pull == pytest.approx({("L2", 0): 14.9, ("L2", 1): 17.9, ("L1", 0): 19.9, ("L1", 1): 21.9,
                                  ("L0", 0): 22.9, ("L0", 1): 23.9})
    # L2's pull to w0 (11.9-14.9) runs while L1 and L0 are still being pushed (11-17)
    assert tl.start[ops[("pull[L2/weights]", 2, 0)]] < tl.end[ops[("push[L0/weights]", 1, 2)]]
    t, _ = iteration_time(plan, tl)
    assert t * 1e3 == pytest.approx(23.9)
    server = [op for op in plan.ops if isinstance(op, Compute) and op.category == "server"]
    assert plan.meta["server_compute_s"] == pytest.approx(sum(op.seconds for op in server)) == pytest.approx(1.8e-3)


def test_two_servers_timeline_by_hand():
    """As above with 2 servers: round-robin in creation order puts L0, L2 on ps0 (rank 2), L1 on ps1 (rank 3).

    FIFO: every endpoint sends one message at a time and receives one at a time, so no link is shared.
    Pushes (deps: gradient ready, the worker's previous push, the server's previous arrival):
      L2: w0 -> ps0 5-8;   w1 -> ps0 8-11 (ps0 busy until 8)
      L1: w0 -> ps1 8-10 (w0 busy until 8, beside w1's L2 push on other links);  w1 -> ps1 11-13
      L0: w0 -> ps0 11-12 (ps0 busy until 11);  w1 -> ps0 13-14
    Updates (3 x n x 1e-10 s/B): ps0 L2 11-11.9, L0 14-14.3; ps1 L1 13-13.6.
    Pulls (deps: update, the server's previous send, the worker's previous receive):
      L2: ps0 -> w0 11.9-14.9, -> w1 14.9-17.9
      L1: ps1 -> w0 14.9-16.9 (w0 receiving L2 until 14.9), -> w1 17.9-19.9
      L0: ps0 -> w0 17.9-18.9 (ps0 sending until 17.9), -> w1 19.9-20.9
    Iteration 2, w1: forward after L0 (20.9), 20.9-23.9, backward 23.9-29.9: 29.9 - 9 = 20.9 ms,
    faster than one server's 23.9 ms.  No link carries two messages, so the analytic fidelity agrees.
    """
    plan, tl, ops = _run(2, queues="fifo")
    assert plan.meta["servers"] == (2, 3)
    push = {(t, r): _end(tl, ops, f"push[{t}/weights]", r, 2 + (t == "L1")) for t in ("L0", "L1", "L2")
            for r in (0, 1)}
    assert push == pytest.approx({("L2", 0): 8, ("L2", 1): 11, ("L1", 0): 10, ("L1", 1): 13,
                                  ("L0", 0): 12, ("L0", 1): 14})
    assert _end(tl, ops, "update[L2/weights]", 2) == pytest.approx(11.9)
    assert _end(tl, ops, "update[L1/weights]", 3) == pytest.approx(13.6)
    assert _end(tl, ops, "update[L0/weights]", 2) == pytest.approx(14.3)
    pull = {(t, r): _end(tl, ops, f"pull[{t}/weights]", 2 + (t == "L1"), r) for t in ("L0", "L1", "L2")
            for r in (0, 1)}
    assert pull == pytest.approx({("L2", 0): 14.9, ("L2", 1): 17.9, ("L1", 0): 16.9, ("L1", 1): 19.9,
                                  ("L0", 0): 18.9, ("L0", 1): 20.9})
    assert iteration_time(plan, tl)[0] * 1e3 == pytest.approx(20.9)
    an = engine.simulate(plan, _star(2, 2), fidelity="analytic", runtime=MPICH)
    assert iteration_time(plan, an)[0] * 1e3 == pytest.approx(20.9)


def test_fifo_analytic_equals_flow_and_concurrent_differs():
    """One server, FIFO queues: no two messages share a link, so the closed form (analytic) is the flow time.

    With concurrent queues the flow fidelity shares the server link (both workers' L2 pushes take 6 ms,
    5-11) while the analytic fidelity prices each push alone (3 ms): it misses the incast.
    """
    plan, tl, _ = _run(1)
    topo = _star(2, 1)
    assert iteration_time(plan, engine.simulate(plan, topo, fidelity="analytic", runtime=MPICH))[0] == \
        pytest.approx(iteration_time(plan, tl)[0], rel=1e-9)
    plan, tl, ops = _run(1, queues="concurrent")
    an = engine.simulate(plan, topo, fidelity="analytic", runtime=MPICH)
    i = ops[("push[L2/weights]", 1, 2)]
    assert (tl.end[i] - tl.start[i]) * 1e3 == pytest.approx(6) and (an.end[i] - an.start[i]) * 1e3 == pytest.approx(3)


def test_queues_auto_is_fifo_with_one_server_only():
    one, _, _ = _run(1)
    two, _, _ = _run(2)
    assert {op.stream for op in one.ops if isinstance(op, Transfer)} == {"push", "pull"}
    assert {op.stream for op in two.ops if isinstance(op, Transfer)} == {"push0", "push1", "pull0", "pull1"}
    assert any("queues auto -> concurrent" in x for x in PSParams(servers=2).assumed)


def test_pull_after_update_waits_for_every_tensor():
    """``pull after-update`` (TF's SyncReplicasOptimizer): the first pull leaves after the last update, 17.3 ms."""
    plan, tl, ops = _run(1, pull="after-update")
    first = min(tl.start[ops[(f"pull[{t}/weights]", 2, r)]] for t in ("L0", "L1", "L2") for r in (0, 1))
    assert first * 1e3 == pytest.approx(17.3)


def test_tensors_split_as_the_frameworks_keep_them():
    from simcomm.traces import load_bundled

    w = build_workload(load_bundled("resnet50-1080ti-roofline"), 1)
    t = tensors(w)
    # 53 conv kernels (no bias) + 53 batch norms x (gamma, beta) + fc kernel and bias = TF's 161 variables
    assert len(t) == 161 and sum(x.nbytes for x in t) == pytest.approx(w.model_bytes)
    assert [x.name for x in t[:3]] == ["conv1/kernel", "bn1/gamma", "bn1/beta"]
    assert t[-1].name == "fc/bias" and t[-1].nbytes == 4 * 1000
    assert len(tensors(build_workload(load_bundled("vgg16-v100-roofline"), 1))) == 32  # 13 conv + 3 fc, with biases
    # conv 3 -> 64, 3x3 with bias: 3*64*9 + 64 = 1792 parameters
    conv = Layer("c", "Conv2d", 1792, 4 * 1792, 0, 0, 0, (3, 32, 32), (64, 32, 32))
    assert split_layer(conv) == (("kernel", 1728 / 1792), ("bias", 64 / 1792))
    assert split_layer(Layer("r", "ReLU", 0, 0, 0, 0)) == ()


def test_sharding_rules():
    class T:
        def __init__(self, n):
            self.nbytes = n
    sizes = [T(n) for n in (10, 1, 1, 1, 5)]
    assert shard(sizes, 2, "round-robin") == (0, 1, 0, 1, 0)
    # greedy by bytes: 10 -> s0; 1 -> s1 (0 < 10); 1 -> s1 (1 < 10); 1 -> s1 (2); 5 -> s1 (3 < 10)
    assert shard(sizes, 2, "greedy-bytes") == (0, 1, 1, 1, 1)


def test_ready_groups_end_at_layers_with_parameters():
    layers = (Layer("a", "Conv2d", 10, 40, 1, 1), Layer("r", "ReLU", 0, 0, 1, 1), Layer("b", "Linear", 10, 40, 1, 1))
    w = build_workload(Trace("g", 1, "fp32", "t", "gpu", "synthetic", layers, 3.0), 1)
    assert ready_groups(w) == ((2,), (1, 0))  # backward: b, then relu + a (a's gradient ends the group)


def test_layer_drop_pulls_the_union_over_workers():
    """R = 0.5, 4 workers, one 4 MB tensor each layer: push 0.5 x 4 MB + 0.5 x 4 B = 2,000,002 B.

    union shared: every worker sends the same layers -> pull = push.
    union independent: some worker sends it with probability 1 - 0.5^4 = 0.9375 ->
    pull = 0.9375 x 4 MB + 0.0625 x 4 B = 3,750,000.25 B.
    """
    w = build_workload(_trace((4, 4, 4)), 4)
    topo = _star(4, 1)
    for union, pull_b in (("shared", 2_000_002.0), ("independent", 3_750_000.25)):
        plan = LayerDrop(LayerDropParams(drop_ratio=0.5, union=union)).plan(w, topo)
        pushes = [op.nbytes for op in plan.ops if isinstance(op, Transfer) and op.label.startswith("push")]
        pulls = [op.nbytes for op in plan.ops if isinstance(op, Transfer) and op.label.startswith("pull")]
        assert len(pushes) == len(pulls) == 3 * 4  # 3 tensors x 4 workers, each direction
        assert pushes == pytest.approx([2_000_002.0] * 12) and pulls == pytest.approx([pull_b] * 12)
        assert plan.meta["pull_bytes"] == pytest.approx(3 * pull_b)
    assert union_fraction([0.1, 0.3], "shared") == 0.3
    assert union_fraction([0.1, 0.3], "independent") == pytest.approx(1 - 0.9 * 0.7)
    with pytest.raises(ConfigError, match="union"):
        LayerDropParams(union="some")
    assert any("R ~ 0.95" in line and "90 % cut" in line for line in LayerDropParams().assumed)


def test_layer_drop_union_from_l1_history():
    """Replayed fractions (test_strategies_pins): a is sent half the iterations, b and c always.

    2 workers, independent: a's union 1 - 0.5^2 = 0.75 -> pull 0.75 x 40 + 0.25 x 4 = 31 B; b 40; c 80.
    """
    layers = tuple(Layer(n, "Linear", p, 4 * p, 1e-3, 2e-3, grad_l1=(l1,) * 4)
                   for n, p, l1 in (("a", 10, 1.0), ("b", 10, 2.0), ("c", 20, 20.0)))
    w = build_workload(Trace("m", 8, "fp32", "d", "gpu", "synthetic", layers, 9e-3), 2)
    push, pull = LayerDrop(LayerDropParams(drop_ratio=0.4, union="independent")).wire_bytes(w)
    assert push == pytest.approx(142.0) and pull == pytest.approx(31 + 40 + 80)


def _drop_run(mb, servers: int, **kw):
    """ps-layer-drop with R = 0 (every layer sent, so ps's bytes) and no overheads, 2 workers."""
    w = build_workload(_trace(mb), 2)
    topo = _star(2, servers)
    params = LayerDropParams(drop_ratio=0.0, worker_overhead=0.0, server_overhead=0.0, server_s_per_byte=1e-10,
                             servers=servers, **kw)
    plan = LayerDrop(params).plan(w, topo)
    tl = engine.simulate(plan, topo, runtime=MPICH)
    ops = {(op.label, op.src, op.dst) if isinstance(op, Transfer) else (op.label, op.rank): op.id
           for op in plan.ops}
    return plan, tl, ops


def test_layer_drop_pushes_after_backward_by_hand():
    """Seed 004 Sec. 4.1: the worker sends its compressed list once backward has ended (9 ms).

    As test_one_server_timeline_by_hand, but every push waits for the end of backward:
      L2: w0 9-12, w1 12-15      update 15-15.9
      L1: w0 15-17, w1 17-19     update 19-19.6
      L0: w0 19-20, w1 20-21     update 21-21.3
    Pulls: L2 w0 15.9-18.9, w1 18.9-21.9; L1 21.9-23.9, 23.9-25.9; L0 25.9-26.9, 26.9-27.9.
    w1: forward 27.9-30.9, backward 30.9-36.9: iteration 36.9 - 9 = 27.9 ms (ps, pushing as
    backward produces each gradient: 23.9).  ``push as-ready`` is ps's schedule.
    """
    plan, tl, ops = _drop_run((1, 2, 3), 1)
    push = {(t, r): _end(tl, ops, f"push[{t}/weights]", r, 2) for t in ("L0", "L1", "L2") for r in (0, 1)}
    assert push == pytest.approx({("L2", 0): 12, ("L2", 1): 15, ("L1", 0): 17, ("L1", 1): 19,
                                  ("L0", 0): 20, ("L0", 1): 21})
    assert float(tl.start[ops[("push[L2/weights]", 0, 2)]]) * 1e3 == pytest.approx(9.0)
    pull = {(t, r): _end(tl, ops, f"pull[{t}/weights]", 2, r) for t in ("L0", "L1", "L2") for r in (0, 1)}
    assert pull == pytest.approx({("L2", 0): 18.9, ("L2", 1): 21.9, ("L1", 0): 23.9, ("L1", 1): 25.9,
                                  ("L0", 0): 26.9, ("L0", 1): 27.9})
    assert iteration_time(plan, tl)[0] * 1e3 == pytest.approx(27.9)
    plan, tl, _ = _drop_run((1, 2, 3), 1, push="as-ready")
    assert iteration_time(plan, tl)[0] * 1e3 == pytest.approx(23.9)
    assert any("push after-backward" in line for line in LayerDropParams().assumed)
    with pytest.raises(ConfigError, match="push"):
        LayerDropParams(push="early")


def test_layer_drop_forward_waits_for_the_whole_list_by_hand():
    """3 servers (L0, L1, L2 one each), concurrent queues, tensors 1, 1, 6 MB; backward ends at 9 ms.

    The 6 pushes start at 9 and share each worker's uplink three ways (1/3 GB/s each): L0 and L1
    (1 MB) end at 12; L2's two pushes then share ps2's ingress, 0.5 GB/s each: 5 MB more, 22;
    update 3 x 6 MB x 1e-10 = 1.8 ms, 23.8; its two pulls share ps2's egress: 6 MB at 0.5, 35.8.
    L0 is pulled by 14.3, but the worker merges the whole list first (Sec. 4.1): forward starts at
    35.8 on both workers, backward ends at 44.8, iteration 35.8 ms.  ``as-ready`` (pushes from 5 ms,
    as backward produces them) lets L0's forward start when its own pull ends, 13.3, and wait only at L2.
    """
    plan, tl, ops = _drop_run((1, 1, 6), 3, queues="concurrent")
    assert _end(tl, ops, "pull[L0/weights]", 2, 0) == pytest.approx(14.3)
    assert _end(tl, ops, "pull[L2/weights]", 4, 0) == pytest.approx(35.8)
    assert float(tl.start[ops[("forward#2[L0]", 0)]]) * 1e3 == pytest.approx(35.8)
    assert iteration_time(plan, tl)[0] * 1e3 == pytest.approx(35.8)
    plan, tl, ops = _drop_run((1, 1, 6), 3, queues="concurrent", push="as-ready")
    assert float(tl.start[ops[("forward#2[L0]", 0)]]) * 1e3 == pytest.approx(13.3)


def test_seed004_ps_preset_structure():
    from simcomm.pipeline import Context, simulate
    from simcomm.scenario import Scenario
    from simcomm.topologies.devices import device_gamma
    from simcomm.topologies.presets import preset

    t = preset("seed004-ps")
    assert t.n_ranks == 5 and [t.machine_of(r) for r in range(5)] == [0, 0, 1, 1, 2]
    assert t.meta["server_ranks"] == (4,) and t.meta["device"] == "gtx-1080-ti"
    assert t.gamma(4) == device_gamma("haswell", 1) and t.gamma(0) == device_gamma("gtx-1080-ti", 2)
    # the server has its own NIC on the 1 GbE network
    assert "eth-1g" in {t.link_names[i] for i in t.route(4, 0)}
    assert preset("seed004-ps", nodes=3).n_ranks == 7  # --nodes counts worker machines
    scn = Scenario(strategy="ps", nodes=2, cluster="seed004-ps", batch=8)
    seen = {}
    res = simulate(scn, ctx=Context(scn), baseline=False, analytic=False,
                   on_timeline=lambda label, weight, plan, tl, topo: seen.update(plan=plan))
    assert res.n_ranks == 4 and res.gpus_per_node == 2 and seen["plan"].meta["servers"] == (4,)
    assert res.breakdown.server > 0


def _toy_file(tmp_path, n_layers=3) -> str:
    layers = tuple(Layer(f"l{i}", "Linear", 250_000, MB, 1e-3, 2e-3, 1e-4) for i in range(n_layers))
    path = tmp_path / "toy.json"
    save_trace(Trace("toy", 8, "fp32", "v100", "gpu", "synthetic", layers, 9.3e-3), path)
    return str(path)


def test_more_servers_than_tensors_one_line_exit_2(tmp_path, cli):
    rc, out, err = cli("run", "-s", "ps", "-n", "2", "--servers", "4", "--trace", _toy_file(tmp_path))
    assert rc == 2 and out == ""
    assert err.startswith("error: ") and err.count("\n") == 1
    assert "servers: 4 is more than the 3 parameter tensors" in err


def test_custom_topology_file_gets_a_server_node(tmp_path, cli):
    """Two machines (rank - PCIe - NIC - 10 GbE - switch); placement own adds a third wired the same way."""
    f = tmp_path / "c.toml"
    edges = (("g0", "n0", "pcie3"), ("n0", "sw", "eth-10g"), ("g1", "n1", "pcie3"), ("n1", "sw", "eth-10g"))
    f.write_text('ranks = ["g0", "g1"]\n[nodes]\nsw = "switch"\n'
                 'g0 = { kind = "rank", machine = 0 }\nn0 = { kind = "nic", machine = 0 }\n'
                 'g1 = { kind = "rank", machine = 1 }\nn1 = { kind = "nic", machine = 1 }\n'
                 + "".join(f'[[edges]]\na = "{a}"\nb = "{b}"\nlink = "{k}"\n' for a, b, k in edges))
    from simcomm.pipeline import build_cluster
    from simcomm.scenario import Scenario

    topo = build_cluster(Scenario(strategy="ps", cluster=str(f)), 2, 1)
    assert topo.n_ranks == 3 and topo.meta["server_ranks"] == (2,) and topo.machine_of(2) == 2
    assert [topo.link_names[i] for i in topo.route(2, 0)] == ["pcie3", "eth-10g", "eth-10g", "pcie3"]
    rc, out, err = cli("run", "-s", "ps", "--cluster", str(f), "--trace", _toy_file(tmp_path), "--json",
                       "--no-baseline")
    assert rc == 0, err
    assert '"n_ranks": 2' in out
    # ranks wired only to each other: nowhere to attach a server
    g = tmp_path / "mesh.toml"
    g.write_text('ranks = ["a", "b"]\n[nodes]\na = "rank"\nb = "rank"\n[[edges]]\na = "a"\nb = "b"\n'
                 'link = "eth-10g"\n')
    rc, out, err = cli("run", "-s", "ps", "--cluster", str(g), "--trace", _toy_file(tmp_path))
    assert rc == 2 and err.count("\n") == 1 and "needs a network switch" in err
    rc, out, err = cli("run", "-s", "ps", "--cluster", str(g), "--trace", _toy_file(tmp_path),
                       "--placement", "colocated", "--no-baseline")
    assert rc == 0, err
