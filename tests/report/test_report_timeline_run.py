"""`simcomm run --timeline`: a valid trace whose totals equal the run's reported breakdown."""

import json

import pytest

from simcomm.cli.app import main
from simcomm.report.perfetto import validate_trace_events

# a model of its own: ceta-ciemat would otherwise run seed 000's Table VII setting (its loading and evaluation)
ARGS = ["run", "--strategy", "allreduce", "--nodes", "2", "--gpus-per-node", "2", "--cluster", "ceta-ciemat",
        "--model", "resnet50", "--no-baseline", "--json"]


def _run(capsys, tmp_path, extra):
    path = tmp_path / "tl.json"
    assert main(ARGS + extra + ["--timeline", str(path)]) == 0
    res = json.loads(capsys.readouterr().out)
    return res, json.loads(path.read_text())


def _busy(events, pid, cats):
    return sum(e["dur"] for e in events if e["ph"] == "X" and e["pid"] == pid and e["cat"] in cats) / 1e6


def test_timeline_totals_equal_breakdown_without_overlap(capsys, tmp_path):
    res, obj = _run(capsys, tmp_path, ["--opt", "overlap=none"])
    assert validate_trace_events(obj) == []
    ev = obj["traceEvents"]
    bd = res["breakdown"]
    for rank in range(4):
        assert _busy(ev, rank, {"compute", "update"}) == pytest.approx(bd["compute"], rel=1e-9)
        assert _busy(ev, rank, {"comm"}) == pytest.approx(bd["comm_exposed"], rel=1e-9)
    assert obj["otherData"]["span_s"] == pytest.approx(res["mean_s"], rel=1e-12)
    names = {e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"}
    assert names == {"rank 0 (node 0)", "rank 1 (node 0)", "rank 2 (node 1)", "rank 3 (node 1)"}


def test_timeline_with_overlap_hides_communication(capsys, tmp_path):
    res, obj = _run(capsys, tmp_path, ["--opt", "overlap=backward"])
    ev = obj["traceEvents"]
    bd = res["breakdown"]
    comm = _busy(ev, 0, {"comm"})
    # Every second of communication is either hidden behind compute or exposed.
    assert comm >= bd["comm_exposed"] - 1e-12 and bd["comm_hidden"] > 0
    assert obj["otherData"]["span_s"] == pytest.approx(bd["compute"] + bd["comm_exposed"], rel=1e-9)


def test_periodic_strategy_lays_kinds_end_to_end(capsys, tmp_path):
    path = tmp_path / "nb.json"
    assert main(["run", "--strategy", "node-based", "--nodes", "2", "--gpus-per-node", "2", "--cluster",
                 "ceta-ciemat", "--model", "resnet50", "--no-baseline", "--json", "--timeline", str(path)]) == 0
    res = json.loads(capsys.readouterr().out)
    obj = json.loads(path.read_text())
    assert validate_trace_events(obj) == []
    marks = [e for e in obj["traceEvents"] if e["ph"] == "i"]
    assert [m["name"] for m in marks] == ["iteration: local", "iteration: exchange"]
    times = [k["time_s"] for k in res["kinds"]]
    assert marks[1]["ts"] == pytest.approx(times[0] * 1e6, rel=1e-12)
    assert obj["otherData"]["span_s"] == pytest.approx(sum(times), rel=1e-12)


def test_timeline_into_missing_directory_is_one_line(capsys, tmp_path):
    assert main(ARGS + ["--timeline", str(tmp_path / "nope" / "t.json")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --timeline: directory") and err.count("\n") == 1


def test_timeline_has_link_usage_counters_that_integrate_to_the_link_bytes(capsys, tmp_path):
    res, obj = _run(capsys, tmp_path, ["--opt", "overlap=none"])
    counters = [e for e in obj["traceEvents"] if e["ph"] == "C"]
    assert {e["name"] for e in counters} == {f"link {f} (B/s)" for f in res["link_bytes"]}
    for fam, total in res["link_bytes"].items():
        series = sorted((e["ts"] / 1e6, e["args"][fam]) for e in counters if fam in e["args"])
        assert series[-1][1] == 0.0 and all(v >= 0 for _, v in series)
        carried = sum(v * (series[i + 1][0] - t) for i, (t, v) in enumerate(series[:-1]))
        assert carried == pytest.approx(total, rel=1e-9)
