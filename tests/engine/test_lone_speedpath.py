"""The lean form's one-flow pass (simcomm.engine.fluid.lone: LoneFlows._first_pass_of_one and
_enter_one, and settle_next's one-flow next instant) gives the general scalar form's and the
array core's answer bit for bit: every settle's completed batches and finish times, every next
instant, and the solve, round and merge counts, for a chain of single messages (the per-tensor
parameter server's case), zero-byte ones and settles early or late against a finish included."""

from contextlib import contextmanager

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simcomm.engine.fluid.core import FluidCore
from simcomm.engine.fluid.lone import LoneFlows


def _cores(caps, resolution):
    """The lean form (the default), the general scalar form and the arrays."""
    return [FluidCore(caps, resolution=resolution), FluidCore(caps, "scalar", resolution=resolution),
            FluidCore(caps, "numpy", resolution=resolution)]


def _stats(c):
    return c.solves, c.rounds, c.full_solves, c.merged, c.t


def _settle_all(cores, t):
    outs = [c.settle_next(t) for c in cores]
    return [([(b, f.tobytes()) for b, f in done], nxt) for done, nxt in outs]


@contextmanager
def counting_one_flow_passes():
    """How many times the one-flow pass ran (a test fails if the fast path was bypassed)."""
    calls: list = []
    orig = LoneFlows._first_pass_of_one

    def spy(self, *a):
        calls.append(1)
        return orig(self, *a)

    LoneFlows._first_pass_of_one = spy
    try:
        yield calls
    finally:
        LoneFlows._first_pass_of_one = orig


@pytest.fixture
def one_flow_passes():
    with counting_one_flow_passes() as calls:
        yield calls


@st.composite
def chains(draw):
    """Messages one after another over two disjoint routes, each sent when the previous one ends,
    with settles pulled early or pushed late now and then (as a driver may call settle_next)."""
    caps = np.array(draw(st.lists(st.sampled_from([1.0, 2.0, 0.5, 4.0]) | st.floats(0.1, 10.0),
                                  min_size=4, max_size=4)))
    msgs = draw(st.lists(st.tuples(st.sampled_from([(0, 2), (1, 3), (2,)]),
                                   st.sampled_from([0.0, 1.0, 4.0]) | st.floats(0.0, 10.0),
                                   st.sampled_from([0.0, 0.25, 0.5]),
                                   st.sampled_from([0.0, 0.0, -0.004, 0.004, 0.3])), min_size=1, max_size=12))
    return caps, msgs


@settings(max_examples=120, deadline=None)
@given(chains(), st.sampled_from([0.01, 0.2, 0.5]))
def test_a_message_chain_is_the_general_form_and_the_arrays_bit_for_bit(case, resolution):
    caps, msgs = case
    with counting_one_flow_passes() as passes:
        out, cores = _chain(caps, msgs, resolution)
    for o in out:
        assert o[0] == o[1] == o[2]
    assert _stats(cores[0]) == _stats(cores[1]) == _stats(cores[2])
    # every settle but the very first (which makes the scalar twin) took the lean core's one-flow pass
    assert len(passes) == len(out) - 1


def _chain(caps, msgs, resolution):
    cores = _cores(caps, resolution)
    out: list = []
    t = 0.0
    for route, size, lat, shift in msgs:
        for c in cores:
            c.add_message(float(size), t + lat, route)
        out.append(_settle_all(cores, t))
        while not cores[0].empty:
            nxt = out[-1][0][1]
            assert out[-1][1][1] == nxt and out[-1][2][1] == nxt
            # a settle moved by ``shift`` (fraction of the next instant's distance) before or after it
            t = max(t, nxt + shift * (nxt - t)) if nxt < np.inf else t
            out.append(_settle_all(cores, t))
        for c in cores[1:]:
            assert c.empty
    return out, cores


def test_one_message_alone_by_hand(one_flow_passes):
    # 6 B over links 0 (2 B/s) and 1 (3 B/s) after 0.5 s of latency: 0.5 + 6 / 2 = 3.5 s.
    cores = _cores(np.array([2.0, 3.0]), 0.01)
    for c in cores:
        c.add_message(6.0, 0.5, (0, 1))
    kick = _settle_all(cores, 0.0)
    assert kick[0] == ([], 0.5)                # latency phase: next instant its bandwidth phase
    enter = _settle_all(cores, 0.5)
    assert enter[0] == ([], 3.5)               # at its route's tightest link
    done = _settle_all(cores, 3.5)
    assert done[0] == ([(0, np.array([3.5]).tobytes())], np.inf)
    assert kick[0] == kick[1] == kick[2] and enter[0] == enter[1] == enter[2] and done[0] == done[1] == done[2]
    # one full solve of one round when it enters, one solve of nothing when it leaves
    assert _stats(cores[0])[:3] == (2, 1, 1) == _stats(cores[1])[:3] == _stats(cores[2])[:3]
    assert len(one_flow_passes) == 2           # the kick found nothing due: no solve


def test_a_zero_byte_message_enters_and_leaves_in_one_settle():
    cores = _cores(np.array([2.0]), 0.01)
    for c in cores:
        c.add_message(0.0, 0.25, (0,))
    assert _settle_all(cores, 0.0)[0] == ([], 0.25)
    out = _settle_all(cores, 0.25)
    assert out[0] == out[1] == out[2] == ([(0, np.array([0.25]).tobytes())], np.inf)
    assert _stats(cores[0]) == _stats(cores[1]) == _stats(cores[2])
    assert cores[0].solves == 2  # entered (solved alone), then finished in a second pass


@pytest.mark.parametrize("at, merged", [(3.49, 1), (3.4, 0), (4.0, 1)])
def test_a_settle_before_or_after_the_finish(at, merged):
    # Due at 3.5 s after 3 s of transfer: a settle within 1 % of that (30 ms) before it finishes
    # it early; 100 ms before, it keeps running; after it, it finishes late (both count as merged).
    cores = _cores(np.array([2.0]), 0.01)
    for c in cores:
        c.add_message(6.0, 0.5, (0,))
    _settle_all(cores, 0.0)
    _settle_all(cores, 0.5)
    out = _settle_all(cores, at)
    assert out[0] == out[1] == out[2]
    assert bool(out[0][0]) == (at != 3.4)
    assert [c.merged for c in cores] == [merged] * 3
    assert _stats(cores[0]) == _stats(cores[1]) == _stats(cores[2])
