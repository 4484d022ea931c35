"""Fixtures for the baseline-strategy tests: a synthetic trace and a small two-level cluster."""

from __future__ import annotations

import networkx as nx
import pytest

from simcomm.links.base import LinkClass
from simcomm.topologies.base import Topology
from simcomm.traces.schema import Layer, Trace

INTRA = LinkClass("t-intra", 100e9, 1e-6, "nvlink")
INTER = LinkClass("t-inter", 10e9, 2e-6, "infiniband")


def make_trace(n_layers: int = 4, grad_bytes: int = 4_000_000, batch: int = 32, l1=None) -> Trace:
    """Layers with forward 1 ms, backward 2 ms, update 0.1 ms and ``grad_bytes`` each."""
    layers = tuple(Layer(f"l{i}", "Linear", grad_bytes // 4, grad_bytes, 1e-3, 2e-3, 1e-4,
                         (3, 224, 224) if i == 0 else (16,), (16,),
                         grad_l1=tuple(l1[i]) if l1 else ()) for i in range(n_layers))
    return Trace("toy", batch, "float32", "test", "gpu", "synthetic", layers, iteration_s=n_layers * 3.1e-3)


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


@pytest.fixture
def trace():
    return make_trace()


class _Toy:
    """The helpers above, handed to tests as a fixture (importlib mode cannot import conftest)."""

    INTRA = INTRA
    INTER = INTER
    make_trace = staticmethod(make_trace)
    two_level = staticmethod(two_level)


@pytest.fixture
def toy():
    return _Toy
