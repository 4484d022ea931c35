"""The direct loop runs plans whose collectives are all cuts (crossover-sgd's barriers between rounds of
messages) exactly as SimPy's queue does: every op's start and end, every statistic and the link bytes are the
same floats (hypothesis-drawn rounds of messages, computes and collectives over all ranks or some, and
crossover-sgd's own plan), and :func:`simcomm.engine.paths.cuts_only` accepts exactly the plans where each
collective is a cut."""

import pytest
import timelines
from hypothesis import given, settings
from hypothesis import strategies as st
from timelines import check

from simcomm.engine.paths import cuts_only
from simcomm.links.base import LinkClass
from simcomm.ops import PlanBuilder
from simcomm.pipeline import simulate as run_scenario
from simcomm.scenario import Scenario
from simcomm.topologies.fat_tree import fat_tree

LINK = LinkClass("cuts-link", 1e9, 1e-6, "custom")
TOPO = fat_tree(4, link=LINK, levels=2, oversubscription=2)


both = timelines.direct_vs_queue


@st.composite
def round_plans(draw):
    """Rounds of messages and computes, each closed by a collective over every rank (a cut) that waits for all
    of the round's ops; members' streams vary (the collective on the messages' stream or on another)."""
    n = TOPO.n_ranks
    b = PlanBuilder(n)
    gate: list[int] = []
    for k in range(draw(st.integers(1, 4))):
        made = [b.transfer(k % n, (k + 1) % n, 2e3, after=gate)]  # a message in every round
        for _ in range(draw(st.integers(1, 12))):
            stream = draw(st.sampled_from(["comm", "push", "compute"]))
            if draw(st.integers(0, 3)) == 0:
                secs = draw(st.sampled_from([0.0, 1e-6, 5e-6]) | st.floats(0.0, 2e-5))
                made.append(b.compute(draw(st.integers(0, n - 1)), secs, after=gate, stream=stream))
            else:
                src = draw(st.integers(0, n - 1))
                dst = draw(st.integers(0, n - 1).filter(lambda d, src=src: d != src))
                size = draw(st.sampled_from([1e3, 4e3, 1e4]) | st.floats(1.0, 5e4))
                made.append(b.transfer(src, dst, size, after=gate, stream=stream))
        kind = draw(st.sampled_from(["allreduce", "broadcast", "allgather"]))
        nbytes = draw(st.sampled_from([4.0, 1e4, 6e4]))
        stream = draw(st.sampled_from(["comm", "sync"]))
        gate = [b.collective(kind, tuple(range(n)), nbytes, after=made, label=f"barrier {k}", stream=stream)]
    if draw(st.booleans()):  # work after the last cut
        b.compute(draw(st.integers(0, n - 1)), 3e-6, after=gate)
        b.transfer(0, n - 1, 2e3, after=gate)
    return b.build()


@settings(max_examples=80, deadline=None)
@given(round_plans(), st.sampled_from([0.0, 0.0, 0.01, 0.2]), st.booleans())
def test_cut_collectives_on_the_direct_loop_are_the_simpy_run_bit_for_bit(plan, resolution, scalar):
    assert cuts_only(plan.ops)
    a, b = both(plan, TOPO, resolution=resolution, reference=() if scalar else {"scalar"})
    assert (a.paths["driver"], b.paths["driver"]) == ("direct", "callbacks")
    check(a, b)


def test_link_usage_and_busiest_links_with_cuts_are_the_same():
    b = PlanBuilder(TOPO.n_ranks)
    m = [b.transfer(r, (r + 5) % TOPO.n_ranks, 1e4) for r in range(TOPO.n_ranks)]
    bar = b.collective("allreduce", tuple(range(TOPO.n_ranks)), 1e4, after=m)
    b.transfer(1, 2, 1e4, after=[bar])
    a, ref = both(b.build(), TOPO, record_link_usage=True, busiest_links=3)
    check(a, ref)
    assert a.paths["driver"] == "direct" and a.meta["link_usage"] and len(a.meta["busiest_links"]) == 3


def _plan(extra):
    b = PlanBuilder(4)
    m = [b.transfer(r, (r + 1) % 4, 1e3) for r in range(4)]
    extra(b, m)
    return b.build().ops


@pytest.mark.parametrize("extra, want", [
    (lambda b, m: b.collective("allreduce", (0, 1, 2, 3), 4.0, after=m), True),
    # nothing but messages and computes: the plain direct loop's plans, not this check's
    (lambda b, m: None, True),
    # a message not waited for by the barrier (and not on a member's stream before it): not an ancestor
    (lambda b, m: b.collective("allreduce", (0, 1, 2, 3), 4.0, after=m[:3], stream="sync"), False),
    # ... unless it precedes the barrier on a member's stream (stream order is an edge too)
    (lambda b, m: b.collective("allreduce", (0, 1, 2, 3), 4.0, after=m[:3]), True),
    # an op after the barrier that does not wait for it (another stream, no dependency)
    (lambda b, m: (b.collective("allreduce", (0, 1, 2, 3), 4.0, after=m), b.compute(0, 1e-6)), False),
    # a collective of a group: the other ranks' later messages do not descend from it
    (lambda b, m: (b.collective("allreduce", (0, 1), 4.0, after=m), b.transfer(2, 3, 1e3, stream="x")), False),
])
def test_cuts_only_by_hand(extra, want):
    assert cuts_only(_plan(extra)) is want


def test_a_plan_of_collectives_alone_stays_off_the_direct_loop():
    b = PlanBuilder(4)
    c = b.compute(0, 1e-6)
    b.collective("allreduce", (0, 1, 2, 3), 4.0, after=[c])
    assert not cuts_only(b.build().ops)  # no messages: the callbacks driver, as before


@pytest.mark.parametrize("mode, driver", [("serial", "direct"), ("blocking", "callbacks")])
def test_crossover_sgd_runs_on_the_direct_loop_bit_for_bit(mode, driver):
    # serial: a barrier over all ranks after every round (cuts); blocking: 2-rank all-reduces (not cuts)
    seen = []

    def keep(label, weight, plan, tl, topo):
        seen.append((plan, tl, topo))

    scn = Scenario(strategy="crossover-sgd", nodes=4, gpus_per_node=4, cluster="dgx-a100-hdr",
                   options={"mode": mode}, resolution=0.0)
    run_scenario(scn, on_timeline=keep, baseline=False, analytic=False)
    (plan, tl, topo), = seen
    assert tl.paths["driver"] == driver
    from simcomm.runtimes import get_runtime

    a, ref = both(plan, topo, runtime=get_runtime("nccl"), record_link_usage=True)
    check(a, ref)


@st.composite
def mixed_plans(draw):
    """Rounds closed by a collective over some or all ranks, with ops that may or may not wait for the round."""
    n = 6
    b = PlanBuilder(n)
    ids: list[int] = []
    gate: list[int] = []
    for _ in range(draw(st.integers(1, 3))):
        made: list[int] = []
        for _ in range(draw(st.integers(0, 5))):
            after = draw(st.sampled_from([gate, [], draw(st.lists(st.sampled_from(ids), max_size=2)) if ids else []]))
            stream = draw(st.sampled_from(["comm", "x"]))
            if draw(st.booleans()):
                src = draw(st.integers(0, n - 1))
                made.append(b.transfer(src, (src + draw(st.integers(1, n - 1))) % n, 1e3, after=after, stream=stream))
            else:
                made.append(b.compute(draw(st.integers(0, n - 1)), 1e-6, after=after, stream=stream))
        ids += made
        ranks = tuple(range(n)) if draw(st.booleans()) else tuple(sorted(draw(st.sets(st.integers(0, n - 1),
                                                                                            min_size=1))))
        wait = made if draw(st.booleans()) else made[: draw(st.integers(0, len(made)))]
        gate = [b.collective("allreduce", ranks, 8.0, after=wait, stream=draw(st.sampled_from(["comm", "x", "y"])))]
        ids += gate
    return b.build()


def _cut_by_definition(ops) -> bool:
    """Messages, and every collective a cut, from the transitive closure of deps and stream order."""
    from simcomm.ops import Collective, Transfer

    preds: list[set[int]] = []
    last: dict = {}
    for op in ops:
        members = (op.src,) if isinstance(op, Transfer) else op.ranks
        p = set(op.deps)
        for r in members:
            if (r, op.stream) in last:
                p.add(last[(r, op.stream)])
            last[(r, op.stream)] = op.id
        preds.append(p)
    anc: list[set[int]] = []
    for i in range(len(ops)):
        a: set[int] = set()
        for p in preds[i]:
            a |= anc[p] | {p}
        anc.append(a)
    for op in ops:
        if isinstance(op, Collective):
            c = op.id
            if anc[c] != set(range(c)) or any(c not in anc[j] for j in range(c + 1, len(ops))):
                return False
    return any(isinstance(op, Transfer) for op in ops)


@settings(max_examples=300, deadline=None)
@given(mixed_plans())
def test_cuts_only_is_the_definition(plan):
    cut = _cut_by_definition(plan.ops)
    assert cuts_only(plan.ops) is cut
    if cut:  # (collectives over some ranks too): the direct loop is SimPy's queue
        a, b = both(plan, TOPO)
        assert a.paths["driver"] == "direct"
        check(a, b)


def _cuts_by_closure(ops) -> bool:
    """cuts_only's definition, by brute force: messages in the plan, and every collective has every earlier op as
    an ancestor and every later op as a descendant (edges: deps, and stream order on each op's streams)."""
    from simcomm.ops import Collective, Transfer

    last: dict = {}
    anc = [0] * len(ops)  # bit set of each op's ancestors
    for op in ops:
        preds = set(op.deps)
        for r in ((op.src,) if isinstance(op, Transfer) else op.ranks):
            if (r, op.stream) in last:
                preds.add(last[(r, op.stream)])
            last[(r, op.stream)] = op.id
        for d in preds:
            anc[op.id] |= anc[d] | (1 << d)
    for c, op in enumerate(ops):
        if isinstance(op, Collective) and (anc[c] != (1 << c) - 1 or any(not anc[x] >> c & 1
                                                                           for x in range(c + 1, len(ops)))):
            return False
    return any(isinstance(op, Transfer) for op in ops)


@st.composite
def loose_plans(draw):
    """Small plans of messages, computes and collectives (over every rank or some) with random deps: some
    collectives are cuts, some not."""
    n = 4
    b = PlanBuilder(n)
    for _ in range(draw(st.integers(1, 14))):
        ids = len(b._ops)
        after = draw(st.lists(st.integers(0, ids - 1), max_size=3)) if ids else []
        stream = draw(st.sampled_from(["comm", "sync"]))
        what = draw(st.integers(0, 4))
        if what == 0:
            b.compute(draw(st.integers(0, n - 1)), 1e-6, after=after, stream=stream)
        elif what == 1:
            ranks = draw(st.sampled_from([(0, 1, 2, 3), (0, 1), (2, 3)]))
            b.collective("allreduce", ranks, 4.0, after=after if draw(st.booleans()) else range(ids), stream=stream)
        else:
            src = draw(st.integers(0, n - 1))
            b.transfer(src, (src + draw(st.integers(1, n - 1))) % n, 1e3, after=after, stream=stream)
    return b.build().ops


@settings(max_examples=300, deadline=None)
@given(loose_plans())
def test_cuts_only_is_its_definition(ops):
    assert cuts_only(ops) is _cuts_by_closure(ops)


def test_subclasses_of_op_types_run_as_their_base_types():
    # the direct loop tells kinds of op apart by exact type, and a subclass by isinstance: a compute's subclass in a
    # plan of messages, a collective's subclass as a cut
    from dataclasses import dataclass

    from simcomm.ops import Collective, CommPlan, Compute

    @dataclass(frozen=True, slots=True)
    class TimedCompute(Compute):
        pass

    @dataclass(frozen=True, slots=True)
    class Barrier(Collective):
        pass

    for cut in (False, True):
        b = PlanBuilder(TOPO.n_ranks)
        c = b.compute(0, 2e-6)
        m = [b.transfer(r, (r + 3) % TOPO.n_ranks, 1e4, after=[c]) for r in range(TOPO.n_ranks)]
        last = b.collective("allreduce", tuple(range(TOPO.n_ranks)), 4.0, after=m) if cut else m[-1]
        b.compute(1, 1e-6, after=[last])
        ops = list(b.build().ops)
        if cut:
            ops[last] = Barrier(**{f: getattr(ops[last], f) for f in ("id", "kind", "ranks", "nbytes", "deps", "label")})
        else:
            ops[c] = TimedCompute(**{f: getattr(ops[c], f) for f in ("id", "rank", "seconds", "deps", "label")})
        a, ref = both(CommPlan(TOPO.n_ranks, tuple(ops)).validate(), TOPO)
        assert a.paths["driver"] == "direct" and type(ops[last if cut else c]).__name__ in ("Barrier", "TimedCompute")
        check(a, ref)
