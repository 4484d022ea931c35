"""From a prepared Collective op to what the engine runs: routed steps and closed forms.

* What runs for an op (algorithm, ranks per machine, steps) is the runtime's
  answer (:class:`~simcomm.collectives.runtime.Prepared`), handed in by the
  caller as an object satisfying :class:`~simcomm.collectives.runtime.CollectiveRuntime`:
  the engine names no stack and imports no runtime.
* :class:`RoutedStep` is one step mapped to global ranks, with its routes as a
  flat incidence list, per-transfer route latency and the per-receiver data
  needed to price reductions.  It is built once per step and reused by every
  repeat, by the coalescing shortcut and by link-byte accounting.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import chain

import numpy as np

from simcomm.collectives.base import Algorithm, Step
from simcomm.collectives.runtime import Prepared, takes_ppn
from simcomm.topologies.base import Topology

__all__ = ["Prepared", "takes_ppn", "algorithm_cost", "RoutedStep", "route_step", "step_routes", "step_routes_many",
           "message_routes"]


def algorithm_cost(alg: Algorithm, p: int, nbytes: float, alpha: float, beta: float, gamma: float,
                   ppn: int, alpha_inter: float | None = None, beta_inter: float | None = None) -> float:
    """``alg.cost(...).total`` through the Algorithm contract (``ppn`` and internode α/β for every algorithm)."""
    return alg.cost(p, nbytes, alpha, beta, gamma, ppn=ppn, alpha_inter=alpha_inter, beta_inter=beta_inter).total


@dataclass(frozen=True, eq=False)
class RoutedStep:
    """One step in global ranks, routed (arrays are per transfer unless noted)."""

    src: np.ndarray
    dst: np.ndarray
    nbytes: np.ndarray
    latency: np.ndarray          # summed per-hop latency of each route
    route_len: np.ndarray        # links per route
    links: np.ndarray            # concatenated routes (directed link ids)
    repeat: int
    red_ranks: np.ndarray        # receivers that reduce (per receiver)
    red_seconds: np.ndarray      # gamma x reduced bytes (per receiver)
    red_slot: np.ndarray         # per transfer: its receiver's slot in red_ranks, -1 if none

    def __len__(self) -> int:
        return len(self.src)

    def end_time(self, t_start: float, finish: np.ndarray) -> float:
        """Step end: last transfer, or a receiver's last arrival plus its reduction."""
        if len(self.src) == 0:
            return t_start
        end = float(finish.max())
        if len(self.red_ranks):
            arrive = np.full(len(self.red_ranks), -np.inf)
            on = self.red_slot >= 0
            np.maximum.at(arrive, self.red_slot[on], finish[on])
            end = max(end, float((arrive + self.red_seconds).max()))
        return end

    def family_bytes(self, family_of_link: np.ndarray, n_families: int) -> np.ndarray:
        """Bytes carried per link family by one run of this step."""
        per_link = np.repeat(self.nbytes, self.route_len)
        return np.bincount(family_of_link[self.links], weights=per_link, minlength=n_families)


def step_routes(topology: Topology, group: np.ndarray, step: Step, cache: dict | None = None,
                group_key: bytes | None = None) -> tuple:
    """``(route latency, route lengths, links, src, dst, -1 per transfer)`` of a group-local step's pattern in
    global ranks (see :func:`route_step`; ``cache`` keeps them per (group, src, dst) pattern, read-only)."""
    key = None
    if cache is not None:
        key = (group.tobytes() if group_key is None else group_key, step.src.tobytes(), step.dst.tobytes())
        hit = cache.get(key)
        if hit is not None:
            return hit
    src = group[step.src]
    dst = group[step.dst]
    route_len, links = topology.routes(src, dst)
    owner = np.repeat(np.arange(len(src)), route_len)
    latency = np.bincount(owner, weights=topology.latency[links], minlength=len(src))
    none = np.full(len(src), -1, dtype=np.int64)
    if cache is not None and key is not None:
        # a pattern's global ranks are shared by every size of it, read-only (an all-to-all over 16 384
        # GPUs is 3.4 x 10^7 transfers, and pcnn runs one per conv unit, each of its own size)
        for arr in (src, dst, none):
            arr.flags.writeable = False
        cache[key] = (latency, route_len, links, src, dst, none)
    return latency, route_len, links, src, dst, none


#: :func:`step_routes_many` routes at most this many pairs per call: fewer than a batch that
#: :meth:`Topology.routes` keeps (4 096 pairs or more), since a primed batch is never asked again and would
#: push out one that is (hierarchical-allreduce's lanes' trees, asked once per bucket)
PRIME_CHUNK = 2048


def step_routes_many(topology: Topology, items: list, cache: dict) -> None:
    """Put :func:`step_routes` of each ``(group, group key, step)`` of ``items`` into ``cache`` (each pattern once,
    not yet in it), their pairs routed a chunk of :data:`PRIME_CHUNK` at a time instead of one call per pattern.

    The same arrays as :func:`step_routes`: :meth:`Topology.routes` gives each pair the links ``route()`` does
    whatever the batch, and the latencies are one ``bincount`` over the chunk, which adds each pair's links in
    route order as the pattern's own would (hierarchical-crossover-sgd at 16 384 GPUs primes 4 096 patterns of
    2 048 machines, each a few pairs on NVLink, that were ~70 us of numpy and routing each).
    """
    todo: dict = {}
    for group, gkey, step in items:
        key = (gkey, step.src.tobytes(), step.dst.tobytes())
        if len(step) and key not in cache and key not in todo:
            todo[key] = (group[step.src], group[step.dst])
    keys = list(todo)
    lat_of = topology.latency
    for lo in range(0, len(keys), PRIME_CHUNK):
        part = [todo[k] for k in keys[lo:lo + PRIME_CHUNK]]
        src = np.concatenate([a for a, _ in part])
        dst = np.concatenate([b for _, b in part])
        route_len, links = topology.routes(src, dst)
        latency = np.bincount(np.repeat(np.arange(len(src)), route_len), weights=lat_of[links], minlength=len(src))
        ends = np.cumsum(route_len).tolist()
        at = e0 = 0
        for key, (s, d) in zip(keys[lo:lo + PRIME_CHUNK], part, strict=True):
            n = len(s)
            e1 = ends[at + n - 1] if n else e0
            none = np.full(n, -1, dtype=np.int64)
            for arr in (s, d, none):
                arr.flags.writeable = False
            lens, crossed = route_len[at:at + n].copy(), links[e0:e1].copy()
            # (a pattern that crosses no link: step_routes' bincount of no entries, which numpy types as integers)
            lat = latency[at:at + n].copy() if e1 > e0 else np.bincount(
                np.repeat(np.arange(n), lens), weights=lat_of[crossed], minlength=n)
            cache[key] = (lat, lens, crossed, s, d, none)
            at, e0 = at + n, e1


def route_step(topology: Topology, group: np.ndarray, step: Step, gamma: np.ndarray,
               cache: dict | None = None, group_key: bytes | None = None) -> RoutedStep:
    """Map a group-local step to global ranks and route every transfer.

    ``cache`` (a dict owned by the caller, one per topology) keeps the routes
    of each (group, src, dst) pattern, so a pattern seen again with other byte
    counts (the same all-to-all on another layer) is not routed again.
    """
    latency, route_len, links, src, dst, none = step_routes(topology, group, step, cache, group_key)
    red = step.reduce > 0
    if red.any():
        ranks, slot = np.unique(dst[red], return_inverse=True)
        red_bytes = np.bincount(slot, weights=step.reduce[red], minlength=len(ranks))
        red_slot = np.full(len(src), -1, dtype=np.int64)
        # Every transfer into a reducing receiver counts for its arrival time,
        # including those that carry nothing to reduce (as in ideal_time()).
        pos = np.searchsorted(ranks, dst)
        hit = (pos < len(ranks)) & (ranks[np.minimum(pos, len(ranks) - 1)] == dst)
        red_slot[hit] = pos[hit]
        red_seconds = gamma[ranks] * red_bytes
    else:
        ranks = np.zeros(0, dtype=np.int64)
        red_seconds = np.zeros(0)
        red_slot = none
    return RoutedStep(src, dst, step.nbytes.astype(float), latency, route_len, links, step.repeat,
                      ranks, red_seconds, red_slot)


def message_routes(keys: list, topology: Topology, fam_of_link: np.ndarray, n_fam: int) -> dict:
    """``(src, dst) -> (route latency, route tuple, [(family, links of it)], links)`` of each pair of ``keys``.

    What pricing a message needs of its route (``FlowPricer.transfer``, the direct loop), for all pairs in one
    pass: routes of one length as one matrix, their latencies summed row by row (``sum(axis=1)`` of a C-ordered
    matrix adds each row as a 1-D ``sum`` does: the same float; tests/engine/test_engine_direct_routes.py) and
    the links of each family counted, instead of a few numpy calls per pair (~60 us each: 2 s for a tree
    reduction over 16 384 ranks).  Only the families the route crosses are listed (adding n x 0.0 to the others
    changes no float).
    """
    # every pair routed in one batch (Topology.routes: the links route() gives each pair; crossover-sgd's 3 x 10^5
    # pairs were primed into route()'s cache as tuples, then read back one by one)
    pairs = np.fromiter(chain.from_iterable(keys), dtype=np.int64, count=2 * len(keys)).reshape(-1, 2)  # (np.array's ints)
    lens, flat = topology.routes(pairs[:, 0], pairs[:, 1])
    starts = np.cumsum(lens) - lens
    out: dict = {}
    for length in np.unique(lens).tolist():
        idx = np.flatnonzero(lens == length)
        links = flat[starts[idx, None] + np.arange(length)]  # the routes of this length as rows (C order)
        latency = topology.latency[links].sum(axis=1).tolist()
        # each route as a tuple of ints, zipped from the columns (no list per route: 3 x 10^5 of them)
        routes = zip(*links.T.tolist(), strict=True) if length else [()] * len(idx)
        fams = fam_of_link[links]
        counts = np.stack([(fams == f).sum(axis=1) for f in range(n_fam)], axis=1) if n_fam \
            else np.zeros((len(idx), 0), dtype=np.int64)
        # one list per pattern of family counts (a fabric has a few), shared by the routes that have it; a
        # pattern's code is its counts as digits in base length + 1
        codes = counts @ (length + 1) ** np.arange(n_fam, dtype=np.int64)
        _, first, which = np.unique(codes, return_index=True, return_inverse=True)
        lists = [[(f, x) for f, x in enumerate(row) if x != 0.0] for row in counts[first].astype(float).tolist()]
        fam = map(lists.__getitem__, which.reshape(-1).tolist())
        out.update(zip(map(keys.__getitem__, idx.tolist()), zip(latency, routes, fam, list(links), strict=True),
                       strict=True))
    return out
