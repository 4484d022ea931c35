"""Small steps' routes primed in batches (``FlowPricer.prime_steps``, :func:`step_routes_many`) are the arrays
:func:`step_routes` gives one pattern at a time, array by array; and a run that primes them routes fewer batches
and gives the floats of a run that does not.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simcomm import engine
from simcomm.collectives.base import Step
from simcomm.engine import schedule
from simcomm.engine.flow import steps as flow_steps
from simcomm.engine.options import EngineOptions
from simcomm.engine.schedule import step_routes, step_routes_many
from simcomm.runtimes import get_runtime
from simcomm.topologies.base import _KEEP_PAIRS
from simcomm.topologies.presets import preset
from simcomm.topologies.star import star
from simcomm.topologies.two_level import two_level

NCCL = get_runtime("nccl")
TOPOLOGIES = {
    "dgx-a100-hdr": lambda: preset("dgx-a100-hdr", nodes=4, gpus_per_node=8),
    "fat-tree": lambda: two_level(6, 4, intra="pcie", nics_per_node=2, inter="fat-tree"),
    "star": lambda: star(12, "ib-hdr"),
}


def test_a_primed_chunk_is_not_kept_by_the_topology():
    assert schedule.PRIME_CHUNK < _KEEP_PAIRS


@settings(max_examples=30, deadline=None)
@given(name=st.sampled_from(sorted(TOPOLOGIES)), chunk=st.sampled_from([1, 3, 7, 2048]), seed=st.integers(0, 1000))
def test_primed_patterns_are_step_routes_array_by_array(name, chunk, seed):
    topo = TOPOLOGIES[name]()
    rng = np.random.default_rng(seed)
    items = []
    for _ in range(int(rng.integers(1, 12))):
        size = int(rng.integers(2, 9))
        group = rng.choice(topo.n_ranks, size=size, replace=False).astype(np.int64)
        if rng.random() < 0.5:
            group = np.sort(group)
        n = int(rng.integers(0, 12))
        src, dst = rng.integers(0, size, n), rng.integers(0, size, n)
        step = Step.make(src, dst, 1e6)
        items.append((group, group.tobytes(), step))
        if rng.random() < 0.3:  # one pattern twice: primed once
            items.append((group, group.tobytes(), Step.make(src, dst, 2e6)))
    primed: dict = {}
    old = schedule.PRIME_CHUNK
    schedule.PRIME_CHUNK = chunk
    try:
        step_routes_many(topo, items, primed)
    finally:
        schedule.PRIME_CHUNK = old
    alone: dict = {}
    for group, gkey, step in items:
        if len(step):
            step_routes(topo, group, step, alone, gkey)
    assert primed.keys() == alone.keys()
    for key, want in alone.items():
        got = primed[key]
        for a, b in zip(got, want, strict=True):
            assert a.dtype == b.dtype and a.tobytes() == b.tobytes()
        assert not got[3].flags.writeable and not got[4].flags.writeable and not got[5].flags.writeable


def _hierarchical(topo):
    from simcomm.pipeline.baseline import make_strategy
    from simcomm.traces import default_trace
    from simcomm.workload import build_workload

    w = build_workload(default_trace(), topo.n_ranks, batch=8, dataset_size=1000)
    (_, plan), = make_strategy("hierarchical-allreduce", {}).iterations(w, topo)
    return plan


@pytest.mark.parametrize("reference", [frozenset(), frozenset({"shapes", "keep"}), frozenset({"alike_steps"})])
def test_a_run_with_primed_routes_is_the_run_without(reference, monkeypatch):
    calls = [0]
    out = []
    for prime in (True, False):
        topo = preset("dgx-a100-hdr", nodes=4, gpus_per_node=8)
        real = topo.routes

        def routes(src, dst, real=real):
            calls[0] += 1
            return real(src, dst)

        topo.routes = routes  # type: ignore[method-assign]
        if not prime:
            monkeypatch.setattr(flow_steps.StepDerivation, "prime_steps", lambda self, ops, prepared: None)
        calls[0] = 0
        tl = engine.simulate(_hierarchical(topo), topo, options=EngineOptions(runtime=NCCL, reference=reference))
        out.append((tl, calls[0]))
    (fast, n_fast), (ref, n_ref) = out
    assert n_fast < n_ref
    assert fast.start.tobytes() == ref.start.tobytes() and fast.end.tobytes() == ref.end.tobytes()
    assert fast.makespan == ref.makespan and fast.link_class_bytes == ref.link_class_bytes
    assert fast.meta == ref.meta
