"""Max-min fair shares: hand-computed cases and invariants on random flow sets."""

import numpy as np
from flowcases import coo, flow_instances
from hypothesis import given, settings
from hypothesis import strategies as st

from simcomm.engine.fluid.core import run_isolated
from simcomm.engine.fluid.maxmin import maxmin_rates


def test_textbook_example():
    # Links: 0 (cap 10) shared by flows A, B, C; link 1 (cap 4) carries C and D.
    # C and D split link 1 at 2 each; A and B then share the 8 left on link 0.
    routes = [[0], [0], [0, 1], [1]]
    rates, rounds = maxmin_rates(*coo(routes), 4, np.array([10.0, 4.0]))
    assert rates.tolist() == [4.0, 4.0, 2.0, 2.0]
    assert rounds == 2


def test_weights_count_as_identical_flows():
    rates, _ = maxmin_rates(*coo([[0], [0]]), 2, np.array([9.0]), weight=np.array([2.0, 1.0]))
    assert rates.tolist() == [3.0, 3.0]


def test_empty_and_linkless_flows():
    rates, rounds = maxmin_rates(np.zeros(0, np.int64), np.zeros(0, np.int64), 0, np.ones(3))
    assert len(rates) == 0 and rounds == 0
    rates, _ = maxmin_rates(np.zeros(0, np.int64), np.zeros(0, np.int64), 2, np.ones(3))
    assert np.isinf(rates).all()


def flow_sets():
    return flow_instances(max_links=8, caps=st.floats(0.5, 100.0), max_route=4, max_flows=12)


@settings(max_examples=200, deadline=None)
@given(flow_sets())
def test_maxmin_invariants(case):
    caps, routes = case
    flow, link = coo(routes)
    rates, _ = maxmin_rates(flow, link, len(routes), caps)
    assert (rates > 0).all() and np.isfinite(rates).all()
    load = np.bincount(link, weights=rates[flow], minlength=len(caps))
    assert (load <= caps * (1 + 1e-9)).all(), "a link is over capacity"
    saturated = load >= caps * (1 - 1e-9)
    for i, r in enumerate(routes):
        # A bottleneck: a saturated link of the route on which no flow is faster than flow i.
        ok = [l for l in r if saturated[l] and rates[flow[link == l]].max() <= rates[i] * (1 + 1e-9)]
        assert ok, f"flow {i} has no bottleneck link"


@settings(max_examples=60, deadline=None)
@given(flow_sets(), st.lists(st.floats(0.0, 50.0), min_size=12, max_size=12),
       st.lists(st.floats(0.0, 0.3), min_size=12, max_size=12))
def test_fluid_run_conserves_bytes_and_respects_capacity(case, sizes, lats):
    caps, routes = case
    f = len(routes)
    nbytes, lat = np.array(sizes[:f]), np.array(lats[:f])
    flow, link = coo(routes)
    lens = np.array([len(r) for r in routes])
    done = run_isolated(caps, nbytes, lat, lens, link)
    assert not np.isnan(done.finish).any()
    # No flow beats its route alone: latency + bytes / bottleneck capacity.
    alone = lat + nbytes / np.array([caps[r].min() for r in routes])
    assert (done.finish >= alone * (1 - 1e-9) - 1e-12).all()
    # Stopping halfway and reading the state back is consistent with the full run.
    mid = float(done.finish.max()) / 2
    half = run_isolated(caps, nbytes, lat, lens, link, until=mid)
    finished = ~np.isnan(half.finish)
    assert np.allclose(half.finish[finished], done.finish[finished], rtol=1e-12, atol=0)
    assert (done.finish[~finished] >= mid * (1 - 1e-12)).all()
    assert (half.rem <= nbytes + 1e-9).all()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(-1.0, 1e12, allow_nan=False).filter(lambda v: v != 0.0) | st.sampled_from([0.0, 5e-324]), min_size=1,
                max_size=8))
def test_the_lean_forms_closed_form_is_the_solver_on_one_flow(caps):
    # route_rate (the lean form's rate: a flow sharing no link) is maxmin_rates and maxmin_small of that
    # flow alone, bit for bit, negative residuals (clamped to 0) and zero capacities included
    from simcomm.engine.fluid.maxmin import maxmin_small, route_rate

    links = list(range(len(caps)))
    want, rounds = maxmin_rates(np.zeros(len(caps), dtype=np.int64), np.array(links), 1, np.array(caps))
    assert np.float64(route_rate(caps)).tobytes() == want[0].tobytes() and rounds == 1
    assert maxmin_small([links], dict(enumerate(caps))) == ([route_rate(caps)], 1)
    assert route_rate([]) == np.inf


def test_the_incremental_re_solve_is_written_once():
    """Every form of the fluid core runs the one re-solve (maxmin.IncrementalSolve.resolve) with kernels of its own;
    the lean form runs the scalar form's pass and replaces only kernels of the re-solve and which lists a removal
    shortens (docs/engine.md, "Incremental re-solves")."""
    from simcomm.engine.fluid.core import FluidCore
    from simcomm.engine.fluid.lone import LoneFlows
    from simcomm.engine.fluid.maxmin import IncrementalSolve
    from simcomm.engine.fluid.small import SmallFlows

    for form in (FluidCore, SmallFlows, LoneFlows):
        assert issubclass(form, IncrementalSolve) and form.resolve is IncrementalSolve.resolve
        assert all(getattr(form, k) is not getattr(IncrementalSolve, k)
                   for k in ("_rates_gone_entered", "_resolve_set", "_new_rates", "_apply"))
    own = {k for k, v in vars(LoneFlows).items() if callable(v) and k in vars(SmallFlows)}
    assert own == {"__init__", "merge", "compact", "_rates_gone_entered", "_new_rates", "_slot_fields", "_release"}
    assert LoneFlows.step is SmallFlows.step and LoneFlows._resolve_set is SmallFlows._resolve_set
