"""Sweeps: identical results in every executor, failed points recorded, resumable after a kill."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from simcomm.errors import ConfigError
from simcomm.sweep import ResultStore, parse_vary, run_sweep

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
import sweep_points  # noqa: E402


def _rows(records):
    return [(r.index, r.inputs, r.result, r.error) for r in records]


def test_sequential_processes_and_dask_agree(tmp_path):
    grid = parse_vary(["x=1..6", "offset=0,100"])
    seq = run_sweep(sweep_points.square, grid, ResultStore(tmp_path / "a"), executor="sequential")
    par = run_sweep(sweep_points.square, grid, ResultStore(tmp_path / "b"), executor="processes", workers=2)
    assert _rows(seq) == _rows(par)
    assert seq[0].result == {"y": 1} and seq[-1].result == {"y": 136}
    distributed = pytest.importorskip("dask.distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        dsk = run_sweep(sweep_points.square, grid, ResultStore(tmp_path / "c"), dask=client)
    assert _rows(dsk) == _rows(seq)


def test_failed_point_is_recorded_and_sweep_continues(tmp_path):
    grid = parse_vary(["x=1..4"])
    recs = run_sweep(sweep_points.square, grid, ResultStore(tmp_path), base={"fail": 3}, executor="sequential")
    assert [r.ok for r in recs] == [True, True, False, True]
    assert recs[2].error == "internal error: ValueError: boom" and recs[3].result == {"y": 16}


def test_rerun_skips_finished_points_and_ignores_torn_line(tmp_path):
    log = tmp_path / "log.txt"
    grid = parse_vary(["x=1..3"])
    store = ResultStore(tmp_path / "out")
    run_sweep(sweep_points.slow_logged, grid, store, base={"log": str(log)}, executor="sequential")
    with store.path.open("a") as fh:
        fh.write('{"index": 9, "key": "torn')  # a write cut off by a kill
    recs = run_sweep(sweep_points.slow_logged, grid, store, base={"log": str(log)}, executor="sequential")
    assert log.read_text().split() == ["1", "2", "3"]
    # A point appended after the torn line must survive the next resume.
    run_sweep(sweep_points.slow_logged, parse_vary(["x=1..4"]), store, base={"log": str(log)}, executor="sequential")
    run_sweep(sweep_points.slow_logged, parse_vary(["x=1..4"]), store, base={"log": str(log)}, executor="sequential")
    assert log.read_text().split() == ["1", "2", "3", "4"]
    assert [r.result["y"] for r in recs] == [10, 20, 30]


def test_killed_sweep_resumes_without_redoing_points(tmp_path):
    log, out = tmp_path / "log.txt", tmp_path / "out"
    script = f"""
import sys; sys.path.insert(0, {str(HERE)!r})
import sweep_points
from simcomm.sweep import ResultStore, parse_vary, run_sweep
run_sweep(sweep_points.slow_logged, parse_vary(["x=1..8"]), ResultStore({str(out)!r}),
          base={{"log": {str(log)!r}, "sleep": 0.3}}, executor="sequential")
"""
    proc = subprocess.Popen([sys.executable, "-c", script], start_new_session=True)
    deadline = time.time() + 60
    while time.time() < deadline:
        done = (out / "points.jsonl").read_text().count("\n") if (out / "points.jsonl").exists() else 0
        if done >= 3:
            break
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    stored = [json.loads(line)["inputs"]["x"] for line in (out / "points.jsonl").read_text().splitlines()]
    assert 3 <= len(stored) < 8
    recs = run_sweep(sweep_points.slow_logged, parse_vary(["x=1..8"]), ResultStore(out),
                     base={"log": str(log), "sleep": 0.3}, executor="sequential")
    runs = [int(x) for x in log.read_text().split()]
    # Every stored point ran exactly once; only the unfinished ones ran again.
    assert all(runs.count(x) == 1 for x in stored)
    assert sorted(set(runs)) == list(range(1, 9)) and [r.result["y"] for r in recs] == [10 * x for x in range(1, 9)]


def test_dask_by_scheduler_address(tmp_path):
    distributed = pytest.importorskip("dask.distributed")
    grid = parse_vary(["x=1..3"])
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster:
        recs = run_sweep(sweep_points.square, grid, ResultStore(tmp_path), dask=cluster.scheduler_address)
    assert [r.result["y"] for r in recs] == [1, 4, 9]


def test_unreachable_dask_scheduler_is_a_config_error(tmp_path):
    pytest.importorskip("dask.distributed")
    with pytest.raises(ConfigError, match="cannot reach the Dask scheduler"):
        run_sweep(sweep_points.square, parse_vary(["x=1..2"]), ResultStore(tmp_path), dask="tcp://127.0.0.1:9")
