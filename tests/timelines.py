"""Bit-for-bit comparison of engine timelines, for the tests of the engine's exact shortcuts."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np


def same(a, b) -> bool:
    """Equal shapes and the same bytes (NaN equals NaN, -0.0 differs from 0.0)."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    return a.shape == b.shape and a.tobytes() == b.tobytes()


def check(a, b) -> None:
    """Every start, end, statistic and link byte of two timelines the same."""
    assert same(a.start, b.start) and same(a.end, b.end) and a.makespan == b.makespan
    assert a.meta == b.meta and a.link_class_bytes == b.link_class_bytes


@contextmanager
def flags(module, **values) -> Iterator[None]:
    """Set module-level switches (``executor.DIRECT`` ...) for the block, restored afterwards."""
    old = {k: getattr(module, k) for k in values}
    for k, v in values.items():
        setattr(module, k, v)
    try:
        yield
    finally:
        for k, v in old.items():
            setattr(module, k, v)


def both(plan, topo, fast: dict, ref: dict, **kw):
    """(timeline with the executor's switches ``fast``, timeline with ``ref``) of one plan."""
    from simcomm.engine import executor, simulate

    with flags(executor, **fast):
        a = simulate(plan, topo, **kw)
    with flags(executor, **ref):
        b = simulate(plan, topo, **kw)
    return a, b
