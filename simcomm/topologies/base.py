"""The :class:`Topology`: a networkx graph of ranks, NICs and switches, plus routes.

Graph conventions (every builder follows them):

* node attribute ``kind``: ``"rank"`` (a GPU or process), ``"nic"`` or ``"switch"``
  (any forwarding element: NVSwitch, PCIe switch, ToR, spine, torus router);
* node attribute ``machine``: index of the physical node (server) a rank, NIC or
  node-local switch belongs to, ``None`` for fabric switches;
* rank nodes may carry ``gamma`` (seconds per byte reduced on that device);
* edge attribute ``link``: the name of a :class:`~simcomm.links.LinkClass` in
  ``Topology.links``.

Every undirected edge is a full-duplex pair of *directed links*; edge ``e`` (in
``graph.edges`` order) gives link ids ``2e`` (u→v) and ``2e+1`` (v→u).  The
engine works on these ids only: ``route(a, b)`` returns the tuple of directed
link ids from rank ``a`` to rank ``b``, and ``capacity``/``latency`` are numpy
arrays indexed by link id.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from itertools import chain

import networkx as nx
import numpy as np

from simcomm.errors import TopologyError
from simcomm.links.base import LinkClass
from simcomm.registry import Registry
from simcomm.topologies.overrides import NetworkOverrides
from simcomm.topologies.routers import Router, ShortestPathRouter, ecmp_hash, ecmp_hash_many
from simcomm.topologies.wiring import KINDS, Wiring, unique_ids

__all__ = ["TOPOLOGIES", "Topology", "Recipe", "Router", "ShortestPathRouter", "ecmp_hash", "ecmp_hash_many",
           "DEFAULT_GAMMA"]

#: every topology builder (each module registers its own) and, added by the package, every preset
TOPOLOGIES: Registry = Registry("topology", "simcomm.topologies")

#: Batches of fewer pairs are routed one by one (array set-up would cost more);
#: larger ones in chunks of _MANY_CHUNK pairs (memory stays bounded).
_MANY_MIN, _MANY_CHUNK = 256, 1 << 17
#: ... unless more pairs than this are not routed yet: then a router's ``links_many`` routes the batch at once.
_FEW_NEW = 2
#: Batches of at least _KEEP_PAIRS pairs are kept routed, the last _KEEP_BATCHES of them (see routes()),
#: and older ones too while all kept batches hold at most _KEEP_LINKS link ids (32 MB), up to _KEEP_MOST batches.
_KEEP_PAIRS, _KEEP_BATCHES, _KEEP_LINKS, _KEEP_MOST = 4096, 4, 1 << 22, 32
#: Graphs up to this many nodes get a dense node-pair -> link table (64 MB at most).
_DENSE_NODES = 4096
#: Larger graphs search node-pair keys by binary search, in key order from this many keys (the same positions).
_SORTED_NEEDLES = 4096

#: Seconds per byte reduced when a rank node carries no ``gamma``: 0, so that a
#: topology without device information prices pure communication.  Builders
#: that know the device set it (see "Reduction cost" in docs/topologies.md).
DEFAULT_GAMMA = 0.0


def _connected(g: nx.Graph) -> bool:
    """``nx.is_connected(g)`` of a graph of two nodes or more; for ``nx.Graph`` the same breadth-first search
    without networkx's dispatch and generator per node reached (36 000 nodes at 16 384 GPUs)."""
    if type(g) is not nx.Graph:
        return nx.is_connected(g)
    adj = g._adj
    start = next(iter(adj))
    seen, frontier = {start}, [start]
    while frontier:
        reached = []
        for v in frontier:
            for w in adj[v]:
                if w not in seen:
                    seen.add(w)
                    reached.append(w)
        frontier = reached
    return len(seen) == len(adj)


@dataclass(frozen=True)
class Recipe:
    """How a builder made a topology: the builder's name, the arguments it was called with, and the ``meta``
    keys it wrote itself (keys beyond them were added afterwards, by a preset).  A network override rebuilds
    from it with other network arguments and nothing else (:mod:`simcomm.topologies.overrides`)."""

    builder: str
    args: Mapping[str, object]
    meta_keys: frozenset[str]


@dataclass(eq=False)
class Topology:
    """A cluster: graph, link classes, rank placement and a router.

    Parameters
    ----------
    name: label shown in reports.
    graph: see the module docstring for attribute conventions.
    links: link-class name -> :class:`LinkClass` for every ``link`` used on edges.
    ranks: graph node of each rank, in rank order (this *is* the placement).
    router: path chooser; defaults to :class:`ShortestPathRouter`.
    meta: builder parameters, shown by ``simcomm topology show``.
    recipe: how the builder made it (two-level clusters), for network overrides to rebuild from.
    network: the network overrides the user gave on top of a preset (empty: the preset's own network).
    """

    name: str
    graph: nx.Graph
    links: Mapping[str, LinkClass]
    ranks: tuple[Hashable, ...]
    router: Router = field(default_factory=ShortestPathRouter)
    meta: dict = field(default_factory=dict)
    recipe: Recipe | None = None
    network: NetworkOverrides = field(default_factory=NetworkOverrides)

    def __post_init__(self) -> None:
        self.ranks = tuple(self.ranks)
        self._routes: dict[tuple[int, int], tuple[int, ...]] = {}
        self.validate()

    @classmethod
    def from_wiring(cls, name: str, wiring: Wiring, links: Mapping[str, LinkClass], rank_nodes: np.ndarray, *,
                    router: Router, meta: dict) -> Topology:
        """A topology whose graph is ``wiring`` (:mod:`simcomm.topologies.wiring`), made into a networkx
        graph only when ``graph`` is first read; ``rank_nodes`` are the node indices of the ranks in order."""
        topo = cls.__new__(cls)
        names = wiring.nodes
        topo.name, topo.links, topo.router, topo.meta = name, links, router, meta
        topo.ranks = tuple(map(names.__getitem__, np.asarray(rank_nodes).tolist()))
        topo.recipe, topo.network = None, NetworkOverrides()
        topo._routes = {}
        topo._wired = (wiring, np.asarray(rank_nodes, dtype=np.int64))
        topo._validate_wiring()
        return topo

    @classmethod
    def relinked(cls, topology: Topology, graph: nx.Graph, links: Mapping[str, LinkClass],
                 edges: tuple[list[tuple[Hashable, Hashable]], list[str]], meta: dict) -> Topology:
        """``topology`` on ``graph``, a copy of its graph whose edges' link classes were renamed to classes of
        ``links`` (a transport stack's effective ones, :func:`simcomm.stacks.apply_stack`); ``edges``: the
        copy's edges in order and each one's class, gathered while copying.  Nodes, kinds, placement and
        connectivity are ``topology``'s, checked when it was made, and every class is in ``links`` by
        construction: not checked again (~0.1 s of CPU at 16 384 GPUs, as is the pass over the edges)."""
        topo = cls.__new__(cls)
        topo.name, topo.graph, topo.links, topo.ranks = topology.name, graph, links, topology.ranks
        topo.router, topo.meta, topo.recipe, topo.network = topology.router, meta, topology.recipe, topology.network
        topo._routes = {}
        topo.__dict__["_edges_with_links"] = edges
        return topo

    def __getattr__(self, attr: str):
        # Only ``graph`` is ever missing: a topology made from a Wiring builds it on first use.
        wired = self.__dict__.get("_wired")
        if attr == "graph" and wired is not None:
            self.graph = wired[0].graph()
            return self.graph
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {attr!r}")

    @property
    def wiring(self) -> Wiring | None:
        """The arrays this topology was made from (:meth:`from_wiring`), None for a graph builder's."""
        wired = self.__dict__.get("_wired")
        return None if wired is None else wired[0]

    # ---- structure -------------------------------------------------------
    def _validate_wiring(self) -> None:
        wiring, nodes = self._wired
        if not len(nodes):
            raise TopologyError(f"topology {self.name!r} has no ranks")
        if (wiring.kind[nodes] != KINDS.index("rank")).any() or len(unique_ids(nodes, wiring.n_nodes)) != len(nodes):
            raise TopologyError(f"topology {self.name!r}: the placement names a node twice or one that is "
                                "not a rank node")
        unknown = sorted(set(wiring.link_classes) - set(self.links))
        if unknown:
            raise TopologyError(f"topology {self.name!r}: link {unknown[0]!r} is not in its link table; valid "
                                f"choices: {', '.join(sorted(self.links))}")
        if not wiring.connected():
            raise TopologyError(f"topology {self.name!r} is disconnected; every rank must reach every other")

    def validate(self) -> None:
        g = self.graph
        if not self.ranks:
            raise TopologyError(f"topology {self.name!r} has no ranks")
        node = g._node  # (networkx's node -> attributes dict: ``g.nodes[n]`` makes a view per look-up)
        try:
            placed = all([node[n].get("kind") == "rank" for n in self.ranks])
        except (KeyError, TypeError):  # a rank that is no node (or no node name at all): named below
            placed = False
        for n in () if placed else self.ranks:
            if n not in g or g.nodes[n].get("kind") != "rank":
                raise TopologyError(f"topology {self.name!r}: placement names {n!r}, which is not a rank node")
        if len(set(self.ranks)) != len(self.ranks):
            raise TopologyError(f"topology {self.name!r}: two ranks placed on the same node")
        # The names and kinds in use first (one pass over plain dicts: 3 million edges at 1 048 576 ranks);
        # the loops that name the first offender run only when one is unknown.
        if not {data.get("link") for _, nbrs in g.adjacency() for data in nbrs.values()} <= self.links.keys():
            for u, v, data in g.edges(data=True):
                name = data.get("link")
                if name not in self.links:
                    raise TopologyError(f"topology {self.name!r}: edge {u!r}-{v!r} uses unknown link "
                                        f"{name!r}; valid choices: {', '.join(sorted(self.links))}")
        if not {data.get("kind") for data in node.values()} <= {"rank", "nic", "switch"}:
            for n, data in g.nodes(data=True):
                if data.get("kind") not in ("rank", "nic", "switch"):
                    raise TopologyError(f"topology {self.name!r}: node {n!r} has kind {data.get('kind')!r}; "
                                        "valid choices: nic, rank, switch")
        if g.number_of_nodes() > 1 and not _connected(g):
            parts = nx.number_connected_components(g)
            raise TopologyError(f"topology {self.name!r} is disconnected ({parts} components); "
                                "every rank must reach every other")

    @property
    def n_ranks(self) -> int:
        return len(self.ranks)

    @cached_property
    def node_index(self) -> dict[Hashable, int]:
        return {n: i for i, n in enumerate(self._nodes)}

    @property
    def _nodes(self) -> Sequence[Hashable]:
        wiring = self.wiring
        return wiring.nodes if wiring is not None else list(self.graph.nodes)

    @cached_property
    def _edge_ids(self) -> dict[tuple[Hashable, Hashable], int]:
        ids: dict[tuple[Hashable, Hashable], int] = {}
        for e, (u, v) in enumerate(self._edge_list):
            ids[(u, v)] = 2 * e
            ids[(v, u)] = 2 * e + 1
        return ids

    @cached_property
    def _edges_with_links(self) -> tuple[list[tuple[Hashable, Hashable]], list[str]]:
        """The graph's edges in order and each one's link-class name, in one pass over the edges."""
        edges, names = [], []
        for u, v, name in self.graph.edges(data="link"):
            edges.append((u, v))
            names.append(name)
        return edges, names

    @cached_property
    def link_class_codes(self) -> tuple[tuple[str, ...], np.ndarray]:
        """``(names, code)``: the link classes in use, in order of first use, and the index into ``names``
        of each directed link id's class."""
        wiring = self.wiring
        if wiring is not None:
            used = np.flatnonzero(np.bincount(wiring.link, minlength=len(wiring.link_classes)))
            first = used[np.argsort([np.argmax(wiring.link == c) for c in used], kind="stable")]
            renum = np.zeros(len(wiring.link_classes), dtype=np.int64)
            renum[first] = np.arange(len(first))
            return tuple(wiring.link_classes[c] for c in first.tolist()), np.repeat(renum[wiring.link], 2)
        per_edge = self._edges_with_links[1]
        names = tuple(dict.fromkeys(per_edge))
        code = {name: i for i, name in enumerate(names)}
        return names, np.repeat(np.array([code[n] for n in per_edge], dtype=np.int64), 2)

    @cached_property
    def link_names(self) -> tuple[str, ...]:
        """Link-class name of each directed link id."""
        names, code = self.link_class_codes
        return tuple(np.array(names, dtype=object)[code].tolist())

    def _per_link(self, attr: str) -> np.ndarray:
        names, code = self.link_class_codes
        return np.array([getattr(self.links[n], attr) for n in names], dtype=float)[code]

    @cached_property
    def capacity(self) -> np.ndarray:
        """Bytes/s of each directed link id."""
        return self._per_link("bandwidth")

    @cached_property
    def latency(self) -> np.ndarray:
        """Seconds per traversal of each directed link id."""
        return self._per_link("latency")

    @cached_property
    def _edge_list(self) -> list[tuple[Hashable, Hashable]]:
        return self._edges_with_links[0]

    def link_endpoints(self, lid: int) -> tuple[Hashable, Hashable]:
        wiring = self.wiring
        if wiring is not None:
            u, v = wiring.nodes[int(wiring.u[lid // 2])], wiring.nodes[int(wiring.v[lid // 2])]
        else:
            u, v = self._edge_list[lid // 2]  # cached: graphs are not mutated after construction
        return (u, v) if lid % 2 == 0 else (v, u)

    @cached_property
    def _machines(self) -> tuple[int | None, ...]:
        if "graph" not in self.__dict__ and self.wiring is not None:
            wiring, nodes = self._wired
            return tuple(None if m < 0 else m for m in wiring.machine[nodes].tolist())
        node = self.graph._node  # networkx's node -> attributes dict: the ranks' entries, no view per look-up
        return tuple([node[n].get("machine") for n in self.ranks])

    def machine_of(self, rank: int) -> int | None:
        """Physical node (server) index of ``rank``, or None if the builder has none."""
        return self._machines[rank]

    def machines(self) -> np.ndarray:
        """:meth:`machine_of` of every rank as an array, -1 for a rank without one."""
        if "graph" not in self.__dict__ and self.wiring is not None:
            wiring, nodes = self._wired
            return wiring.machine[nodes]
        return np.fromiter((-1 if m is None else m for m in self._machines), dtype=np.int64, count=self.n_ranks)

    def gamma(self, rank: int) -> float:
        """Seconds per byte reduced on ``rank``'s device."""
        if "graph" not in self.__dict__ and self.wiring is not None:
            return float(self.gammas()[rank])
        return float(self.graph.nodes[self.ranks[rank]].get("gamma", DEFAULT_GAMMA))

    def gammas(self) -> np.ndarray:
        """:meth:`gamma` of every rank, in one pass over the nodes (read afresh: a preset may set a server's)."""
        if "graph" not in self.__dict__ and self.wiring is not None:  # nothing can have changed the arrays
            wiring, nodes = self._wired
            gamma = wiring.gamma[nodes]
            return np.where(np.isnan(gamma), DEFAULT_GAMMA, gamma)
        node = self.graph._node  # (as in _machines)
        return np.array([float(node[n].get("gamma", DEFAULT_GAMMA)) for n in self.ranks], dtype=float)

    # ---- routes ----------------------------------------------------------
    def path(self, a: int, b: int) -> list[Hashable]:
        """Node path from rank ``a`` to rank ``b`` (inspectable: ``simcomm topology route``)."""
        return list(self.router.path(self, self.ranks[a], self.ranks[b]))

    def route(self, a: int, b: int) -> tuple[int, ...]:
        """Directed link ids from rank ``a`` to rank ``b``; cached."""
        key = (a, b)
        r = self._routes.get(key)
        if r is None:
            direct = self._links_from_coordinates(np.array([a]), np.array([b]))
            if direct is not None:
                r = self._routes[key] = tuple(direct[1].tolist())
        if r is None:
            nodes = self.path(a, b)
            ids = self._edge_ids
            try:
                r = tuple(ids[(u, v)] for u, v in zip(nodes, nodes[1:], strict=False))
            except KeyError as exc:
                raise TopologyError(f"topology {self.name!r}: router returned a non-edge {exc}") from None
            self._routes[key] = r
        return r

    def prime_routes(self, src: np.ndarray, dst: np.ndarray) -> None:
        """Work out :meth:`route` of the pairs ``src[i] -> dst[i]`` not cached yet, in one batch.

        A gossip plan sends ~10^5 messages over ~3 x 10^4 pairs: one array pass through
        :meth:`routes` (the same links, tests/topologies/test_topologies_routes_many.py) instead of one
        router call per pair.
        """
        pairs = np.unique(np.stack((np.asarray(src, np.int64), np.asarray(dst, np.int64)), axis=1), axis=0)
        todo = [(a, b) for a, b in pairs.tolist() if (a, b) not in self._routes]
        if len(todo) < _MANY_MIN:  # a few: route() one by one costs less than the arrays
            return
        arr = np.array(todo, dtype=np.int64)
        route_len, links = self._routes_of(arr[:, 0], arr[:, 1])
        ends = np.cumsum(route_len).tolist()
        flat = links.tolist()
        for (a, b), lo, hi in zip(todo, [0, *ends[:-1]], ends, strict=True):
            self._routes[(a, b)] = tuple(flat[lo:hi])

    def routes(self, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(route_len, links)`` of the pairs ``src[i] -> dst[i]``: :meth:`route` of each, concatenated.

        Routers with ``paths_many`` route all pairs with array operations (an
        all-to-all over 1 024 ranks is 10^6 routes); others go pair by pair.
        """
        src, dst = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
        if len(src) < _KEEP_PAIRS:
            return self._routes_of(src, dst)
        # A large batch is often asked again (NCCL's closed form, then the engine, then the baseline's run;
        # hierarchical-allreduce's 8 lanes' trees once per bucket, in turn): the last few are kept, read-only.
        kept = self.__dict__.setdefault("_batches", {})
        key = (src.tobytes(), dst.tobytes())
        hit = kept.get(key)
        if hit is None:
            hit = self._routes_of(src, dst)
            for arr in hit:
                arr.flags.writeable = False
            held = sum(len(links) for _, links in kept.values()) + len(hit[1])
            while kept and (len(kept) >= _KEEP_MOST or (len(kept) >= _KEEP_BATCHES and held > _KEEP_LINKS)):
                held -= len(kept.pop(next(iter(kept)))[1])
            kept[key] = hit
        return hit

    def _routes_of(self, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if len(src) < _MANY_MIN:
            # A few pairs: route() of each (and its cache: sgp asks the same few again and again), unless more than
            # _FEW_NEW of them are not in that cache yet: then the batch comes from coordinates when the router
            # can (~65 us a batch against ~27 us a pair for route() on a two-level cluster: hierarchical-allreduce's
            # 2 056 steps of 8 new pairs at 16 384 GPUs take 0.04 s instead of 0.14 s)
            pairs = zip(src.tolist(), dst.tolist(), strict=True)
            if len(src) - sum(map(self._routes.__contains__, pairs)) > _FEW_NEW:
                direct = self._links_from_coordinates(src, dst)
                if direct is not None:
                    return direct
            return self._routes_one_by_one(src, dst)
        direct = self._links_from_coordinates(src, dst)
        if direct is not None:
            return direct
        many = getattr(self.router, "paths_many", None)
        if many is None or len(src) < _MANY_MIN:
            return self._routes_one_by_one(src, dst)
        lens, links = [], []
        for lo in range(0, len(src), _MANY_CHUNK):  # bounded memory: one padded matrix per chunk
            nodes = many(self, src[lo:lo + _MANY_CHUNK], dst[lo:lo + _MANY_CHUNK])
            if nodes is None:
                return self._routes_one_by_one(src, dst)
            n_len, n_links = self._links_of_paths(nodes)
            lens.append(n_len)
            links.append(n_links)
        return np.concatenate(lens), np.concatenate(links)

    def _links_from_coordinates(self, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """:meth:`routes` from the router's ``links_many`` (link ids from coordinates, no node paths), or
        None when it has none for this topology."""
        many = getattr(self.router, "links_many", None)
        if many is None:
            return None
        lens, links = [], []
        for lo in range(0, max(len(src), 1), _MANY_CHUNK):  # bounded memory, as below
            part = many(self, src[lo:lo + _MANY_CHUNK], dst[lo:lo + _MANY_CHUNK])
            if part is None:
                return None
            lens.append(part[0])
            links.append(part[1])
        return np.concatenate(lens), np.concatenate(links)

    def _routes_one_by_one(self, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        routes = [self.route(a, b) for a, b in zip(src.tolist(), dst.tolist(), strict=False)]
        route_len = np.fromiter(map(len, routes), dtype=np.int64, count=len(routes))
        return route_len, np.fromiter(chain.from_iterable(routes), dtype=np.int64, count=int(route_len.sum()))

    @cached_property
    def _pair_keys(self) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """``u * n_nodes + v`` of every directed link, sorted, with its id; and, for graphs
        of up to 4 096 nodes, a dense key -> id table (-1: no link), which is ~10x faster
        to look up than a binary search."""
        n, wiring = len(self._nodes), self.wiring
        if wiring is not None:
            u, v = wiring.u, wiring.v
        else:
            idx = self.node_index
            u = np.array([idx[a] for a, _ in self._edge_list], dtype=np.int64)
            v = np.array([idx[b] for _, b in self._edge_list], dtype=np.int64)
        keys = np.concatenate((u * n + v, v * n + u))
        ids = np.concatenate((2 * np.arange(len(u)), 2 * np.arange(len(u)) + 1))
        order = np.argsort(keys, kind="stable")
        table = None
        if n <= _DENSE_NODES:
            table = np.full(n * n, -1, dtype=np.int32)
            table[keys] = ids
        return keys[order], ids[order], table

    def _links_of_paths(self, nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Node index paths (rows padded with -1) -> ``(route_len, links)``."""
        u, v = nodes[:, :-1], nodes[:, 1:]
        hop = v >= 0
        keys = u[hop] * len(self._nodes) + v[hop]  # row-major: each route in order
        sorted_keys, ids, table = self._pair_keys
        if table is not None:
            links = table[keys].astype(np.int64)
            bad = links < 0
        elif len(keys) >= _SORTED_NEEDLES:
            # the same positions, searched in key order: numpy's binary search starts from the last one's bounds
            # when the needles ascend (~2x faster for crossover-sgd's 3 x 10^5 routes at 16 384 GPUs)
            order = np.argsort(keys)
            pos = np.empty(len(keys), dtype=np.intp)
            pos[order] = np.minimum(np.searchsorted(sorted_keys, keys[order]), len(sorted_keys) - 1)
            links = ids[pos]
            bad = sorted_keys[pos] != keys
        else:
            pos = np.minimum(np.searchsorted(sorted_keys, keys), len(sorted_keys) - 1)
            links = ids[pos]
            bad = sorted_keys[pos] != keys
        if bad.any():
            raise TopologyError(f"topology {self.name!r}: router returned a non-edge "
                                f"({int(keys[bad][0])} as node pair key)")
        return hop.sum(axis=1).astype(np.int64), links

    def link_ids(self, u: np.ndarray, v: np.ndarray) -> np.ndarray:
        """Directed link ids from graph node indices ``u[i]`` to ``v[i]`` (an error if one is no edge)."""
        return self._links_of_paths(np.stack((np.asarray(u, np.int64), np.asarray(v, np.int64)), axis=1))[1]

    def pair_counts(self, rows: np.ndarray) -> np.ndarray:
        """Per link id, how many routes of every ordered pair ``(a, b)``, ``a != b``, within each row of
        ``rows`` (global ranks, distinct in a row) cross it: ``np.bincount`` of those routes' links, as int64.

        A router with ``pair_counts`` counts them from classes of the members (no route per pair: an
        all-to-all over 16 384 GPUs crosses 3 x 10^8 links); otherwise the rows are routed a chunk at a time
        (bounded memory) and counted (:mod:`simcomm.topologies.pair_counts`).  The last few answers are kept,
        read-only (every size of one group's all-to-all, pcnn's one per conv unit, asks the same).
        """
        from simcomm.topologies.pair_counts import pair_counts

        rows = np.asarray(rows, dtype=np.int64)
        kept = self.__dict__.setdefault("_pair_counts", {})
        key = (rows.shape, rows.tobytes())
        hit = kept.get(key)
        if hit is None:
            hit = pair_counts(self, rows)
            hit.flags.writeable = False
            while len(kept) >= _KEEP_BATCHES:
                kept.pop(next(iter(kept)))
            kept[key] = hit
        return hit

    def route_latency(self, a: int, b: int) -> float:
        lat = self.latency
        return float(sum(lat[i] for i in self.route(a, b)))
