"""The scalar core's lean form (simcomm.engine.fluid.lone) gives the general scalar form's and the
array core's answer bit for bit: every settle's completed batches and finish times, every
next instant, the statistics, on FIFO-like workloads whose live routes are mostly disjoint
and on ones that overlap (lean -> general -> lean)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simcomm.engine.fluid.core import FluidCore
from simcomm.engine.fluid.lone import LoneFlows
from simcomm.engine.fluid.small import MAX_LIVE


def _cores(caps, resolution):
    """The lean form (the default), the general scalar form and the arrays."""
    return [FluidCore(caps, resolution=resolution), FluidCore(caps, "scalar", resolution=resolution),
            FluidCore(caps, "numpy", resolution=resolution)]


def _drive(cores, arrivals, *, messages: bool = False, combined: bool = False, after=None):
    """Feed ``arrivals`` (time, route, bytes, latency) to ``cores`` in lockstep; every settle's output.

    ``after()``, if given, runs after every settle of all cores (white-box checks of their state).
    """
    out: list[list] = [[] for _ in cores]
    k, t = 0, 0.0
    while k < len(arrivals) or not cores[-1].empty:
        nxt = [c.next_time() for c in cores]
        assert len(set(nxt)) == 1, nxt
        t = nxt[0]
        if k < len(arrivals) and arrivals[k][0] <= t:
            t = arrivals[k][0]
            while k < len(arrivals) and arrivals[k][0] == t:
                _, route, size, lat = arrivals[k]
                for c in cores:
                    if messages:
                        c.add_message(float(size), t + lat, tuple(route))
                    else:
                        c.add(np.array([size]), np.array([t + lat]), np.array([len(route)]), np.array(route))
                k += 1
        for c, o in zip(cores, out, strict=False):
            if combined:
                done, nt = c.settle_next(t)
                o.append(([(b, f.tobytes()) for b, f in done], nt))
            else:
                o.append([(b, f.tobytes()) for b, f in c.settle(t)])
        if after is not None:
            after()
    return out


def _stats(c):
    return c.solves, c.rounds, c.full_solves, c.merged, c.t


def _fifo_arrivals(draw, n_links):
    """Messages mostly one or two at a time over disjoint pairs of links, sometimes overlapping."""
    t = 0.0
    out = []
    for _ in range(draw(st.integers(1, 40))):
        t += draw(st.sampled_from([0.0, 0.0, 0.5, 1.0, 2.5]) | st.floats(0.0, 4.0))
        first = draw(st.integers(0, n_links - 1))
        route = list(dict.fromkeys([first, draw(st.integers(0, n_links - 1))]))
        out.append((round(t, 2), route, draw(st.sampled_from([1.0, 2.0, 4.0]) | st.floats(0.1, 10.0)),
                    draw(st.sampled_from([0.0, 0.1, 0.25]))))
    return sorted(out, key=lambda a: a[0])


@st.composite
def fifo_workloads(draw):
    n_links = draw(st.integers(2, 10))
    caps = draw(st.lists(st.sampled_from([1.0, 2.0, 0.5, 4.0]) | st.floats(0.1, 10.0),
                         min_size=n_links, max_size=n_links))
    return np.array(caps), _fifo_arrivals(draw, n_links)


@settings(max_examples=150, deadline=None)
@given(fifo_workloads(), st.sampled_from([0.0, 0.0, 0.01, 0.2]), st.booleans(), st.booleans())
def test_lean_form_is_the_general_form_and_the_arrays_bit_for_bit(case, resolution, messages, combined):
    caps, arrivals = case
    cores = _cores(caps, resolution)
    out = _drive(cores, arrivals, messages=messages, combined=combined)
    assert out[0] == out[1] == out[2]
    assert _stats(cores[0]) == _stats(cores[1]) == _stats(cores[2])


@settings(max_examples=60, deadline=None)
@given(fifo_workloads(), st.sampled_from([0.0, 0.01]))
def test_the_lean_state_is_the_general_state_after_every_settle(case, resolution):
    # White box: the lean form derives the general form's rows, loads and flow counts.
    caps, arrivals = case
    cores = _cores(caps, resolution)[:2]

    def same_state():
        a, b = cores[0]._small, cores[1]._small
        if a is not None:
            assert b is not None
            fields = ("rem", "rate", "t_next", "phase", "batch", "index", "route", "gone_routes")
            assert [getattr(a, f) for f in fields] == [getattr(b, f) for f in fields]
            rows = b.row
            assert a.row == rows
            assert {x: a.load.get(x, 0.0) for r in rows for x in r} == {x: b.load.get(x, 0.0) for r in rows for x in r}
            assert {x: a.nflows.get(x, 0) for r in rows for x in r} == \
                {x: b.nflows.get(x, 0) for r in rows for x in r}

    _drive(cores, arrivals, after=same_state)


def test_a_fifo_chain_on_disjoint_routes_stays_lean_and_ends_at_the_hand_computed_time():
    # Pushes over links (0, 2) and pulls over (1, 3), one of each live at a time (a FIFO server):
    # each message gets its route's tightest link alone, 0.5 s of latency first.
    caps = np.array([2.0, 4.0, 8.0, 1.0])
    core = FluidCore(caps)
    t = 0.0
    push_end = pull_end = 0.0
    for _k in range(20):
        core.add_message(4.0, t + 0.5, (0, 2))     # 0.5 + 4 / 2 = 2.5 s
        core.add_message(2.0, t + 0.5, (1, 3))     # 0.5 + 2 / 1 = 2.5 s
        done, nxt = core.settle_next(t)
        assert isinstance(core._small, LoneFlows) and core._small.lean
        while not core.empty:
            t = nxt
            done, nxt = core.settle_next(t)
            assert core._small is not None and core._small.lean
        push_end = pull_end = t
    assert push_end == pytest.approx(20 * 2.5, rel=1e-12) and pull_end == push_end
    # Per pair: one solve when both enter (one round: disjoint routes freeze together) and one
    # when both finish (nothing left to re-solve: no round).
    assert (core.solves, core.rounds) == (40, 20)


def test_overlapping_flows_leave_the_lean_form_and_disjoint_ones_return_to_it():
    caps = np.array([1.0, 1.0, 3.0])
    cores = _cores(caps, 0.0)
    arrivals = [(0.0, [0, 2], 4.0, 0.0), (1.0, [1, 2], 2.0, 0.0),  # share link 2 -> general form
                (9.0, [0], 1.0, 0.0), (9.0, [1], 1.0, 0.0)]      # the network has drained: lean again
    forms: list[bool] = []
    out = _drive(cores, arrivals, after=lambda: forms.append(cores[0]._small.lean))
    assert out[0] == out[1] == out[2]
    assert forms[0] and not all(forms) and forms[-1]
    # 4 B alone on link 0 (1 B/s) for 1 s, then 3 B at 1 B/s (link 2 has room): ends at 4 s;
    # 2 B from 1 s at 1 B/s: ends at 3 s.
    assert [x for o in out[0] for x in o][:2] == [(1, np.array([3.0]).tobytes()), (0, np.array([4.0]).tobytes())]


def test_more_than_max_live_disjoint_flows_go_to_the_arrays_with_the_same_answer():
    n = MAX_LIVE + 3
    caps = np.arange(1.0, n + 1.0)
    arrivals = [(0.0, [i], float(i + 1), 0.0) for i in range(MAX_LIVE)] + \
        [(0.5, [i], 1.0, 0.0) for i in range(MAX_LIVE, n)]
    cores = _cores(caps, 0.0)
    out = _drive(cores, arrivals)
    assert out[0] == out[1] == out[2]
    assert _stats(cores[0]) == _stats(cores[2])


def test_add_message_is_add_of_a_one_flow_batch():
    caps = np.array([2.0, 3.0])
    a, b = FluidCore(caps), FluidCore(caps)
    assert a.add_message(6.0, 0.25, (1, 0)) == b.add(np.array([6.0]), np.array([0.25]), np.array([2]),
                                                      np.array([1, 0]))
    for t in (0.0, 0.25):
        assert [(x, f.tolist()) for x, f in a.settle(t)] == [(x, f.tolist()) for x, f in b.settle(t)]
    assert a.next_time() == b.next_time() == 0.25 + 6.0 / 2.0
    assert a.bytes_left(0, 0, 1.25) == b.bytes_left(0, 0, 1.25) == 4.0
