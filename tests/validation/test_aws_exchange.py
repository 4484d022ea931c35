"""Seed 001's AWS exchange functions: their own host work, counted from the authors' code and priced by hand."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from simcomm.validation import aws_exchange
from simcomm.validation.aws_exchange import THREAD_S, exchange_cost

# 0.5 GB/s of memory traffic and 1 us per launch: a 1000-element tensor is traffic-bound, a 10-element one
# launch-bound
DEVICE = SimpleNamespace(mem_bw=1e9, memory_eff=0.5, launch_s=1e-6)
SEGMENTS = [[1000], [10, 10]]


def test_allreduce_by_hand():
    # per segment a cat and a division, 16 B per element: 32 us (traffic) and 2 launches (2 us)
    bare = exchange_cost(SEGMENTS, DEVICE, "allreduce", 4, dispatch_s=0.0)
    assert bare.total_s == pytest.approx(34e-6) and bare.barrier_s == 0.0
    # with 1 us of dispatch a call costs 2 us: 32 + 4 us of kernels, and per tensor the flatten's and the
    # unflatten's two calls each plus the .data setter: 3 tensors x 5 calls
    full = exchange_cost(SEGMENTS, DEVICE, "allreduce", 4, dispatch_s=1e-6)
    assert full.total_s == pytest.approx(36e-6 + 15e-6)


def test_sgp_by_hand():
    # 4 ranks: offsets 1 and 2, the second a 2-cycle (pair all-reduce and a division instead of zeros_like
    # and a thread): half the iterations each
    cost = exchange_cost(SEGMENTS, DEVICE, "sgp", 4, dispatch_s=0.0)
    seg0 = 16e-6 + 0.5 * 8e-6 + 0.5 * 16e-6  # cat 8 B, zeros 4 B or division 8 B, 1000 elements
    seg1 = 1e-6 + 0.5e-6 + 0.5e-6  # launch-bound
    average = 56e-6 + 2 * 3e-6  # three kernels per tensor, 28 B per element
    assert cost.kernels_s == pytest.approx(seg0 + seg1 + average)
    assert cost.calls_s == pytest.approx(THREAD_S + 2 * 1e-6)  # half a thread and one synchronisation each
    assert cost.barrier_s == aws_exchange.STORE_POLL_S == 0.01  # new_group's store barrier, every call
    # 6 ranks: offsets 1 and 2, neither a 2-cycle; 2 ranks: offset 1 always is
    six = exchange_cost(SEGMENTS, DEVICE, "sgp", 6, dispatch_s=0.0)
    assert six.calls_s == pytest.approx(2 * THREAD_S + 2e-6)
    two = exchange_cost(SEGMENTS, DEVICE, "sgp", 2, dispatch_s=0.0)
    assert two.calls_s == pytest.approx(2e-6)


def test_crossover_by_hand():
    cost = exchange_cost(SEGMENTS, DEVICE, "crossover-sgd", 16, dispatch_s=0.0)
    # two cats of the whole model (8 B x 1020), a zeroed receive buffer per segment (4 B), the average
    assert cost.kernels_s == pytest.approx(2 * 16.32e-6 + (8e-6 + 1e-6) + 56e-6 + 6e-6)
    assert cost.calls_s == pytest.approx(2 * (THREAD_S + 1e-6)) and cost.barrier_s == 0.0


def test_resnet50_counts_and_order():
    from simcomm.validation import seed001

    trace = seed001._trace()
    segs = seed001.segment_tensors(trace)
    assert len(segs) == 18 and sum(map(len, segs)) == 161 and sum(map(sum, segs)) == 25_557_032
    from simcomm.traces.devices import get_device

    cost = {m: exchange_cost(segs, get_device("t4"), m, 16) for m in aws_exchange.METHODS}
    assert cost["sgp"].kernels == 2 * 18 + 3 * 161 and cost["sgp"].syncs == 18
    # SGP pays the barrier and a per-segment average; Crossover-SGD averages once; AllReduce only copies
    assert cost["sgp"].total_s > cost["crossover-sgd"].total_s > cost["allreduce"].total_s > 0
    assert seed001.exchange_host(trace, "hier-g2", 16) == 0.0


def test_unknown_method_is_refused():
    with pytest.raises(ValueError, match="method"):
        exchange_cost(SEGMENTS, DEVICE, "dpsgd", 4)
