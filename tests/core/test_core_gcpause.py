"""simcomm.gcpause: the cyclic collector is off inside, and its previous state comes back."""

import gc

import pytest

from simcomm.gcpause import gc_paused


def test_pauses_and_restores_nested_and_on_error():
    was = gc.isenabled()
    gc.enable()
    try:
        with gc_paused():
            assert not gc.isenabled()
            with gc_paused():
                assert not gc.isenabled()
            assert not gc.isenabled()  # the outer pause still holds
        assert gc.isenabled()
        with pytest.raises(ValueError), gc_paused():
            raise ValueError("boom")
        assert gc.isenabled()
        gc.disable()
        with gc_paused():
            pass
        assert not gc.isenabled()  # a caller that had it off keeps it off
    finally:
        gc.enable() if was else gc.disable()


def test_engine_and_pipeline_runs_leave_the_collector_as_they_found_it():
    from simcomm.pipeline import simulate
    from simcomm.scenario import Scenario

    assert gc.isenabled()
    simulate(Scenario(strategy="sgp", nodes=2))
    assert gc.isenabled()
