"""PCNN (seed 003): FC and conv communication, Eq. 11 criterion, overlap, errors."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simcomm.errors import PlanError
from simcomm.ops import Collective
from simcomm.runtimes.mpi import MPICH
from simcomm.strategies import STRATEGIES
from simcomm.strategies.base import make_params
from simcomm.strategies.pcnn import fc_criterion, pcnn_conv_cost, pcnn_fc_cost, rabenseifner_cost, units_of


def colls(plan, kind, label=""):
    return [op for op in plan.ops if isinstance(op, Collective) and op.kind == kind and label in op.label]


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 5000), st.integers(1, 5000), st.integers(1, 4096), st.sampled_from([2, 4, 8, 64, 1024]))
def test_eq11_is_the_bandwidth_comparison(n, n_prev, k, p):
    pc = pcnn_fc_cost(n, n_prev, k, p, 0.0, 1.0)
    ar = rabenseifner_cost(n * n_prev, p, 0.0, 1.0)
    if abs(pc - ar) > 1e-9 * ar:
        assert fc_criterion(n, n_prev, k, p) == (pc < ar)


def test_vgg_fc1_satisfies_eq11():
    # seed 003 Sec. IV-B-1: N' = 25088, N = 4096, K = 256, 392 MB
    assert fc_criterion(4096, 25088, 256, 8)
    assert pytest.approx(392, abs=0.1) == 4096 * 25088 * 4 / 2**20
    assert not fc_criterion(64, 64, 8192, 4)


def test_eq12_equals_rabenseifner_bandwidth():
    assert pcnn_conv_cost(1e6, 8, 0, 1) == pytest.approx(rabenseifner_cost(1e6, 8, 0, 1))


def test_fc_ops_match_eqs_5_to_7(make_workload, mesh, toy):
    n, n_prev, k, p = 4096, 25088, 256, 8
    w = make_workload(p, toy.fc_trace(n, n_prev, batch=k), scaling="strong")
    assert w.batch == k // p
    plan = STRATEGIES.get("pcnn")().plan(w, mesh(p))
    (a2a,) = colls(plan, "alltoall")
    err, par = colls(plan, "allgather", "errors"), colls(plan, "allgather", "params")
    assert a2a.nbytes == n_prev * k / p * 4                  # Eq. 5: this rank's N' x K/P block
    assert err[0].nbytes == n * k * 4                         # Eq. 6: gathered N x K
    assert par[0].nbytes == (n * n_prev + n) * 4              # Eq. 7: gathered N x N' (+ bias)
    moved = (a2a.nbytes + err[0].nbytes + par[0].nbytes) * (p - 1) / p
    assert moved < 2 * (p - 1) / p * w.model_bytes           # beats all-reduce (Eq. 11 holds)


def _comm_exposed(name, opts, w, topo):
    from simcomm.engine import simulate

    cls = STRATEGIES.get(name)
    return simulate(cls(make_params(cls, opts)).plan(w, topo), topo, runtime=MPICH).makespan


@pytest.mark.parametrize("n, n_prev, k, wins", [(1024, 4096, 64, True), (64, 64, 4096, False)])
def test_pcnn_beats_allreduce_exactly_when_eq11(n, n_prev, k, wins, make_workload, mesh, toy):
    p = 4
    assert fc_criterion(n, n_prev, k, p) == wins
    w = make_workload(p, toy.fc_trace(n, n_prev, batch=k), scaling="strong")
    pc = _comm_exposed("pcnn-no-overlap", {}, w, mesh(p))
    ar = _comm_exposed("allreduce", {"overlap": "none"}, w, mesh(p))
    assert (pc < ar) == wins


def test_overlap_helps(make_workload, mesh, toy):
    names = ("conv1", "layer1.0.conv1", "layer1.1.conv1", "layer2.0.conv1")
    w = make_workload(4, toy.toy_trace(names), bucket_mb=5)
    topo = mesh(4)
    assert _comm_exposed("pcnn", {}, w, topo) < _comm_exposed("pcnn-no-overlap", {}, w, topo)


def test_conv_units_follow_buckets(make_workload, mesh, toy):
    w = make_workload(4, toy.toy_trace(), bucket_mb=4)            # 4 MB layers: one per bucket
    assert [k for k, _ in units_of(w)] == ["conv"] * 4
    plan = STRATEGIES.get("pcnn")().plan(w, mesh(4))
    assert len(colls(plan, "alltoall", "gradient")) == 4
    assert all(c.nbytes == 4e6 for c in colls(plan, "allgather", "params"))
    w1 = make_workload(4, toy.toy_trace(), bucket_mb=0)           # one bucket: one unit
    assert len(units_of(w1)) == 1


def test_missing_shapes_is_one_line_error(make_workload, mesh, toy):
    w = make_workload(4, toy.fc_trace(16, 32, batch=8, shapes=False))
    with pytest.raises(PlanError) as err:
        STRATEGIES.get("pcnn")().plan(w, mesh(4))
    assert "activation shapes" in str(err.value) and "\n" not in str(err.value)


def test_slice_update_is_one_pth(make_workload, mesh, toy):
    plan = STRATEGIES.get("pcnn")().plan(make_workload(4, toy.toy_trace(), bucket_mb=0), mesh(4))
    ups = [op for op in plan.ops if getattr(op, "label", "").startswith("slice update")]
    assert len(ups) == 4 and all(op.seconds == pytest.approx(4e-4 / 4) for op in ups)


# ---- issue 12: the FC volume ratio, the posting point of the activations, FIFO, no-overlap ----------

def test_fc1_volume_ratio_from_the_cost_functions():
    from simcomm.strategies.pcnn import fc_volume_ratio

    # VGG-16 FC1, N = 4096, N' = 25088, K = 256: NN' = 102 760 448 words
    # P = 16: 2 NN' / (N'K/P + NK + NN') = 205 520 896 / (401 408 + 1 048 576 + 102 760 448) = 1.97217
    assert fc_volume_ratio(4096, 25088, 256, 16) == pytest.approx(205_520_896 / 104_210_432)
    assert fc_volume_ratio(4096, 25088, 256, 16) == pytest.approx(1.97217, abs=1e-5)
    # P = 256: 205 520 896 / (25 088 + 1 048 576 + 102 760 448) = 1.97932 (not the 70.9-95.7x of N N'/(N'K/P + NK))
    assert fc_volume_ratio(4096, 25088, 256, 256) == pytest.approx(1.97932, abs=1e-5)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 5000), st.integers(1, 5000), st.integers(1, 4096), st.sampled_from([2, 4, 8, 64, 1024]))
def test_fc_volume_ratio_below_two_and_above_one_iff_eq11(n, n_prev, k, p):
    from simcomm.strategies.pcnn import fc_volume_ratio

    r = fc_volume_ratio(n, n_prev, k, p)
    assert 0 < r < 2  # PCNN all-gathers N N' parameters itself, so it can at most halve the all-reduce's words
    if abs(r - 1) > 1e-9:
        assert (r > 1) == fc_criterion(n, n_prev, k, p)


def _two_unit_workload(make_workload):
    from simcomm.traces.schema import Layer, Trace

    conv = Layer("conv", "Conv2d", 1000, 4000, 1e-3, 2e-3, 1e-4, (8,), (16,))
    fc = Layer("fc", "Linear", 16 * 8 + 8, 4 * (16 * 8 + 8), 1e-3, 2e-3, 1e-4, (16,), (8,))
    return make_workload(4, Trace("cf", 8, "float32", "test", "gpu", "synthetic", (conv, fc), iteration_s=6.2e-3))


def test_activation_alltoall_posted_when_its_inputs_exist(make_workload, mesh):
    w = _two_unit_workload(make_workload)
    plan = STRATEGIES.get("pcnn")().plan(w, mesh(4))
    (a2a,) = colls(plan, "alltoall", "activations")
    fwd = {op.id: op.label for op in plan.ops if getattr(op, "label", "").startswith("forward")}
    # after the previous unit's forward (the FC layer's input), not after the FC layer's own forward
    assert sorted(fwd[d] for d in a2a.deps if d in fwd) == ["forward[0]"] * 4


def test_one_communication_thread_runs_fifo(make_workload, mesh, toy):
    from simcomm.engine import simulate

    names = ("conv1", "layer1.0.conv1", "layer1.1.conv1", "layer2.0.conv1")
    w = make_workload(4, toy.toy_trace(names), bucket_mb=5)
    plan = STRATEGIES.get("pcnn")().plan(w, mesh(4))
    tl = simulate(plan, mesh(4), runtime=MPICH)
    cs = [op for op in plan.ops if isinstance(op, Collective)]
    assert all(op.stream == "comm" for op in cs)
    for a, b in zip(cs, cs[1:], strict=False):  # in posting order, never two at once
        assert tl.end[a.id] <= tl.start[b.id] + 1e-15


def test_no_overlap_serialises_compute_and_communication(make_workload, mesh, toy):
    from simcomm.engine import simulate
    from simcomm.ops import Compute

    names = ("conv1", "layer1.0.conv1", "layer1.1.conv1", "layer2.0.conv1")
    w = make_workload(4, toy.toy_trace(names), bucket_mb=5)
    plan = STRATEGIES.get("pcnn-no-overlap")().plan(w, mesh(4))
    tl = simulate(plan, mesh(4), runtime=MPICH)
    compute = sum(op.seconds for op in plan.ops if isinstance(op, Compute) and op.rank == 0)
    comm = sum(tl.end[op.id] - tl.start[op.id] for op in plan.ops if isinstance(op, Collective))
    assert tl.makespan == pytest.approx(compute + comm, rel=1e-9)
