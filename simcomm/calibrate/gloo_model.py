"""Predict gloo collectives on a switched cluster: gloo's real schedules over max-min fair links.

What gloo (as built into torch 2.x, ``third_party/gloo``) runs, read from its
source (``gloo/allreduce.cc``, ``allgather.cc``, ``broadcast.cc``; torch's
``ProcessGroupGloo`` calls these with the default algorithm):

* **all-reduce** – ``UNSPECIFIED`` means ``ring``: a ring reduce-scatter then a
  ring all-gather, rank r sending to r-1, the buffer cut into ≥ 2p segments of
  ≤ 1 MiB with two in flight, so reductions overlap the transfers.  Per rank
  ``2(p-1)/p·n`` bytes leave and enter: the Hockney ring closed form.
* **all-gather** – a ring (r sends to r+1), each block sent as two halves in
  flight: ``(p-1)/p·N`` bytes per rank for a gathered total N.
* **broadcast** – a binomial tree over virtual ranks, *but* a rank posts all its
  sends at once as soon as it holds the data, so the root feeds ⌈log₂p⌉
  children concurrently through one NIC; the classical binomial closed form
  (⌈log₂p⌉ sequential rounds) is then optimistic by up to ~2× on a switch.
* **PS push / pull** – p-1 concurrent point-to-point messages into / out of
  rank 0: an incast on rank 0's link.

Each schedule is a set of flows with "starts when flow f has arrived"
dependencies.  :func:`fluid_makespan` runs them as a fluid model: active flows
share every directed link max-min fairly (progressive filling), rates are
recomputed whenever a flow ends, and each flow adds the per-message α when it
arrives.  That is the flow-level model of simcomm's engine, restricted to
what these checks need, so the calibration check does not depend on it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from simcomm.errors import ConfigError

__all__ = ["Net", "Flow", "fluid_makespan", "predict", "CASES", "closed_form"]

CASES = ("allreduce", "allgather", "broadcast", "ps_push", "ps_pull", "p2p")


@dataclass(frozen=True)
class Net:
    """Hosts on leaf switches joined by a spine; rates in bytes/s per direction.

    ``leaf_of[h]`` is host h's leaf; ``rank_host[r]`` rank r's host.  With one
    leaf it is a star.  Ranks on the same host talk over loopback, modelled as
    free of link limits (``intra_bw``).
    """

    leaf_of: tuple[int, ...]
    rank_host: tuple[int, ...]
    host_bw: float
    trunk_bw: float
    alpha: float
    intra_bw: float = 1e11  # loopback: far above any emulated link, finite to keep the fluid model simple

    def route(self, a: int, b: int) -> list[tuple]:
        ha, hb = self.rank_host[a], self.rank_host[b]
        if ha == hb:
            return [("lo", ha)]
        la, lb = self.leaf_of[ha], self.leaf_of[hb]
        links = [("up", ha)]
        if la != lb:
            links += [("tup", la), ("tdown", lb)]
        return links + [("down", hb)]

    def capacity(self, link: tuple) -> float:
        kind = link[0]
        return self.host_bw if kind in ("up", "down") else self.trunk_bw if kind in ("tup", "tdown") else self.intra_bw


@dataclass(frozen=True)
class Flow:
    src: int
    dst: int
    nbytes: float
    after: tuple[int, ...] = ()  # indices of flows that must have arrived first


def _maxmin(routes: list[list[tuple]], net: Net) -> np.ndarray:
    """Max-min fair rates of flows with the given routes (progressive filling)."""
    rate = np.zeros(len(routes))
    frozen = np.zeros(len(routes), bool)
    cap = {}
    for r in routes:
        for link in r:
            cap[link] = net.capacity(link)
    while not frozen.all():
        best, bottleneck = math.inf, None
        for link, c in cap.items():
            users = [i for i, r in enumerate(routes) if not frozen[i] and link in r]
            if users and c / len(users) < best:
                best, bottleneck = c / len(users), link
        if bottleneck is None or math.isinf(best):
            rate[~frozen] = math.inf
            break
        for i, r in enumerate(routes):
            if not frozen[i] and bottleneck in r:
                rate[i] = best
                frozen[i] = True
                for link in r:
                    cap[link] -= best
    return rate


def fluid_makespan(flows: list[Flow], net: Net) -> float:
    """Time until the last flow has arrived (fluid max-min model, α per message)."""
    n = len(flows)
    left = np.array([f.nbytes for f in flows], float)
    start = [0.0 if not f.after else None for f in flows]
    arrived = [None] * n
    done_data = np.zeros(n, bool)
    now = 0.0
    while True:
        active = [i for i in range(n) if start[i] is not None and start[i] <= now and not done_data[i]]
        pending = [start[i] for i in range(n) if start[i] is not None and start[i] > now]
        if not active and not pending:
            break
        dt = min(pending) - now if pending else math.inf
        if active:
            rates = _maxmin([net.route(flows[i].src, flows[i].dst) for i in active], net)
            with np.errstate(divide="ignore"):
                dt = min(dt, float(np.min(left[active] / rates)))
            left[active] -= rates * dt
        now += dt
        for i in active:
            if left[i] <= 1e-9 * max(1.0, flows[i].nbytes):
                done_data[i] = True
                arrived[i] = now + net.alpha
        for j in range(n):
            if start[j] is None and all(arrived[k] is not None for k in flows[j].after):
                start[j] = max(arrived[k] for k in flows[j].after)
    return max(a for a in arrived if a is not None) if n else 0.0


def _ring(p: int, chunk: float, steps: int, direction: int) -> list[Flow]:
    """``steps`` ring steps; rank r sends to r+direction after receiving the previous step."""
    flows: list[Flow] = []
    for s in range(steps):
        for r in range(p):
            prev = () if s == 0 else ((s - 1) * p + (r - direction) % p,)
            flows.append(Flow(r, (r + direction) % p, chunk, prev))
    return flows


def _gloo_broadcast(p: int, n: float) -> list[Flow]:
    dim = max(1, math.ceil(math.log2(p))) if p > 1 else 0
    flows: list[Flow] = []
    incoming: dict[int, int] = {}
    for i in range(dim):  # round i: virtual ranks < 2^i send to v + 2^i
        for v in range(min(2 ** i, p)):
            peer = v + 2 ** i
            if peer < p:
                after = (incoming[v],) if v in incoming else ()
                incoming[peer] = len(flows)
                flows.append(Flow(v, peer, n, after))
    return flows


def schedule(case: str, p: int, nbytes: float) -> list[Flow]:
    """The flows gloo runs for ``case`` (root and server = rank 0)."""
    if case == "allreduce":
        return _ring(p, nbytes / p, 2 * (p - 1), -1)
    if case == "allgather":
        return _ring(p, nbytes / p, p - 1, +1)
    if case == "broadcast":
        return _gloo_broadcast(p, nbytes)
    if case == "ps_push":
        return [Flow(r, 0, nbytes) for r in range(1, p)]
    if case == "ps_pull":
        return [Flow(0, r, nbytes) for r in range(1, p)]
    if case == "p2p":
        return [Flow(0, 1, nbytes)]
    raise ConfigError(f"case: {case!r} is not one of {', '.join(CASES)}")


def predict(case: str, p: int, nbytes: float, net: Net) -> float:
    """Predicted seconds for ``case`` with ``p`` ranks and ``nbytes`` (simcomm size convention)."""
    if p < 2:
        return 0.0
    return fluid_makespan(schedule(case, p, nbytes), net)


def closed_form(case: str, p: int, nbytes: float, alpha: float, beta: float) -> float | None:
    """The catalogue's Hockney closed form for the matching algorithm, if registered.

    Uses :data:`simcomm.collectives.ALGORITHMS` (``allreduce/ring``,
    ``allgather/ring``, ``broadcast/binomial``, ``p2p/...``); returns ``None``
    when that algorithm is not (yet) in the catalogue.  Shown beside the
    prediction so a reader sees where the textbook form and gloo differ.
    """
    from simcomm.collectives import ALGORITHMS

    key = {"allreduce": "allreduce/ring", "allgather": "allgather/ring",
           "broadcast": "broadcast/binomial"}.get(case)
    if key is None or key not in ALGORITHMS:
        return None
    return float(ALGORITHMS.get(key).cost(p, nbytes, alpha, beta).total)
