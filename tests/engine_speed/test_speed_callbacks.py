"""Streams and collectives without SimPy processes (the ``callbacks`` driver) run plans exactly
as SimPy processes do: every op's start and end, every statistic and the link bytes are the
same floats, on hypothesis-drawn plans mixing computes, messages and collectives (streams of
collectives alone, several of them with the same ops, which the engine merges into one
callback; collectives that wait for computes; zero-length work) and on a folded Megatron
layout, where the tensor-parallel ranks' streams hold nothing but collectives."""

import pytest
import timelines
from flowcases import mixed_plans
from hypothesis import given, settings
from hypothesis import strategies as st
from timelines import check

from simcomm.engine import simulate
from simcomm.errors import PlanError
from simcomm.links.base import LinkClass
from simcomm.ops import Collective, CommPlan, Compute, PlanBuilder
from simcomm.runtimes.mpi import MPICH
from simcomm.topologies.fat_tree import fat_tree

LINK = LinkClass("callback-link", 1e9, 1e-6, "custom")
TOPO = fat_tree(4, link=LINK, levels=2, oversubscription=2)


def both(plan, topo, **kw):
    """(callbacks, SimPy processes) timelines of one plan, both off the direct loop."""
    a, b = timelines.both(plan, topo, {"direct"}, {"direct", "callbacks"}, **kw)
    assert (a.paths["driver"], b.paths["driver"]) == ("callbacks", "processes")
    return a, b


@settings(max_examples=60, deadline=None)
@given(mixed_plans(TOPO.n_ranks), st.sampled_from([0.0, 0.01]))
def test_callbacks_run_drawn_plans_exactly_as_processes(plan, resolution):
    check(*both(plan, TOPO, resolution=resolution))


def test_identical_collective_streams_are_merged_and_exact():
    # eight ranks whose "tp" streams hold the same collectives; rank 0 computes between them
    b = PlanBuilder(8)
    last = None
    for i in range(6):
        c = b.compute(0, 1e-6 * (i + 1), after=[last] if last is not None else [])
        last = b.collective("allreduce", range(8), 4e3 * (i + 1), after=[c], stream="tp")
    plan = b.build()
    assert sum(isinstance(op, Collective) for op in plan.ops) == 6
    a, ref = both(plan, TOPO)
    check(a, ref)
    assert a.makespan > 21e-6  # the computes alone take 21 us; every all-reduce adds to it


def test_a_collective_that_cannot_run_is_the_same_error():
    # the all-reduce waits for a compute that waits for it (not a valid plan): neither runs
    bad = CommPlan(n_ranks=2, ops=(Collective(id=0, kind="allreduce", ranks=(0, 1), nbytes=8.0, deps=(1,)),
                                   Compute(id=1, rank=0, seconds=1.0, deps=(0,))))
    errors = []
    for reference in ((), {"callbacks"}):
        with pytest.raises(PlanError, match="never ran") as err:
            simulate(bad, TOPO, reference=reference, runtime=MPICH)
        errors.append(str(err.value))
    assert errors[0] == errors[1]


def test_folded_megatron_layout_runs_exactly_as_processes():
    from simcomm.engine import EngineOptions
    from simcomm.pipeline import Context, make_strategy
    from simcomm.runtimes import NcclRuntime
    from simcomm.scenario import from_flat
    from simcomm.workload import build_workload

    scn = from_flat({"strategy": "megatron", "model": "gpt2-small", "cluster": "dgx-a100-hdr", "nodes": 4,
                     "gpus_per_node": 8, "tp": 4, "pp": 2, "schedule": "interleaved", "virtual": 2,
                     "global_batch": 16, "precision": "bf16", "microbatch": 1, "sequence_parallel": True,
                     "replicas": "one"})
    ctx = Context(scn)
    _, topo = ctx.cluster(scn.nodes, 0)
    w = build_workload(ctx.trace(), topo.n_ranks, wire_dtype="bf16")
    plan = make_strategy("megatron", dict(scn.options)).plan(w, topo)
    assert plan.info.measured_ranks is not None  # replicas (and lanes) folded
    check(*both(plan, topo, options=EngineOptions(runtime=NcclRuntime(), resolution=0.01)))
