"""A scalable step first priced at a byte count whose bandwidth phase is lost to rounding (a subnormal
or a tiny count on a fast link) is not scaled to later sizes: before, a subnormal count made the next
collective's period NaN (0 x inf) and it never ran, and 1e-20 B made a 1 kB all-reduce cost its
latency alone (found by hypothesis in tests/engine_speed/test_speed_callbacks.py)."""

import pytest

from simcomm.engine import simulate
from simcomm.links.base import LinkClass
from simcomm.ops import PlanBuilder
from simcomm.runtimes.mpi import MPICH
from simcomm.topologies.fat_tree import fat_tree

TOPO = fat_tree(4, link=LinkClass("tiny-link", 1e9, 1e-6, "custom"), levels=2, oversubscription=2)


def second_duration(first_bytes: float | None) -> float:
    b = PlanBuilder(8)
    after = []
    if first_bytes is not None:
        after = [b.collective("allreduce", (0, 1, 2), first_bytes, stream="tp")]
    b.collective("allreduce", (0, 1, 2), 1000.0, stream="tp", after=after)
    tl = simulate(b.build(), TOPO, runtime=MPICH)
    return float(tl.end[-1] - tl.start[-1])


@pytest.mark.parametrize("first", [2.225073858507203e-309, 5e-324, 1e-300, 1e-20])
def test_a_tiny_first_size_does_not_mis_scale_the_next(first):
    alone = second_duration(None)
    assert alone > 4e-6  # more than the hops' latency: the bandwidth phase counts
    assert second_duration(first) == pytest.approx(alone, rel=1e-12)
