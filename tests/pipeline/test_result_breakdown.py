"""result.breakdown reads a plan's messages field by field (src, dst) instead of through ``Transfer.ranks``: the same
breakdown, bit for bit, as when each message is read through its ``ranks`` (as a collective of its two ranks)."""

from types import SimpleNamespace

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from simcomm.ops import Collective, Compute, Transfer
from simcomm.result import breakdown

CATEGORIES = ("compute", "dataload", "server", "compression", "sketch", "comm")


def _as_collectives(plan):
    """The plan with each message a collective of its two ranks: read through ``ranks`` (the reference form)."""
    ops = [Collective(op.id, "sendrecv", op.ranks, op.nbytes) if isinstance(op, Transfer) else op for op in plan.ops]
    return SimpleNamespace(ops=ops, n_ranks=plan.n_ranks, info=plan.info)


@st.composite
def runs(draw):
    n = draw(st.integers(1, 5))
    ops = []
    for i in range(draw(st.integers(1, 30))):
        what = draw(st.sampled_from(("compute", "transfer", "collective")))
        if what == "compute":
            ops.append(Compute(i, draw(st.integers(0, n - 1)), draw(st.floats(0, 1)),
                               category=draw(st.sampled_from(CATEGORIES))))
        elif what == "transfer":
            ops.append(Transfer(i, draw(st.integers(0, n - 1)), draw(st.integers(0, n - 1)), 1.0))
        else:
            ranks = tuple(draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=n, unique=True)))
            ops.append(Collective(i, "allreduce", ranks, 1.0))
    times = draw(st.lists(st.tuples(st.floats(0, 10), st.floats(0, 3)), min_size=len(ops), max_size=len(ops)))
    start = np.array([s for s, _ in times])
    end = start + np.array([d for _, d in times])
    measured = draw(st.one_of(st.none(), st.frozensets(st.integers(0, n - 1), min_size=1)))
    plan = SimpleNamespace(ops=ops, n_ranks=n, info=SimpleNamespace(measured_ranks=measured))
    window = draw(st.one_of(st.none(), st.tuples(st.floats(0, 5), st.floats(5, 13))))
    return plan, SimpleNamespace(start=start, end=end, makespan=float(end.max())), draw(st.integers(1, n)), window


@settings(max_examples=300, deadline=None)
@given(runs())
def test_breakdown_is_the_reference_loop_bit_for_bit(run):
    plan, timeline, n_train, window = run
    assert breakdown(plan, timeline, n_train, window) == breakdown(_as_collectives(plan), timeline, n_train, window)
