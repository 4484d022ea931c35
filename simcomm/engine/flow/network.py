"""The live network: a :class:`~simcomm.engine.fluid.core.FluidCore` driven by SimPy.

Processes hand batches of flows to :meth:`LiveNetwork.add` and wait on the
returned event, whose value is the array of finish times.  The network keeps a
single wake-up scheduled at the next phase change.  Its own events run at a
priority *after* every ordinary event of the same instant, so all flows that
start at one instant are merged before rates are recomputed (one max-min solve
per instant, not per flow).  Ties among ordinary events follow SimPy's
(time, priority, insertion sequence) order, which is deterministic.  The late
priority is built from SimPy's public API: a :class:`LateEvent` is triggered
with its own ``succeed()``, which queues it through ``Environment.schedule`` at
its delay and the late priority (:mod:`simcomm.engine.events`).

Reservations implement coalesced repeats: a collective whose step repeats r
times holds the step's own links (``per_link``, the default) or the whole idle
network (``per_link=False``) for r x (isolated step time).  A step's links may
be reserved when no live batch uses any of them and no other reservation holds
one; several disjoint reservations may be held at once.  Traffic arriving
meanwhile on a held link (on any link, whole-network mode) *interrupts* that
reservation first; the owner is told how many repeats were complete and how
far into the current one it was, so it can rebuild that partial step exactly
and continue in the plain model (docs/engine.md, "Coalesced repeats" and
"Per-link reservations").  Max-min allocations decompose over the connected
components of the flow-link graph, so a step whose links nothing else touches
runs exactly as it would alone.
"""

from __future__ import annotations

import math
from functools import partial

import numpy as np
import simpy

from simcomm.engine.events import Environment, LateEvent
from simcomm.engine.fluid.core import FluidCore
from simcomm.engine.fluid.small import MAX_LIVE

__all__ = ["Environment", "LateEvent", "LiveNetwork", "Reservation"]

class Reservation:
    """``count`` back-to-back repeats of a step of isolated duration ``period`` from ``t0``.

    ``event`` fires with ``None`` when all repeats are done, or with
    ``(k, offset)`` when interrupted during repeat ``k`` (0-based), ``offset``
    seconds after that repeat started.
    """

    def __init__(self, env: simpy.Environment, t0: float, period: float, count: int,
                 links: np.ndarray | None = None, rid: int = -1):
        self.t0, self.period, self.count = t0, period, count
        self.links, self.rid = links, rid  # held links (unique ids) and id; None, -1: the whole network
        self.event = env.event()

    @property
    def end(self) -> float:
        return self.t0 + self.count * self.period


class LiveNetwork:
    """Flows and reservations on one topology's directed links."""

    def __init__(self, env: Environment, capacity: np.ndarray, form: str = "lean",
                 family_of_link: np.ndarray | None = None, resolution: float = 0.0, per_link: bool = True,
                 max_live: int = MAX_LIVE, sparse_links: bool = True):
        if not isinstance(env, Environment):
            raise TypeError("LiveNetwork runs on simcomm.engine.events.Environment (the engine's own environment)")
        self.env = env
        self.core = FluidCore(capacity, form, family_of_link, resolution, max_live, sparse_links)
        self.per_link = per_link
        self.reservation: Reservation | None = None  # whole-network mode's one reservation
        self._held: dict[int, Reservation] = {}  # per-link mode: reservation id -> reservation
        self._rid = 0
        n_links = len(capacity)
        # Per link: live batches crossing it, and the id of the reservation holding it (-1: none).
        # A batch counts on all its links until the whole batch is done (conservative: a link
        # freed early only forgoes a reservation, never makes one wrong).
        self._busy = np.zeros(n_links, dtype=np.int64)
        self._owner = np.full(n_links, -1, dtype=np.int64)
        self._batch_links: dict[int, np.ndarray] = {}  # batches counted in _busy -> their links
        # Batches added since _busy was last read, not counted yet (:meth:`_count_fresh`): a batch that is done
        # before anyone asks (every message of a gossip round) costs no per-link work at all.
        self._fresh: dict[int, np.ndarray] = {}
        self.interrupts = 0
        self.settles = 0
        self._waiters: dict[int, simpy.Event] = {}
        self._gen = 0
        self._kicked = False

    @property
    def idle(self) -> bool:
        """No flow active or queued and no reservation held."""
        return self.reservation is None and not self._held and self.core.empty

    def free(self, links: np.ndarray) -> bool:
        """Whether a step on ``links`` (unique link ids) may be reserved now.

        Per link: no live batch crosses them and no reservation holds one; otherwise
        (``per_link=False``) the whole network must be idle.
        """
        if not self.per_link:
            return self.idle
        if self._fresh:
            self._count_fresh()
        return not (self._busy[links].any() or (self._owner[links] >= 0).any())

    def _count_fresh(self) -> None:
        """Count the batches added since the last read on their links (integer counts: any order)."""
        for bid, links in self._fresh.items():
            self._busy[links] += 1
            self._batch_links[bid] = links
        self._fresh.clear()

    def add(self, rem: np.ndarray, t_bw: np.ndarray, route_len: np.ndarray, links: np.ndarray,
            finish: np.ndarray | None = None) -> simpy.Event:
        """Start a batch of flows now; the event's value is their finish times, ``event.batch`` its id."""
        self._take(links)
        return self._started(self.core.add(rem, t_bw, route_len, links, finish), links)

    def add_message(self, nbytes: float, t_bw: float, route: tuple, links: np.ndarray) -> simpy.Event:
        """:meth:`add` of one flow, given Python scalars and its route as a tuple and as an array
        (:meth:`FluidCore.add_message`: the same flow; a gossip plan adds ~3 x 10^5 of them)."""
        self._take(links)
        return self._started(self.core.add_message(nbytes, t_bw, route), links)

    def _take(self, links: np.ndarray) -> None:
        """Interrupt the reservations that new flows over ``links`` take links from."""
        if self.per_link and self._held:
            hit = self._owner[links]
            for rid in np.unique(hit[hit >= 0]).tolist():  # in grant order: deterministic
                self._interrupt(self._held[rid])
        elif self.reservation is not None:
            self._interrupt(self.reservation)

    def _started(self, bid: int, links: np.ndarray) -> simpy.Event:
        if self.per_link:
            # counted on its links when _busy is next read (a link repeated in ``links`` counts once there and
            # once in the decrement: balanced)
            self._fresh[bid] = links
        ev = self.env.event()
        ev.batch = bid  # type: ignore[attr-defined]  # lets a caller follow the batch (FluidCore.bytes_left)
        self._waiters[bid] = ev
        self._kick()
        return ev

    def reserve(self, period: float, count: int, links: np.ndarray | None = None) -> Reservation:
        """Hold ``links`` (unique ids; see :meth:`free`) for ``count`` repeats of ``period`` seconds.

        Whole-network mode (or ``links=None``) holds the (idle) network instead.
        """
        if self.per_link and links is not None:
            return self.start(self.hold(links), period, count)
        assert self.idle, "reservations are only granted on an idle network"
        res = Reservation(self.env, self.env.now, period, count)
        self.reservation = res
        return self._arm(res)

    def hold(self, links: np.ndarray) -> Reservation:
        """Hold free ``links`` (per-link mode) for a reservation priced later in this instant.

        Until :meth:`start` gives it a period, traffic on these links interrupts it
        with ``(0, 0.0)``: nothing has run yet.  The owner may :meth:`release` it.
        The caller has checked :meth:`free` this instant (not again here: a collective's hot path).
        """
        assert self.per_link, "links are held only in per-link mode"
        res = Reservation(self.env, self.env.now, math.nan, 0, links, self._rid)
        self._rid += 1
        self._held[res.rid] = res
        self._owner[links] = res.rid
        return res

    def start(self, res: Reservation, period: float, count: int) -> Reservation:
        """Run held ``res`` from now as ``count`` repeats of ``period`` seconds."""
        assert self._held.get(res.rid) is res and not res.count, "start() takes a reservation still held"
        res.t0, res.period, res.count = self.env.now, period, count
        return self._arm(res)

    def release(self, res: Reservation) -> None:
        """Give back a held reservation that was never started (its step needs no time)."""
        released = res.count == 0 and self._release(res)
        assert released

    def late(self) -> LateEvent:
        """An event that fires at the end of this instant (after its ordinary events)."""
        ev = LateEvent(self.env, 0.0)
        ev.succeed()
        return ev

    # ---- internals -------------------------------------------------------
    def _arm(self, res: Reservation) -> Reservation:
        timer = self.env.timeout(res.end - self.env.now)
        timer.callbacks.append(partial(self._expire_on, res))
        return res

    def _expire_on(self, res: Reservation, _ev: simpy.Event) -> None:
        self._expire(res)

    def _release(self, res: Reservation) -> bool:
        """Drop ``res`` if it is still held; whether it was."""
        if res.links is None:
            if self.reservation is not res:
                return False
            self.reservation = None
            return True
        if self._held.get(res.rid) is not res:
            return False
        del self._held[res.rid]
        self._owner[res.links] = -1
        return True

    def _expire(self, res: Reservation) -> None:
        if self._release(res):
            res.event.succeed(None)

    def _interrupt(self, res: Reservation) -> None:
        held = self._release(res)
        assert held  # called only while res is held
        self.interrupts += 1
        if not res.count:  # held but not started: nothing ran, nothing to rebuild
            res.event.succeed((0, 0.0))
            return
        elapsed = self.env.now - res.t0
        k = int(math.floor(elapsed / res.period))
        if k >= res.count:
            res.event.succeed(None)
        else:
            res.event.succeed((k, max(elapsed - k * res.period, 0.0)))

    def _kick(self) -> None:
        if not self._kicked:
            self._kicked = True
            ev = LateEvent(self.env, 0.0)
            ev.callbacks.append(self._on_kick)
            ev.succeed()

    def _on_kick(self, _ev) -> None:
        self._kicked = False
        self._settle()

    def _wake_on(self, gen: int, _ev: simpy.Event) -> None:
        self._on_wake(gen)

    def _on_wake(self, gen: int) -> None:
        if gen == self._gen and not self._kicked:
            self._settle()

    def _settle(self) -> None:
        self.settles += 1
        done, nxt = self.core.settle_next(self.env.now)
        for bid, fin in done:
            if self.per_link and self._fresh.pop(bid, None) is None:  # (a fresh batch was never counted)
                self._busy[self._batch_links.pop(bid)] -= 1
            self._waiters.pop(bid).succeed(fin)
        self._gen += 1
        if nxt < math.inf:
            gen = self._gen
            ev = LateEvent(self.env, max(nxt - self.env.now, 0.0))
            ev.callbacks.append(partial(self._wake_on, gen))
            ev.succeed()
