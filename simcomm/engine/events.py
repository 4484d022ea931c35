"""The engine's events: the one module that touches SimPy's private state, and why.

SimPy's public API makes one object per process and per event and runs every
event through ``Environment.step``; a run of a 1 024-GPU plan schedules
millions of events, and that bookkeeping was most of its time.  So the engine
drives SimPy's own queue itself, with SimPy's own order, in the few places
below, and nowhere else:

* :func:`run_events` is ``env.run()`` with ``step`` inlined (reads ``env._queue``,
  sets ``env._now``; re-raises a failed event's ``_value`` unless ``_defused``,
  as ``step`` does);
* :func:`started` is the urgent, already-triggered event ``env.process`` makes to
  start a process (SimPy's ``Initialize``), without the process (sets ``_ok`` and
  ``_value``, as ``Initialize`` does);
* :class:`LateEvent` queues itself at a priority after the instant's ordinary
  events (SimPy's ``succeed`` queues at the normal one): it sets ``_ok`` and
  ``_value`` as ``succeed`` does;
* :class:`Driver` resumes a generator as ``Process._resume`` does (reads a yielded
  event's ``_ok`` and ``_value``);
* :func:`run_alone` sets ``env._now`` (on an empty queue) to run one collective from the direct
  loop's instant, as the whole run would have reached it.

Each keeps SimPy's (time, priority, sequence) order, so every event runs at the
same instant and in the same order as through the public API (docs/engine.md,
"Drivers"); the tests compare them with ``EngineOptions(reference={"callbacks"})``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from heapq import heappop

import simpy

__all__ = ["Environment", "LateEvent", "Driver", "started", "run_events", "run_alone", "LATE"]

#: Network bookkeeping runs after ordinary (priority 1) events of the same instant.
LATE = simpy.events.EventPriority(simpy.events.NORMAL + 1)


class Environment(simpy.Environment):
    """The engine's SimPy environment: the one :class:`~simcomm.engine.flow.network.LiveNetwork` runs on.

    Late events queue themselves at the late priority (:meth:`LateEvent.succeed`; the engine
    triggers them no other way), so this class adds nothing to SimPy's per-event path; it marks
    the environments a live network was built for.
    """


class LateEvent(simpy.Event):
    """An event that, once triggered, fires ``delay`` seconds later after the instant's ordinary events."""

    def __init__(self, env: simpy.Environment, delay: float):
        super().__init__(env)
        self.delay = delay

    def succeed(self, value=None) -> LateEvent:
        """Trigger it: queued at its delay and the late priority (SimPy's own ``succeed`` queues now)."""
        if self._value is not simpy.events.PENDING:
            raise RuntimeError(f"{self} has already been triggered")
        self._ok = True
        self._value = value
        simpy.Environment.schedule(self.env, self, LATE, self.delay)
        return self


def started(env: simpy.Environment, callback: Callable) -> None:
    """Call ``callback(event)`` now, at the urgent priority: the start ``env.process`` would queue."""
    ev = simpy.Event(env)
    ev._ok, ev._value = True, None  # triggered, as SimPy's Initialize is
    ev.callbacks.append(callback)
    env.schedule(ev, simpy.events.URGENT)


def run_events(env: simpy.Environment, halt: Sequence = ()) -> None:
    """``env.run()`` until no event is left, with SimPy's ``step`` inlined (a call less per event).

    The same order (SimPy's queue of ``(time, priority, sequence, event)``) and the same
    callbacks; an event that failed undefused raises its exception, as ``step`` does.  ``halt``:
    the run also ends once this is non-empty (after the callbacks of the event that filled it).
    """
    queue = env._queue
    while queue and not halt:
        env._now, _, _, event = heappop(queue)
        callbacks, event.callbacks = event.callbacks, None  # type: ignore[assignment]  # SimPy's own marker
        for callback in callbacks:
            callback(event)
        if not event._ok and not hasattr(event, "_defused"):
            raise event._value


def run_alone(env: simpy.Environment, now: float, gen) -> float:
    """Drive ``gen`` from time ``now`` on an empty queue until no event is left; the time ``gen`` ended at.

    The direct loop's cut collectives (``paths.cuts_only``): nothing else is pending, so the queue holds only
    ``gen``'s events, in SimPy's order.  The queue is drained after ``gen`` ends (a live network's superseded
    wake-ups, which do nothing), so the end is taken when ``gen`` returns, not from ``env.now`` afterwards.
    """
    assert not env._queue, "run_alone needs an empty queue"
    env._now = now
    ended: list[float] = []

    def body():
        yield from gen
        ended.append(env.now)

    Driver(env, body())
    run_events(env)
    return ended[0]


class Driver:
    """Drive a generator as a SimPy process would, with less per-event work.

    Like ``env.process(gen)``: one urgent event starts it now, and each event it yields resumes
    it from that event's callbacks, in the same place in the list, so every event runs at the
    same instant and in the same order.  What it leaves out is what nothing in the engine uses:
    the active-process bookkeeping and the process's own termination event (no one waits for
    a stream or a collective's process; they signal through ``done`` events).  An exception
    inside the generator propagates out of :func:`run_events` at once.  The engine never fails
    an event, so a yielded event is always ``ok``.
    """

    __slots__ = ("gen",)

    def __init__(self, env: simpy.Environment, gen):
        self.gen = gen
        started(env, self)

    def __call__(self, event) -> None:
        send = self.gen.send
        while True:
            assert event._ok  # nothing in the engine fails an event
            try:
                event = send(event._value)
            except StopIteration:
                self.gen = None  # done: drop the frame
                return
            cbs = event.callbacks
            if cbs is not None:  # pending: resume when it is processed
                cbs.append(self)
                return
            # already processed: go on at once, as SimPy's _resume does
