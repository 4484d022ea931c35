"""Bit-for-bit comparison of engine timelines, for the tests of the engine's exact shortcuts."""

from __future__ import annotations

import numpy as np


def same(a, b) -> bool:
    """Equal shapes and the same bytes (NaN equals NaN, -0.0 differs from 0.0)."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    return a.shape == b.shape and a.tobytes() == b.tobytes()


def check(a, b) -> None:
    """Every start, end, statistic and link byte of two timelines the same."""
    assert same(a.start, b.start) and same(a.end, b.end) and a.makespan == b.makespan
    assert a.meta == b.meta and a.link_class_bytes == b.link_class_bytes


def with_reference(kw: dict, names) -> dict:
    """``simulate`` keyword arguments ``kw`` with the reference paths ``names`` added to its options."""
    from dataclasses import replace

    from simcomm.engine import EngineOptions

    kw = dict(kw)
    fields = {f for f in EngineOptions.__dataclass_fields__}
    opts = EngineOptions.of(kw.pop("options", None), **{k: kw.pop(k) for k in list(kw) if k in fields})
    return {**kw, "options": replace(opts, reference=opts.reference | frozenset(names))}


def both(plan, topo, fast=(), ref=(), **kw):
    """(timeline with the reference paths ``fast`` turned off, timeline with ``ref``) of one plan."""
    from simcomm.engine import simulate
    from simcomm.runtimes.mpi import MPICH

    kw = {"runtime": MPICH, **kw}  # MPICH's rules unless the caller names a runtime
    return simulate(plan, topo, **with_reference(kw, fast)), simulate(plan, topo, **with_reference(kw, ref))


def direct_vs_queue(plan, topo, **kw):
    """(direct loop, SimPy's queue) timelines of one plan: :func:`both` with the ``direct`` reference."""
    return both(plan, topo, (), {"direct"}, **kw)


def dgx_with_one_slow_link(nodes: int = 3):
    """``dgx-a100-hdr`` of ``nodes`` machines with rank 8's NVLink port (machine 1) at half its rate: alike
    groups whose only difference is a capacity, for the tests that shared steps keep each machine's own times."""
    from simcomm.topologies.presets import preset

    topo = preset("dgx-a100-hdr", nodes=nodes, gpus_per_node=8)
    _, links = topo.routes(np.array([8]), np.array([9]))
    capacity = topo.capacity.copy()
    capacity[links[0]] /= 2
    topo.__dict__["capacity"] = capacity
    return topo
