"""Staggered starts under max-min sharing: the mechanism behind Crossover-SGD's latency sensitivity.

Seed 001's blocking Crossover-SGD has no barrier between segments: a rank sends its next segment once its own
send and receive are done.  When one pair's exchange of a segment ends late, the ranks that finished early
send into the late pair's ranks while those still receive, and max-min sharing slows both flows
(docs/validation.md, seed 001's findings; validation.aws_stagger.stagger_case runs it with NCCL's pair all-reduce).
"""

from __future__ import annotations

import pytest

from simcomm import engine
from simcomm.links.base import LinkClass
from simcomm.ops import PlanBuilder
from simcomm.topologies.star import star

SIZE = 1e6  # 1 ms on a 1 GB/s link


def _two_segments(hop_latency: float, late: float = 100e-6) -> float:
    """Five hosts on a 1 GB/s star; segment 0: 0 <-> 1 (after ``late`` s of compute) and 2 -> 3 -> 4 -> 2,
    segment 1: 2 -> 0 -> 3 -> 1 -> 4 -> 2, each send after its rank's own segment-0 send and receive."""
    b = PlanBuilder(5)
    delay = {r: b.compute(r, late) for r in (0, 1)}
    first = {(s, d): b.transfer(s, d, SIZE, after=[delay[s]] if s in delay else [])
             for s, d in ((0, 1), (1, 0), (2, 3), (3, 4), (4, 2))}
    gate = {r: [op for (s, d), op in first.items() if r in (s, d)] for r in range(5)}
    for s, d in ((2, 0), (0, 3), (3, 1), (1, 4), (4, 2)):
        b.transfer(s, d, SIZE, after=gate[s])
    return engine.simulate(b.build(), star(5, LinkClass("toy", 1e9, hop_latency))).makespan


@pytest.mark.parametrize("route_us", [0, 20, 50])
def test_a_late_pair_costs_its_whole_lateness_while_next_sends_overlap_it(route_us):
    # a = route latency (two hops).  2 -> 0 starts bytes at 1000 + 2a while 1 -> 0 still has 100 - a us of
    # bytes: both at half rate, 1 -> 0 ends at 1200, rank 0 sends 0 -> 3 from 1200: ends 2200 + a.  With
    # first-come first-served the late pair would end at 1100 + a and the makespan be 2100 + 2a.
    a = route_us * 1e-6
    assert _two_segments(a / 2) == pytest.approx(2200e-6 + a, rel=1e-12)


def test_no_overlap_once_the_latency_exceeds_the_lateness():
    # a = 150 us >= 100 us: the next sends reach rank 0 after the pair is done: 1100 + a, then 0 -> 3
    a = 150e-6
    assert _two_segments(a / 2) == pytest.approx(2100e-6 + 2 * a, rel=1e-12)
