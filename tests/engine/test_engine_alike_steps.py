"""A group's steps taken from an alike group's derivation (``FlowPricer._translated``) are the steps the group
derives on its own (the ``alike_steps`` reference), array by array, and a run with them is the reference run bit
for bit.

Groups are alike when their ranks increase and their routes agree on latency, length and link families, and their
members on reduction rate (``FlowPricer._pattern``'s signature): machine-local groups of alike machines, and also
groups across machines whose routes look the same.  Groups whose ranks do not increase, or whose routes differ,
derive their steps on their own.
"""

from __future__ import annotations

import pytest

from simcomm import engine
from simcomm.engine.flow import pricer
from simcomm.engine.options import EngineOptions
from simcomm.ops import PlanBuilder
from simcomm.runtimes import get_runtime
from simcomm.runtimes.mpi import MPICH
from simcomm.topologies.presets import preset
from tests.timelines import check, dgx_with_one_slow_link

NCCL = get_runtime("nccl")
KINDS = (("allreduce", 0), ("reduce", 0), ("broadcast", 1), ("allgather", 0), ("reduce_scatter", 0))


def _groups() -> list[tuple[int, ...]]:
    """Machine-local groups, groups across machines (strided), a reversed group and a partial one."""
    out = [tuple(range(8 * m, 8 * m + 8)) for m in range(4)]
    out += [tuple(range(m, 32, 8)) for m in range(3)]  # one rank per machine
    out += [tuple(range(15, 7, -1)), (16, 18, 21), (24, 26, 29)]  # ranks decreasing; two alike partial groups
    return out


def _plan(topo, sizes=(4e6, 1e6, 4e6, 3e5)):
    """Rounds of each kind on every group, the groups of one round after one another's (so repeats coalesce)."""
    b = PlanBuilder(topo.n_ranks)
    gate: dict = {}
    for s, size in enumerate(sizes):
        for kind, root in KINDS:
            for g in _groups():
                gate[g] = [b.collective(kind, g, size, root=root, after=gate.get(g, []), label=f"{kind} {s}")]
    return b.build()


def _recorded(monkeypatch):
    """Spy on ``FlowPricer._steps``: every (group, preparation)'s entries, in call order."""
    seen: list = []
    real = pricer.FlowPricer._steps

    def steps(self, op, prep):
        out = real(self, op, prep)
        seen.append((op.ranks, out))
        return out
    monkeypatch.setattr(pricer.FlowPricer, "_steps", steps)
    return seen


def _same_entry(a, b) -> None:
    (ra, ka, ha, fa, ca), (rb, kb, hb, fb, cb) = a, b
    for name in ("src", "dst", "nbytes", "latency", "route_len", "links", "red_ranks", "red_seconds", "red_slot"):
        x, y = getattr(ra, name), getattr(rb, name)
        assert x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes(), name
    assert ra.repeat == rb.repeat and ka == kb and ca == cb
    assert (ha is None) == (hb is None) and (ha is None or ha.tobytes() == hb.tobytes())
    assert (fa is None) == (fb is None) and (fa is None or fa.tobytes() == fb.tobytes())


@pytest.mark.parametrize("runtime", [NCCL, MPICH], ids=["nccl", "mpich"])
@pytest.mark.parametrize("settings", [{}, {"resolution": 0.01}, {"busiest_links": 3}, {"record_link_usage": True},
                                      {"reference": frozenset({"shapes"})}])
def test_alike_steps_are_the_groups_own_steps_bit_for_bit(runtime, settings, monkeypatch):
    seen = _recorded(monkeypatch)
    out = []
    for extra in (frozenset(), frozenset({"alike_steps"})):
        topo = preset("dgx-a100-hdr", nodes=4, gpus_per_node=8)
        seen.clear()
        opts = EngineOptions(runtime=runtime, **settings)
        opts = EngineOptions.of(opts, reference=opts.reference | extra | {"keep"})
        tl = engine.simulate(_plan(topo), topo, options=opts)
        out.append((tl, list(seen)))
    (fast, steps_fast), (ref, steps_ref) = out
    check(fast, ref)  # every start, end, statistic and link byte
    if settings.get("record_link_usage"):
        assert repr(fast.meta.get("link_usage")) == repr(ref.meta.get("link_usage"))
    assert fast.paths["alike_steps"] and not ref.paths["alike_steps"]
    # (with the shapes reference every group has a preparation of its own, and a derivation is one preparation's)
    assert (fast.paths["taken"].get("alike_steps", 0) > 0) == ("shapes" not in settings.get("reference", ()))
    assert "alike_steps" not in ref.paths["taken"]
    assert len(steps_fast) == len(steps_ref)
    for (ga, a), (gb, b) in zip(steps_fast, steps_ref, strict=True):
        assert ga == gb and len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            _same_entry(x, y)


def test_only_groups_whose_ranks_increase_and_whose_routes_agree_share_steps(monkeypatch):
    taken: list = []
    reduced: list = []  # whether the step taken reduces at some receivers
    real = pricer.FlowPricer._translated

    def translated(self, made, pattern, group, pkey):
        taken.append(tuple(group.tolist()))
        reduced.append(len(made[2]) > 0)
        return real(self, made, pattern, group, pkey)
    monkeypatch.setattr(pricer.FlowPricer, "_translated", translated)
    topo = preset("dgx-a100-hdr", nodes=4, gpus_per_node=8)
    tl = engine.simulate(_plan(topo), topo, options=EngineOptions(runtime=MPICH, reference={"keep"}))
    groups = set(taken)
    assert (15, 14, 13, 12, 11, 10, 9, 8) not in groups  # decreasing: derived on its own
    assert tuple(range(8, 16)) in groups and (24, 26, 29) in groups  # alike machines' groups, alike partial ones
    assert tl.paths["taken"]["alike_steps"] == len(taken)
    assert any(reduced) and not all(reduced)  # steps that reduce were taken too (receivers by position)


def test_a_machine_with_a_slower_link_keeps_its_own_times():
    """Capacities are not in the signature (the derivation does not read them): the routes' own links are, so a
    machine with one slower link still runs at its own rate."""
    out = []
    for reference in (frozenset(), frozenset({"alike_steps", "shapes"})):
        topo = dgx_with_one_slow_link()  # machine 1: rank 8's NVLink port at half its rate
        b = PlanBuilder(topo.n_ranks)
        for m in range(3):
            ranks = tuple(range(8 * m, 8 * m + 8))
            first = b.collective("broadcast", ranks, 8e6, label=f"machine {m}")
            b.collective("broadcast", ranks, 2e6, after=[first], label=f"machine {m} again")
        out.append(engine.simulate(b.build(), topo, options=EngineOptions(runtime=NCCL, reference=reference)))
    fast, ref = out
    check(fast, ref)
    assert fast.paths["taken"]["alike_steps"] > 0
    assert fast.end[0] == fast.end[4] < fast.end[2]  # machine 1 is slower


def test_a_machine_that_reduces_slower_derives_its_own_steps(monkeypatch):
    """Each member's reduction rate is in the signature: a machine whose GPUs reduce at half the rate takes no
    other machine's reduction seconds."""
    from simcomm.topologies.base import Topology

    def run(reference):
        topo = preset("dgx-a100-hdr", nodes=3, gpus_per_node=8)
        b = PlanBuilder(topo.n_ranks)
        for m in range(3):
            b.collective("reduce", tuple(range(8 * m, 8 * m + 8)), 8e6, label=f"machine {m}")
        return engine.simulate(b.build(), topo, options=EngineOptions(runtime=MPICH, reference=reference))

    alike = run(frozenset()).paths["taken"]["alike_steps"]  # machines 1 and 2 take machine 0's steps
    real = Topology.gammas

    def gammas(self):
        out = real(self).copy()
        out[8:16] = 2.0 * out[8:16] + 1e-12  # machine 1 reduces slower
        return out
    monkeypatch.setattr(Topology, "gammas", gammas)
    fast, ref = run(frozenset()), run(frozenset({"alike_steps"}))
    check(fast, ref)
    assert 2 * fast.paths["taken"]["alike_steps"] == alike  # now machine 2 alone
    assert fast.end[0] == fast.end[2] < fast.end[1]  # machine 1 reduces slower: its own steps
