"""Seed 001's five-instance stagger case: what --stack-overhead changes in it."""

from __future__ import annotations

import pytest

from simcomm.validation.aws_stagger import stagger_case


def test_overhead_lengthens_transfers_not_the_pair_all_reduce_and_the_run_stays_bounded():
    runs = {us: stagger_case(us * 1e-6) for us in (0, 40)}
    # a transfer crosses two links with one rank end each: it pays the whole overhead once
    assert runs[40][1] - runs[0][1] == pytest.approx(40e-6, abs=1e-12)
    for pair, one, makespan in runs.values():
        # segment 1 waits for each rank's own segment 0: never faster than a pair then a transfer back to back
        assert makespan >= pair + one - 1e-12
