"""Perfetto export: valid trace-event format, paired flows, exact timestamps, atomic writes."""

import json

import numpy as np
import pytest

from simcomm.engine.timeline import Timeline
from simcomm.ops import PlanBuilder
from simcomm.report.perfetto import trace_events, validate_trace_events, write_timeline


def _plan_and_timeline():
    b = PlanBuilder(2)
    f = b.compute(0, 1e-3, label="forward")
    c = b.collective("allreduce", [0, 1], 1e6, after=[f], label="grads")
    t = b.transfer(1, 0, 500.0, after=[c], label="push")
    plan = b.build()
    tl = Timeline(start=np.array([0.0, 1e-3, 3e-3]), end=np.array([1e-3, 3e-3, 3.5e-3]), makespan=3.5e-3,
                  meta={"link_usage": [(0.0, "infiniband", 0.0), (1e-3, "infiniband", 5e8)]})
    return plan, tl, (f, c, t)


def test_events_are_valid_and_exact():
    plan, tl, (f, c, t) = _plan_and_timeline()
    obj = trace_events(plan, tl, machine_of=lambda r: r)
    assert validate_trace_events(obj) == []
    xs = [e for e in obj["traceEvents"] if e["ph"] == "X"]
    fwd = [e for e in xs if e["name"] == "forward"]
    assert fwd == [{"ph": "X", "name": "forward", "cat": "compute", "pid": 0, "tid": 1, "ts": 0.0,
                    "dur": 1000.0, "args": {"op": f}}]
    grads = [e for e in xs if e["name"] == "grads"]
    assert sorted(e["pid"] for e in grads) == [0, 1] and all(e["dur"] == pytest.approx(2000.0) for e in grads)
    flows = [e for e in obj["traceEvents"] if e["ph"] in "sf"]
    assert [(e["ph"], e["pid"]) for e in flows] == [("s", 1), ("f", 0)]
    counters = [e for e in obj["traceEvents"] if e["ph"] == "C"]
    assert counters[1]["args"] == {"infiniband": 5e8} and counters[1]["ts"] == pytest.approx(1000.0)
    names = {e["args"]["name"] for e in obj["traceEvents"] if e["name"] == "process_name"}
    assert names == {"rank 0 (node 0)", "rank 1 (node 1)"}


def test_validator_catches_broken_events():
    assert validate_trace_events({}) == ["traceEvents missing or not a list"]
    bad = {"traceEvents": [{"ph": "X", "ts": 0, "pid": 0, "tid": 0, "dur": -1},
                           {"ph": "s", "id": 1, "ts": 0, "pid": 0, "tid": 0}, {"ph": "B", "ts": 0}]}
    problems = validate_trace_events(bad)
    assert "event 0 has a negative or missing duration" in problems
    assert "flow events are not paired one start to one finish" in problems
    assert "event 2 lacks pid" in problems


def test_write_is_atomic_and_loadable(tmp_path):
    plan, tl, _ = _plan_and_timeline()
    out = tmp_path / "t.json"
    write_timeline(out, trace_events(plan, tl))
    assert validate_trace_events(json.loads(out.read_text())) == []
    with pytest.raises(TypeError):
        write_timeline(out, {"traceEvents": [object()]})
    assert json.loads(out.read_text())["otherData"]["makespan_s"] == 3.5e-3  # old file intact
    assert [p.name for p in tmp_path.iterdir()] == ["t.json"]  # no temp file left behind


def test_every_stream_is_a_named_thread_and_slices_name_the_algorithm_run():
    """A push on its own stream gets a named thread on both ends; an auto collective shows what ran."""
    b = PlanBuilder(2)
    c = b.collective("allreduce", [0, 1], 1e6, label="grads")
    t = b.transfer(1, 0, 500.0, after=[c], label="push", stream="push")
    plan = b.build()
    tl = Timeline(start=np.array([0.0, 2e-3]), end=np.array([2e-3, 3e-3]), makespan=3e-3,
                  meta={"algorithms": [("allreduce", "auto", "NCCL Ring/LL128", 1)]})
    obj = trace_events(plan, tl)
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in obj["traceEvents"] if e["name"] == "thread_name"}
    used = {(e["pid"], e["tid"]) for e in obj["traceEvents"] if e["ph"] == "X"}
    assert used <= set(threads) and {threads[(1, e["tid"])] for e in obj["traceEvents"]
                                     if e["ph"] == "X" and e["args"]["op"] == t and e["pid"] == 1} == {"push"}
    grads = [e for e in obj["traceEvents"] if e["ph"] == "X" and e["name"] == "grads"]
    assert {e["args"]["algorithm"] for e in grads} == {"NCCL Ring/LL128"}
