"""Contract over every registered strategy: valid plan, conserved bytes, termination,
determinism, iteration time >= compute critical path, and faster links never slower."""

from __future__ import annotations

import math

import numpy as np
import pytest

from simcomm import engine
from simcomm.links.base import LinkClass
from simcomm.ops import Collective, Compute, Transfer
from simcomm.result import iteration_time
from simcomm.runtimes.mpi import MPICH, resolve
from simcomm.strategies import STRATEGIES, NotApplicable
from simcomm.topologies.full_mesh import full_mesh
from simcomm.workload import build_workload

NAMES = STRATEGIES.names()


def _plans(toy, name, topo_fn, nodes=2, gpus=2, bucket_mb=8.0):
    cls = STRATEGIES.get(name)
    s = cls()
    trace = toy.make_trace(n_layers=4)
    topo = topo_fn(nodes + s.extra_nodes(), gpus)
    w = build_workload(trace, nodes * gpus, bucket_mb=bucket_mb, dataset_size=4 * nodes * gpus * 32 * 3)
    try:
        return s.iterations(w, topo), topo, w
    except NotApplicable as exc:
        pytest.skip(f"{name} not applicable here: {exc}")


def _plan_bytes(plan) -> float:
    total = 0.0
    for op in plan.ops:
        if isinstance(op, Transfer):
            total += op.nbytes
        elif isinstance(op, Collective) and len(op.ranks) > 1:
            alg = resolve(op.kind, op.algorithm, len(op.ranks), op.nbytes)
            total += sum(float(st.nbytes.sum()) * st.repeat for st in alg.steps(len(op.ranks), op.nbytes, op.root))
    return total


@pytest.mark.parametrize("name", NAMES)
def test_plan_valid_and_deterministic(toy, name):
    kinds, topo, _ = _plans(toy, name, toy.two_level)
    assert kinds and all(w > 0 for w, _ in kinds)
    for _, plan in kinds:
        plan.validate()
        a = engine.simulate(plan, topo, seed=3, runtime=MPICH)
        b = engine.simulate(plan, topo, seed=3, runtime=MPICH)
        assert math.isfinite(a.makespan) and a.makespan > 0  # terminates
        assert np.array_equal(a.end, b.end) and a.link_class_bytes == b.link_class_bytes


@pytest.mark.parametrize("name", NAMES)
def test_bytes_sent_equal_bytes_received(toy, name):
    """On a full mesh every transfer crosses one link, so link bytes == bytes sent == bytes received."""
    link = LinkClass("t-mesh", 10e9, 1e-6, "infiniband")
    kinds, topo, _ = _plans(toy, name, lambda n, g: full_mesh(n * g, link), nodes=4, gpus=1)
    for _, plan in kinds:
        tl = engine.simulate(plan, topo, runtime=MPICH)
        carried = sum(tl.link_class_bytes.values())
        assert carried == pytest.approx(_plan_bytes(plan), rel=1e-9, abs=1e-6)


@pytest.mark.parametrize("name", NAMES)
def test_iteration_at_least_compute_critical_path(toy, name):
    kinds, topo, w = _plans(toy, name, toy.two_level)
    for _, plan in kinds:
        tl = engine.simulate(plan, topo, runtime=MPICH)
        t, _ = iteration_time(plan, tl)
        assert t >= (w.forward_s + w.backward_s) * (1 - 1e-12)
        if not plan.info.period and not plan.info.period_ranks:
            per_rank = np.zeros(plan.n_ranks)
            for op in plan.ops:
                if isinstance(op, Compute) and op.stream == "compute":
                    per_rank[op.rank] += op.seconds
            assert t >= per_rank.max() * (1 - 1e-12)


@pytest.mark.parametrize("name", NAMES)
def test_faster_links_never_slower(toy, name):
    kinds, topo, _ = _plans(toy, name, toy.two_level)
    I, E = toy.INTRA, toy.INTER
    fast_intra = LinkClass(I.name + "-x2", I.bandwidth * 2, I.latency / 2, I.family)
    fast_inter = LinkClass(E.name + "-x2", E.bandwidth * 2, E.latency / 2, E.family)
    cls = STRATEGIES.get(name)
    fast = toy.two_level(2 + cls().extra_nodes(), 2, fast_intra, fast_inter)
    for _, plan in kinds:
        slow_t = iteration_time(plan, engine.simulate(plan, topo, runtime=MPICH))[0]
        fast_t = iteration_time(plan, engine.simulate(plan, fast, runtime=MPICH))[0]
        assert fast_t <= slow_t * (1 + 1e-9)
