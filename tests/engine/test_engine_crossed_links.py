"""A re-solve's per-link counts and loads kept for the links its flows cross (``fluid.core._crossed_alone``).

When the flows that leave or enter at an event cross few links of a large network, the fluid core counts and
sums them over those links alone instead of over every link (131 264 at 16 384 GPUs): each link's sum is added
in entry order either way and a link not crossed keeps its load, so both forms give the same floats.  Here
every event takes one form, then the other, on messages at random instants and sizes over an oversubscribed
fat-tree and on a DGX cluster's collectives, compared bit for bit.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simcomm.engine import simulate
from simcomm.engine.fluid import core
from simcomm.ops import PlanBuilder
from simcomm.runtimes import NcclRuntime
from simcomm.runtimes.mpi import MPICH
from simcomm.topologies.fat_tree import fat_tree
from tests.timelines import check

TREE = fat_tree(4, link="ib-hdr", oversubscription=4.0)

messages = st.lists(st.tuples(st.integers(0, 15), st.integers(0, 15), st.floats(1e3, 5e7), st.floats(0, 2e-4)),
                    min_size=2, max_size=40)


def _both(plan, topo, **kw):
    out = []
    saved = core._crossed_alone
    try:
        for alone in (True, False):  # every event on the crossed links alone, then every event over all links
            core._crossed_alone = lambda entries, links, alone=alone: alone
            out.append(simulate(plan, topo, **kw))
    finally:
        core._crossed_alone = saved
    return out


@settings(max_examples=40, deadline=None)
@given(messages, st.sampled_from([0.0, 0.01]))
def test_crossed_links_alone_give_the_floats_of_every_link(sends, resolution):
    b = PlanBuilder(16)
    for src, dst, nbytes, delay in sends:
        if src != dst:
            b.transfer(src, dst, nbytes, after=[b.compute(src, delay)] if delay else ())
    plan = b.build()
    for reference in ((), {"direct"}):
        crossed, every = _both(plan, TREE, runtime=MPICH, resolution=resolution, reference=reference)
        check(crossed, every)


@pytest.mark.parametrize("kind", ["allreduce", "reduce_scatter"])
def test_crossed_links_alone_on_collectives(kind):
    from tests.timelines import dgx_with_one_slow_link

    topo = dgx_with_one_slow_link(3)
    b = PlanBuilder(24)
    b.collective(kind, tuple(range(24)), 48e6)
    for r in range(0, 24, 2):
        b.collective("allreduce", (r, r + 1), 8e6, stream="pair", after=[b.compute(r, 1e-4 * (r % 3))])
    crossed, every = _both(b.build(), topo, runtime=NcclRuntime())
    check(crossed, every)
