"""Link-usage counters (engine option record_link_usage) and the late-event scheduling of the live network."""

from itertools import pairwise

import numpy as np
import pytest
import simpy
from hypothesis import given, settings
from hypothesis import strategies as st

from simcomm.engine import simulate
from simcomm.engine.flow.network import Environment, LateEvent, LiveNetwork
from simcomm.links.base import LinkClass
from simcomm.ops import PlanBuilder
from simcomm.runtimes.mpi import MPICH
from simcomm.topologies.fat_tree import fat_tree
from simcomm.topologies.star import star

B, LAT = 1e9, 1e-6
LINK = LinkClass("us-link", B, LAT, "custom")


def _series(rows, family):
    return [(t, v) for t, f, v in rows if f == family]


def _integral(rows, family, end):
    s = _series(rows, family)
    times = [t for t, _ in s] + [end]
    return sum(v * (times[i + 1] - t) for i, (t, v) in enumerate(s))


def _value_at(rows, family, t):
    v = 0.0
    for ts, val in _series(rows, family):
        if ts <= t:
            v = val
    return v


def test_single_transfer_on_two_hops_integrates_to_twice_its_bytes():
    n = 3e6
    b = PlanBuilder(2)
    b.transfer(0, 1, n)
    tl = simulate(b.build(), star(2, LINK), record_link_usage=True, runtime=MPICH)
    rows = tl.meta["link_usage"]
    # Latency phase (nothing carried), then B on each of the two links, then nothing.
    assert rows == [(0.0, "custom", 0.0), (2 * LAT, "custom", 2 * B), (2 * LAT + n / B, "custom", 0.0)]
    assert _integral(rows, "custom", tl.makespan) == pytest.approx(2 * n, rel=1e-12)


def test_usage_is_off_by_default_and_empty_for_analytic():
    b = PlanBuilder(2)
    b.transfer(0, 1, 1e6)
    assert "link_usage" not in simulate(b.build(), star(2, LINK), runtime=MPICH).meta
    assert simulate(b.build(), star(2, LINK), fidelity="analytic", record_link_usage=True, runtime=MPICH).meta["link_usage"] == []


def _check_against_plain(plan, topo):
    fast = simulate(plan, topo, record_link_usage=True, runtime=MPICH)
    plain = simulate(plan, topo, reference={"coalesce", "incremental"}, record_link_usage=True, runtime=MPICH)
    assert fast.makespan == pytest.approx(plain.makespan, rel=1e-9)
    for fam, total in plain.link_class_bytes.items():
        # Every byte crossing a link of the family shows up in the counter's integral.
        assert _integral(plain.meta["link_usage"], fam, plain.makespan) == pytest.approx(total, rel=1e-9)
        assert _integral(fast.meta["link_usage"], fam, fast.makespan) == pytest.approx(total, rel=1e-9)
        # Coalesced repeats replay the same step function as the plain model.
        cuts = sorted({t for t, f, _ in plain.meta["link_usage"] if f == fam})
        for a, c in pairwise(cuts):
            mid = (a + c) / 2
            assert _value_at(fast.meta["link_usage"], fam, mid) == pytest.approx(
                _value_at(plain.meta["link_usage"], fam, mid), rel=1e-9, abs=1e-3)
    return fast


def test_coalesced_ring_replays_the_isolated_profile():
    topo = fat_tree(4, link=LINK, levels=2, oversubscription=2)
    b = PlanBuilder(8)
    b.collective("allreduce", range(8), 5e6, algorithm="ring")
    b.collective("alltoall", range(8), 1e6, algorithm="pairwise")
    fast = _check_against_plain(b.build(), topo)
    assert fast.meta["steps_coalesced"] > 0


@settings(max_examples=25, deadline=None)
@given(st.floats(0.0, 8e-3), st.floats(1e3, 5e6))
def test_interrupted_reservation_usage_matches_the_plain_model(delay, size):
    b = PlanBuilder(6)
    b.collective("allreduce", range(4), 4e6, algorithm="ring")
    c = b.compute(4, delay)
    b.transfer(4, 1, size, after=[c])
    _check_against_plain(b.build(), star(6, LINK))


def test_late_events_run_after_ordinary_events_of_their_instant():
    env = Environment()
    order = []
    late = LateEvent(env, 1.0)
    late.callbacks.append(lambda _e: order.append("late"))
    late.succeed()  # triggered first, still runs last at t=1
    env.timeout(1.0).callbacks.append(lambda _e: order.append("ordinary"))
    env.run()
    assert order == ["ordinary", "late"] and env.now == 1.0


def test_live_network_needs_the_engine_environment():
    with pytest.raises(TypeError, match="Environment"):
        LiveNetwork(simpy.Environment(), np.ones(1))
