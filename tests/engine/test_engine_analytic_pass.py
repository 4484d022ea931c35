"""The analytic fidelity without an event loop (``link_bytes=False``): the same floats as with one.

:func:`simcomm.engine.flow.analytic.longest_path` computes every op's start and end
in one pass in op order.  These tests check that it gives bit for bit the
event loop's times on hand-made and hypothesis-drawn plans (several streams
per rank, collectives over subsets, zero-length ops, NCCL's own schedules),
that ``link_bytes=False`` leaves the flow fidelity's times alone, and that
collective preparations kept with the topology serve later runs unchanged.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simcomm.engine import simulate
from simcomm.errors import ConfigError
from simcomm.links.base import LinkClass
from simcomm.ops import PlanBuilder
from simcomm.runtimes import NcclRuntime
from simcomm.runtimes.mpi import MPICH
from simcomm.topologies.fat_tree import fat_tree
from simcomm.topologies.full_mesh import full_mesh
from simcomm.topologies.presets import preset

LINK = LinkClass("p-link", 3e9, 2e-6, "custom")


def _same_times(plan, topo, **options):
    options = {"runtime": MPICH, **options}
    ref = simulate(plan, topo, fidelity="analytic", **options)
    fast = simulate(plan, topo, fidelity="analytic", link_bytes=False, **options)
    np.testing.assert_array_equal(fast.start, ref.start)
    np.testing.assert_array_equal(fast.end, ref.end)
    assert fast.makespan == ref.makespan
    assert fast.link_class_bytes == {} and ref.link_class_bytes
    assert fast.meta == ref.meta
    return ref


def test_hand_plan_streams_collectives_and_zero_length_ops():
    b = PlanBuilder(4)
    c = [b.compute(r, 1e-3 * (r + 1)) for r in range(4)]
    b.compute(1, 0.0)                                              # zero-length compute
    t0 = b.transfer(0, 3, 2e6, after=[c[0]], stream="comm")
    b.transfer(2, 1, 0.0, stream="side")                           # zero bytes: only the route latency
    a = b.collective("allreduce", (1, 3), 5e5, algorithm="ring", after=[t0])
    b.collective("broadcast", range(4), 1e6, algorithm="binomial", root=2, after=[a, c[2]])
    b.compute(3, 2e-3, after=[a])
    b.collective("allgather", (0, 2), 0.0, algorithm="ring")    # nothing to move
    ref = _same_times(b.build(), fat_tree(levels=2, hosts=4, link=LINK))
    assert ref.start[a] == ref.end[t0]                             # its dep, after both members arrived


@st.composite
def plans(draw):
    p = draw(st.integers(2, 8))
    b = PlanBuilder(p)
    ids: list[int] = []
    for _ in range(draw(st.integers(1, 40))):
        kind = draw(st.sampled_from(["compute", "transfer", "collective"]))
        after = draw(st.lists(st.sampled_from(ids), max_size=3)) if ids else []
        stream = draw(st.sampled_from(["compute", "comm", "x"]))
        if kind == "compute":
            secs = draw(st.sampled_from([0.0, 1e-6, 3e-4, 1e-3 / 3]))
            ids.append(b.compute(draw(st.integers(0, p - 1)), secs, after=after, stream=stream))
        elif kind == "transfer":
            src, dst = draw(st.lists(st.integers(0, p - 1), min_size=2, max_size=2, unique=True))
            nbytes = draw(st.sampled_from([0.0, 1.0, 12345.5, 3e6]))
            ids.append(b.transfer(src, dst, nbytes, after=after, stream=stream))
        else:
            ranks = draw(st.lists(st.integers(0, p - 1), min_size=1, max_size=p, unique=True))
            coll = draw(st.sampled_from([("allreduce", "ring"), ("allreduce", "auto"), ("broadcast", "binomial"),
                                         ("allgather", "ring"), ("alltoall", "auto")]))
            nbytes = draw(st.sampled_from([0.0, 8.0, 1e5, 7.5e6]))
            ids.append(b.collective(coll[0], ranks, nbytes, algorithm=coll[1], after=after, stream=stream))
    return b.build()


@settings(max_examples=120, deadline=None)
@given(plans())
def test_drawn_plans_give_the_event_loops_times(plan):
    _same_times(plan, fat_tree(levels=2, hosts=8, link=LINK, oversubscription=2))


@settings(max_examples=40, deadline=None)
@given(plans())
def test_drawn_plans_on_a_mesh_with_reductions(plan):
    _same_times(plan, full_mesh(8, LINK, gamma=1e-10))


def test_nccl_schedules_and_pair_allreduces():
    topo = preset("dgx-a100-hdr", nodes=2, gpus_per_node=8)
    b = PlanBuilder(16)
    for s, nbytes in enumerate((1e6, 3.2e6, 1e6)):
        for r in range(8):  # 2-rank all-reduces between the nodes, as blocking SGP's pairs
            b.collective("allreduce", (r, r + 8), nbytes, label=f"segment {s}")
    b.collective("allreduce", range(16), 25e6)
    _same_times(b.build(), topo, runtime=NcclRuntime())


def test_flow_times_do_not_depend_on_link_bytes():
    topo = fat_tree(levels=2, hosts=8, link=LINK, oversubscription=2)
    b = PlanBuilder(8)
    b.collective("allreduce", range(8), 4e6, algorithm="ring")
    for r in range(8):
        b.transfer(r, (r + 3) % 8, 1e6 * (1 + r % 3))
    plan = b.build()
    ref = simulate(plan, topo, runtime=MPICH)
    fast = simulate(plan, topo, link_bytes=False, runtime=MPICH)
    np.testing.assert_array_equal(fast.start, ref.start)
    np.testing.assert_array_equal(fast.end, ref.end)
    assert fast.link_class_bytes == {} and ref.link_class_bytes


def test_link_bytes_must_be_a_bool():
    b = PlanBuilder(2)
    b.transfer(0, 1, 1e6)
    with pytest.raises(ConfigError, match="link_bytes"):
        simulate(b.build(), full_mesh(2, LINK), link_bytes="no", runtime=MPICH)


def test_kept_preparations_serve_later_runs_unchanged():
    topo = preset("dgx-a100-hdr", nodes=2, gpus_per_node=8)
    b = PlanBuilder(16)
    for r in range(8):
        b.collective("allreduce", (r, r + 8), 2e6)
    plan = b.build()
    first = simulate(plan, topo, runtime=NcclRuntime())
    from simcomm.engine.drive.executor import _KEPT

    kept = dict(_KEPT[topo])
    assert kept  # small 2-rank schedules are kept with the topology
    again = simulate(plan, topo, runtime=NcclRuntime())
    np.testing.assert_array_equal(again.end, first.end)
    assert again.meta == first.meta
    # Another runtime is another key: the kept schedules are not reused for it.
    ring = simulate(plan, topo, runtime=NcclRuntime(nccl_algo="ring"))
    assert len(_KEPT[topo]) > len(kept)
    fresh = simulate(plan, preset("dgx-a100-hdr", nodes=2, gpus_per_node=8), runtime=NcclRuntime(nccl_algo="ring"))
    np.testing.assert_array_equal(ring.end, fresh.end)
    # The keep reference prepares every op again and keeps nothing more: the same floats.
    before = len(_KEPT[topo])
    other = simulate(plan, topo, runtime=NcclRuntime(nccl_algo="tree"), reference={"keep"})
    assert len(_KEPT[topo]) == before
    np.testing.assert_array_equal(other.end, simulate(plan, topo, runtime=NcclRuntime(nccl_algo="tree")).end)


def test_large_preparations_serve_the_closed_form_within_a_budget(monkeypatch):
    # A 512-rank NCCL tree all-reduce has 16 channels x ~2 x 512 transfers, more than the 4 096 always kept: it is
    # kept while the topology's kept preparations stay within _KEEP_BUDGET transfers, so a run's flow simulation
    # and its closed form (the analytic pass) prepare it once; with no budget left, twice.  The same floats.
    from simcomm.engine.drive import executor

    calls = []
    real = executor._prepare
    monkeypatch.setattr(executor, "_prepare", lambda *a: calls.append(a[1]) or real(*a))
    b = PlanBuilder(512)
    b.collective("allreduce", range(512), 25e6)
    plan = b.build()
    runs = []
    for budget in (executor._KEEP_BUDGET, 0):
        monkeypatch.setattr(executor, "_KEEP_BUDGET", budget)
        topo = preset("dgx-a100-hdr", nodes=64, gpus_per_node=8)
        del calls[:]
        flow = simulate(plan, topo, runtime=NcclRuntime())
        closed = simulate(plan, topo, fidelity="analytic", runtime=NcclRuntime(), link_bytes=False)
        held = executor._KEPT[topo].transfers
        runs.append((len(calls), held, flow.end, closed.end))
    (once, held, flow, closed), (twice, none, flow0, closed0) = runs
    assert (once, twice) == (1, 2) and held > executor._KEEP_TRANSFERS and none == 0
    np.testing.assert_array_equal(flow, flow0)
    np.testing.assert_array_equal(closed, closed0)


@pytest.mark.parametrize("topo", [fat_tree(levels=3, hosts=128, link=LINK, routing="ecmp"),
                                  preset("dgx-a100-hdr", nodes=48, gpus_per_node=8)],
                         ids=["fat-tree-ecmp", "dgx-a100-hdr"])
def test_messages_routed_all_at_once_time_as_routed_one_by_one(topo):
    # the one-pass form routes every message's pair in one vectorised call (AnalyticPricer.route_pairs:
    # Topology.routes takes its many-pairs path from 256 pairs on); the event loop routes pair by pair
    rng = np.random.default_rng(7)
    n = topo.n_ranks
    b = PlanBuilder(n)
    for k in range(700):
        src, off = int(rng.integers(n)), int(rng.integers(1, n))
        b.transfer(src, (src + off) % n, float(rng.integers(1, 10**7)), stream=f"s{k % 3}")
    _same_times(b.build(), topo)


@pytest.mark.parametrize("strategy", ["hierarchical-allreduce", "hierarchical-crossover-sgd"])
def test_a_runtime_closed_form_uncounted_is_the_priced_one(strategy, monkeypatch):
    """With no bytes counted, a collective with the runtime's own closed form takes it straight from the
    preparation (``AnalyticPricer.collective_seconds``): the seconds ``_price`` gives, for every collective."""
    from simcomm.engine.flow.analytic import AnalyticPricer
    from simcomm.pipeline.baseline import make_strategy
    from simcomm.traces import default_trace
    from simcomm.workload import build_workload

    real = AnalyticPricer.collective_seconds
    checked = [0]

    def both(self, op, prep):
        got = real(self, op, prep)
        seconds, fam, per = self._price(prep, op)
        assert fam is None and per is None and got.hex() == seconds.hex()
        checked[0] += prep.closed_form is not None
        return got

    monkeypatch.setattr(AnalyticPricer, "collective_seconds", both)
    topo = preset("dgx-a100-hdr", nodes=4, gpus_per_node=8)
    w = build_workload(default_trace(), topo.n_ranks, batch=8, dataset_size=1000)
    (_, plan), = make_strategy(strategy, {}).iterations(w, topo)
    simulate(plan, topo, fidelity="analytic", link_bytes=False, runtime=NcclRuntime())
    assert checked[0] > 0
