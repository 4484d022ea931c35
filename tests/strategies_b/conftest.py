"""Fixtures for the gossip / compression / PCNN strategy tests: tiny traces and clusters."""

from __future__ import annotations

import pytest

from simcomm.links.base import LinkClass
from simcomm.topologies.full_mesh import full_mesh
from simcomm.traces.schema import Layer, Trace
from simcomm.workload import build_workload

LINK = LinkClass("b-link", 1e9, 1e-6, "infiniband")


def toy_trace(names=("l0", "l1", "l2", "l3"), grad_bytes=4_000_000, module="Conv2d", batch=8, shapes=True) -> Trace:
    """Layers with forward 1 ms, backward 2 ms, update 0.1 ms and ``grad_bytes`` each."""
    layers = tuple(Layer(n, module, grad_bytes // 4, grad_bytes, 1e-3, 2e-3, 1e-4,
                         (16,) if shapes else (), (16,) if shapes else ()) for n in names)
    return Trace("toy", batch, "float32", "test", "gpu", "synthetic", layers, iteration_s=len(names) * 3.1e-3)


def fc_trace(n: int, n_prev: int, batch: int, shapes: bool = True) -> Trace:
    """One FC layer N' -> N (fp32 weights and bias)."""
    params = n * n_prev + n
    layer = Layer("fc", "Linear", params, 4 * params, 1e-3, 2e-3, 1e-4,
                  (n_prev,) if shapes else (), (n,) if shapes else ())
    return Trace("fc", batch, "float32", "test", "gpu", "synthetic", (layer,), iteration_s=3.1e-3)


@pytest.fixture
def make_workload():
    def make(n_ranks, trace=None, **kw):
        return build_workload(trace or toy_trace(), n_ranks, bucket_mb=kw.pop("bucket_mb", 0), **kw)
    return make


@pytest.fixture
def mesh():
    return lambda n: full_mesh(n, LINK)


@pytest.fixture
def traces():
    """The trace factories: ``traces.toy(...)``, ``traces.fc(...)``."""
    class _T:
        toy = staticmethod(toy_trace)
        fc = staticmethod(fc_trace)
    return _T
