"""The emulated suite's workers for every seed strategy: message order, host merges, rates (no root needed)."""

import argparse

import numpy as np
import pytest
from e2e import TABLE_SEEDS, E2ESpec, with_rates
from e2e_sparse import merge

from simcomm.strategies._gossip import fair_peer_table


class _Dist:
    """Stands in for torch.distributed: records every call, moves no bytes."""

    def __init__(self):
        self.calls = []
        self.groups = []

    def new_group(self, ranks):
        self.groups.append(tuple(ranks))
        return len(self.groups) - 1

    def isend(self, tensor, dst, tag=None):
        self.calls.append(("isend", dst) if tag is None else ("isend", dst, tag))
        return self

    def irecv(self, tensor, src, tag=None):
        self.calls.append(("irecv", src) if tag is None else ("irecv", src, tag))
        return self

    def send(self, tensor, dst):
        self.calls.append(("send", dst))

    def recv(self, tensor, src):
        self.calls.append(("recv", src))

    def barrier(self, group=None):
        self.calls.append(("barrier",))

    def reduce(self, tensor, dst, group=None):
        self.calls.append(("reduce", dst, group))

    def broadcast(self, tensor, src, group=None):
        self.calls.append(("broadcast", src, group))

    def wait(self):
        return None


def _rank(strategy, rank, world=4, groups=0):
    torch = pytest.importorskip("torch")
    from e2e_worker import Rank

    a = argparse.Namespace(rank=rank, world=world, strategy=strategy, model="resnet20-cifar", batch=1, per_host=1,
                           groups=groups)
    dist = _Dist()
    return Rank(a, torch, dist), dist


def test_merge_sums_common_indices_and_keeps_the_k_largest():
    v, i = merge(np.array([5.0, -1.0, 2.0], dtype=np.float32), np.array([10, 20, 30], dtype=np.int32),
                 np.array([-4.0, 3.0, 0.5], dtype=np.float32), np.array([20, 40, 10], dtype=np.int32), 3)
    # common: 10 -> 5 + 0.5, 20 -> -1 - 4; others 30 -> 2, 40 -> 3; keep |5.5|, |-5|, |3|
    assert i.tolist() == [10, 20, 40]
    assert v.tolist() == pytest.approx([5.5, -5.0, 3.0])


def test_dpsgd_posts_both_receives_before_both_sends():
    me, dist = _rank("dpsgd", 1)
    assert me.step(1) == "gossip"
    assert dist.calls == [("irecv", 0), ("irecv", 2), ("isend", 0), ("isend", 2)]


def test_crossover_sends_first_then_receives_then_barriers_per_segment():
    me, dist = _rank("crossover-sgd", 2)
    segs = me.helper.segs
    assert len(segs) == 11  # stem, 9 residual blocks, fc (seed 001's "blocks and FC layer")
    assert [len(s) for s in segs][:2] == [3, 6]  # conv1 + bn1 (2); block: 2 convs + 2 bns (2 each)
    me.step(5)
    want = []
    for s in range(len(segs)):
        dest = fair_peer_table(4, 0, 5, s)
        want += [("isend", int(dest[2])), ("recv", int(list(dest).index(2))), ("barrier",)]
    assert dist.calls == want


@pytest.mark.parametrize("rank", [0, 1])
def test_hierarchical_reduces_to_the_root_then_exchanges_among_roots_and_broadcasts_each_segment(rank):
    me, dist = _rank("hierarchical-crossover-sgd", rank, groups=2)
    assert dist.groups == [(0, 1), (2, 3)]
    me.step(3)
    n = len(me.helper.segs)
    calls = dist.calls
    assert calls[0] == ("reduce", 0, 0)
    per_seg = [("isend", 2), ("recv", 2), ("barrier",), ("broadcast", 0, 0)] if rank == 0 \
        else [("barrier",), ("broadcast", 0, 0)]
    assert calls[1:] == per_seg * n  # with 2 groups the roots' derangement is always the 2-cycle


def test_rates_enter_the_trace_per_device_except_the_host_merge():
    from simcomm import traces

    t = with_rates(traces.default_trace(), {"topk": 2e-8, "merge_cpu": 1e-7}, 2.0)
    assert t.meta["compression_rates"] == {"topk": 1e-8, "merge_cpu": 1e-7}
    assert with_rates(t, None, 2.0) is t


def test_every_seed_strategy_has_a_suite_spec():
    from run_seeds import SPECS

    names = {s.strategy for s in SPECS}
    assert {"allreduce", "node-based", "sgp", "dpsgd", "crossover-sgd", "hierarchical-crossover-sgd", "gtopk",
            "gs-sgd", "ps", "ps-layer-drop", "pcnn"} <= names
    assert TABLE_SEEDS >= 4
    with pytest.raises(Exception, match="strategy"):
        E2ESpec("no-such-strategy")


def test_layer_drop_threshold_is_the_last_layer_added_until_the_ratio_is_passed():
    from e2e_psdrop import threshold

    # values 1, 2, 3, 4 with 10, 60, 20, 10 elements: dropped 10, 70, 90, 100 after each; Alg. 1 line 8 stops
    # at the first count *above* 90 % of 100, so 4 (at 3 the count equals 90: not yet passed)
    assert threshold([3.0, 1.0, 4.0, 2.0], [20, 10, 10, 60], 0.9) == 4.0
    assert threshold([3.0, 1.0, 4.0, 2.0], [20, 10, 10, 60], 0.85) == 3.0
    assert threshold([3.0, 1.0], [20, 10], 0.0) == 1.0  # the smallest value: every layer reaches it and goes
    assert threshold([3.0, 1.0], [20, 10], 1.0) == -1.0  # never above the total: invalid, every layer goes


def test_layer_drop_worker_sends_flags_then_one_message_per_tensor():
    me, dist = _rank("ps-layer-drop", 0, world=5)
    assert me.server == 4 and me.workers == 4
    n = len(me.params)
    assert me.step(1) == "every iteration"
    # before iteration 1, the server's whole model, one tensor each (Sec. 4.1)
    assert dist.calls[:n] == [("recv", 4)] * n
    sends = [c for c in dist.calls if c[0] == "isend"]
    assert sends == [("isend", 4)] * (1 + n) and dist.calls[n:2 * n + 1] == sends  # flags, a tensor each
    assert dist.calls[2 * n + 1] == ("recv", 4)  # then the union's flags, then a tensor each
    assert len([c for c in dist.calls if c[0] == "recv"]) == n + 1 + n
    dist.calls.clear()
    assert me.step(2) == "every iteration"  # no model broadcast after the first iteration
    assert dist.calls[:1 + n] == [("isend", 4)] * (1 + n)


def test_layer_drop_server_sends_its_model_to_every_worker_before_iteration_1():
    me, dist = _rank("ps-layer-drop", 4, world=5)
    me.helper._initial()
    assert dist.calls == [("isend", w) for _ in me.params for w in range(4)]


def test_in_run_compute_is_start_to_end_of_backward_of_the_measured_iterations():
    from run_seeds import score, train_compute

    spec = E2ESpec("allreduce", workers=2, warmup=1, iters=2)
    r0 = {"rank": 0, "ends": [0.0, 1.0, 3.0, 6.0], "compute_ends": [0.5, 2.5, 4.0]}
    r1 = {"rank": 1, "ends": [0.0, 1.1, 3.0, 6.1], "compute_ends": [0.4, 1.6, 5.0]}
    # iteration 1 is warm-up; iterations 2 and 3 start at ends[1], ends[2]
    assert train_compute({"spec": spec.__dict__, "ranks": [r0, r1]}) == [[1.5, 1.0], [0.5, 2.0]]
    rows = [{"strategy": "a", "measured": 1.0, "p": 1.1}, {"strategy": "b", "measured": 2.0, "p": 1.0},
            {"strategy": "c", "measured": 1.02, "p": 3.0}]
    s = score(rows, "p")
    # errors 10 %, 50 %, 194 %; a/c are within 5 % so only a/b and b/c count, and both are misordered
    assert s["median"] == pytest.approx(0.5) and s["pairs"] == 2 and s["misordered"] == ["a / b", "b / c"]


def test_ps_worker_pushes_each_tensor_during_backward_and_pulls_each_before_its_forward():
    me, dist = _rank("ps", 1, world=5)
    n = len(me.params)
    me.helper.drain()  # nothing pending before training
    me.step(1)
    pushes = [c for c in dist.calls if c[0] == "isend"]
    assert sorted(c[2] for c in pushes) == list(range(n)) and {c[1] for c in pushes} == {4}
    assert pushes[0][2] > pushes[-1][2]  # backward order: the last tensors go first
    assert [c for c in dist.calls if c[0] == "irecv"] == [("irecv", 4, i) for i in range(n)]
    assert len(me.helper.pulls) == n
    me.helper.active = False
    me.compute()  # a probe's forward consumes the pulls (each layer waits for its own), pushes nothing
    assert not me.helper.pulls and len([c for c in dist.calls if c[0] == "isend"]) == n


class _Collectives(_Dist):
    """Also records the collectives of pcnn's communication thread (outputs zero-filled)."""

    def all_to_all_single(self, out, inp):
        self.calls.append(("alltoall", inp.numel()))
        out.zero_()

    def all_gather_single(self, out, inp):
        self.calls.append(("allgather", inp.numel()))
        out.zero_()


def test_pcnn_posts_as_the_authors_code_then_waits_per_layer_in_the_next_forward():
    torch = pytest.importorskip("torch")
    from e2e_worker import Rank

    a = argparse.Namespace(rank=1, world=4, strategy="pcnn", model="resnet20-cifar", batch=2, per_host=1, groups=0)
    dist = _Collectives()
    me = Rank(a, torch, dist)
    convs = [m.weight.numel() for m in me.model.modules() if isinstance(m, torch.nn.Conv2d)]
    assert len(convs) == 19 and convs[0] == 16 * 3 * 9
    me.helper.drain()  # nothing pending: the thread just stops; a fresh one serves the step
    from e2e_pcnn import CommThread

    me.helper.comm = CommThread(dist)
    me.step(1)
    me.helper.drain()
    # forward: the FC's input activations (N' = 64 x 2 samples); backward: its errors (N = 10 x 2), then each
    # convolution's gradient as backward produces it (last first); after backward: the updated 1/4 slices'
    # all-gathers in forward order, the convolutions' then the FC's (10 x 64 / 4)
    assert dist.calls == [("alltoall", 64 * 2), ("allgather", 10 * 2),
                          *[("alltoall", n) for n in reversed(convs)],
                          *[("allgather", n // 4) for n in convs], ("allgather", 10 * 16)]
    assert not me.helper.gathers and not me.helper.pending
    assert me.compute_end is not None
    me.helper.comm = CommThread(dist)
    dist.calls.clear()
    me.compute()  # a compute probe posts nothing (hooks act only inside training iterations)
    assert dist.calls == []
    me.helper.comm.close()


_GLOO_QUEUE = """
import datetime, sys, torch, torch.distributed as dist
from e2e_pcnn import GlooQueue
store = dist.TCPStore("127.0.0.1", 0, 1, is_master=True, timeout=datetime.timedelta(seconds=30))
dist.init_process_group("gloo", store=store, rank=0, world_size=1)
q = GlooQueue(dist, 0, 1)
send, recv, out = torch.arange(4.0), torch.zeros(4), torch.zeros(3)
a = q.all_to_all(recv, send)
b = q.all_gather(out, torch.tensor([[1.0, 2.0, 3.0]]))
a.wait(); b.wait(); q.close()
print(recv.tolist(), out.tolist())
dist.destroy_process_group()
"""


def test_pcnn_gloo_queue_runs_real_collectives_on_a_group_of_its_own():
    """GlooQueue's private torch calls (ProcessGroupGloo._Options, alltoall_base, _allgather_base) on this torch:
    a one-rank group of its own beside the default one, each call's work waited for, the values moved."""
    pytest.importorskip("torch")
    import os
    import subprocess
    import sys
    from pathlib import Path

    here = Path(__file__).resolve().parents[2] / "benchmarks" / "accuracy"
    run = subprocess.run([sys.executable, "-c", _GLOO_QUEUE], capture_output=True, text=True, timeout=120,
                         cwd=here, env={**os.environ, "PYTHONPATH": str(here)})
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip().splitlines()[-1] == "[0.0, 1.0, 2.0, 3.0] [1.0, 2.0, 3.0]"
