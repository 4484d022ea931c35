"""Steps of one transfer size per link priced by their closed form (``closed_steps``), against the fluid run.

The theorem (docs/engine.md, "Steps of one size per link"): a batch of transfers that start together, alone on
the network, each link carrying transfers of one size, ends at ``latency + max over links (bytes / capacity)``
under max-min fair sharing.  Checked on hypothesis-drawn batches against the fluid core, with a batch that
breaks the condition (two sizes on one link) as the counter-example the guard exists for, and on NCCL
all-to-alls and the strategies that run them, priced both ways.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simcomm import engine
from simcomm.engine.flow.closed import closed_period as _closed_period
from simcomm.engine.fluid.core import run_isolated
from simcomm.engine.options import CLOSED_STEPS, EngineOptions
from simcomm.engine.schedule import RoutedStep
from simcomm.errors import ConfigError
from simcomm.ops import PlanBuilder
from simcomm.runtimes import NcclRuntime
from simcomm.stacks import apply_stack, get_stack
from simcomm.topologies.two_level import two_level

NONE = np.zeros(0, dtype=np.int64)


def step(nbytes, routes, latency=0.0) -> RoutedStep:
    n = len(nbytes)
    return RoutedStep(np.arange(n), np.arange(n), np.asarray(nbytes, float), np.full(n, latency),
                      np.array([len(r) for r in routes], dtype=np.int64),
                      np.array([x for r in routes for x in r], dtype=np.int64), 1, NONE, np.zeros(0),
                      np.full(n, -1, dtype=np.int64))


def fluid(s: RoutedStep, capacity) -> float:
    iso = run_isolated(np.asarray(capacity, float), s.nbytes, s.latency, s.route_len, s.links, form="numpy")
    return s.end_time(0.0, iso.finish)


@st.composite
def one_size_per_link(draw):
    """Links in groups, each group with its own size; every transfer routed within one group."""
    groups = draw(st.integers(1, 3))
    per = [draw(st.integers(1, 4)) for _ in range(groups)]
    first = np.cumsum([0] + per)
    capacity = [draw(st.sampled_from([1.0, 2.5, 10.0, 3e9, 25e9])) for _ in range(first[-1])]
    sizes = [draw(st.sampled_from([1.0, 7.0, 1e3, 4096.0, 3.3e6])) for _ in range(groups)]
    nbytes, routes = [], []
    for _ in range(draw(st.integers(1, 24))):
        g = draw(st.integers(0, groups - 1))
        links = draw(st.lists(st.integers(first[g], first[g + 1] - 1), min_size=1, max_size=per[g], unique=True))
        nbytes.append(sizes[g])
        routes.append(links)
    return step(nbytes, routes, draw(st.sampled_from([0.0, 3e-6]))), capacity


@settings(max_examples=150, deadline=None)
@given(one_size_per_link())
def test_one_size_per_link_ends_at_its_closed_form(case):
    s, capacity = case
    found = _closed_period(s, np.asarray(capacity, float))
    assert found is not None
    closed, load = found
    assert load == pytest.approx(np.bincount(s.links, weights=np.repeat(s.nbytes, s.route_len),
                                             minlength=len(capacity)), rel=1e-12)
    assert closed == pytest.approx(fluid(s, capacity), rel=1e-9)


def test_two_sizes_on_one_link_is_left_to_the_fluid_run():
    # f1 (1 B) shares link A with f2 (1 B) and link B with three 0.25 B transfers; f2 shares C with three more.
    # Until the small ones end (t = 1) f1 and f2 get 1/4 each, so A idles half the time: the fluid run ends at
    # 2.5 s while the busiest link (A: 2 B at 1 B/s) says 2 s.  The guard sees two sizes on B and C.
    s = step([1.0, 1.0] + [0.25] * 6, [[0, 1], [0, 2], [1], [1], [1], [2], [2], [2]])
    capacity = [1.0, 1.0, 1.0]
    assert fluid(s, capacity) == pytest.approx(2.5, rel=1e-12)
    assert _closed_period(s, np.asarray(capacity)) is None


def test_a_reduction_or_unequal_latencies_are_left_to_the_fluid_run():
    s = step([1.0, 1.0], [[0], [1]])
    assert _closed_period(s, np.ones(2))[0] == 1.0
    assert _closed_period(step([1.0, 1.0], [[0], [1]]).__class__(
        s.src, s.dst, s.nbytes, np.array([0.0, 1e-6]), s.route_len, s.links, 1, NONE, np.zeros(0),
        s.red_slot), np.ones(2)) is None
    reduced = RoutedStep(s.src, s.dst, s.nbytes, s.latency, s.route_len, s.links, 1, np.array([1]),
                         np.array([1e-3]), np.array([0, 0]))
    assert _closed_period(reduced, np.ones(2)) is None


def pxn(nodes):
    return apply_stack(two_level(nodes, 8, intra="nvswitch", nic_link="ib-hdr", nics_per_node=8, device="h100",
                                 inter="rail"), get_stack("nccl"))


@pytest.mark.parametrize("nodes", [2, 3, 5])
@pytest.mark.parametrize("nbytes", [4096.0, 818e3, 64e6])
def test_nccl_alltoall_priced_closed_equals_its_flows(nodes, nbytes):
    topo = pxn(nodes)
    b = PlanBuilder(topo.n_ranks)
    b.collective("alltoall", range(topo.n_ranks), nbytes)
    b.collective("alltoall", range(topo.n_ranks), nbytes / 3, after=[0])
    plan = b.build()
    closed = engine.simulate(plan, topo, runtime=NcclRuntime(), closed_steps=1)
    flows = engine.simulate(plan, topo, runtime=NcclRuntime(), reference={"closed_steps"}, closed_steps=1)
    assert closed.meta["steps_closed"] == 2 and "steps_closed" not in flows.meta
    assert closed.end == pytest.approx(flows.end, rel=1e-9)
    assert closed.link_class_bytes == pytest.approx(flows.link_class_bytes, rel=1e-12)
    # below the default size the fluid run prices it: no float of a stored hash moves
    assert "steps_closed" not in engine.simulate(plan, topo, runtime=NcclRuntime()).meta


def test_traffic_arriving_during_a_closed_step_resumes_it_exactly():
    topo = pxn(3)
    b = PlanBuilder(topo.n_ranks)
    a2a = b.collective("alltoall", range(topo.n_ranks), 64e6)
    c = b.compute(0, 200e-6)
    b.transfer(0, 8, 3e6, after=[c], stream="p2p")  # rank 0's message to node 1 meets the all-to-all on rank 0's rail mid-way
    b.compute(5, 1e-6, after=[a2a])
    plan = b.build()
    closed = engine.simulate(plan, topo, runtime=NcclRuntime(), closed_steps=1)
    flows = engine.simulate(plan, topo, runtime=NcclRuntime(), reference={"closed_steps"}, closed_steps=1)
    assert closed.meta["steps_closed"] == 1 and closed.meta["reservation_interrupts"] >= 1
    assert closed.end == pytest.approx(flows.end, rel=1e-9)


@pytest.mark.parametrize("strategy", ["ok-topk", "pcnn", "pcnn-no-overlap"])
@pytest.mark.parametrize("resolution", [0.0, 0.01])
def test_strategies_running_alltoalls_are_priced_alike(strategy, resolution):
    from simcomm.pipeline.baseline import make_strategy, scenario_options
    from simcomm.result import iteration_time
    from simcomm.scenario.resolve import from_flat
    from simcomm.scenario.setup import Resolver, resolve_setup
    from simcomm.workload import build_workload

    scn = from_flat({"strategy": strategy, "nodes": 3, "gpus_per_node": 8, "cluster": "dgx-a100-hdr"})
    st = make_strategy(scn.strategy, scenario_options(scn))
    setup = resolve_setup(scn, Resolver(scn), st.extra_nodes())
    w = build_workload(setup.trace, setup.n_train, batch=8, wire_dtype=setup.wire_dtype, dataset_size=1000)
    def run(plan, **opts):
        tl = engine.simulate(plan, setup.topology, options=EngineOptions(
            runtime=setup.runtime, resolution=resolution, closed_steps=1, **opts))
        return tl, iteration_time(plan, tl)[0]

    for _, plan in st.iterations(w, setup.topology):
        (closed, t_closed), (_, t_flows) = run(plan), run(plan, reference={"closed_steps"})
        assert closed.meta["steps_closed"] >= 1
        # the closed form is the exact fluid answer; merged completions (resolution 1 %) move the fluid run
        # by at most the resolution's own bound
        assert t_closed == pytest.approx(t_flows, rel=1e-9 if resolution == 0 else resolution)


@pytest.mark.parametrize("nodes", [3, 21])
def test_counted_closed_steps_equal_the_routed_ones(nodes, monkeypatch):
    # a PXN all-to-all kept as blocks of pairs is priced from each link's count of pairs, never routed: the
    # same closed form, link bytes and statistics as the routed step's, bit for bit
    from simcomm.nccl.algorithms.p2p import P2P

    topo = apply_stack(two_level(nodes, 8, intra="nvswitch", nic_link="ib-hdr", nics_per_node=8, device="a100",
                                 inter="rail", inter_options={"nodes_per_leaf": 4}), get_stack("nccl"))
    b = PlanBuilder(topo.n_ranks)
    first = b.collective("alltoall", range(topo.n_ranks), 818e3)
    b.collective("alltoall", range(topo.n_ranks), 1e8 / 3, after=[first])
    plan = b.build()
    routes = []
    real = type(topo).routes
    monkeypatch.setattr(type(topo), "routes", lambda self, s, d: routes.append(len(s)) or real(self, s, d))
    runs = {(fidelity, busiest): dict(runtime=NcclRuntime(pair_blocks_from=1), closed_steps=1, fidelity=fidelity,
                                      busiest_links=busiest)  # (kept as blocks at any size here)
            for fidelity in ("flow", "analytic") for busiest in (0, 5)}
    counted = {key: engine.simulate(plan, topo, **opts) for key, opts in runs.items()}
    assert counted["flow", 0].meta["steps_closed"] == 2 and not any(n > 64 for n in routes)  # none routed
    monkeypatch.setattr(P2P, "blocks", lambda *args: None)
    for key, opts in runs.items():
        # the closed form, bytes per family and the busiest links (bytes per link) from the counts: the routed
        # step's, bit for bit, in both fidelities
        one, two = counted[key], engine.simulate(plan, topo, **opts)
        assert one.end.tobytes() == two.end.tobytes() and one.start.tobytes() == two.start.tobytes()
        assert one.link_class_bytes == two.link_class_bytes and one.meta == two.meta
        assert one.link_class_bytes and all(v > 0 for v in one.link_class_bytes.values())
        assert ("busiest_links" in one.meta) == (key[1] > 0)


def test_closed_steps_must_be_a_positive_count():
    assert EngineOptions().closed_steps == CLOSED_STEPS
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ConfigError, match="closed_steps"):
            EngineOptions(closed_steps=bad)


def test_loads_summed_in_chunks_are_the_loads(monkeypatch):
    import simcomm.engine.flow.closed as pricer
    from simcomm.engine.schedule import route_step
    from simcomm.nccl.prepare import prepare_nccl
    from simcomm.ops import Collective

    topo = pxn(3)
    op = Collective(0, "alltoall", tuple(range(topo.n_ranks)), 818e3)
    prep = prepare_nccl(op, topo, NcclRuntime())
    routed = route_step(topo, np.arange(topo.n_ranks), prep.steps[0], np.zeros(topo.n_ranks))
    routed = replace(routed, latency=np.full(len(routed), prep.latency[0]))  # NCCL's, as the pricer sets it
    whole = _closed_period(routed, topo.capacity)
    monkeypatch.setattr(pricer, "_CHUNK", 7)  # passes that end mid-way through both sizes' transfers
    chunked = _closed_period(routed, topo.capacity)
    assert whole is not None and chunked is not None
    assert chunked[0] == pytest.approx(whole[0], rel=1e-12)
    assert chunked[1] == pytest.approx(whole[1], rel=1e-12)
    # two sizes on one link are seen across passes too: the in-node relays doubled onto a rail's route
    two = RoutedStep(routed.src, routed.dst, np.where(np.arange(len(routed)) == len(routed) - 1,
                                                      routed.nbytes * 2, routed.nbytes), routed.latency,
                     routed.route_len, routed.links, 1, NONE, np.zeros(0), routed.red_slot)
    assert _closed_period(two, topo.capacity) is None


@pytest.mark.parametrize("resolution", [0.0, 0.01])
def test_a_step_of_exactly_closed_steps_transfers_is_priced_closed(resolution):
    # the threshold counts a step's transfers (``>=``): at its own count the step is priced by its closed form,
    # one above it runs as flows, and the two agree to rounding (docs/engine.md: within 1e-12) at the
    # engine's exact resolution and at a scenario's 1 %
    from simcomm.nccl.prepare import prepare_nccl
    from simcomm.ops import Collective

    topo = pxn(3)
    n = len(prepare_nccl(Collective(0, "alltoall", tuple(range(topo.n_ranks)), 818e3), topo, NcclRuntime()).steps[0])
    assert n == 3 * 8 * 7 + 8 * 3 * 2  # PXN: the in-node relays, then each rail's pairs across nodes
    b = PlanBuilder(topo.n_ranks)
    b.collective("alltoall", range(topo.n_ranks), 818e3)
    plan = b.build()
    at = engine.simulate(plan, topo, runtime=NcclRuntime(), closed_steps=n, resolution=resolution)
    above = engine.simulate(plan, topo, runtime=NcclRuntime(), closed_steps=n + 1, resolution=resolution)
    assert at.meta["steps_closed"] == 1 and "steps_closed" not in above.meta
    assert at.end == pytest.approx(above.end, rel=1e-12, abs=0)
    # its bytes per family are counted crossing by crossing, as its flows count them: the same floats
    assert at.link_class_bytes == above.link_class_bytes


def test_the_default_prices_the_alltoalls_of_1024_gpus_closed():
    # CLOSED_STEPS = 2^16: NCCL's all-to-all over 128 DGX A100 nodes (137 216 transfers after PXN) is priced by
    # its closed form by default, to rounding the flow run's answer at the scenario's resolution (1 %), which
    # merges completions and so could differ by up to 1 %: it does not here (docs/engine.md, "Steps of one
    # size per link"); every stored hash keeps its floats (check_hashes.py)
    from simcomm.pipeline.baseline import make_strategy, scenario_options
    from simcomm.result import iteration_time
    from simcomm.scenario.resolve import from_flat
    from simcomm.scenario.setup import Resolver, resolve_setup
    from simcomm.workload import build_workload

    assert CLOSED_STEPS == 1 << 16 and 64 * 8 * 7 + 8 * 64 * 63 < CLOSED_STEPS <= 128 * 8 * 7 + 8 * 128 * 127
    scn = from_flat({"strategy": "ok-topk", "nodes": 128, "gpus_per_node": 8, "cluster": "dgx-a100-hdr"})
    st = make_strategy(scn.strategy, scenario_options(scn))
    setup = resolve_setup(scn, Resolver(scn), st.extra_nodes())
    w = build_workload(setup.trace, setup.n_train, batch=8, wire_dtype=setup.wire_dtype, dataset_size=1000)
    (_, plan), = st.iterations(w, setup.topology)
    runs = [engine.simulate(plan, setup.topology, options=EngineOptions(runtime=setup.runtime, resolution=0.01,
                                                                        reference=ref))
            for ref in (frozenset(), {"closed_steps"})]
    closed, flows = runs
    assert closed.paths["taken"]["closed_steps"] == 1 and "closed_steps" not in flows.paths["taken"]
    assert iteration_time(plan, closed)[0] == pytest.approx(iteration_time(plan, flows)[0], rel=1e-12, abs=0)
    assert closed.end == pytest.approx(flows.end, rel=1e-12, abs=0)
    assert closed.link_class_bytes == flows.link_class_bytes
