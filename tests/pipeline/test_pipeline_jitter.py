"""Per-iteration compute jitter (simcomm.jitter): chained iterations with fresh compute draws.

Hand-computed chains pin the rule (rank r's copy j waits for its own copy j-1 and for the
messages it received; a copy ends when its last op does; the iteration is the mean spacing
of the copy ends); a long chain checks the normal-order-statistics result the docs quote;
the pipeline, scenario and CLI checks pin the option's plumbing and its errors.
"""

import math
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simcomm.engine import simulate
from simcomm.errors import ConfigError
from simcomm.jitter import FLOOR, ITERATIONS, chain, draw, per_iteration
from simcomm.links.base import LinkClass
from simcomm.ops import Compute, PlanBuilder, Transfer
from simcomm.runtimes.mpi import MPICH
from simcomm.topologies.full_mesh import full_mesh

FREE = LinkClass("free-link", 1e12, 0.0, "custom")  # messages of 1 byte take 1e-12 s


def _sync_plan(n: int, w: float = 1.0):
    """Every rank computes w, then all synchronise (all-reduce of 1 byte)."""
    b = PlanBuilder(n)
    c = [b.compute(r, w) for r in range(n)]
    b.collective("allreduce", range(n), 1.0, algorithm="ring", after=c)
    return b.build(kind="sync")


def _independent_plan(n: int, w: float = 1.0):
    b = PlanBuilder(n)
    for r in range(n):
        b.compute(r, w)
    return b.build(kind="alone")


def _run(plan, factors, n):
    chained, copies = chain(plan, np.asarray(factors, dtype=float))
    tl = simulate(chained, full_mesh(n, FREE), runtime=MPICH)
    return per_iteration(tl.end, copies)[0]


def test_synchronous_step_pays_the_slowest_rank_every_iteration():
    # factors alternate which rank is slow; a synchronised step waits for it each time: 2 s
    f = [[1, 2], [2, 1], [1, 2], [2, 1]]
    assert _run(_sync_plan(2), f, 2) == pytest.approx(2.0, abs=1e-9)


def test_independent_ranks_keep_their_own_pace():
    # rank ends: r0 1,3,4,6 and r1 2,3,5,6; copy ends 2,3,5,6 -> (6 - 2) / 3
    f = [[1, 2], [2, 1], [1, 2], [2, 1]]
    assert _run(_independent_plan(2), f, 2) == pytest.approx(4 / 3, abs=1e-9)


def test_a_receiver_waits_for_the_message_of_the_previous_iteration():
    # rank 0 computes f then sends 1 byte to rank 1, which only computes 0.5 s per iteration:
    # rank 1's copy j must wait for copy j-1's message, so it follows rank 0's pace
    b = PlanBuilder(2)
    c = b.compute(0, 1.0)
    b.transfer(0, 1, 1.0, after=[c])
    b.compute(1, 0.5)
    f = [[1, 1], [3, 1], [1, 1]]
    chained, copies = chain(b.build(), np.asarray(f, dtype=float))
    tl = simulate(chained, full_mesh(2, FREE), runtime=MPICH)
    ends = [max(tl.end[i] for i in c) for c in copies]
    # rank 0: 1, 4, 5 (+ the message); rank 1 of copy 1 starts after copy 0's message (t = 1)
    assert ends == pytest.approx([1.0, 4.0, 5.0], abs=1e-9)
    assert per_iteration(tl.end, copies)[0] == pytest.approx(2.0, abs=1e-9)


def test_ones_change_nothing_for_a_bulk_synchronous_plan():
    plan = _sync_plan(4, 0.3)
    one = simulate(plan, full_mesh(4, FREE), runtime=MPICH).makespan
    assert _run(plan, np.ones((5, 4)), 4) == pytest.approx(one, rel=1e-12)


def test_chain_scales_only_compute_and_renumbers():
    plan = _sync_plan(2)
    chained, copies = chain(plan, np.array([[1.0, 1.5], [0.5, 2.0]]))
    assert len(chained.ops) == 2 * len(plan.ops) and [list(c) for c in copies] == [[0, 1, 2], [3, 4, 5]]
    assert [op.seconds for op in chained.ops if isinstance(op, Compute)] == [1.0, 1.5, 0.5, 2.0]
    assert chained.validate() is chained and chained.meta["chained"] == 2
    # copy 1's first ops wait for their rank's end of copy 0 (the collective, id 2)
    assert 2 in chained.ops[3].deps and 2 in chained.ops[4].deps


def test_long_chain_matches_the_expected_maximum_of_normal_draws():
    # E[max of k normals] = e_k sigma: e_4 = 1.0294; 3 000 iterations put the mean within ~1 %
    cv, n = 0.1, 3000
    f = draw(cv, n, 4, seed=7)
    t = _run(_sync_plan(4), f, 4)
    assert t == pytest.approx(1.0 + cv * 1.0294, rel=0.01)
    # and two ranks wait for less: e_2 = 0.5642
    assert _run(_sync_plan(2), draw(cv, n, 2, seed=7), 2) == pytest.approx(1.0 + cv * 0.5642, rel=0.01)


def test_draw_is_seeded_and_floored():
    a, b = draw(0.2, 8, 3, seed=(1, 0)), draw(0.2, 8, 3, seed=(1, 0))
    assert np.array_equal(a, b) and not np.array_equal(a, draw(0.2, 8, 3, seed=(1, 1)))
    assert draw(0.99, 2000, 2, seed=0).min() == FLOOR
    for bad in (-0.1, 1.0, float("nan")):
        with pytest.raises(ConfigError, match="compute_jitter"):
            draw(bad, 2, 2, seed=0)


def test_plans_spanning_two_iterations_are_refused():
    plan = _sync_plan(2)
    twice = type(plan)(plan.n_ranks, plan.ops, dict(plan.meta), replace(plan.info, period=(0, 1)))
    with pytest.raises(ConfigError, match="backward\\+forward"):
        chain(twice, np.ones((2, 2)))


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 5), st.floats(0.0, 0.4), st.integers(0, 2**16))
def test_synchronous_chain_is_bounded_by_mean_and_slowest_draw(n, cv, seed):
    f = draw(cv, 6, n, seed=seed)
    t = _run(_sync_plan(n), f, n)
    # each iteration of a bulk-synchronous plan lasts its slowest rank's draw (plus ~1e-12 s)
    want = float(np.mean(f.max(axis=1)[1:]))
    assert t == pytest.approx(want, rel=1e-9, abs=1e-9)
    assert t >= float(np.mean(f[1:])) - 1e-9


def test_pipeline_adds_the_straggler_wait_and_says_so():
    from simcomm.pipeline import simulate as run
    from simcomm.scenario import Scenario, WorkloadSpec

    base = Scenario(strategy="allreduce", nodes=4, gpus_per_node=1, options={"overlap": "none"})
    plain = run(base, baseline=False, analytic=False)
    jit = run(Scenario(strategy="allreduce", nodes=4, gpus_per_node=1, options={"overlap": "none"},
                       workload=WorkloadSpec(compute_jitter=0.1)), baseline=False, analytic=False)
    again = run(Scenario(strategy="allreduce", nodes=4, gpus_per_node=1, options={"overlap": "none"},
                         workload=WorkloadSpec(compute_jitter=0.1)), baseline=False, analytic=False)
    assert jit.mean_s == again.mean_s  # seeded
    compute = plain.breakdown.compute
    # 16 draws of the max of 4: well above the plain iteration, below the all-slowest bound
    assert plain.mean_s < jit.mean_s < plain.mean_s + 0.1 * 3.5 * compute
    assert any(f"mean of {ITERATIONS} chained iterations" in a for a in jit.assumed)
    with pytest.raises(ConfigError, match="workload.compute_jitter"):
        WorkloadSpec(compute_jitter=1.2)
    assert math.isclose(jit.kinds[0].time_s, jit.mean_s)


def test_cli_flag_and_bad_value(cli):
    code, out, _ = cli("run", "--strategy", "allreduce", "--nodes", "4", "--opt", "overlap=none",
                       "--compute-jitter", "0.05")
    assert code == 0 and "compute jitter" in out
    import json

    runs = {}
    for cv in ("0", "0.05"):
        code, out, _ = cli("compare", "--strategies", "allreduce,sgp", "--nodes", "4", "--json",
                           "--compute-jitter", cv)
        assert code == 0
        runs[cv] = {r["strategy"]: r["mean_s"] for r in json.loads(out)}
    # compare passes it on: the synchronous step slows, and more than gossip does
    d_ar = runs["0.05"]["allreduce"] - runs["0"]["allreduce"]
    assert d_ar > 0 and runs["0.05"]["sgp"] - runs["0"]["sgp"] < d_ar
    code, out, err = cli("run", "--strategy", "allreduce", "--nodes", "4", "--compute-jitter", "2")
    assert code == 2 and "compute_jitter: 2.0 is out of range" in (out + err) and "Traceback" not in (out + err)


def test_receives_are_part_of_the_frontier():
    # the transfer into rank 1 is on rank 0's stream; rank 1's next copy must still wait for it
    b = PlanBuilder(2)
    b.transfer(0, 1, 1.0)
    b.compute(1, 1.0)
    chained, _ = chain(b.build(), np.ones((2, 2)))
    second_compute = chained.ops[3]
    assert isinstance(chained.ops[2], Transfer) and 0 in second_compute.deps
