"""The estimate's TP-beside-bucket window (:meth:`DataParallelTimelines.side_by_side`), on a stub flow model.

The window's probes are run lazily, only as far as a start needs them; these tests pin that every answer
equals probing the whole window first (the rule docs/plan.md section 3 states), whatever order the starts
come in, and count the flow runs it saves.  The two-collective flow run is replaced by a table of seconds per
probe index, so every number is by hand.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from simcomm.llm.estimate_dp import DataParallelTimelines

ALONE, SPAN = 1.0, 10.0  # the TP collective alone, the bucket alone: step = max(1, 10/16) = 1 second
PAIR = ("allreduce", ((0, 1),), 100, "allreduce", ((0, 8),), 1000)


class Stub(DataParallelTimelines):
    """price: ALONE for the TP collective, SPAN for the bucket; _pair: ``curve[k]`` at start k·step."""

    def __init__(self, curve: list[float]):
        self._prices, self._stages, self.curve, self.runs = {}, {}, curve, []

    def price(self, kind, groups, nbytes):
        return SPAN if nbytes == PAIR[5] else ALONE

    def _pair(self, pair, since):
        k = round(since)
        assert abs(since - k) < 1e-9  # probes and interpolation read the grid only
        if k not in self.runs:
            self.runs.append(k)
        return self.curve[k] if k < len(self.curve) else ALONE


def side_by_side(stub: Stub, since: float) -> float:
    return stub.side_by_side(PAIR[0], PAIR[1], PAIR[2], PAIR[3], PAIR[4], PAIR[5], since)


def whole_window_end(curve: list[float]) -> float:
    """The rule, probing the whole window first: starts 0, 1, 2, ... below the span, up to the first that runs
    alone after one inside; the end is one step past the last inside (0: none inside)."""
    end, k = 0.0, 0
    while k < SPAN:
        inside = (curve[k] if k < len(curve) else ALONE) > ALONE * (1 + 1e-9)
        if inside:
            end = k + 1.0
        elif end:
            break
        k += 1
    return end


def reference(curve: list[float], since: float) -> float:
    if since >= whole_window_end(curve):
        return ALONE
    k = int(since)
    at = [curve[i] if i < len(curve) else ALONE for i in (k, k + 1)]
    return max(ALONE, at[0] + (at[1] - at[0]) * (since - k))


def test_by_hand_early_start_runs_two_probes():
    stub = Stub([1.0, 5.0, 4.0, 1.0])  # inside at starts 1 and 2: the window ends at 3
    assert side_by_side(stub, 0.5) == 3.0  # between 1.0 (start 0) and 5.0 (start 1)
    assert stub.runs == [0, 1]  # the window is known to reach past 0.5 after start 1: no more probes
    assert side_by_side(stub, 2.5) == 2.5  # between 4.0 and 1.0
    assert stub.runs == [0, 1, 2, 3]
    assert side_by_side(stub, 3.5) == ALONE  # past the end: start 3 ran alone
    assert stub.runs == [0, 1, 2, 3]


def test_by_hand_late_start_first_probes_the_window():
    stub = Stub([1.0, 5.0, 4.0, 1.0, 1.0, 1.0])
    assert side_by_side(stub, 7.0) == ALONE
    assert stub.runs == [0, 1, 2, 3]  # stops at the first alone start after the window (the rule: not 4, 5)


def test_start_with_the_bucket_reads_one_probe():
    stub = Stub([3.0, 5.0, 1.0])
    assert side_by_side(stub, 0.0) == 3.0  # inside from the first start: no second probe to interpolate with
    assert stub.runs == [0]
    stub = Stub([1.0, 5.0, 1.0])
    assert side_by_side(stub, 0.0) == ALONE  # the first start runs alone: alone, inside the window or not
    assert stub.runs == [0]


def test_a_gap_ends_the_window():
    stub = Stub([1.0, 3.0, 1.0, 3.0])  # inside, alone, inside: the window ends at 2
    assert side_by_side(stub, 3.2) == ALONE
    assert side_by_side(stub, 1.5) == 2.0  # between 3.0 and 1.0


def test_no_window_probes_to_the_span():
    stub = Stub([1.0] * 12)
    assert side_by_side(stub, 0.3) == ALONE
    assert stub.runs == list(range(10))  # starts 0..9 below the 10-second span, all alone


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from([1.0, 1.5, 2.0, 4.0]), min_size=0, max_size=12),
       st.lists(st.one_of(st.just(0.0), st.floats(0.0, 12.0, allow_nan=False)), min_size=1, max_size=8))
def test_lazy_window_equals_the_whole_window(curve, starts):
    stub = Stub(curve)
    for since in starts:
        assert side_by_side(stub, since) == reference(curve, since)
    # never more probes than the whole window's (its probes, or the span's without one) and the reads
    end = whole_window_end(curve)
    probes = set(range(int(end) + 1)) if end else set(range(int(SPAN)))
    reads = {k for since in starts if since < end for k in (int(since), int(since) + 1)}
    assert set(stub.runs) <= probes | reads
