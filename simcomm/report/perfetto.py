"""Chrome trace-event / Perfetto JSON of one simulated iteration.

Open the file at https://ui.perfetto.dev (drag and drop; everything stays in
the browser) or in chrome://tracing.  Layout:

* one process per rank (``pid`` = rank, named ``rank R (node M)``), with one
  thread per stream: compute, comm, data;
* every op is a complete event (``ph: "X"``) on its stream, with its category
  (compute, dataload, update, compression, comm) and byte count;
* a collective appears on the comm track of every member rank;
* a point-to-point transfer has a flow arrow (``ph: "s"`` at the sender, ``ph:
  "f"`` at the receiver) and a ``recv`` slice on the receiver's comm track;
* link utilisation, when the engine recorded it, is a counter track per link
  family (``ph: "C"``), in bytes per second.

Times are microseconds, as the format requires.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable

from simcomm.fileio import atomic_open
from simcomm.ops import Collective, CommPlan, Compute, Transfer

__all__ = ["trace_events", "kinds_trace_events", "write_timeline", "validate_trace_events", "STREAM_TIDS"]

STREAM_TIDS = {"compute": 1, "comm": 2, "data": 3}
_US = 1e6


def _tid(stream: str) -> int:
    return STREAM_TIDS.get(stream, 10 + sum(map(ord, stream)) % 1000)


def trace_events(plan: CommPlan, timeline, *, machine_of=None, link_usage: Iterable | None = None) -> dict:
    """Build the trace-event object for ``plan`` as run in ``timeline``.

    ``machine_of(rank)`` names each rank's node; ``link_usage`` is an iterable
    of ``(time_s, family, bytes_per_s)`` samples (defaults to
    ``timeline.meta["link_usage"]`` when present).
    """
    ev: list[dict] = []
    # Every stream a rank's ops use gets a named thread (a gossip or point-to-point stream too).
    extra: dict[int, set[str]] = {}
    for op in plan.ops:
        ranks = (op.rank,) if isinstance(op, Compute) else (op.src, op.dst) if isinstance(op, Transfer) \
            else op.ranks if isinstance(op, Collective) else ()
        if op.stream not in STREAM_TIDS:
            for r in ranks:
                extra.setdefault(r, set()).add(op.stream)
    for r in range(plan.n_ranks):
        node = machine_of(r) if machine_of else None
        label = f"rank {r}" + (f" (node {node})" if node is not None else "")
        ev.append({"ph": "M", "name": "process_name", "pid": r, "tid": 0, "ts": 0, "args": {"name": label}})
        ev.append({"ph": "M", "name": "process_sort_index", "pid": r, "tid": 0, "ts": 0, "args": {"sort_index": r}})
        for stream in (*STREAM_TIDS, *sorted(extra.get(r, ()))):
            ev.append({"ph": "M", "name": "thread_name", "pid": r, "tid": _tid(stream), "ts": 0,
                       "args": {"name": stream}})
    ran = _algorithms_run(timeline)
    flow_id = 0
    for op in plan.ops:
        t0, t1 = float(timeline.start[op.id]), float(timeline.end[op.id])
        ts, dur = t0 * _US, max(0.0, (t1 - t0) * _US)
        name = op.label or (op.kind if isinstance(op, Collective) else type(op).__name__.lower())
        if isinstance(op, Compute):
            ev.append({"ph": "X", "name": name, "cat": op.category, "pid": op.rank, "tid": _tid(op.stream),
                       "ts": ts, "dur": dur, "args": {"op": op.id}})
        elif isinstance(op, Collective):
            args = {"op": op.id, "bytes": op.nbytes, "group": len(op.ranks),
                    "algorithm": ran.get((op.kind, op.algorithm), op.algorithm)}
            for r in op.ranks:
                ev.append({"ph": "X", "name": name, "cat": op.category, "pid": r, "tid": _tid(op.stream),
                           "ts": ts, "dur": dur, "args": args})
        elif isinstance(op, Transfer):
            flow_id += 1
            args = {"op": op.id, "bytes": op.nbytes, "src": op.src, "dst": op.dst}
            ev.append({"ph": "X", "name": name, "cat": op.category, "pid": op.src, "tid": _tid(op.stream),
                       "ts": ts, "dur": dur, "args": args})
            ev.append({"ph": "X", "name": f"recv {name}", "cat": op.category, "pid": op.dst, "tid": _tid(op.stream),
                       "ts": ts + dur, "dur": 0.0, "args": args})
            ev.append({"ph": "s", "name": "transfer", "cat": "flow", "id": flow_id, "pid": op.src,
                       "tid": _tid(op.stream), "ts": ts})
            ev.append({"ph": "f", "bp": "e", "name": "transfer", "cat": "flow", "id": flow_id, "pid": op.dst,
                       "tid": _tid(op.stream), "ts": ts + dur})
    usage = link_usage if link_usage is not None else timeline.meta.get("link_usage", ())
    for t, family, bps in usage:
        ev.append({"ph": "C", "name": f"link {family} (B/s)", "pid": 0, "tid": 0, "ts": float(t) * _US,
                   "args": {family: float(bps)}})
    return {"traceEvents": ev, "displayTimeUnit": "ms",
            "otherData": {"generator": "simcomm", "makespan_s": float(timeline.makespan),
                          "fidelity": timeline.fidelity}}


def _algorithms_run(timeline) -> dict[tuple[str, str], str]:
    """(collective, algorithm asked) -> what the engine ran (``auto`` resolved; NCCL's choice with protocol).

    The engine counts what each (collective, asked) pair ran in ``meta["algorithms"]``;
    when one pair ran several algorithms (sizes differ), all are named with their counts.
    """
    out: dict[tuple[str, str], list[tuple[str, int]]] = {}
    for kind, asked, what, count in timeline.meta.get("algorithms", ()):
        out.setdefault((kind, asked), []).append((str(what), int(count)))
    return {k: v[0][0] if len(v) == 1 else ", ".join(f"{w} x{n}" for w, n in sorted(v)) for k, v in out.items()}


def kinds_trace_events(kinds: list[tuple[str, CommPlan, object]], *, machine_of=None) -> dict:
    """One trace of several kinds of iteration (e.g. node-based's local and exchange iterations).

    The kinds are laid end to end in the order given, each shifted by the
    makespans before it, with an instant marker naming each kind, so one
    file shows one period of a periodic strategy.
    """
    events: list[dict] = []
    offset, flows = 0.0, 0
    for i, (label, plan, tl) in enumerate(kinds):
        obj = trace_events(plan, tl, machine_of=machine_of)
        for e in obj["traceEvents"]:
            if e["ph"] == "M" and i > 0:
                continue  # process and thread names once
            e = dict(e)
            e["ts"] = e["ts"] + offset * _US if e["ph"] != "M" else 0
            if e["ph"] in ("s", "f"):
                e["id"] = e["id"] + flows
            events.append(e)
        flows += sum(1 for e in obj["traceEvents"] if e["ph"] == "s")
        events.append({"ph": "i", "s": "g", "name": f"iteration: {label}", "pid": 0, "tid": 0,
                       "ts": offset * _US})
        offset += float(tl.makespan)
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"generator": "simcomm", "kinds": [k[0] for k in kinds], "span_s": offset}}


def write_timeline(path: str | os.PathLike, obj: dict) -> None:
    """Write atomically: a temp file in the same directory, then rename."""
    with atomic_open(path, "w") as fh:
        json.dump(obj, fh, separators=(",", ":"), sort_keys=True)


def validate_trace_events(obj: dict) -> list[str]:
    """Problems found in a trace-event object (empty when valid).

    Checks what viewers rely on: every event has ph, ts, pid and tid; complete
    events have non-negative durations; every flow start has one finish.
    """
    problems: list[str] = []
    events = obj.get("traceEvents")
    if not isinstance(events, list):
        return ["traceEvents missing or not a list"]
    starts: dict = {}
    finishes: dict = {}
    for i, e in enumerate(events):
        for key in ("ph", "ts", "pid", "tid"):
            if key not in e:
                problems.append(f"event {i} lacks {key}")
        if e.get("ph") == "X" and not (isinstance(e.get("dur"), (int, float)) and e["dur"] >= 0):
            problems.append(f"event {i} has a negative or missing duration")
        if e.get("ph") == "s":
            starts[e.get("id")] = starts.get(e.get("id"), 0) + 1
        if e.get("ph") == "f":
            finishes[e.get("id")] = finishes.get(e.get("id"), 0) + 1
    if starts != finishes or any(v != 1 for v in starts.values()):
        problems.append("flow events are not paired one start to one finish")
    return problems
