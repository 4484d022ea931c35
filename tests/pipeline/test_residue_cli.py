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

from simcomm.strategies.base import STRATEGIES

ROOT = Path(__file__).resolve().parents[2]


def test_bench_sendrecv_of_8_bytes_and_1_mb_on_2_nodes(cli):
    # once a ValueError in nccl/prepare.py: the 8-byte message is 2 floats, each rank's own pair
    rc, out, err = cli(["bench", "sendrecv", "--sizes", "8,1MB", "--nodes", "2"])
    assert rc == 0 and "Traceback" not in err, err
    rows = [line.split() for line in out.splitlines() if line.strip() and not line.startswith("#")]
    assert [(r[0], r[1], r[-2], r[-1]) for r in rows] == [("8", "2", "NCCL", "P2P"), ("1000000", "250000", "NCCL", "P2P")]
    assert all(math.isfinite(float(r[5])) and float(r[5]) > 0 for r in rows)  # the times


def _refused(cli, tmp_path, monkeypatch, *args):
    """Run ``args`` in an empty directory with every writer asked for: (rc, the one error line), no file left."""
    monkeypatch.chdir(tmp_path)
    rc, out, err = cli(["run", *args, "--no-baseline", "--timeline", "t.json"])
    assert (rc, out, err.count("\n")) == (2, "", 1) and err.startswith("error: ") and "Traceback" not in err, err
    assert list(tmp_path.iterdir()) == []
    return err


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
def test_a_per_rank_batch_of_a_billion_is_refused_with_the_largest_that_fits(cli, tmp_path, monkeypatch, strategy):
    # megatron once ran it as one micro-batch (~300 h, memory not checked: resnet50-cifar has no transformer
    # shape); now every strategy judges the replica's activations (megatron's with ZeRO's sharded state) on the
    # V100 and names the largest per-rank batch whose peak fits its 17.18 GB
    err = _refused(cli, tmp_path, monkeypatch, "--strategy", strategy, "--batch", "1000000000")
    assert err.startswith("error: memory: resnet50-cifar at batch 1000000000 (fp32, sgd") and "but a V100 has" in err
    assert err.endswith("; --memory warn runs it anyway); batch: 1000000000 per rank does not fit, "
                        "valid range 1..437 per rank\n"), err


def test_the_largest_batch_named_fits_and_one_more_does_not(cli, tmp_path, monkeypatch):
    for strategy in ("allreduce", "megatron"):
        rc, out, err = cli(["run", "--strategy", strategy, "--batch", "437", "--no-baseline", "--fidelity", "analytic",
                            "--json"])
        assert rc == 0, err
        assert json.loads(out)["memory"]["fits"] is True
        err = _refused(cli, tmp_path, monkeypatch, "--strategy", strategy, "--batch", "438")
        assert err.endswith("(short by 14.74 MB; --memory warn runs it anyway); batch: 438 per rank does not fit, "
                            "valid range 1..437 per rank\n"), err


def test_megatron_layouts_name_the_key_that_sets_the_micro_batch(cli, tmp_path, monkeypatch):
    gpt = ("--strategy", "megatron", "--model", "gpt2-small", "--cluster", "dgx-a100-hdr", "--nodes", "2")
    err = _refused(cli, tmp_path, monkeypatch, *gpt, "--batch", "1000000000")
    assert err.endswith("; batch: 1000000000 per rank does not fit, valid range 1..148 per rank\n"), err
    # a micro-batch the user gave is its own key; ZeRO-3 shards the CNN replica's state over its 4 ranks
    err = _refused(cli, tmp_path, monkeypatch, *gpt, "--batch", "4096", "--opt", "microbatch=4096")
    assert err.endswith("; microbatch: 4096 does not fit, valid range 1..148\n"), err
    err = _refused(cli, tmp_path, monkeypatch, "--strategy", "megatron", "--opt", "zero=3", "--batch", "1000000000")
    # its weights, gradients and momentum a quarter each (94.08 -> 23.52 MB) plus the largest layer gathered:
    # ~200 MB more room, 6 more samples of ~36.8 MB than a full replica's 437
    assert "(fp32, sgd, ZeRO-3 over 4 ranks) needs" in err and "weights 23.52 MB, gradients 23.52 MB, optimizer " \
        "23.52 MB" in err and err.endswith("valid range 1..443 per rank\n"), err


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
