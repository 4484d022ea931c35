"""A step of more than ``max_live`` flows run alone depends on its links only through their order and capacities
(``FlowPricer._relabelled_key``), so alike steps on other links share one isolated run, exactly.

* :func:`run_isolated` of a step and of the same step with its links moved to other ids of a larger network, in
  the same order and with the same capacities, gives the same floats bit for bit (finish times, solves, merged
  flows), in every incremental form of the core, with and without an event resolution.  A relabelling that
  swaps two links of different capacities is allowed to differ and has another key.
* ``hierarchical-allreduce``'s lanes (the same tree over each lane's machines, ``max_live`` lowered so that they
  are large steps here) run alone fewer times than with the ``shapes`` reference, to the same timeline.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simcomm import engine
from simcomm.engine.flow import pricer
from simcomm.engine.fluid.core import run_isolated
from simcomm.engine.options import EngineOptions
from simcomm.runtimes import get_runtime
from simcomm.topologies.presets import preset

NCCL = get_runtime("nccl")
MAX_LIVE = 4


@st.composite
def _steps(draw):
    """A network of a few capacities (ties among them), a step of 5-30 flows over it and a monotone embedding of
    its links into a larger network (other links of random capacities around them)."""
    n_links = draw(st.integers(3, 12))
    levels = draw(st.lists(st.sampled_from([1e9, 2.5e10, 5e10, 3e11]), min_size=n_links, max_size=n_links))
    capacity = np.array(levels, dtype=float)
    n = draw(st.integers(MAX_LIVE + 1, 30))
    routes = [draw(st.lists(st.integers(0, n_links - 1), min_size=1, max_size=5)) for _ in range(n)]
    nbytes = np.array(draw(st.lists(st.sampled_from([1e3, 4e6, 4e6, 1e7, 3.3e7]), min_size=n, max_size=n)))
    latency = np.array(draw(st.lists(st.sampled_from([0.0, 1e-6, 2e-6, 5e-6]), min_size=n, max_size=n)))
    spread = draw(st.integers(n_links, 4 * n_links))
    ids = np.sort(np.array(draw(st.lists(st.integers(0, spread + n_links), min_size=n_links, max_size=n_links,
                                         unique=True))))
    seed = draw(st.integers(0, 2**16))
    return capacity, routes, nbytes, latency, ids, seed


def _run(capacity, routes, nbytes, latency, form, resolution):
    lens = np.array([len(r) for r in routes], dtype=np.int64)
    links = np.array([x for r in routes for x in r], dtype=np.int64)
    iso = run_isolated(capacity, nbytes, latency, lens, links, form=form, resolution=resolution, max_live=MAX_LIVE)
    return iso.finish.tobytes(), iso.solves, iso.merged


@settings(max_examples=150, deadline=None)
@given(_steps(), st.sampled_from(["lean", "scalar", "numpy"]), st.sampled_from([0.0, 0.01]))
def test_a_relabelled_step_runs_to_the_same_floats(step, form, resolution):
    capacity, routes, nbytes, latency, ids, seed = step
    big = np.random.default_rng(seed).choice([1e9, 2.5e10, 5e10, 3e11], size=int(ids[-1]) + 3)
    big[ids] = capacity  # link i of the small network is link ids[i] here: the same order, the same capacities
    moved = [[int(ids[x]) for x in r] for r in routes]
    assert _run(capacity, routes, nbytes, latency, form, resolution) == \
        _run(big, moved, nbytes, latency, form, resolution)


def _key(capacity, routes, nbytes, latency):
    from simcomm.engine.schedule import RoutedStep

    class _Pricer:  # what _relabelled_key reads of the pricer
        fam, form, max_live = None, "lean", MAX_LIVE

        class net:  # noqa: N801  (an attribute path, as the pricer's)
            class core:  # noqa: N801
                pass

    _Pricer.net.core.capacity = capacity
    lens = np.array([len(r) for r in routes], dtype=np.int64)
    links = np.array([x for r in routes for x in r], dtype=np.int64)
    n = len(routes)
    routed = RoutedStep(np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64), nbytes, latency, lens, links, 1,
                        np.zeros(0, dtype=np.int64), np.zeros(0), np.full(n, -1, dtype=np.int64))
    return pricer.FlowPricer._relabelled_key(_Pricer(), routed)  # type: ignore[arg-type]


def test_the_key_tells_an_order_or_a_capacity_apart():
    capacity = np.array([1e9, 5e10, 5e10, 3e11, 1e9, 5e10])
    routes = [[0, 1], [1, 2], [2, 3], [0, 3], [1], [2, 0]]
    nb, lat = np.full(6, 4e6), np.zeros(6)
    same = [[{0: 4, 1: 5, 2: 5, 3: 3}.get(x, x) for x in r] for r in routes]  # 1 and 2 merged: another step
    shifted = [[x + 1 for x in r] for r in routes]
    wide = np.concatenate(([7e9], capacity))
    assert _key(capacity, routes, nb, lat) == _key(wide, shifted, nb, lat)  # links moved up by one, in order
    assert _key(capacity, routes, nb, lat) != _key(capacity, same, nb, lat)
    swapped = [[{1: 3, 3: 1}.get(x, x) for x in r] for r in routes]  # 5e10 and 3e11 swap places
    assert _key(capacity, routes, nb, lat) != _key(capacity, swapped, nb, lat)


def _hierarchical(topo):
    from simcomm.pipeline.baseline import make_strategy
    from simcomm.traces import default_trace
    from simcomm.workload import build_workload

    w = build_workload(default_trace(), topo.n_ranks, batch=8, dataset_size=1000)
    (_, plan), = make_strategy("hierarchical-allreduce", {}).iterations(w, topo)
    return plan


@pytest.mark.parametrize("resolution", [0.0, 0.01])
def test_hierarchical_allreduce_lanes_share_their_runs_alone(resolution, monkeypatch):
    runs = [0]

    def isolated(*args, **kwargs):
        if len(args[1]) > MAX_LIVE:
            runs[0] += 1
        return run_isolated(*args, **kwargs)

    monkeypatch.setattr(pricer, "run_isolated", isolated)
    out = []
    for reference in (frozenset(), frozenset({"shapes", "keep"})):
        topo = preset("dgx-a100-hdr", nodes=8, gpus_per_node=8)
        plan = _hierarchical(topo)
        runs[0] = 0
        tl = engine.simulate(plan, topo, options=EngineOptions(runtime=NCCL, resolution=resolution,
                                                              max_live=MAX_LIVE, reference=reference))
        out.append((tl, runs[0]))
    (fast, n_fast), (ref, n_ref) = out
    assert 0 < n_fast < n_ref
    assert fast.start.tobytes() == ref.start.tobytes() and fast.end.tobytes() == ref.end.tobytes()
    assert fast.makespan == ref.makespan and fast.link_class_bytes == ref.link_class_bytes
    assert fast.meta == ref.meta
