"""A fat-tree built as arrays (``Wiring``) is the graph-built one, link for link.

``fat_tree()`` builds its topology from a :class:`~simcomm.topologies.wiring.Wiring` and routes with link ids
computed from coordinates (``FatTreeFabric.links_many``); the reference is the graph the builder used to make
(``rank_graph`` + ``add_fat_tree``) routed by node paths and networkx's edge order.  Every node, attribute,
edge, link id, capacity, route and simulated time must agree.
"""

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simcomm.engine import simulate
from simcomm.errors import TopologyError
from simcomm.ops import PlanBuilder
from simcomm.runtimes.mpi import MPICH
from simcomm.topologies.analysis import summarize
from simcomm.topologies.base import Topology
from simcomm.topologies.fabric import add_link, rank_graph, standalone
from simcomm.topologies.fat_tree import add_fat_tree, fat_tree
from simcomm.topologies.wiring import Wiring, unique_ids


def _graph_built(hosts, k=None, link="ib-edr", oversubscription=1.0, levels=3, routing=None, gamma=0.0):
    """The graph builder: what ``fat_tree()`` did before it built arrays."""
    links: dict = {}
    hl = add_link(links, link)
    g, names = rank_graph(hosts, gamma)
    fab = add_fat_tree(g, names, hl, links, k=k, link=link, oversubscription=oversubscription, levels=levels,
                       routing=routing)
    return standalone("ref", g, links, names, fab, {})


FABRICS = st.tuples(st.integers(1, 70), st.sampled_from([2, 3]), st.sampled_from([None, "ecmp", "d-mod-k"]),
                    st.sampled_from([1.0, 2.0]), st.sampled_from(["ib-edr", "roce-100g"]))


@settings(max_examples=30, deadline=None)
@given(FABRICS, st.integers(0, 10))
def test_arrays_and_graph_agree_on_nodes_edges_links_and_routes(fabric, seed):
    hosts, levels, routing, over, link = fabric
    wired = fat_tree(hosts=hosts, levels=levels, routing=routing, oversubscription=over, link=link, gamma=2e-11)
    ref = _graph_built(hosts, levels=levels, routing=routing, oversubscription=over, link=link, gamma=2e-11)
    assert wired.wiring is not None and "graph" not in wired.__dict__
    # what the engine reads, before the graph exists
    assert wired.link_names == ref.link_names
    assert np.array_equal(wired.capacity, ref.capacity) and np.array_equal(wired.latency, ref.latency)
    assert wired.ranks == ref.ranks and wired.gammas().tolist() == ref.gammas().tolist()
    assert [wired.machine_of(r) for r in range(hosts)] == [ref.machine_of(r) for r in range(hosts)]
    rng = np.random.default_rng(seed)
    src, dst = rng.integers(0, hosts, 400), rng.integers(0, hosts, 400)
    src[:hosts], dst[:hosts] = np.arange(hosts), np.arange(hosts)[::-1]  # self pairs and mirrors
    assert wired.router.links_many(wired, src, dst) is not None  # link ids from coordinates
    assert ref.router.links_many(ref, src, dst) is None  # node paths and networkx's edge order
    lens, links = wired.routes(src, dst)
    want = [ref.route(a, b) for a, b in zip(src.tolist(), dst.tolist(), strict=True)]
    assert lens.tolist() == [len(r) for r in want]
    assert links.tolist() == [x for r in want for x in r]
    assert [wired.route(a, b) for a, b in zip(src[:20].tolist(), dst[:20].tolist(), strict=True)] == want[:20]
    assert "graph" not in wired.__dict__  # nothing above needed the networkx graph
    # the graph, made on first use: the same nodes, attributes and edges in the same order
    g, h = wired.graph, ref.graph
    assert list(g.nodes(data=True)) == list(h.nodes(data=True))
    assert list(g.edges(data=True)) == list(h.edges(data=True))
    assert wired.path(0, hosts - 1) == ref.path(0, hosts - 1)
    ref.name, ref.meta = wired.name, wired.meta
    assert summarize(wired) == summarize(ref)  # counts, links per class, bisection, diameter
    w = Wiring.from_graph(h)
    for name in ("kind", "machine", "u", "v"):
        assert np.array_equal(getattr(w, name), getattr(wired.wiring, name)), name
    assert [w.link_classes[c] for c in w.link] == [wired.wiring.link_classes[c] for c in wired.wiring.link]


@pytest.mark.parametrize("levels,hosts", [(3, 54), (2, 18), (3, 128)])
def test_a_ring_allreduce_runs_the_same_on_both(levels, hosts):
    wired, ref = fat_tree(hosts=hosts, levels=levels), _graph_built(hosts, levels=levels)
    b = PlanBuilder(hosts)
    b.collective("allreduce", range(hosts), 100e6, algorithm="ring")
    b.collective("alltoall", range(hosts), 1e6, algorithm="pairwise")
    plan = b.build()
    for fidelity in ("flow", "analytic"):
        t1 = simulate(plan, wired, fidelity=fidelity, runtime=MPICH)
        t2 = simulate(plan, ref, fidelity=fidelity, runtime=MPICH)
        assert t1.start.tolist() == t2.start.tolist() and t1.end.tolist() == t2.end.tolist()
        assert t1.link_class_bytes == t2.link_class_bytes
    assert "graph" not in wired.__dict__


def test_a_derived_topology_reads_the_graph_and_routes_by_paths():
    wired = fat_tree(hosts=20, levels=2)
    derived = Topology("copy", wired.graph, dict(wired.links), wired.ranks, router=wired.router)
    assert derived.wiring is None
    src, dst = np.arange(20), np.arange(20)[::-1]
    assert [x.tolist() for x in derived.routes(src, dst)] == [x.tolist() for x in wired.routes(src, dst)]


def test_a_wiring_that_is_not_connected_or_misplaced_is_refused():
    wired = fat_tree(hosts=8, levels=2)
    w = wired.wiring
    cut = Wiring(w.nodes, w.kind, w.machine, w.gamma, w.u[1:], w.v[1:], w.link[1:], w.link_classes)
    with pytest.raises(TopologyError, match="disconnected"):
        Topology.from_wiring("cut", cut, wired.links, np.arange(8), router=wired.router, meta={})
    with pytest.raises(TopologyError, match="not a rank node"):
        Topology.from_wiring("sw", w, wired.links, np.array([0, 8]), router=wired.router, meta={})
    with pytest.raises(TopologyError, match="link table"):
        Topology.from_wiring("nolink", w, {}, np.arange(8), router=wired.router, meta={})


def test_connected_agrees_with_networkx():
    g = nx.path_graph(5)
    nx.set_node_attributes(g, "switch", "kind")
    nx.set_edge_attributes(g, "ib-edr", "link")
    assert Wiring.from_graph(g).connected()
    g.remove_edge(2, 3)
    assert not Wiring.from_graph(g).connected()


@given(st.lists(st.integers(0, 99), max_size=300))
def test_unique_ids_is_np_unique(ids):
    arr = np.array(ids, dtype=np.int64)
    assert unique_ids(arr, 100).tolist() == np.unique(arr).tolist()


def test_a_wired_topology_pickles_and_copies_without_its_graph():
    import copy
    import pickle

    wired = fat_tree(hosts=20, levels=2)
    src, dst = np.arange(20), np.arange(20)[::-1]
    for other in (pickle.loads(pickle.dumps(wired)), copy.deepcopy(wired)):
        assert "graph" not in other.__dict__ and other.wiring is not None
        assert other.routes(src, dst)[1].tolist() == wired.routes(src, dst)[1].tolist()
        assert list(other.graph.edges) == list(wired.graph.edges)
    assert not hasattr(wired, "no_such_attribute")
