"""The direct loop's message rounds (:mod:`simcomm.engine.drive.rounds`) give the floats of one stream at a time.

Messages one done event releases start in one pass, handed to the fluid core in one call, and their bytes per link
family are added at cuts and at the end by a sequential sum: every start, end, statistic and link byte must be
the run's with the ``rounds`` reference (one stream at a time, each message's bytes added as it starts) and with
SimPy's queue (the ``direct`` reference), on hypothesis-drawn irregular rounds (streams released by one event
next to streams that still wait, at a compute or a collective; traffic weights and busiest links, which keep the
adds one by one) and on crossover-sgd's own plan.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from timelines import both, check

from simcomm.engine import EngineOptions, simulate
from simcomm.engine.drive.rounds import FamilyBytes
from simcomm.links.base import LinkClass
from simcomm.ops import PlanBuilder
from simcomm.runtimes.mpi import MPICH
from simcomm.topologies.fat_tree import fat_tree

LINK = LinkClass("rounds-link", 1e9, 1e-6, "custom")
TOPO = fat_tree(4, link=LINK, levels=2, oversubscription=2)


@st.composite
def round_plans(draw):
    """Gates (a compute on rank 0, or a message) that release messages of many ranks at once; some of those wait
    for a second gate, some ranks compute or send on another stream first; optionally a barrier over all ranks
    after a round (a cut) and an irregular tail."""
    n = TOPO.n_ranks
    b = PlanBuilder(n)
    gate = [b.compute(0, draw(st.sampled_from([0.0, 1e-6, 3e-6])))]
    for k in range(draw(st.integers(1, 4))):
        made = []
        late = b.compute(1, draw(st.sampled_from([0.0, 2e-6, 7e-6])), after=gate, label=f"late {k}")
        for src in draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=3 * n)):
            dst = draw(st.integers(0, n - 1).filter(lambda d, src=src: d != src))
            size = draw(st.sampled_from([1e3, 4e3, 1e4]) | st.floats(1.0, 5e4))
            stream = draw(st.sampled_from(["comm", "comm", "comm", "push"]))
            after = gate + ([late] if draw(st.integers(0, 4)) == 0 else [])
            if draw(st.integers(0, 6)) == 0:  # a stream at a compute when the gate ends
                made.append(b.compute(src, 1e-6, after=gate, stream=stream))
            made.append(b.transfer(src, dst, size, after=after, stream=stream))
        # every op so far before the next gate (a barrier is then a cut, and the plan stays on the direct loop)
        if draw(st.booleans()):
            gate = [b.collective("allreduce", tuple(range(n)), 8.0, after=[*made, late, *gate], label=f"barrier {k}")]
        else:
            gate = [b.compute(0, 1e-6, after=[*made, late], label=f"gate {k}")]
    if draw(st.booleans()):
        b.transfer(0, n - 1, 2e3, after=gate)
    return b.build(traffic_weights={"push": 2.0} if draw(st.booleans()) else None)


def _run(plan, reference=(), **kw):
    return simulate(plan, TOPO, runtime=MPICH, traffic_weights=plan.info.traffic_weights or (),
                    reference=set(reference), **kw)


@settings(max_examples=80, deadline=None)
@given(round_plans(), st.sampled_from([0.0, 0.0, 0.01, 0.2]), st.sampled_from([(), ("scalar",), ("lean",)]),
       st.sampled_from([0, 0, 3]))
def test_message_rounds_are_one_stream_at_a_time_bit_for_bit(plan, resolution, core, busiest):
    fast = _run(plan, core, resolution=resolution, busiest_links=busiest)
    assert fast.paths["driver"] == "direct"
    check(fast, _run(plan, {"rounds", *core}, resolution=resolution, busiest_links=busiest))
    check(fast, _run(plan, {"direct", *core}, resolution=resolution, busiest_links=busiest))
    assert "message_rounds" not in _run(plan, {"rounds"}, resolution=resolution).paths["taken"]


def test_a_round_released_by_one_compute_is_taken_and_counted():
    # 16 ranks each send after rank 0's compute: one round of 16 messages; rank 3 also waits for rank 1's compute
    n = TOPO.n_ranks
    b = PlanBuilder(n)
    gate = b.compute(0, 1e-6)
    late = b.compute(1, 5e-6)
    for r in range(n):
        b.transfer(r, (r + 5) % n, 1e4, after=[gate, late] if r == 3 else [gate])
    plan = b.build()
    fast, ref = _run(plan), _run(plan, {"rounds"})
    check(fast, ref)
    # the round of the other 15 ranks (rank 3's message starts alone when rank 1's compute ends)
    assert fast.paths["taken"] == {"message_rounds": 1} and ref.paths["taken"] == {}
    assert fast.link_class_bytes == ref.link_class_bytes and fast.link_class_bytes["custom"] > 0


@pytest.mark.parametrize("fold", [False, True])
@pytest.mark.parametrize("options", [{}, {"mode": "blocking", "segments": 5}, {"overlap": "compute", "seed": 3}])
@pytest.mark.parametrize("resolution", [0.0, 0.01])
def test_crossover_sgd_plans_run_the_same_with_and_without_rounds(options, fold, resolution):
    from dataclasses import replace

    from simcomm.pipeline.baseline import make_strategy, scenario_options
    from simcomm.scenario.resolve import from_flat
    from simcomm.scenario.setup import Resolver, resolve_setup
    from simcomm.workload import build_workload

    # 3 machines of 8: 24 ranks, an irregular number of machines
    scn = from_flat({"strategy": "crossover-sgd", "nodes": 3, "gpus_per_node": 8, "cluster": "dgx-a100-hdr",
                     **options})
    strategy = make_strategy(scn.strategy, scenario_options(scn))
    setup = resolve_setup(scn, Resolver(scn), strategy.extra_nodes())
    w = replace(build_workload(setup.trace, setup.n_train, batch=8), fold_ranks=fold)
    for _, plan in strategy.iterations(w, setup.topology):
        fast, ref = both(plan, setup.topology, (), {"rounds"}, runtime=setup.runtime, resolution=resolution)
        check(fast, ref)
        assert "message_rounds" not in ref.paths["taken"]
        if fast.paths["driver"] == "direct":
            # folded ranks average through rank 0's compute, whose end releases every rank's next message: a round
            # per segment (unfolded, each rank's own average releases its own message alone)
            assert (fast.paths["taken"].get("message_rounds", 0) >= 5) == fold
        else:
            # (pair all-reduces, or an exchange beside forward and backward: collectives that are not cuts)
            assert options.get("mode") == "blocking" or options.get("overlap") == "compute"


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([0, 1, 2]), st.floats(0.0, 1e12) | st.sampled_from([1.0, 3e9, 1e-3])),
                max_size=60),
       st.lists(st.floats(0.0, 1e15), min_size=3, max_size=3))
def test_family_bytes_are_the_adds_one_by_one(messages, totals):
    patterns = [[(0, 2.0), (2, 1.0)], [(1, 4.0)], [(0, 1.0), (1, 2.0), (2, 2.0)]]
    log = FamilyBytes(3)
    one_by_one = list(totals)
    for which, nbytes in messages:
        log.fams.append(patterns[which])
        log.nbytes.append(nbytes)
        for f, x in patterns[which]:
            one_by_one[f] += nbytes * x
    summed = list(totals)
    log.flush(summed)
    assert np.array(summed).tobytes() == np.array(one_by_one).tobytes()
    assert not log.fams and not log.nbytes


def test_the_rounds_reference_is_an_engine_option():
    assert "rounds" in EngineOptions(reference=frozenset({"rounds"})).reference


@settings(max_examples=60, deadline=None)
@given(round_plans())
def test_the_one_pass_prices_every_message_at_once_bit_for_bit(plan):
    # the closed-form estimate (analytic, no link bytes): each message's seconds from one routing of every pair
    fast = _run(plan, fidelity="analytic", link_bytes=False)
    ref = _run(plan, {"rounds"}, fidelity="analytic", link_bytes=False)
    assert fast.paths["driver"] == ref.paths["driver"] == "one-pass"
    assert np.asarray(fast.start).tobytes() == np.asarray(ref.start).tobytes()
    assert np.asarray(fast.end).tobytes() == np.asarray(ref.end).tobytes() and fast.meta == ref.meta
    many = sum(type(op).__name__ == "Transfer" for op in plan.ops) > 1
    assert fast.paths["taken"] == ({"message_rounds": 1} if many else {}) and ref.paths["taken"] == {}


@pytest.mark.parametrize("fold", ["auto", "on"])
@pytest.mark.parametrize("resolution", [0.0, 0.01])
def test_rounds_beside_machine_local_collectives_are_bit_for_bit(fold, resolution):
    # hierarchical-crossover-sgd on the direct loop: its roots' rounds of messages between machine-local reduces and
    # broadcasts, whose bytes are added while messages' are logged (the log is added first: the same order)
    from simcomm.runtimes import get_runtime
    from simcomm.topologies.presets import preset
    from tests.engine.test_engine_local_collectives import _hierarchical

    topo = preset("dgx-a100-hdr", nodes=3, gpus_per_node=8)
    plan = _hierarchical(topo, fold=fold)
    kw = {"runtime": get_runtime("nccl"), "resolution": resolution}
    fast, ref = both(plan, topo, ("keep",), {"rounds", "keep"}, **kw)
    check(fast, ref)
    check(fast, both(plan, topo, ("keep",), {"direct", "keep"}, **kw)[1])
    # (three roots, each released by its own machine's reduce: no round of two, but every message's bytes logged)
    assert fast.paths["driver"] == "direct" and fast.paths["taken"]["local_collectives"] > 0
    assert any(type(op).__name__ == "Transfer" for op in plan.ops) and fast.link_class_bytes


def test_the_one_pass_routes_the_flow_runs_batch_of_pairs_once():
    # the one pass routes the distinct pairs in the order the flow run does (first appearance), so the routed batch
    # Topology.routes keeps from the flow run is read back, not routed again; the seconds are the per-pair ones
    from simcomm.topologies.two_level import two_level

    topo = two_level(64, 8, inter="fat-tree")
    n = topo.n_ranks
    b = PlanBuilder(n)
    gate = [b.compute(0, 1e-6)]
    for k in (1, 3, 5, 7, 9, 11, 13, 15, 1):  # 4 096 distinct pairs and a round that repeats the first
        gate = [b.compute(0, 1e-6, after=[b.transfer(r, (r + k) % n, 1e4 * k, after=gate) for r in range(n)])]
    plan = b.build()
    flow = simulate(plan, topo, runtime=MPICH)
    assert len(topo._batches) == 1
    fast = simulate(plan, topo, runtime=MPICH, fidelity="analytic", link_bytes=False)
    assert len(topo._batches) == 1 and fast.paths["taken"] == {"message_rounds": 1}
    ref = simulate(plan, two_level(64, 8, inter="fat-tree"), runtime=MPICH, fidelity="analytic", link_bytes=False,
                   reference={"rounds"})
    assert np.asarray(fast.end).tobytes() == np.asarray(ref.end).tobytes() and flow.makespan > 0


def _drain(core):
    """Every (batch id, finish time) of ``core`` settled event by event until it is idle."""
    out, now = [], 0.0
    while not core.empty:
        done, now = core.settle_next(now)
        out += [(b, float(f[0])) for b, f in done]
        if now == np.inf:
            break
    return out


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, TOPO.n_ranks - 1), st.integers(1, TOPO.n_ranks - 1),
                          st.floats(1.0, 5e4), st.sampled_from([0.0, 1e-6, 3e-6])), min_size=1, max_size=60),
       st.integers(0, 3), st.sampled_from([2, 16]))
def test_a_round_queued_as_one_block_is_its_messages_one_by_one(msgs, singles, max_live):
    """FluidCore.add_messages queues a round of more than ``max_live`` messages as one block: the same batches,
    finish times and bytes left as add_message of each in turn, alone or beside single messages queued with it."""
    from simcomm.engine.fluid.core import FluidCore

    routes = [tuple(TOPO.route(a, (a + d) % TOPO.n_ranks)) for a, d, _, _ in msgs]
    sizes, starts = [m[2] for m in msgs], [m[3] for m in msgs]
    block, one = FluidCore(TOPO.capacity, max_live=max_live), FluidCore(TOPO.capacity, max_live=max_live)
    for core in (block, one):  # single messages queued before the round (a mixed queue)
        for k in range(singles):
            core.add_message(1e3 * (k + 1), 0.0, routes[0])
    first = block.add_messages(sizes, starts, routes)
    assert first == one.add_message(sizes[0], starts[0], routes[0])
    for nb, tb, route in zip(sizes[1:], starts[1:], routes[1:], strict=True):
        one.add_message(nb, tb, route)
    assert [block.bytes_left(first + i, 0, 0.0) for i in range(len(msgs))] == sizes
    assert block.bytes_left(first, 1, 0.0) == 0.0
    assert _drain(block) == _drain(one)


def test_a_block_of_mismatched_lists_is_refused():
    from simcomm.engine.fluid.core import FluidCore

    core = FluidCore(TOPO.capacity, max_live=2)
    route = tuple(TOPO.route(0, 1))
    with pytest.raises(ValueError, match="differ in length"):
        core.add_messages([1.0, 2.0, 3.0], [0.0, 0.0], [route] * 3)


@settings(max_examples=40, deadline=None)
@given(round_plans(), st.sampled_from([0.0, 0.01]), st.sampled_from([(), ("scalar",), ("incremental",)]))
def test_link_loads_updated_on_the_links_crossed_alone_are_bit_for_bit(plan, resolution, core):
    """FluidCore._rates_gone_entered touches only the links an event's flows cross when they are few against the
    network's links (every event here, forced) and one array over every link otherwise (forced too): the same
    floats either way, on rounds of messages and barriers in every core form."""
    import simcomm.engine.fluid.core as fluid_core

    runs = []
    for sparse in (10**9, 0):  # every event on the crossed links alone; every event over every link
        old = fluid_core._SPARSE_LINKS
        fluid_core._SPARSE_LINKS = sparse
        try:
            runs.append(_run(plan, core, resolution=resolution, max_live=2))
        finally:
            fluid_core._SPARSE_LINKS = old
    check(runs[0], runs[1])
