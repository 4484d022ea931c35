"""Machine-local collectives on the direct loop (``taken.local_collectives``) are the callbacks driver's run bit for
bit (the ``local_collectives`` reference), and a plan whose local collectives could meet other traffic stays on
SimPy's queue.

A collective whose ranks sit on one machine, every step of which the flow pricer reserves on its own links, runs
on the direct loop beside the plan's messages and cuts (``paths.cuts_only`` with ``local``) when nothing else in
the plan crosses those links (``executor._local_collectives``): the same events in the same order, so every start,
end, statistic and link byte is the same.  Cases: hierarchical-crossover-sgd's plan (its group reduces and
broadcasts between barriers over all ranks, with the roots' messages), on alike machines and on a machine with a
slower NVLink port, exact and at 1 %; hand-made plans of every kind of collective on partial and whole machines,
of irregular sizes (one of zero bytes), starting at the same instants as messages; and plans that fall back
(a message or another group's collective on the same links, a collective across machines).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simcomm import engine
from simcomm.engine.drive import executor
from simcomm.engine.options import EngineOptions
from simcomm.ops import PlanBuilder
from simcomm.runtimes import get_runtime
from simcomm.runtimes.mpi import MPICH
from simcomm.topologies.presets import preset
from tests.timelines import check, dgx_with_one_slow_link

NCCL = get_runtime("nccl")
KINDS = (("allreduce", 0), ("reduce", 2), ("broadcast", 1), ("allgather", 0), ("reduce_scatter", 0))


def _both(plan, topo, runtime=NCCL, **settings):
    """(default run, ``local_collectives`` reference run) of ``plan``, nothing kept between them."""
    out = []
    for extra in (frozenset(), frozenset({"local_collectives"})):
        opts = EngineOptions(runtime=runtime, **settings)
        out.append(engine.simulate(plan, topo, options=EngineOptions.of(opts, reference=opts.reference | extra
                                                                         | {"keep"})))
    return out


def _hierarchical(topo, fold="auto", **opts):
    """hierarchical-crossover-sgd's flow plan on ``topo`` (ResNet-50's trace, as ``simcomm run`` plans it;
    ``fold="on"``: the rank fold, which leaves the non-root members streams of collectives alone)."""
    from simcomm.pipeline.run import simulate
    from simcomm.scenario.spec import Scenario

    got = []
    real = executor.run

    def keep(plan, topology, **kw):
        got.append(plan)
        return real(plan, topology, **kw)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(executor, "run", keep)
        simulate(Scenario(strategy="hierarchical-crossover-sgd", cluster="dgx-a100-hdr", nodes=topo.n_ranks // 8,
                          gpus_per_node=8, options=opts, fold_ranks=fold), baseline=False, analytic=False)
    return got[0]


@pytest.mark.parametrize("slow", [False, True], ids=["alike", "one-slow-link"])
@pytest.mark.parametrize("settings", [{}, {"resolution": 0.01}], ids=["exact", "1%"])
@pytest.mark.parametrize("opts", [{}, {"broadcast": "model"}, {"segments": 3, "seed": 5}, {"fold": "on"}], ids=str)
def test_hierarchical_crossover_sgd_on_the_direct_loop_is_the_reference_bit_for_bit(slow, settings, opts,
                                                                                    monkeypatch):
    topo = dgx_with_one_slow_link(3) if slow else preset("dgx-a100-hdr", nodes=3, gpus_per_node=8)
    plan = _hierarchical(topo, **opts)
    merged = []
    real = executor._merged
    monkeypatch.setattr(executor, "_merged", lambda streams: merged.append(real(streams)) or merged[-1])
    fast, ref = _both(plan, topo, **settings)
    check(fast, ref)  # every start, end, statistic and link byte
    assert fast.paths["driver"] == "direct" and ref.paths["driver"] == "callbacks"
    locals_ = sum(1 for op in plan.ops if getattr(op, "kind", None) and len(op.ranks) == 8)
    assert fast.paths["taken"]["local_collectives"] == locals_ > 0
    assert "local_collectives" not in ref.paths["taken"]
    # folded, the 7 other members of each machine are one stream of weight 7 (executor._merged)
    (streams, weight), = merged
    assert max(weight) == (7 if opts.get("fold") == "on" else 1) and len(streams) == len(weight)


def _mixed(topo, sizes=(4e6, 0.0, 3e5, 1.7e6), partial=True):
    """Per machine, every kind of collective on its ranks (and on a partial group of 3, on another stream),
    rounds of them between barriers over all ranks, and messages between the machines' first ranks that start
    at the same instants as the collectives (after the same barrier)."""
    n = topo.n_ranks
    machines = [tuple(range(8 * m, 8 * m + 8)) for m in range(n // 8)]
    b = PlanBuilder(n)
    gate = [b.compute(r, 1e-4 * (1 + r % 3), label="work") for r in range(n)]
    barrier = None
    for s, size in enumerate(sizes):
        after = [barrier] if barrier is not None else []
        ends = []  # what the round's barrier waits for besides its members' collectives
        for m, group in enumerate(machines):
            if partial and m == len(machines) - 1:  # the last machine: two partial groups, on streams of their own
                for lo, stream in ((0, "comm"), (4, "side")):
                    ends.append(b.collective("allreduce", group[lo:lo + 3], size / 3 + 1,
                                             after=after + [gate[r] for r in group[lo:lo + 3]], stream=stream,
                                             label=f"partial {s}"))
            else:
                for kind, root in KINDS:
                    b.collective(kind, group, size, root=root, after=after + [gate[r] for r in group],
                                 label=f"{kind} {s}")
            ends.append(b.transfer(group[0], machines[(m + 1) % len(machines)][0], 1e5 * (s + 1), after=after,
                                   stream="msg", label=f"msg {s}"))
        barrier = b.collective("allreduce", range(n), 8.0, after=ends + (gate if s == 0 else []), label=f"barrier {s}")
    return b.build()


@pytest.mark.parametrize("settings", [{}, {"resolution": 0.01}, {"link_bytes": False}], ids=str)
@pytest.mark.parametrize("nodes", [2, 3])
def test_every_kind_of_local_collective_with_messages_at_the_same_instants_is_the_reference(settings, nodes):
    topo = preset("dgx-a100-hdr", nodes=nodes, gpus_per_node=8)
    plan = _mixed(topo)
    fast, ref = _both(plan, topo, **settings)
    check(fast, ref)
    assert fast.paths["driver"] == "direct" and fast.paths["taken"]["local_collectives"] > 0
    assert fast.paths["taken"]["cut_collectives"] == 4


def test_a_machine_with_a_slower_link_keeps_its_own_times_on_the_direct_loop():
    topo = dgx_with_one_slow_link(3)
    plan = _mixed(topo, partial=False)
    fast, ref = _both(plan, topo)
    check(fast, ref)
    assert fast.paths["driver"] == "direct"
    ends = {op.label: [] for op in plan.ops if op.label.startswith("allreduce")}
    for op in plan.ops:
        if op.label in ends:
            ends[op.label].append(fast.end[op.id] - fast.start[op.id])
    # the slow machine's all-reduce (machine 1) takes longer than its alike neighbours'
    assert ends["allreduce 0"][1] > ends["allreduce 0"][0] == ends["allreduce 0"][2]


def _driver(plan, topo, runtime=NCCL) -> tuple[str, str]:
    fast, ref = _both(plan, topo, runtime)
    check(fast, ref)
    return fast.paths["driver"], ref.paths["driver"]


def test_plans_whose_local_collectives_could_meet_other_traffic_stay_on_simpys_queue():
    topo = preset("dgx-a100-hdr", nodes=2, gpus_per_node=8)
    assert _driver(_mixed(topo), topo) == ("direct", "callbacks")
    # a message inside a machine, over links its collectives hold
    b = PlanBuilder(16)
    first = b.collective("allreduce", range(8), 4e6)
    b.transfer(1, 2, 1e6, stream="msg")
    b.collective("allreduce", range(16), 8.0, after=[first])
    assert _driver(b.build(), topo) == ("callbacks", "callbacks")
    # two groups of one machine on other streams, sharing links
    b = PlanBuilder(16)
    b.collective("allreduce", range(0, 4), 4e6)
    b.collective("allreduce", range(2, 6), 4e6, stream="other")
    b.transfer(0, 8, 1e6, stream="msg")
    assert _driver(b.build(), topo) == ("callbacks", "callbacks")
    # a collective across machines that is not a cut
    b = PlanBuilder(16)
    b.collective("allreduce", (0, 8), 4e6)
    b.transfer(1, 9, 1e6, stream="msg")
    assert _driver(b.build(), topo) == ("callbacks", "callbacks")


def test_the_same_group_on_one_stream_runs_one_collective_after_another():
    """The collectives of one group and stream may share links: each waits for the one before (stream order)."""
    topo = preset("dgx-a100-hdr", nodes=2, gpus_per_node=8)
    b = PlanBuilder(16)
    for size in (4e6, 1e6, 3.3e6):
        for g in (range(8), range(8, 16)):
            b.collective("allreduce", g, size)
    b.transfer(0, 8, 2e6, stream="msg")
    plan = b.build()
    fast, ref = _both(plan, topo)
    check(fast, ref)
    assert fast.paths["taken"]["local_collectives"] == 6
    for a, c in ((0, 2), (2, 4), (1, 3), (3, 5)):
        assert fast.end[a] <= fast.start[c]


@pytest.mark.parametrize("runtime", [NCCL, MPICH], ids=["nccl", "mpich"])
def test_either_runtime_gives_the_reference_floats(runtime):
    """MPICH's intranode schedules hold steps that run as flows: such plans stay on SimPy's queue; either way the
    floats are the reference's."""
    topo = preset("dgx-a100-hdr", nodes=2, gpus_per_node=8)
    fast, ref = _both(_mixed(topo), topo, runtime)
    check(fast, ref)
    assert ref.paths["driver"] == "callbacks"


def test_local_collectives_of_zero_bytes_alone_hold_no_link():
    topo = preset("dgx-a100-hdr", nodes=2, gpus_per_node=8)
    fast, ref = _both(_mixed(topo, sizes=(0.0, 0.0), partial=False), topo)
    check(fast, ref)
    assert fast.paths["driver"] == "direct" and fast.paths["taken"]["local_collectives"] > 0


def test_a_run_that_stops_after_some_ops_keeps_simpys_queue():
    """``stop_after`` ends a run early on SimPy's queue (ops not reached keep NaN times); the direct loop runs every
    op, so a plan that needs local collectives on it keeps the queue when ``stop_after`` is given."""
    topo = preset("dgx-a100-hdr", nodes=2, gpus_per_node=8)
    plan = _mixed(topo)
    first = next(op.id for op in plan.ops if op.label == "barrier 0")
    fast, ref = _both(plan, topo, stop_after=frozenset({first}))
    check(fast, ref)
    assert fast.paths["driver"] == "callbacks" and fast.paths["taken"]["ops_not_run"] > 0


@st.composite
def _drawn_plans(draw):
    """Rounds between barriers over all ranks: per machine, drawn local collectives on a drawn group (the whole
    machine, a prefix or a suffix of it) of drawn kinds and sizes (zero included), on one or two streams; drawn
    messages between drawn ranks (inside a machine too: the plan then keeps SimPy's queue); drawn computes."""
    nodes = draw(st.integers(2, 3))
    n = 8 * nodes
    b = PlanBuilder(n)
    gate = [b.compute(r, draw(st.sampled_from([0.0, 1e-5, 3e-5])), label="work") for r in range(n)]
    # per machine, its group and stream (mostly one for all rounds; another one shares its links: a fallback)
    groups = [(tuple(range(8 * m + lo, 8 * m + hi)), stream) for m in range(nodes)
              for lo, hi in [draw(st.sampled_from([(0, 8), (0, 3), (5, 8), (2, 6)]))]
              for stream in [draw(st.sampled_from(["comm", "side"]))]]
    barrier = None
    for s in range(draw(st.integers(1, 3))):
        after = [barrier] if barrier is not None else []
        ends = list(gate) if s == 0 else []
        for m in range(nodes):
            group, stream = groups[m] if draw(st.integers(0, 9)) else (tuple(range(8 * m, 8 * m + 8)), "other")
            for _ in range(draw(st.integers(0, 3))):
                kind, root = draw(st.sampled_from(KINDS))
                size = draw(st.sampled_from([0.0, 8.0, 1e5, 3.3e6, 4e6]))
                ends.append(b.collective(kind, group, size, root=min(root, len(group) - 1), after=after,
                                         stream=stream, label=f"{kind} {s}"))
        for _ in range(draw(st.integers(0, 4))):
            src = draw(st.integers(0, n - 1))
            other = draw(st.integers(0, 9)) > 0  # mostly to another machine (inside one: a fallback)
            dst = (src + 8 * draw(st.integers(1, nodes - 1))) % n if other else 8 * (src // 8) + (src + 1) % 8
            ends.append(b.transfer(src, dst, draw(st.sampled_from([1e3, 1e5, 2e6])), after=after, stream="msg"))
        barrier = b.collective("allreduce", range(n), 8.0, after=ends, label=f"barrier {s}")
    return b.build(), nodes


@settings(max_examples=25, deadline=None)
@given(_drawn_plans(), st.sampled_from([0.0, 0.01, 0.2]))
def test_drawn_plans_are_the_reference_bit_for_bit(drawn, resolution):
    plan, nodes = drawn
    topo = preset("dgx-a100-hdr", nodes=nodes, gpus_per_node=8)
    fast, ref = _both(plan, topo, resolution=resolution)
    check(fast, ref)
    assert ref.paths["driver"] in ("callbacks", "direct")  # (direct: no local collective drawn, messages only)
    assert fast.paths["driver"] == "direct" or "local_collectives" not in fast.paths["taken"]
