"""PlanBuilder's fast path (simcomm.ops: _new_compute, _new_transfer and _with_prev, used by
compute() and transfer()) builds the very ops the dataclass constructors and the set-and-sort
dependency rule build: equal, of the same type, hashing alike, every field set; and a plan built
through it equals the one built through the plain constructors, op for op."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import simcomm.ops as ops
from simcomm.errors import ConfigError
from simcomm.ops import Compute, PlanBuilder, Transfer


def _plain(after, prev):
    deps = set(after)
    if prev is not None:
        deps.add(prev)
    return tuple(sorted(deps))


ids = st.integers(0, 6)


@settings(max_examples=300, deadline=None)
@given(st.lists(ids, max_size=5), st.none() | ids, st.sampled_from(["tuple", "list", "generator"]))
def test_dependencies_are_the_set_and_sort_rule(after, prev, kind):
    given_after = tuple(after) if kind == "tuple" else list(after) if kind == "list" else (x for x in after)
    got = ops._with_prev(given_after, prev)
    assert got == _plain(after, prev) and type(got) is tuple


def test_the_fast_constructors_make_the_dataclass_instances():
    c = ops._new_compute(3, 1, 0.5, (0, 2), "forward", "compute", "compute")
    t = ops._new_transfer(4, 1, 2, 8.0, (3,), "push[x]", "push", "comm")
    for made, plain in ((c, Compute(3, 1, 0.5, (0, 2), "forward", "compute", "compute")),
                        (t, Transfer(4, 1, 2, 8.0, (3,), "push[x]", "push", "comm"))):
        assert type(made) is type(plain) and made == plain and hash(made) == hash(plain)
        assert repr(made) == repr(plain)
    with pytest.raises(AttributeError):  # still frozen
        c.seconds = 1.0


def _calls(draw_ops):
    """Replay (kind, rank, peer, value, after-offsets, stream) calls on a builder; the built ops."""
    b = PlanBuilder(4)
    for kind, rank, peer, value, back, stream in draw_ops:
        n = len(b._ops)
        after = tuple(n - 1 - k for k in back if n - 1 - k >= 0)
        if kind == "compute":
            b.compute(rank, value, after=after, label=f"c{n}", stream=stream)
        elif peer != rank:
            b.transfer(rank, peer, value, after=list(after), label=f"t{n}", stream=stream)
    return b.build().ops


calls = st.lists(st.tuples(st.sampled_from(["compute", "transfer"]), st.integers(0, 3), st.integers(0, 3),
                           st.floats(0.0, 10.0), st.lists(st.integers(0, 4), max_size=3),
                           st.sampled_from(["compute", "comm", "push"])), max_size=30)


@settings(max_examples=150, deadline=None)
@given(calls)
def test_a_plan_is_the_plain_constructors_plan(seq):
    fast = _calls(seq)
    saved = ops._new_compute, ops._new_transfer, ops._with_prev
    ops._new_compute, ops._new_transfer, ops._with_prev = Compute, Transfer, _plain
    try:
        plain = _calls(seq)
    finally:
        ops._new_compute, ops._new_transfer, ops._with_prev = saved
    assert [type(op) for op in fast] == [type(op) for op in plain] and fast == plain


def test_the_op_limit_still_stops_a_plan(monkeypatch):
    monkeypatch.setattr(ops, "MAX_PLAN_OPS", 3)
    b = PlanBuilder(2)
    b.compute(0, 1.0)
    b.transfer(0, 1, 8.0)
    b.compute(1, 1.0)
    for add in (lambda: b.compute(0, 1.0), lambda: b.transfer(1, 0, 8.0)):
        with pytest.raises(ConfigError, match="more than 3 ops on 2 ranks"):
            add()
    assert len(b._ops) == 3
