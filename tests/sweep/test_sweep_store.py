"""The point store: damaged lines are skipped and counted, good records kept, points keyed by content."""

import json
import sys
from pathlib import Path

import pytest

from simcomm.errors import ConfigError
from simcomm.sweep import ResultStore, parse_vary, run_sweep
from simcomm.sweep.store import PointRecord, check_out_dir, point_key, record_problem

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
import sweep_points  # noqa: E402


def _filled(tmp_path, n=3):
    """A store holding the points x = 1..n of ``square``."""
    store = ResultStore(tmp_path / "out")
    run_sweep(sweep_points.square, parse_vary([f"x=1..{n}"]), store, executor="sequential", notify=lambda s: None)
    return store


def _resume(store, n=3):
    notes, runs = [], []

    def counted(inputs):
        runs.append(inputs["x"])
        return sweep_points.square(inputs)

    recs = run_sweep(counted, parse_vary([f"x=1..{n}"]), store, executor="sequential", notify=notes.append)
    return recs, notes, runs


def test_a_0xff_byte_skips_one_line_and_only_that_point_runs_again(tmp_path):
    store = _filled(tmp_path)
    lines = store.path.read_bytes().split(b"\n")
    lines[1] = lines[1][:30] + b"\xff" + lines[1][31:]
    store.path.write_bytes(b"\n".join(lines))
    scan = store.scan()
    assert [r.inputs["x"] for r in scan.records] == [1, 3]
    assert dict(scan.skipped) == {"not UTF-8": 1} and scan.problem() == "skipped 1 of 3 line(s) (1 not UTF-8)"
    recs, notes, runs = _resume(store)
    assert runs == [2] and [r.result["y"] for r in recs] == [1, 4, 9]
    assert notes[0] == f"warning: {store.path}: skipped 1 of 3 line(s) (1 not UTF-8); their points are computed again"
    assert notes[1] == f"resume: {store.path}: keeping 2 stored point(s), computing 1"


def test_complete_last_record_without_newline_is_kept_and_torn_one_cut(tmp_path):
    store = _filled(tmp_path)
    data = store.path.read_bytes()
    store.path.write_bytes(data[:-1])  # the last record is whole, only its newline is missing
    assert [r.inputs["x"] for r in store.scan().records] == [1, 2, 3]
    assert store.repair() is False and store.path.read_bytes() == data  # repaired by adding the newline
    store.path.write_bytes(data[:-20])  # now torn mid-record
    scan = store.scan()
    assert [r.inputs["x"] for r in scan.records] == [1, 2] and dict(scan.skipped) == {"cut short, no newline": 1}
    _recs, notes, runs = _resume(store)
    assert runs == [3] and store.path.read_bytes() == data
    # A torn last line is what a kill leaves: cut off before appending, said once, not a warning.
    assert notes == [(f"resume: {store.path}: keeping 2 stored point(s), computing 1; a last line torn by a kill "
                      "was cut off")]


@pytest.mark.parametrize(("change", "reason"), [
    (lambda r: r.update(index="0"), "wrong types"),
    (lambda r: r.update(index=-1), "wrong types"),
    (lambda r: r.update(inputs=[1]), "wrong types"),
    (lambda r: r.update(result=5), "wrong types"),
    (lambda r: r.update(error="boom"), "wrong types"),  # both a result and an error
    (lambda r: r["result"].update(y="fast"), "checksum mismatch"),
    (lambda r: r["result"].update(y=5), "checksum mismatch"),
    (lambda r: r.pop("sum"), "no checksum"),
    (lambda r: r.update(extra=1), "wrong fields"),
])
def test_wrongly_typed_or_edited_records_are_skipped_with_their_reason(tmp_path, change, reason):
    store = _filled(tmp_path)
    lines = store.path.read_text().splitlines()
    rec = json.loads(lines[0])
    change(rec)
    lines[0] = json.dumps(rec)
    store.path.write_text("\n".join(lines) + "\n")
    assert record_problem(rec) == reason
    scan = store.scan()
    assert [r.inputs["x"] for r in scan.records] == [2, 3] and dict(scan.skipped) == {reason: 1}


def test_non_json_lines_and_non_records_are_counted(tmp_path):
    store = _filled(tmp_path)
    with store.path.open("a") as fh:
        fh.write("not json\n[1, 2]\n\n" + "[" * 100_000 + "\n")
    scan = store.scan()
    assert len(scan.records) == 3 and dict(scan.skipped) == {"not JSON": 2, "not a record": 1}
    assert scan.problem() == "skipped 3 of 6 line(s) (2 not JSON, 1 not a record)"


def test_regenerated_trace_file_is_recomputed_not_reused(tmp_path):
    trace = tmp_path / "trace.json"
    trace.write_text("a")
    store = ResultStore(tmp_path / "out")
    grid = parse_vary(["x=1,2"])
    base = {"trace": str(trace)}
    first = run_sweep(sweep_points.file_length, grid, store, base=base, executor="sequential", notify=lambda s: 0)
    assert [r.result["n"] for r in first] == [1, 1]
    trace.write_text("bbb")  # same name, new content
    notes = []
    again = run_sweep(sweep_points.file_length, grid, store, base=base, executor="sequential", notify=notes.append)
    assert [r.result["n"] for r in again] == [3, 3]
    assert notes == [(f"resume: {store.path}: keeping 0 stored point(s), computing 2 (2 recomputed: a file they "
                      "read or the simcomm version changed)")]
    assert point_key({"trace": str(trace), "x": 1}) == again[0].key != first[0].key


def test_point_key_covers_inputs_and_version_not_unlisted_files(tmp_path, monkeypatch):
    f = tmp_path / "log.txt"
    f.write_text("1")
    k = point_key({"log": str(f), "x": 1})
    f.write_text("2")  # an input not listed as a file the point reads: its content is not part of the key
    assert point_key({"log": str(f), "x": 1}) == k != point_key({"log": str(f), "x": 2})
    import simcomm

    monkeypatch.setattr(simcomm, "__version__", "9.9.9")
    assert point_key({"log": str(f), "x": 1}) != k


def test_record_line_round_trips_with_its_checksum():
    rec = PointRecord(3, "k", {"x": 1.5, "s": "é"}, {"y": float("nan")}, None)
    obj = json.loads(rec.line())
    assert rec.line().endswith("\n") and record_problem(obj) is None and set(obj) == {
        "error", "index", "inputs", "key", "result", "sum"}


def test_out_dir_with_user_files_is_refused_unless_forced(tmp_path):
    d = tmp_path / "mine"
    d.mkdir()
    (d / "report.md").write_text("my notes")
    with pytest.raises(ConfigError, match=r"is not empty \(report.md\) and holds no simcomm sweep.*--force"):
        check_out_dir(d)
    check_out_dir(d, force=True)
    check_out_dir(tmp_path / "new")  # not there yet: fine
    (d / "sweep.json").write_text("{}")
    check_out_dir(d)  # a sweep's own directory: resumed
    (tmp_path / "file").write_text("")
    with pytest.raises(ConfigError, match="not a directory"):
        check_out_dir(tmp_path / "file")


def test_whatif_resume_recomputes_points_whose_trace_file_was_regenerated(tmp_path, cli):
    data = Path(__file__).parents[2] / "simcomm" / "traces" / "data"
    trace, out = tmp_path / "t.json", tmp_path / "o"
    args = ["whatif", "--vary", "nodes=2,4", "--strategies", "allreduce", "--fidelity", "analytic", "--set",
            f"trace={trace}", "--sequential", "--no-report", "--out", str(out)]

    def times():
        return [json.loads(x)["result"]["iteration_s"] for x in (out / "points.jsonl").read_text().splitlines()]

    trace.write_bytes((data / "resnet18-cifar-v100-roofline.json").read_bytes())
    assert cli(args)[0] == 0
    first = times()
    trace.write_bytes((data / "resnet20-cifar-1080ti-roofline.json").read_bytes())  # same name, new trace
    rc, _, err = cli(args)
    assert rc == 0 and (f"resume: {out / 'points.jsonl'}: keeping 0 stored point(s), computing 2 (2 recomputed: "
                        "a file they read or the simcomm version changed)") in err
    stored = times()
    assert stored[:2] == first and len(stored) == 4 and stored[2] != first[0] and stored[3] != first[1]
    rows = json.loads((out / "results.json").read_text())["rows"]
    assert [r["iteration_s"] for r in rows] == stored[2:]  # the new numbers, not the stored old ones
    rc, _, err = cli(args)
    assert rc == 0 and f"resume: {out / 'points.jsonl'}: keeping 2 stored point(s), computing 0" in err
