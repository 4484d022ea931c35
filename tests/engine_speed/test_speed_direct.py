"""The direct loop (simcomm.engine.drive.executor._run_direct) runs plans of computes and messages
exactly as the SimPy processes do: every op's start and end, every statistic and the link
bytes are the same floats, on hypothesis-drawn plans (FIFO chains, cross-stream
dependencies, zero-length computes, messages that start and end at the same instants) and on
the parameter server's own plan."""

import pytest
import timelines
from flowcases import fifo_server_plan
from hypothesis import given, settings
from hypothesis import strategies as st
from timelines import check

import simcomm.engine.drive.executor as executor
from simcomm.engine import simulate
from simcomm.errors import PlanError
from simcomm.links.base import LinkClass
from simcomm.ops import CommPlan, Compute, PlanBuilder
from simcomm.pipeline import simulate as run_scenario
from simcomm.runtimes.mpi import MPICH
from simcomm.scenario import Scenario
from simcomm.topologies.fat_tree import fat_tree

LINK = LinkClass("speed-link", 1e9, 1e-6, "custom")
TOPO = fat_tree(4, link=LINK, levels=2, oversubscription=2)


both = timelines.direct_vs_queue


@st.composite
def message_plans(draw):
    n = TOPO.n_ranks
    b = PlanBuilder(n)
    ids: list[int] = []
    for _ in range(draw(st.integers(1, 45))):
        after = draw(st.lists(st.sampled_from(ids), max_size=2, unique=True)) if ids else []
        stream = draw(st.sampled_from(["compute", "push", "pull"]))
        if draw(st.integers(0, 2)) == 0:
            secs = draw(st.sampled_from([0.0, 1e-6, 5e-6]) | st.floats(0.0, 2e-5))
            ids.append(b.compute(draw(st.integers(0, n - 1)), secs, after=after, stream=stream))
        else:
            src = draw(st.integers(0, n - 1))
            dst = draw(st.integers(0, n - 1).filter(lambda d, src=src: d != src))
            size = draw(st.sampled_from([1e3, 4e3, 1e4]) | st.floats(1.0, 5e4))
            ids.append(b.transfer(src, dst, size, after=after, stream=stream))
    return b.build()


@settings(max_examples=120, deadline=None)
@given(message_plans(), st.sampled_from([0.0, 0.0, 0.01, 0.2]), st.booleans())
def test_direct_loop_is_the_simpy_run_bit_for_bit(plan, resolution, scalar):
    a, b = both(plan, TOPO, resolution=resolution, reference=() if scalar else {"scalar"})
    check(a, b)


def test_link_usage_and_busiest_links_are_the_same():
    plan = _fifo_server_plan(3)
    a, b = both(plan, TOPO, record_link_usage=True, busiest_links=3)
    check(a, b)
    assert a.meta["link_usage"]  # recorded
    assert len(a.meta["busiest_links"]) == 3  # messages count on their links (they once counted nowhere)


@pytest.mark.parametrize("fidelity, direct", [("flow", True), ("flow", False), ("analytic", True)])
def test_busiest_links_count_messages_by_hand(fidelity, direct):
    # two messages of n and 2n bytes: every link of a route carries its message's bytes once; a link both
    # routes cross carries 3n. By hand from the routes, in every pricing path of a message.
    n = 1e4
    b = PlanBuilder(TOPO.n_ranks)
    b.transfer(0, 5, n, stream="a")
    b.transfer(1, 6, 2 * n, stream="b")
    want: dict = {}
    for (src, dst), nb in (((0, 5), n), ((1, 6), 2 * n)):
        for lid in TOPO.route(src, dst):
            want[lid] = want.get(lid, 0.0) + nb
    busy = {lid: v / float(TOPO.capacity[lid]) for lid, v in want.items()}
    top = sorted(want, key=lambda i: (-busy[i], i))[:4]
    tl = simulate(b.build(), TOPO, fidelity=fidelity, busiest_links=4, reference=() if direct else {"direct"}, runtime=MPICH)
    assert tl.paths["driver"] == ("direct" if direct and fidelity == "flow" else "callbacks")
    assert [(row[2], row[3]) for row in tl.meta["busiest_links"]] == [(TOPO.link_names[i], want[i]) for i in top]


def _fifo_server_plan(tensors: int):
    """Workers push to rank 0 one message at a time; it updates and pulls back one at a time."""
    return fifo_server_plan(TOPO.n_ranks, tensors, compute=1e-5, nbytes=1e4, update=2e-6)


def test_a_fifo_server_ends_at_the_hand_computed_time():
    # One worker pushes 1e4 B to rank 0, which computes 2 us and pulls it back: two route
    # latencies (4 hops of 1 us each way through the spine, or 2 under one edge switch) plus
    # 1e4 B at 1 GB/s each way.
    b = PlanBuilder(TOPO.n_ranks)
    p = b.transfer(1, 0, 1e4, stream="push")
    u = b.compute(0, 2e-6, after=[p], stream="server")
    b.transfer(0, 1, 1e4, after=[u], stream="pull")
    plan = b.build()
    a, ref = both(plan, TOPO)
    check(a, ref)
    hops = len(TOPO.route(1, 0))
    assert a.makespan == pytest.approx(2 * (hops * 1e-6 + 1e4 / 1e9) + 2e-6, rel=1e-12)


def test_the_parameter_server_strategy_plan_is_the_same():
    got = {}

    def keep(label, weight, plan, tl, topo):
        got.setdefault("run", (plan, topo, tl))

    run_scenario(Scenario(strategy="ps", cluster="dgx-a100-hdr", nodes=2, gpus_per_node=8, resolution=0.01),
                 on_timeline=keep, baseline=False, analytic=False)
    plan, topo, _ = got["run"]
    for kw in ({"resolution": 0.01}, {"resolution": 0.0}, {"resolution": 0.01, "reference": {"scalar"}}):
        check(*both(plan, topo, **kw))


def test_plans_with_collectives_or_cpu_cost_take_the_simpy_path(monkeypatch):
    calls = []
    real = executor._run_direct
    monkeypatch.setattr(executor, "_run_direct", lambda *a: calls.append(1) or real(*a))
    b = PlanBuilder(TOPO.n_ranks)
    b.transfer(0, 1, 1e4)
    plan = b.build()
    simulate(plan, TOPO, runtime=MPICH)
    assert calls == [1]
    simulate(plan, TOPO, comm_cpu=1e-10, runtime=MPICH)
    b.collective("allreduce", range(2, 6), 1e4, algorithm="ring")  # not a cut: the message is not its ancestor
    simulate(b.build(), TOPO, runtime=MPICH)
    assert calls == [1]  # (a collective that is a cut runs on the direct loop: test_speed_direct_cuts.py)


def test_an_op_that_cannot_run_is_the_same_error():
    # (not a valid plan: op 1 waits for itself; the engine reports it rather than hang)
    bad = CommPlan(n_ranks=2, ops=(Compute(id=0, rank=0, seconds=1.0), Compute(id=1, rank=1, seconds=1.0, deps=(1,))))
    with pytest.raises(PlanError, match="never ran") as direct:
        simulate(bad, TOPO, runtime=MPICH)
    with pytest.raises(PlanError, match="never ran") as slow:
        simulate(bad, TOPO, reference={"direct"}, runtime=MPICH)
    assert str(direct.value) == str(slow.value)


def test_busiest_links_of_a_collective_are_the_same_in_both_fidelities():
    # the analytic fidelity once counted no collective's bytes per link (busiest_links came out empty)
    b = PlanBuilder(8)
    b.collective("allreduce", range(8), 1e6, algorithm="ring")
    flow = simulate(b.build(), TOPO, fidelity="flow", busiest_links=5, runtime=MPICH).meta["busiest_links"]
    analytic = simulate(b.build(), TOPO, fidelity="analytic", busiest_links=5, runtime=MPICH).meta["busiest_links"]
    assert len(flow) == 5 and [row[:4] for row in analytic] == [row[:4] for row in flow]
