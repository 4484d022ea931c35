"""Fixtures for the strategy tests: tiny synthetic traces and clusters, handed out as one ``toy`` fixture.

``toy.make_trace`` / ``toy.toy_trace`` / ``toy.fc_trace`` build traces whose layers take
forward 1 ms, backward 2 ms and update 0.1 ms; ``toy.two_level`` is a small two-level
cluster and ``mesh(n)`` a full mesh of one link class.  (importlib mode cannot import a
conftest, so the helpers travel as a fixture.)
"""

from __future__ import annotations

import networkx as nx
import pytest

from simcomm.links.base import LinkClass
from simcomm.topologies.base import Topology
from simcomm.topologies.full_mesh import full_mesh
from simcomm.traces.schema import Layer, Trace
from simcomm.workload import build_workload

INTRA = LinkClass("t-intra", 100e9, 1e-6, "nvlink")
INTER = LinkClass("t-inter", 10e9, 2e-6, "infiniband")
LINK = LinkClass("b-link", 1e9, 1e-6, "infiniband")


def make_trace(n_layers: int = 4, grad_bytes: int = 4_000_000, batch: int = 32, l1=None) -> Trace:
    """``n_layers`` Linear layers of ``grad_bytes`` each, the first with an ImageNet-shaped input."""
    layers = tuple(Layer(f"l{i}", "Linear", grad_bytes // 4, grad_bytes, 1e-3, 2e-3, 1e-4,
                         (3, 224, 224) if i == 0 else (16,), (16,),
                         grad_l1=tuple(l1[i]) if l1 else ()) for i in range(n_layers))
    return Trace("toy", batch, "float32", "test", "gpu", "synthetic", layers, iteration_s=n_layers * 3.1e-3)


def toy_trace(names=("l0", "l1", "l2", "l3"), grad_bytes=4_000_000, module="Conv2d", batch=8, shapes=True) -> Trace:
    """Named layers of one module kind and ``grad_bytes`` each (``shapes=False``: no layer shapes)."""
    layers = tuple(Layer(n, module, grad_bytes // 4, grad_bytes, 1e-3, 2e-3, 1e-4,
                         (16,) if shapes else (), (16,) if shapes else ()) for n in names)
    return Trace("toy", batch, "float32", "test", "gpu", "synthetic", layers, iteration_s=len(names) * 3.1e-3)


def fc_trace(n: int, n_prev: int, batch: int, shapes: bool = True) -> Trace:
    """One FC layer N' -> N (fp32 weights and bias)."""
    params = n * n_prev + n
    layer = Layer("fc", "Linear", params, 4 * params, 1e-3, 2e-3, 1e-4,
                  (n_prev,) if shapes else (), (n,) if shapes else ())
    return Trace("fc", batch, "float32", "test", "gpu", "synthetic", (layer,), iteration_s=3.1e-3)


def two_level(nodes: int, gpus: int, intra: LinkClass = INTRA, inter: LinkClass = INTER) -> Topology:
    """``nodes`` machines; GPUs joined by a node switch, one NIC per machine on a core switch."""
    g = nx.Graph()
    ranks = []
    g.add_node("core", kind="switch", machine=None)
    for m in range(nodes):
        sw, nic = f"sw{m}", f"nic{m}"
        g.add_node(sw, kind="switch", machine=m)
        g.add_node(nic, kind="nic", machine=m)
        g.add_edge(sw, nic, link=intra.name)
        g.add_edge(nic, "core", link=inter.name)
        for k in range(gpus):
            r = f"g{m}.{k}"
            g.add_node(r, kind="rank", machine=m)
            g.add_edge(r, sw, link=intra.name)
            ranks.append(r)
    return Topology(f"toy-{nodes}x{gpus}", g, {intra.name: intra, inter.name: inter}, tuple(ranks))


class _Toy:
    INTRA, INTER, LINK = INTRA, INTER, LINK
    make_trace = staticmethod(make_trace)
    toy_trace = staticmethod(toy_trace)
    fc_trace = staticmethod(fc_trace)
    two_level = staticmethod(two_level)


@pytest.fixture
def toy():
    return _Toy


@pytest.fixture
def trace():
    return make_trace()


@pytest.fixture
def make_workload():
    def make(n_ranks, trace=None, **kw):
        return build_workload(trace or toy_trace(), n_ranks, bucket_mb=kw.pop("bucket_mb", 0), **kw)
    return make


@pytest.fixture
def mesh():
    return lambda n: full_mesh(n, LINK)
