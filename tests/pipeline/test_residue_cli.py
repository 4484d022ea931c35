"""Issue 27's reliability residue, each case run as a user typed it (the others: test_hostile_inputs.py,
test_overflowing_inputs.py, test_full_disk.py, whatif/test_sweep_table_errors.py, traces/test_traces_kineto_fuzz.py):
one ``error:`` line and exit status 2, or a run that finishes and says what it did; never a traceback."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_bench_sendrecv_of_8_bytes_and_1_mb_on_2_nodes(cli):
    # once a ValueError in nccl/prepare.py: the 8-byte message is 2 floats, each rank's own pair
    rc, out, err = cli(["bench", "sendrecv", "--sizes", "8,1MB", "--nodes", "2"])
    assert rc == 0 and "Traceback" not in err, err
    rows = [line.split() for line in out.splitlines() if line.strip() and not line.startswith("#")]
    assert [(r[0], r[1], r[-2], r[-1]) for r in rows] == [("8", "2", "NCCL", "P2P"), ("1000000", "250000", "NCCL", "P2P")]
    assert all(math.isfinite(float(r[5])) and float(r[5]) > 0 for r in rows)  # the times


def test_megatron_with_a_per_rank_batch_of_a_billion_runs_as_one_micro_batch(cli):
    # once grew past 3.9 GB and kept running: the default layout takes the batch as one micro-batch per rank
    rc, out, err = cli(["run", "--strategy", "megatron", "--batch", "1000000000", "--json", "--no-baseline"])
    assert rc == 0, err
    data = json.loads(out)
    assert data["batch"] == 1_000_000_000 and math.isfinite(data["mean_s"]) and data["mean_s"] > 0
    assert any("micro-batch 1000000000 × 1 micro-batches" in line for line in data["assumed"]), data["assumed"]


def test_plan_of_a_billion_samples_with_simulate_0(cli):
    rc, out, err = cli(["plan", "--model", "gpt2-small", "--global-batch", "1000000000", "--simulate", "0"])
    assert (rc, out, err) == (2, "", "error: --simulate: 0 must be >= 1\n")


@pytest.mark.skipif(sys.platform == "win32", reason="sends SIGINT")
def test_ctrl_c_on_a_sweep_says_what_was_saved_and_how_to_resume(tmp_path):
    """Ctrl-C (SIGINT) in the middle of ``simcomm whatif``: exit status 130, one line naming the points saved and how
    to resume, no traceback; running the same command again resumes from there."""
    out = tmp_path / "o"
    args = ["whatif", "--vary", "nodes=2..400", "--strategies", "dpsgd", "--fidelity", "analytic", "--sequential",
            "--no-report", "--out", str(out)]
    # Python leaves SIGINT ignored when it starts with it ignored, as every command started with `&` from a
    # non-interactive shell (or under nohup) does: install the handler a terminal's Python has, so the test
    # sees what Ctrl-C does whatever runs the tests
    argv = [sys.executable, "-c", "import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
            f"sys.argv = ['simcomm', *{args!r}]; runpy.run_module('simcomm', run_name='__main__', alter_sys=True)"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, start_new_session=True)
    try:
        points = out / "points.jsonl"
        end = time.monotonic() + 300  # bounds a failure only: the signal goes once a point is saved
        while not (points.exists() and points.read_text().count("\n") >= 1):
            assert proc.poll() is None, proc.communicate()[1].decode()
            assert time.monotonic() < end, "no point saved"
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    text = err.decode()
    assert proc.returncode == 130 and "Traceback" not in text, text
    saved = points.read_text().count("\n")
    last = text.strip().splitlines()[-1]
    assert last.startswith(f"interrupted: {saved} of ") and last.endswith(
        f"point(s) saved in {points}; run the same command again to resume from there"), last
    assert 0 < saved < int(last.split(" of ")[1].split()[0])
