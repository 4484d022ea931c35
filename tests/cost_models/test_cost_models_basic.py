"""Hockney and LogGP pricing: pins, the two-link split and hypothesis invariants."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simcomm.collectives import ALGORITHMS
from simcomm.cost_models import COST_MODELS, HOCKNEY, LOGGP, LogGP
from simcomm.errors import ConfigError
from simcomm.links import LinkClass

NET = LinkClass("test-net", bandwidth=1e10, latency=2e-6)     # β = 0.1 ns/B, α = 2 µs
FAST = LinkClass("test-fast", bandwidth=1e11, latency=5e-7)


def test_cost_models_registry():
    assert set(COST_MODELS.names()) >= {"hockney", "loggp"}
    for e in COST_MODELS.entries():
        assert e.summary and e.reference


def test_cost_models_hockney_is_the_closed_form():
    alg = ALGORITHMS.get("allreduce/ring")
    assert HOCKNEY.price(alg, 8, 1e6, NET, gamma=1e-10) == alg.cost(8, 1e6, 2e-6, 1e-10, 1e-10)


def test_cost_models_hockney_hierarchical_uses_both_links():
    # p=16, ppn=4: intranode stages on FAST, internode on NET.
    # latency 2·3·0.5 µs + 2·3·2 µs = 15 µs; bandwidth 2·3/4·1e6·1e-11 + 2·3/4·2.5e5·1e-10 = 15 µs + 37.5 µs
    t = HOCKNEY.price(ALGORITHMS.get("allreduce/hierarchical"), 16, 1e6, NET, ppn=4, intra=FAST)
    assert (t.latency, t.bandwidth) == pytest.approx((15e-6, 52.5e-6))
    flat = HOCKNEY.price(ALGORITHMS.get("allreduce/ring"), 16, 1e6, NET, ppn=4, intra=FAST)
    assert flat.latency == pytest.approx(30 * 2e-6)


def test_cost_models_loggp_p2p_matches_hockney_minus_one_byte():
    # L + 2o + (m-1)G = (α - 2o) + 2o + (m-1)β = α + (m-1)β
    t = LOGGP.price(ALGORITHMS.get("p2p/direct"), 2, 1001.0, NET)
    assert t.total == pytest.approx(2e-6 + 1000 * 1e-10, rel=1e-12)


def test_cost_models_loggp_gap_for_multiple_sends():
    # α=10 s, β=1 s/B, o=1: L=8, g=1, G=1.  allreduce/binary-tree p=4: tree 0 <- 2 <- {1, 3}, 5 B each.
    # reduce: 1->2, 3->2: L+2o+4G = 14; 2->0: 14.  bcast: 0->2: 14; 2->{1,3}: g + 14 = 15.  Total 57.
    link = LinkClass("t", bandwidth=1.0, latency=10.0)
    t = LogGP(overhead=1.0).price(ALGORITHMS.get("allreduce/binary-tree"), 4, 5.0, link)
    assert (t.latency, t.bandwidth, t.reduction) == (41.0, 16.0, 0.0)


def test_cost_models_loggp_reduction_and_intranode():
    # ring allreduce p=4, ppn=2 with a fast intranode link: every step still has internode hops,
    # so the time equals the all-internode LogGP time.
    alg = ALGORITHMS.get("allreduce/ring")
    a = LOGGP.price(alg, 4, 4e6, NET, gamma=1e-10, ppn=2, intra=FAST)
    b = LOGGP.price(alg, 4, 4e6, NET, gamma=1e-10)
    assert a == b and a.reduction == pytest.approx(3 * 1e6 * 1e-10)


def test_cost_models_bad_parameters():
    alg = ALGORITHMS.get("allreduce/ring")
    with pytest.raises(ConfigError, match="gamma"):
        HOCKNEY.price(alg, 4, 1.0, NET, gamma=-1.0)
    with pytest.raises(ConfigError, match="overhead"):
        LogGP(overhead=-1.0).price(alg, 4, 1.0, NET)


NAMES = list(ALGORITHMS.names())


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from(NAMES), model=st.sampled_from(["hockney", "loggp"]),
       p=st.integers(1, 40), n1=st.floats(0, 1e9), n2=st.floats(0, 1e9), gamma=st.sampled_from([0.0, 1e-10]))
def test_cost_models_monotone_non_negative(name, model, p, n1, n2, gamma):
    alg, cm = ALGORITHMS.get(name), COST_MODELS.get(model)
    ppn = 1
    lo, hi = sorted((n1, n2))
    a = cm.price(alg, p, lo, NET, gamma=gamma, ppn=ppn)
    b = cm.price(alg, p, hi, NET, gamma=gamma, ppn=ppn)
    assert min(a.latency, a.bandwidth, a.reduction) >= 0
    assert b.total >= a.total * (1 - 1e-12)


@settings(max_examples=40, deadline=None)
@given(name=st.sampled_from(NAMES), p=st.integers(2, 70))
def test_cost_models_tends_to_latency_term(name, p):
    alg = ALGORITHMS.get(name)
    t = HOCKNEY.price(alg, p, 1e-9, NET, gamma=1e-10)
    zero = HOCKNEY.price(alg, p, 0.0, NET, gamma=1e-10)
    assert zero.total == zero.latency > 0
    assert t.total == pytest.approx(zero.latency, rel=1e-6)
