"""``simcomm whatif`` / ``simcomm report``: files, executors, resume, failures and bad input."""

import csv
import json
import os
from pathlib import Path

import pytest

GOLDEN = Path(__file__).parents[1] / "golden" / "whatif"
TINY = ["whatif", "--vary", "nodes=2,4", "--strategies", "allreduce,sgp", "--fidelity", "analytic", "--model",
        "resnet50"]


def test_whatif_writes_results_with_every_input_column(tmp_path, capsys, cli):
    rc, out, _ = cli([*TINY, "--sequential", "--out", str(tmp_path)])
    assert rc == 0
    rows = list(csv.DictReader((tmp_path / "results.csv").open()))
    # Grid order: nodes outer, strategy inner (the last, fastest axis).
    assert [(r["nodes"], r["strategy"]) for r in rows] == [("2", "allreduce"), ("2", "sgp"), ("4", "allreduce"),
                                                          ("4", "sgp")]
    for col in ("cluster", "gpus_per_node", "inter", "topology", "model", "fidelity", "seed", "straggler_scale",
                "jitter", "status", "iteration_s", "comm_exposed_s", "speedup", "inter_util"):
        assert col in rows[0]
    assert all(r["status"] == "ok" and r["cluster"] == "deep-est-esb" for r in rows)
    blob = json.loads((tmp_path / "results.json").read_text())
    assert len(blob["rows"]) == 4 and blob["sweep"]["axes"][0] == ["nodes", [2, 4]]
    assert "best configurations" in out


def test_whatif_sequential_processes_dask_identical(tmp_path, capsys, cli):
    distributed = pytest.importorskip("dask.distributed")
    outs = {}
    for name, extra in (("seq", ["--sequential"]), ("proc", ["--workers", "2"])):
        assert cli([*TINY, *extra, "--no-report", "--out", str(tmp_path / name)])[0] == 0
        outs[name] = (tmp_path / name / "results.csv").read_bytes()
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False, dashboard_address=None,
                                  protocol="tcp://") as cluster:
        rc = cli([*TINY, "--dask", cluster.scheduler_address, "--no-report", "--out",
                  str(tmp_path / "dask")])[0]
    assert rc == 0
    outs["dask"] = (tmp_path / "dask" / "results.csv").read_bytes()
    assert outs["seq"] == outs["proc"] == outs["dask"]


def test_whatif_resume_skips_finished_points(tmp_path, capsys, cli):
    assert cli([*TINY, "--sequential", "--no-report", "--out", str(tmp_path)])[0] == 0
    full = (tmp_path / "results.csv").read_bytes()
    lines = (tmp_path / "points.jsonl").read_text().splitlines(keepends=True)
    # Simulate a kill: two points stored, a third torn mid-write, no results files.
    (tmp_path / "points.jsonl").write_text("".join(lines[:2]) + lines[2][:40])
    for f in ("results.csv", "results.json"):
        (tmp_path / f).unlink()
    assert cli([*TINY, "--sequential", "--no-report", "--out", str(tmp_path)])[0] == 0
    stored = [json.loads(x) for x in (tmp_path / "points.jsonl").read_text().splitlines() if x.endswith("}")]
    keys = [s["key"] for s in stored]
    assert len(keys) == 4 and len(set(keys)) == 4  # the two finished points were not run again
    assert stored[:2] == [json.loads(x) for x in lines[:2]]
    assert (tmp_path / "results.csv").read_bytes() == full


def test_whatif_failed_point_is_reported_not_fatal(tmp_path, capsys, cli):
    rc, out, _ = cli(["whatif", "--vary", "nodes=2,8", "--strategies", "allreduce", "--fidelity",
                      "analytic", "--set", "straggler_node=4", "--set", "straggler_scale=1.5",
                      "--sequential", "--out", str(tmp_path)])
    assert rc == 0
    rows = list(csv.DictReader((tmp_path / "results.csv").open()))
    assert rows[0]["status"] == "failed" and "straggler_node: 4 is out of range" in rows[0]["error"]
    assert rows[1]["status"] == "ok"
    assert "1 point(s) failed" in out
    assert "failed" in (tmp_path / "report.html").read_text()


@pytest.mark.parametrize("args, message", [
    (["--vary", "nodes=4..64y2"], "--vary nodes"),
    (["--vary", "nodes"], "expected KEY=VALUES"),
    (["--strategies", "allreduce"], "sweep grid is empty"),
    (["--vary", "bogus=1,2"], "unknown parameter 'bogus'"),
    (["--vary", "inter=ib-edr,ib-gdr"], "unknown link class 'ib-gdr'"),
    (["--vary", "nodes=2,4", "--strategies", "allreduce,nope"], "unknown strategy 'nope'"),
    (["--vary", "k_prime=10,20", "--strategies", "allreduce"], "k_prime: option of node-based"),
    (["--vary", "nodes=2,4", "--dask", "tcp://127.0.0.1:9"], "cannot reach the Dask scheduler"),
])
def test_whatif_bad_input_one_line_exit_2(tmp_path, capsys, args, message, cli):
    rc, _out, err = cli(["whatif", *args, "--out", str(tmp_path / "o")])
    assert rc == 2
    last = err.strip().splitlines()[-1]
    assert last.startswith("error: ") and message in last
    assert not (tmp_path / "o" / "results.csv").exists()


def test_whatif_toml_sweep_table(tmp_path, capsys, cli):
    toml = tmp_path / "s.toml"
    toml.write_text('cluster = "deep-est-esb"\nfidelity = "analytic"\n[sweep]\nquestion = "EDR or HDR?"\n'
                    'strategies = ["allreduce", "node-based"]\nvary = ["inter=ib-edr,ib-hdr"]\n'
                    '[sweep.axes]\nnodes = [2, 4]\n')
    rc, _out, _ = cli(["whatif", str(toml), "--sequential", "--no-html", "--out", str(tmp_path / "o")])
    assert rc == 0
    rows = list(csv.DictReader((tmp_path / "o" / "results.csv").open()))
    assert len(rows) == 8 and {r["inter"] for r in rows} == {"ib-edr", "ib-hdr"}
    assert "> EDR or HDR?" in (tmp_path / "o" / "report.md").read_text()
    assert not (tmp_path / "o" / "report.html").exists()


def test_whatif_report_rebuilds_identically_and_matches_golden(tmp_path, capsys, cli):
    d = tmp_path / "o"
    assert cli([*TINY, "--sequential", "--question", "Tiny?", "--out", str(d)])[0] == 0
    md = (d / "report.md").read_text()
    html = (d / "report.html").read_text()
    (d / "results.json").unlink()  # report falls back to sweep.json + points.jsonl
    for f in ("report.md", "report.html"):
        (d / f).unlink()
    assert cli(["report", str(d)])[0] == 0
    assert (d / "report.md").read_text() == md
    assert (d / "report.html").read_text() == html
    golden = GOLDEN / "tiny_report.md"
    if os.environ.get("SIMCOMM_UPDATE_GOLDEN") == "1":
        golden.write_text(md)
    assert md == golden.read_text()


def test_report_missing_dir_is_one_line(tmp_path, capsys, cli):
    rc, _, err = cli(["report", str(tmp_path / "nothing")])
    assert rc == 2 and err.strip().startswith("error: RESULTS_DIR")


def test_whatif_straggler_report_explains_gossip(tmp_path, capsys, cli):
    rc, _out, _ = cli(["whatif", "--vary", "straggler_scale=1.0,1.5", "--strategies", "allreduce,sgp",
                       "--nodes", "4", "--model", "resnet50", "--fidelity", "analytic", "--sequential", "--no-html",
                       "--out", str(tmp_path)])
    assert rc == 0
    md = (tmp_path / "report.md").read_text()
    assert "gossip (SGP) waits only for one peer's message" in md
    rows = list(csv.DictReader((tmp_path / "results.csv").open()))
    late = {r["strategy"]: float(r["rank_mean_s"]) for r in rows if r["straggler_scale"] == "1.5"}
    assert late["sgp"] < late["allreduce"]
