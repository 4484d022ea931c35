"""The largest batch a refusal names (``simcomm.memory.fit.largest_fitting``) and a ZeRO-sharded replica's state
(``simcomm.memory.replicated.estimate(zero=, shards=)``), on hand-computable cases."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simcomm.memory.fit import Budget, Peak, largest_fitting


def _linear(state: int, per: int):
    return lambda n: Peak("x", state, 0, 0, per * n)


def test_largest_fitting_by_hand():
    # 100 bytes of state + 7 per sample in 1000 bytes: 128 samples (996 bytes), 129 would need 1003
    budget = Budget(1000, "1 kB", margin=0.0)
    assert largest_fitting(_linear(100, 7), budget, 10**9) == 128
    assert largest_fitting(_linear(100, 7), budget, 50) == 50  # the bound given is the answer when it fits
    assert largest_fitting(_linear(995, 7), budget, 10**9) == 0  # not even 1
    # a 5 % margin on the peak: 1.05 (100 + 7n) <= 1000 -> n <= 121.77
    assert largest_fitting(_linear(100, 7), Budget(1000, "1 kB", margin=0.05), 10**9) == 121


@given(st.integers(0, 10**6), st.integers(1, 10**4), st.integers(1, 10**9), st.integers(1, 10**9))
def test_largest_fitting_is_the_boundary(state, per, capacity, upto):
    budget = Budget(capacity, "c", margin=0.0)
    n = largest_fitting(_linear(state, per), budget, upto)
    assert n == max(0, min(upto, (capacity - state) // per))


def test_zero_shards_a_replicas_state_as_the_zero_paper():
    from simcomm.memory.replicated import estimate

    full = estimate("resnet50", 4, optimizer="adam")
    n = full.parameters // 4  # fp32: 4 bytes of weights per parameter
    assert (full.gradients, full.optimizer_state) == (4 * n, 8 * n)
    for zero, kept in ((1, (4 * n, 4 * n, 8 * -(-n // 8))), (2, (4 * n, 4 * -(-n // 8), 8 * -(-n // 8))),
                       (3, (4 * -(-n // 8), 4 * -(-n // 8), 8 * -(-n // 8)))):
        e = estimate("resnet50", 4, optimizer="adam", zero=zero, shards=8)
        assert (e.parameters, e.gradients, e.optimizer_state) == kept
        assert e.activations == full.activations
        assert e.context == full.context + (0 if zero < 3 else 4 * max(x.params for x in _layers("resnet50")))
        assert f"ZeRO-{zero} over 8 ranks" in e.peak().what and e.peak().replica
    from simcomm.errors import ConfigError

    with pytest.raises(ConfigError, match="zero: 4 is not one of 0, 1, 2, 3"):
        estimate("resnet50", 4, zero=4)


def _layers(name):
    from simcomm.traces.zoo import model_spec

    return model_spec(name).layers
