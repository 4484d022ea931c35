"""Two exact speed-ups for many small flow runs on one topology (``simcomm plan``'s estimate runs ~3 000).

* Kept steps: the routed steps of small collective preparations and their runs alone on the network are kept
  with the topology for later runs (``FlowPricer._steps``, ``_isolated_period``; the ``keep`` reference turns
  it off).  A run after others on the same topology gives the floats and statistics of the same run on a fresh
  topology, bit for bit.
* ``stop_after``: the run ends once the named ops have ended; their times are the full run's, bit for bit,
  and what had not ended by then is NaN.
"""

from __future__ import annotations

import numpy as np
import pytest

from simcomm import engine
from simcomm.errors import ConfigError
from simcomm.ops import PlanBuilder
from simcomm.runtimes import NcclRuntime
from simcomm.stacks import apply_stack, get_stack
from simcomm.topologies.two_level import two_level


def _topo():
    return apply_stack(two_level(2, 8, intra="nvswitch", nic_link="ib-hdr", nics_per_node=8, device="h100",
                                 inter="rail"), get_stack("nccl"))


def _pair(tp_bytes: float, dp_bytes: float, since: float = 0.0):
    """The estimate's two-collective run: TP all-reduces over pairs of GPUs of both nodes (started ``since``
    after) beside a reduce-scatter over each TP lane's 8 data-parallel ranks; (plan, TP op ids)."""
    b = PlanBuilder(16)
    tp = [b.collective("allreduce", (r, r + 1), tp_bytes, stream="tp",
                       after=[b.compute(x, since) for x in (r, r + 1)] if since > 0 else ())
          for r in range(0, 16, 2)]
    for lane in (0, 1):
        b.collective("reduce_scatter", tuple(range(lane, 16, 2)), dp_bytes, stream="dp")
    return b.build(kind="price"), tp


def _same(a, b) -> None:
    assert np.array_equal(a.start, b.start, equal_nan=True) and np.array_equal(a.end, b.end, equal_nan=True)
    assert a.makespan == b.makespan
    assert a.meta == b.meta
    assert a.link_class_bytes == b.link_class_bytes


CASES = [(3.2e7, 2.5e7, 0.0), (3.2e7, 2.5e7, 2e-4), (4e6, 1e8, 0.0), (3.2e7, 1.6e7, 1e-3)]


@pytest.mark.parametrize("link_bytes", [True, False])
def test_a_run_after_others_on_the_topology_gives_a_fresh_runs_floats(link_bytes):
    shared, alone = _topo(), 0
    for case in CASES + CASES[::-1]:  # each case after every other, some twice
        plan, _ = _pair(*case)
        after = engine.simulate(plan, shared, runtime=NcclRuntime(), link_bytes=link_bytes)
        fresh = engine.simulate(plan, _topo(), runtime=NcclRuntime(), link_bytes=link_bytes)
        plain = engine.simulate(plan, shared, runtime=NcclRuntime(), link_bytes=link_bytes, reference={"keep"})
        _same(after, fresh)
        _same(after, plain)
        alone += after.meta.get("isolated_runs", 0)
    assert alone > 0  # kept runs alone stood in for some (counted as their own runs, as a fresh run counts them)


def test_kept_steps_are_reused():
    from simcomm.engine.flow import pricer

    topo = _topo()
    plan, _ = _pair(3.2e7, 1.6e7, 1e-3)  # the buckets' later steps run alone (isolated runs)
    engine.simulate(plan, topo, runtime=NcclRuntime())
    steps, runs = next(iter(pricer._KEPT_STEPS[topo].values()))
    assert steps and any(ran is not None for _, ran in runs.values())
    engine.simulate(plan, topo, runtime=NcclRuntime(), reference={"keep"})
    assert len(pricer._KEPT_STEPS[topo]) == 1  # the reference neither reads nor adds


@pytest.mark.parametrize("case", CASES)
def test_stop_after_gives_the_watched_ops_ends_of_the_full_run(case):
    plan, tp = _pair(*case)
    full = engine.simulate(plan, _topo(), runtime=NcclRuntime(), link_bytes=False)
    cut = engine.simulate(plan, _topo(), runtime=NcclRuntime(), link_bytes=False, stop_after=frozenset(tp))
    assert [cut.end[i] for i in tp] == [full.end[i] for i in tp]
    assert [cut.start[i] for i in tp] == [full.start[i] for i in tp]
    last = max(full.end[i] for i in tp)
    if case != CASES[3]:  # the buckets go on after the TP collectives: the run is cut short
        assert last < full.makespan and np.isnan(cut.end).any()
    assert cut.makespan == np.nanmax(cut.end)
    done = ~np.isnan(cut.end)
    assert np.array_equal(cut.end[done], full.end[done])  # whatever ended before the stop ended as in full
    assert (cut.end[done] <= last).all()


def test_stop_after_every_op_is_the_full_run():
    plan, _ = _pair(3.2e7, 2.5e7)
    full = engine.simulate(plan, _topo(), runtime=NcclRuntime())
    _same(engine.simulate(plan, _topo(), runtime=NcclRuntime(), stop_after=frozenset(range(len(plan.ops)))), full)


@pytest.mark.parametrize("bad, words", [({99}, "op 99 is not in the plan"), ({-1}, "must be a set of op ids"),
                                        ("3", "must be a set of op ids"), ({True}, "must be a set of op ids")])
def test_stop_after_refuses_what_is_not_an_op(bad, words):
    plan, _ = _pair(3.2e7, 2.5e7)
    with pytest.raises(ConfigError, match=words):
        engine.simulate(plan, _topo(), runtime=NcclRuntime(), stop_after=bad)
