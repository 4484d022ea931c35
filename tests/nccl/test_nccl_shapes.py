"""Groups on alike machines share one NCCL preparation (:mod:`simcomm.nccl.shapes`): exact, checked field by field.

Two groups whose :func:`group_shape` is equal must get the same :class:`Prepared` (steps, latency, closed form,
label) from a fresh :func:`prepare_nccl` each; a machine with one link of another capacity, or another rank
count, is another class; and a whole run with one preparation per class times exactly like the reference run
that prepares every group, and runs every group's step alone, on its own
(``EngineOptions.reference={"shapes"}``).
"""

from __future__ import annotations

import numpy as np
import pytest

from simcomm import engine
from simcomm.engine.flow import pricer
from simcomm.engine.fluid.core import run_isolated
from simcomm.engine.options import EngineOptions
from simcomm.nccl import prepare as nccl_prepare
from simcomm.nccl.prepare import prepare_nccl
from simcomm.nccl.shapes import group_shape
from simcomm.ops import Collective
from simcomm.runtimes import get_runtime
from simcomm.topologies.presets import preset
from simcomm.topologies.two_level import two_level
from tests.timelines import dgx_with_one_slow_link

NCCL = get_runtime("nccl")
KINDS = (("allreduce", 0), ("allgather", 0), ("reduce_scatter", 0), ("broadcast", 1), ("reduce", 0),
         ("alltoall", 0))


def same(a, b) -> bool:
    """Every field of two preparations equal, the steps' arrays bit for bit."""
    if (a.algorithm, a.ppn, a.latency, a.closed_form, a.label, a.key, len(a.steps)) != (
            b.algorithm, b.ppn, b.latency, b.closed_form, b.label, b.key, len(b.steps)):
        return False
    return all(x.src.tobytes() == y.src.tobytes() and x.dst.tobytes() == y.dst.tobytes()
               and x.nbytes.tobytes() == y.nbytes.tobytes() and x.repeat == y.repeat
               for x, y in zip(a.steps, b.steps, strict=True))


def op(ranks, kind="allreduce", nbytes=25e6, root=0) -> Collective:
    return Collective(0, kind, tuple(int(r) for r in ranks), nbytes, root=root)


TOPOLOGIES = {
    "dgx-a100-hdr": lambda: preset("dgx-a100-hdr", nodes=4, gpus_per_node=8),
    "dgx-h100-ndr": lambda: preset("dgx-h100-ndr", nodes=3, gpus_per_node=8),  # NVLS
    "dgx1-v100": lambda: preset("dgx1-v100", nodes=3, gpus_per_node=8),  # cube mesh: rings along NVLinks
    "pcie-host": lambda: two_level(3, 4, intra="pcie-host", nics_per_node=2),  # staged through host memory
    "planes": lambda: two_level(4, 8, nics_per_node=4, planes=2, inter="fat-tree"),
    "uneven": lambda: two_level(4, [8, 8, 4, 8], nics_per_node=2),
    "gb200-nvl72": lambda: preset("gb200-nvl72", nodes=36, gpus_per_node=4),  # machines share NVLink domains
}


@pytest.mark.parametrize("name", sorted(TOPOLOGIES))
def test_groups_of_one_shape_are_prepared_alike(name):
    topo = TOPOLOGIES[name]()
    machines = topo.machines()
    rng = np.random.default_rng(7)
    shared = 0
    for _ in range(12):
        size = int(rng.integers(2, 9))
        local = None
        groups = []
        for m in range(int(machines.max()) + 1):
            ranks = np.flatnonzero(machines == m)
            if len(ranks) < size:
                continue
            if local is None:
                local = rng.permutation(len(ranks))[:size]  # the same local members, in the same order
            if local.max() < len(ranks):
                groups.append(ranks[local])
        for kind, root in KINDS:
            nbytes = float(rng.choice([0.0, 7.0, 4096.0, 3e6, 123456789.0]))
            first = {}
            for g in groups:
                shape = group_shape(topo, tuple(int(r) for r in g))
                assert shape is not None and shape[1] == tuple(int(x) for x in local)
                got = prepare_nccl(op(g, kind, nbytes, root % len(g)), topo, NCCL)
                if shape in first:
                    assert same(first[shape], got), (name, kind, nbytes, g)
                    shared += 1
                first.setdefault(shape, got)
    assert shared > 0  # machines of one class were found


def test_a_machine_with_another_link_is_another_class():
    topo = preset("dgx-a100-hdr", nodes=3, gpus_per_node=8)
    route_len, links = topo.routes(np.array([8]), np.array([9]))  # machine 1: rank 8 -> its NVSwitch -> rank 9
    capacity = topo.capacity.copy()
    capacity[links[0]] /= 2  # rank 8's NVLink port at half its rate
    topo.__dict__["capacity"] = capacity
    a, b, c = (tuple(range(m * 8, m * 8 + 8)) for m in range(3))
    assert group_shape(topo, a) == group_shape(topo, c) != group_shape(topo, b)
    pa, pb = (prepare_nccl(op(g), topo, NCCL) for g in (a, b))
    assert pa.closed_form != pb.closed_form  # sharing their preparation would have been wrong
    assert same(pa, prepare_nccl(op(c), topo, NCCL))


def test_groups_across_machines_or_of_one_rank_have_no_shape():
    topo = two_level(3, [8, 8, 4])
    assert group_shape(topo, (0, 8, 16)) is None and group_shape(topo, (3,)) is None
    assert group_shape(topo, (0, 8)) == group_shape(topo, (1, 9)) == ("pair", 0)  # (pairs: below)
    assert group_shape(topo, (16, 17)) != group_shape(topo, (0, 1))  # a machine of 4 is another class
    assert group_shape(topo, (0, 1)) == group_shape(topo, (8, 9)) != group_shape(topo, (1, 0))


def _hierarchical(topo):
    from simcomm.pipeline.baseline import make_strategy
    from simcomm.traces import default_trace
    from simcomm.workload import build_workload

    trace = default_trace()
    w = build_workload(trace, topo.n_ranks, batch=8, dataset_size=1000)
    (_, plan), = make_strategy("hierarchical-allreduce", {}).iterations(w, topo)
    return plan


@pytest.mark.parametrize("fidelity,resolution", [("flow", 0.0), ("flow", 0.01), ("analytic", 0.0)])
def test_a_run_with_shared_preparations_is_the_reference_run_bit_for_bit(fidelity, resolution, monkeypatch):
    calls = [0]

    def counted(*args, **kwargs):
        calls[0] += 1
        return prepare_nccl(*args, **kwargs)

    runs = [0]

    def isolated(*args, **kwargs):
        runs[0] += 1
        return run_isolated(*args, **kwargs)

    monkeypatch.setattr(nccl_prepare, "prepare_nccl", counted)
    monkeypatch.setattr("simcomm.nccl.prepare_nccl", counted)
    monkeypatch.setattr(pricer, "run_isolated", isolated)
    out = []
    for reference in (frozenset(), frozenset({"shapes", "keep"})):
        topo = preset("dgx-a100-hdr", nodes=4, gpus_per_node=8)
        plan = _hierarchical(topo)
        calls[0] = runs[0] = 0
        tl = engine.simulate(plan, topo, fidelity=fidelity, options=EngineOptions(
            runtime=NCCL, resolution=resolution, reference=reference))
        out.append((tl, calls[0], runs[0]))
    (fast, n_fast, iso_fast), (ref, n_ref, iso_ref) = out
    assert n_fast < n_ref  # the machine-local reduce-scatters and all-gathers prepared once per bucket
    if fidelity == "flow":  # the machines' all-gathers run alone once (disjoint routes: FlowPricer._alike_key)
        assert iso_fast < iso_ref
    assert fast.start.tobytes() == ref.start.tobytes() and fast.end.tobytes() == ref.end.tobytes()
    assert fast.makespan == ref.makespan and fast.link_class_bytes == ref.link_class_bytes
    assert fast.meta == ref.meta


def test_alike_steps_on_links_of_another_capacity_run_apart():
    from simcomm.ops import PlanBuilder

    out = []
    for reference in (frozenset(), frozenset({"shapes"})):
        topo = dgx_with_one_slow_link()  # machine 1: rank 8's NVLink port at half its rate
        b = PlanBuilder(topo.n_ranks)
        for m in range(3):
            b.collective("allgather", tuple(range(8 * m, 8 * m + 8)), 8e6, label=f"machine {m}")
        tl = engine.simulate(b.build(), topo, options=EngineOptions(runtime=NCCL, reference=reference))
        out.append(tl)
    fast, ref = out
    assert fast.end.tobytes() == ref.end.tobytes() and fast.meta == ref.meta
    assert fast.end[0] == fast.end[2] < fast.end[1]  # machine 1 is slower: its run was not machine 0's


@pytest.mark.parametrize("name", ["dgx-a100-hdr", "planes", "uneven", "gb200-nvl72", "pcie-host"])
def test_pairs_across_machines_of_one_shape_are_prepared_alike(name):
    """Two ranks on machines of different NVLink domains: equal pair shapes, equal preparations, field by field;
    pairs in one domain (gb200-nvl72's machines share one) or staged through host memory have none."""
    from simcomm.nccl.layout import _domains

    topo = TOPOLOGIES[name]()
    machines = topo.machines()
    domain = _domains(topo)
    rng = np.random.default_rng(11)
    shared, classes, apart = 0, set(), 0
    first = {}
    for _ in range(60):
        a, b = (int(x) for x in rng.choice(topo.n_ranks, 2, replace=False))
        shape = group_shape(topo, (a, b))
        if name == "pcie-host" or domain[machines[a]] == domain[machines[b]]:
            assert shape is None or shape[0] != "pair"
            apart += machines[a] != machines[b]  # (gb200-nvl72: machines of one NVLink domain)
            continue
        assert shape is not None and shape[0] == "pair"
        classes.add(shape)
        for kind, root in KINDS:
            nbytes = float(rng.choice([0.0, 7.0, 4096.0, 3e6, 123456789.0]))
            got = prepare_nccl(op((a, b), kind, nbytes, root), topo, NCCL)
            key = (shape, kind, nbytes)
            if key in first:
                assert same(first[key], got), (name, kind, nbytes, a, b)
                shared += 1
            first.setdefault(key, got)
    if name != "pcie-host":
        assert shared > 0 and len(classes) >= 1
    if name == "gb200-nvl72":
        assert apart > 0  # pairs of two machines in one domain were tried, and got no pair shape


def test_a_pair_across_a_slower_link_is_another_class():
    topo = preset("dgx-a100-hdr", nodes=4, gpus_per_node=8)
    assert group_shape(topo, (0, 16)) == group_shape(topo, (8, 24)) == group_shape(topo, (16, 0))
    topo = preset("dgx-a100-hdr", nodes=4, gpus_per_node=8)
    _, links = topo.routes(np.array([16]), np.array([0]))
    capacity = topo.capacity.copy()
    capacity[links[-1]] /= 2  # the last hop into rank 0 at half its rate
    topo.__dict__["capacity"] = capacity
    assert group_shape(topo, (0, 16)) != group_shape(topo, (8, 24)) == group_shape(topo, (16, 8))
    pa, pb = (prepare_nccl(op(g), topo, NCCL) for g in ((0, 16), (8, 24)))
    assert pa.closed_form != pb.closed_form  # sharing their preparation would have been wrong


@pytest.mark.parametrize("fidelity", ["flow", "analytic"])
def test_a_run_of_pair_allreduces_is_the_reference_run_bit_for_bit(fidelity, monkeypatch):
    """sgp's offset-R/2 exchange: every rank's 2-rank all-reduce with rank + R/2, segment by segment; one
    preparation per pair class and size against the reference's one per pair and size."""
    from simcomm.ops import PlanBuilder

    calls = [0]

    def counted(*args, **kwargs):
        calls[0] += 1
        return prepare_nccl(*args, **kwargs)

    monkeypatch.setattr(nccl_prepare, "prepare_nccl", counted)
    monkeypatch.setattr("simcomm.nccl.prepare_nccl", counted)
    out = []
    for reference in (frozenset(), frozenset({"shapes", "keep"})):
        topo = preset("dgx-a100-hdr", nodes=8, gpus_per_node=8)
        half = topo.n_ranks // 2
        b = PlanBuilder(topo.n_ranks)
        gate = {r: [] for r in range(topo.n_ranks)}
        for s, nbytes in enumerate((3e6, 8e6, 3e6)):
            for r in range(half):
                c = b.collective("allreduce", (r, r + half), nbytes, after=gate[r] + gate[r + half],
                                 label=f"segment {s} {r}")
                gate[r] = gate[r + half] = [c]
            for r in range(topo.n_ranks):
                gate[r] = [b.compute(r, 1e-4 * (1 + r % 3), after=gate[r], label=f"average {s}")]
        calls[0] = 0
        tl = engine.simulate(b.build(), topo, fidelity=fidelity,
                             options=EngineOptions(runtime=NCCL, reference=reference))
        out.append((tl, calls[0]))
    (fast, n_fast), (ref, n_ref) = out
    assert n_fast < n_ref == 2 * 32  # 32 pairs x 2 sizes prepared by the reference
    assert fast.start.tobytes() == ref.start.tobytes() and fast.end.tobytes() == ref.end.tobytes()
    assert fast.makespan == ref.makespan and fast.link_class_bytes == ref.link_class_bytes
    assert fast.meta == ref.meta
