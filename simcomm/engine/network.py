"""The live network: a :class:`~simcomm.engine.fluid.FluidCore` driven by SimPy.

Processes hand batches of flows to :meth:`LiveNetwork.add` and wait on the
returned event, whose value is the array of finish times.  The network keeps a
single wake-up scheduled at the next phase change.  Its own events run at a
priority *after* every ordinary event of the same instant, so all flows that
start at one instant are merged before rates are recomputed (one max-min solve
per instant, not per flow).  Ties among ordinary events follow SimPy's
(time, priority, insertion sequence) order, which is deterministic.  The late
priority is built from SimPy's public API: a :class:`LateEvent` is triggered
with ``succeed()``, and the engine's :class:`Environment` overrides the public
``schedule`` hook to queue such events at their delay and the late priority.

Reservations implement coalesced repeats: a collective whose step repeats r
times on an idle network holds the network for r x (isolated step time).  Any
other traffic arriving meanwhile *interrupts* the reservation first; the owner
is told how many repeats were complete and how far into the current one it
was, so it can rebuild that partial step exactly and continue in the plain
model (docs/engine.md, "Coalesced repeats").
"""

from __future__ import annotations

import math
from functools import partial

import numpy as np
import simpy

from simcomm.engine.fluid import FluidCore

__all__ = ["Environment", "LateEvent", "LiveNetwork", "Reservation"]

#: Network bookkeeping runs after ordinary (priority 1) events of the same instant.
_LATE = simpy.events.NORMAL + 1


class LateEvent(simpy.Event):
    """An event that, once triggered, fires ``delay`` seconds later after the instant's ordinary events."""

    def __init__(self, env: simpy.Environment, delay: float):
        super().__init__(env)
        self.delay = delay


class Environment(simpy.Environment):
    """The engine's SimPy environment: schedules :class:`LateEvent` at its delay and the late priority."""

    def schedule(self, event: simpy.Event, priority=simpy.events.NORMAL, delay: float = 0) -> None:
        if isinstance(event, LateEvent):
            priority, delay = _LATE, event.delay
        super().schedule(event, priority, delay)


class Reservation:
    """``count`` back-to-back repeats of a step of isolated duration ``period`` from ``t0``.

    ``event`` fires with ``None`` when all repeats are done, or with
    ``(k, offset)`` when interrupted during repeat ``k`` (0-based), ``offset``
    seconds after that repeat started.
    """

    def __init__(self, env: simpy.Environment, t0: float, period: float, count: int):
        self.t0, self.period, self.count = t0, period, count
        self.event = env.event()

    @property
    def end(self) -> float:
        return self.t0 + self.count * self.period


class LiveNetwork:
    """Flows and reservations on one topology's directed links."""

    def __init__(self, env: Environment, capacity: np.ndarray, incremental: bool = True,
                 family_of_link: np.ndarray | None = None, resolution: float = 0.0, scalar: bool = True):
        if not isinstance(env, Environment):
            raise TypeError("LiveNetwork needs simcomm.engine.network.Environment (for its late events)")
        self.env = env
        self.core = FluidCore(capacity, incremental, family_of_link, resolution, scalar)
        self.reservation: Reservation | None = None
        self.interrupts = 0
        self.settles = 0
        self._waiters: dict[int, simpy.Event] = {}
        self._gen = 0
        self._kicked = False

    @property
    def idle(self) -> bool:
        """No flow active or queued and no reservation held."""
        return self.reservation is None and self.core.empty

    def add(self, rem: np.ndarray, t_bw: np.ndarray, route_len: np.ndarray, links: np.ndarray,
            finish: np.ndarray | None = None) -> simpy.Event:
        """Start a batch of flows now; the event's value is their finish times, ``event.batch`` its id."""
        if self.reservation is not None:
            self._interrupt()
        bid = self.core.add(rem, t_bw, route_len, links, finish)
        ev = self.env.event()
        ev.batch = bid  # type: ignore[attr-defined]  # lets a caller follow the batch (FluidCore.bytes_left)
        self._waiters[bid] = ev
        self._kick()
        return ev

    def reserve(self, period: float, count: int) -> Reservation:
        """Hold the (idle) network for ``count`` repeats of ``period`` seconds."""
        assert self.idle, "reservations are only granted on an idle network"
        res = Reservation(self.env, self.env.now, period, count)
        self.reservation = res
        timer = self.env.timeout(res.end - self.env.now)
        timer.callbacks.append(partial(self._expire_on, res))
        return res

    # ---- internals -------------------------------------------------------
    def _expire_on(self, res: Reservation, _ev: simpy.Event) -> None:
        self._expire(res)

    def _expire(self, res: Reservation) -> None:
        if self.reservation is res:
            self.reservation = None
            res.event.succeed(None)

    def _interrupt(self) -> None:
        res, self.reservation = self.reservation, None
        assert res is not None  # called only while a reservation holds the network
        self.interrupts += 1
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
            self._waiters.pop(bid).succeed(fin)
        self._gen += 1
        if nxt < math.inf:
            gen = self._gen
            ev = LateEvent(self.env, max(nxt - self.env.now, 0.0))
            ev.callbacks.append(partial(self._wake_on, gen))
            ev.succeed()
