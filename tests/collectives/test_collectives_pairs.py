"""Blocks of pairs (``simcomm.collectives.pairs``): the transfers they stand for, and each link's bytes from
crossing counts equal to ``np.bincount`` over the transfers, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simcomm.collectives.pairs import (
    PairBlocks,
    PairsStep,
    add_block_link_bytes,
    all_pairs,
    block_family_bytes,
    block_loads,
    repeated_sum,
)


def _loop(value: float, k: int) -> float:
    total = 0.0
    for _ in range(k):
        total += value
    return total


@settings(max_examples=60, deadline=None)
@given(value=st.one_of(st.floats(min_value=5e-324, max_value=1e12, allow_nan=False, allow_infinity=False),
                       st.sampled_from([0.1, 1 / 3, 3.0, 0.6, 2.0 ** 52 + 1, 1e17 + 1, 5e-324, 12345.678])),
       counts=st.lists(st.integers(0, 3000), min_size=1, max_size=12))
def test_repeated_sum_is_the_left_to_right_sum(value, counts):
    got = repeated_sum(value, np.array(counts))
    assert [float(g) for g in got] == [_loop(value, k) for k in counts]


@pytest.mark.parametrize("value", [0.1, 1 / 3, 818e3 / 24, 1e9 / 7])
def test_repeated_sum_of_many_terms_is_bincount(value):
    # a link crossed 2 x 10^5 times: what np.bincount adds up, in a few dozen additions
    k = 200_000
    want = np.bincount(np.zeros(k, dtype=np.int64), weights=np.full(k, value))[0]
    assert repeated_sum(value, np.array([k]))[0] == want
    assert repeated_sum(-value, np.array([k]))[0] == -want
    assert repeated_sum(0.0, np.array([k]))[0] == 0.0


def test_blocks_are_the_pairs_block_by_block():
    rows_in = np.array([[0, 1, 2], [3, 4, 5]])
    blocks = PairBlocks((rows_in, rows_in.T), (6.0, 2.5))
    src, dst, nbytes = blocks.arrays()
    want = [(a, b) for r in rows_in.tolist() for a in r for b in r if a != b]
    want += [(a, b) for r in rows_in.T.tolist() for a in r for b in r if a != b]
    assert list(zip(src.tolist(), dst.tolist(), strict=True)) == want
    assert nbytes.tolist() == [6.0] * 12 + [2.5] * 6
    step = PairsStep(blocks, repeat=2)
    assert len(step) == 18 and step.repeat == 2 and step.reduce.tolist() == [0.0] * 18
    assert step.src.tolist() == src.tolist() and step.nbytes.tolist() == nbytes.tolist()
    assert all_pairs(np.zeros((0, 3), dtype=np.int64))[0].size == 0


@settings(max_examples=30, deadline=None)
@given(n_links=st.integers(1, 12), data=st.data())
def test_block_loads_are_the_bincount_of_the_crossings(n_links, data):
    # each block crosses its own links (random routes drawn per transfer): loads from counts = bincount
    sizes = data.draw(st.lists(st.floats(1e-3, 1e9), min_size=1, max_size=3))
    own = np.array_split(np.arange(n_links), len(sizes))
    links, weights, counts = [], [], []
    for s, mine in zip(sizes, own, strict=True):
        hits = np.array(data.draw(st.lists(st.sampled_from(mine.tolist()), max_size=200)) if len(mine) else [],
                        dtype=np.int64)
        links.append(hits)
        weights.append(np.full(len(hits), s))
        counts.append(np.bincount(hits, minlength=n_links))
    blocks = PairBlocks(tuple(np.zeros((1, 2), dtype=np.int64) for _ in sizes), tuple(sizes))
    got = block_loads(blocks, counts)
    want = np.bincount(np.concatenate(links), weights=np.concatenate(weights), minlength=n_links)
    assert got is not None and got.tobytes() == want.tobytes()


def test_a_link_carrying_two_sizes_has_no_block_loads():
    blocks = PairBlocks((np.zeros((1, 2), dtype=np.int64),) * 2, (1.0, 2.0))
    assert block_loads(blocks, [np.array([1, 0]), np.array([1, 1])]) is None
    same = PairBlocks((np.zeros((1, 2), dtype=np.int64),) * 2, (2.0, 2.0))  # one size: fine
    assert block_loads(same, [np.array([1, 0]), np.array([1, 1])]).tolist() == [4.0, 2.0]


@settings(max_examples=30, deadline=None)
@given(sizes=st.lists(st.floats(1e-3, 1e9), min_size=1, max_size=3), data=st.data())
def test_block_family_bytes_are_the_routed_family_sums(sizes, data):
    # transfers crossing links in transfer order (block by block), links in families: the sum per family,
    # crossing by crossing, as RoutedStep.family_bytes adds it, equals the one from the counts
    n_links, n_fam = 6, 3
    family_of_link = np.array(data.draw(st.lists(st.integers(0, n_fam - 1), min_size=n_links, max_size=n_links)))
    crossings = [np.array(data.draw(st.lists(st.integers(0, n_links - 1), max_size=300)), dtype=np.int64)
                 for _ in sizes]
    want = np.bincount(family_of_link[np.concatenate(crossings)],
                       weights=np.concatenate([np.full(len(c), s) for c, s in zip(crossings, sizes, strict=True)]),
                       minlength=n_fam)
    blocks = PairBlocks(tuple(np.zeros((1, 2), dtype=np.int64) for _ in sizes), tuple(sizes))
    counts = [np.bincount(c, minlength=n_links) for c in crossings]
    assert block_family_bytes(blocks, counts, family_of_link, n_fam).tobytes() == want.tobytes()


@settings(max_examples=30, deadline=None)
@given(sizes=st.lists(st.floats(1e-3, 1e9), min_size=1, max_size=3), times=st.integers(1, 5), data=st.data())
def test_block_link_bytes_are_what_add_at_adds(sizes, times, data):
    # onto links that already hold bytes (earlier collectives), crossing by crossing, block by block
    n_links = 8
    start = np.array(data.draw(st.lists(st.sampled_from([0.0, 1.5, 1e6 / 3, 7e8]), min_size=n_links,
                                        max_size=n_links)))
    crossings = [np.array(data.draw(st.lists(st.integers(0, n_links - 1), max_size=300)), dtype=np.int64)
                 for _ in sizes]
    want = start.copy()
    np.add.at(want, np.concatenate(crossings),
              times * np.concatenate([np.full(len(c), s) for c, s in zip(crossings, sizes, strict=True)]))
    got = start.copy()
    blocks = PairBlocks(tuple(np.zeros((1, 2), dtype=np.int64) for _ in sizes), tuple(sizes))
    add_block_link_bytes(got, blocks, [np.bincount(c, minlength=n_links) for c in crossings], times)
    assert got.tobytes() == want.tobytes()
