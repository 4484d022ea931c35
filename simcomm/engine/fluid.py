"""The fluid (flow-level) network state, free of any event library.

A *flow* carries bytes over a route of directed links.  It first spends the
route's summed per-hop latency in a *latency phase* (holding no bandwidth),
then a *bandwidth phase* in which it drains at its max-min fair rate.  Rates
are recomputed whenever the set of flows in the bandwidth phase changes, so
between two events every rate is constant and every flow's finish time is
``t + remaining / rate``.

:class:`FluidCore` keeps all flows in flat numpy arrays (structure of arrays)
and is driven by two calls: :meth:`FluidCore.settle` brings the state to time
``t`` and reports batches whose flows have all finished, and
:meth:`FluidCore.next_time` says when the next flow changes phase.  The live
engine (:mod:`simcomm.engine.network`) drives it from SimPy; :func:`run_isolated`
drives it alone, to price a step pattern once or to rebuild the state of a
partly run step (see docs/engine.md, "Coalesced repeats").
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simcomm.engine.maxmin import maxmin_rates

__all__ = ["FluidCore", "IsolatedState", "run_isolated", "TIME_TOL"]

#: Two instants within this relative distance are the same event.  It only
#: absorbs floating-point rounding (``t + (u - t)`` need not equal ``u``).
TIME_TOL = 1e-12

_EMPTY_F = np.zeros(0)
_EMPTY_I = np.zeros(0, dtype=np.int64)


class FluidCore:
    """All active flows of one network, advanced event by event."""

    def __init__(self, capacity: np.ndarray):
        self.capacity = np.asarray(capacity, dtype=float)
        self.t = 0.0
        self.rem = _EMPTY_F      # bytes left as of self.t
        self.t_bw = _EMPTY_F     # absolute start of the bandwidth phase
        self.rate = _EMPTY_F     # bytes/s (0 while in the latency phase)
        self.t_fin = _EMPTY_F    # projected finish (inf while in the latency phase)
        self.in_bw = np.zeros(0, dtype=bool)
        self.batch = _EMPTY_I    # owning batch id
        self.index = _EMPTY_I    # position inside its batch
        self.nz_flow = _EMPTY_I  # incidence list, sorted by flow
        self.nz_link = _EMPTY_I
        self._pending: list[tuple] = []
        self._finish: dict[int, np.ndarray] = {}
        self._left: dict[int, int] = {}
        self._next_id = 0
        self._born_done: list[int] = []
        self.solves = 0
        self.rounds = 0

    # ---- input -----------------------------------------------------------
    def add(self, rem: np.ndarray, t_bw: np.ndarray, route_len: np.ndarray, links: np.ndarray,
            finish: np.ndarray | None = None) -> int:
        """Queue a batch of flows (taking effect at the next :meth:`settle`); return its id.

        ``route_len[i]`` links of ``links`` (concatenated routes) belong to flow i.
        ``finish`` pre-fills finish times of flows that are already done (NaN = not).
        """
        bid = self._next_id
        self._next_id += 1
        n = len(rem)
        fin = np.full(n, np.nan) if finish is None else np.array(finish, dtype=float)
        alive = np.isnan(fin)
        self._finish[bid] = fin
        self._left[bid] = int(alive.sum())
        if not alive.any():
            del self._left[bid]
            self._born_done.append(bid)
        elif alive.all():
            self._pending.append((bid, np.arange(n), rem, t_bw, route_len, links))
        else:
            # Keep only the live flows, and only their part of the incidence list.
            owner = np.repeat(np.arange(n), route_len)
            keep = alive[owner]
            self._pending.append((bid, np.flatnonzero(alive), rem[alive], t_bw[alive],
                                  route_len[alive], links[keep]))
        return bid

    @property
    def empty(self) -> bool:
        return len(self.rem) == 0 and not self._pending and not self._born_done

    def next_time(self) -> float:
        """Absolute time of the next phase change, ``inf`` when nothing is active."""
        if len(self.rem) == 0:
            return self.t if (self._pending or self._born_done) else np.inf
        return float(np.where(self.in_bw, self.t_fin, self.t_bw).min())

    # ---- progress --------------------------------------------------------
    def settle(self, now: float) -> list[tuple[int, np.ndarray]]:
        """Advance to ``now``; return ``(batch id, finish times)`` of batches that completed."""
        now = float(now)
        tol = TIME_TOL * max(abs(now), 1e-300)
        dt = now - self.t
        if len(self.rem) and dt > 0:
            self.rem = np.where(self.in_bw, self.rem - self.rate * dt, self.rem)
        self.t = now
        changed = False
        done_batches, self._born_done = self._born_done, []
        while True:
            due = self.in_bw & (self.t_fin <= now + tol)
            if due.any():
                self._retire(due, now, done_batches)
                changed = True
            if self._pending:
                self._merge()
            enter = ~self.in_bw & (self.t_bw <= now + tol)
            if enter.any():
                self.in_bw = self.in_bw | enter
                changed = True
            if not changed:
                break
            self._solve(now)
            changed = False
            if not (self.in_bw & (self.t_fin <= now + tol)).any():
                break
        return [(b, self._finish.pop(b)) for b in done_batches]

    def _retire(self, due: np.ndarray, now: float, done_batches: list[int]) -> None:
        for b in np.unique(self.batch[due]):
            sel = due & (self.batch == b)
            b = int(b)
            self._finish[b][self.index[sel]] = now
            self._left[b] -= int(sel.sum())
            if self._left[b] == 0:
                del self._left[b]
                done_batches.append(b)
        keep = ~due
        new_id = np.cumsum(keep) - 1
        nz_keep = keep[self.nz_flow]
        self.nz_flow = new_id[self.nz_flow[nz_keep]]
        self.nz_link = self.nz_link[nz_keep]
        for name in ("rem", "t_bw", "rate", "t_fin", "in_bw", "batch", "index"):
            setattr(self, name, getattr(self, name)[keep])

    def _merge(self) -> None:
        n0 = len(self.rem)
        parts = self._pending
        self._pending = []
        counts = [len(p[1]) for p in parts]
        offs = n0 + np.concatenate(([0], np.cumsum(counts)[:-1]))
        self.nz_flow = np.concatenate([self.nz_flow] + [np.repeat(np.arange(c) + o, p[4])
                                                         for c, o, p in zip(counts, offs, parts)])
        self.nz_link = np.concatenate([self.nz_link] + [np.asarray(p[5], dtype=np.int64) for p in parts])
        total = sum(counts)
        self.rem = np.concatenate([self.rem] + [np.asarray(p[2], dtype=float) for p in parts])
        self.t_bw = np.concatenate([self.t_bw] + [np.asarray(p[3], dtype=float) for p in parts])
        self.rate = np.concatenate([self.rate, np.zeros(total)])
        self.t_fin = np.concatenate([self.t_fin, np.full(total, np.inf)])
        self.in_bw = np.concatenate([self.in_bw, np.zeros(total, dtype=bool)])
        self.batch = np.concatenate([self.batch] + [np.full(c, p[0], dtype=np.int64) for c, p in zip(counts, parts)])
        self.index = np.concatenate([self.index] + [np.asarray(p[1], dtype=np.int64) for p in parts])

    def _solve(self, now: float) -> None:
        """Max-min over the flows in their bandwidth phase; refresh finish times."""
        bw = self.in_bw
        ids = np.flatnonzero(bw)
        local = np.full(len(bw), -1, dtype=np.int64)
        local[ids] = np.arange(len(ids))
        sel = bw[self.nz_flow]
        rates, rounds = maxmin_rates(local[self.nz_flow[sel]], self.nz_link[sel], len(ids), self.capacity)
        self.solves += 1
        self.rounds += rounds
        self.rate = np.zeros(len(bw))
        self.rate[ids] = rates
        with np.errstate(divide="ignore", invalid="ignore"):
            left = np.where(self.rem[ids] > 0, self.rem[ids] / rates, 0.0)
        self.t_fin = np.full(len(bw), np.inf)
        self.t_fin[ids] = now + left

    def snapshot(self, at: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(index, rem, t_bw, in_bw)`` of live flows at ``at`` (between events, no settle)."""
        rem = np.where(self.in_bw, self.rem - self.rate * (at - self.t), self.rem)
        return self.index.copy(), np.maximum(rem, 0.0), self.t_bw.copy(), self.in_bw.copy()


@dataclass(frozen=True, eq=False)
class IsolatedState:
    """A batch run alone from time 0: finish times (NaN if still running at ``at``)
    and, for the flows still running, bytes left and bandwidth-phase start."""

    at: float
    finish: np.ndarray
    rem: np.ndarray
    t_bw: np.ndarray
    solves: int


def run_isolated(capacity: np.ndarray, nbytes: np.ndarray, latency: np.ndarray, route_len: np.ndarray,
                 links: np.ndarray, until: float = np.inf) -> IsolatedState:
    """Run one batch of flows, started at time 0, alone on an empty network.

    Stops at ``until`` (events at exactly ``until`` are applied) and reports the
    state there; with the default it runs to completion.
    """
    core = FluidCore(capacity)
    core.add(np.asarray(nbytes, float), np.asarray(latency, float), route_len, links)
    done = core.settle(0.0)
    while not done:
        t = core.next_time()
        if t > until or t == np.inf:
            break
        done = core.settle(t)
    n = len(nbytes)
    if done:
        return IsolatedState(core.t, done[0][1], np.zeros(n), np.zeros(n), core.solves)
    idx, rem, t_bw, _ = core.snapshot(until)
    finish = core._finish[0].copy()
    r = np.zeros(n)
    tb = np.zeros(n)
    r[idx] = rem
    tb[idx] = t_bw
    return IsolatedState(until, finish, r, tb, core.solves)
