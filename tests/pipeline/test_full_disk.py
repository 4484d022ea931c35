"""Every writer on a full disk: one ``error:`` line, exit status 2, no file or directory left behind.

The disk is a 16 KiB tmpfs filled to the last byte (needs root to mount; skipped otherwise).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess

import pytest


@pytest.fixture
def full_disk(tmp_path):
    mnt = tmp_path / "full"
    mnt.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", str(mnt)],
                                           capture_output=True).returncode:
        pytest.skip("needs root to mount a small tmpfs")
    try:
        fd = os.open(mnt / "fill", os.O_WRONLY | os.O_CREAT)
        try:  # unbuffered writes until the last block is taken
            while os.write(fd, bytes(4096)):
                pass
        except OSError:
            pass
        finally:
            os.close(fd)
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


@pytest.mark.parametrize("argv", [
    ["topology", "show", "dgx-h100-ndr", "--nodes", "2", "--png", "{d}/t.png"],
    ["compare", "--strategies", "allreduce,sgp", "--nodes", "2", "--fidelity", "analytic", "--png", "{d}/c.png"],
    ["whatif", "--vary", "nodes=2", "--strategies", "allreduce", "--fidelity", "analytic", "--sequential",
     "--out", "{d}/w"],
    ["run", "--strategy", "allreduce", "--nodes", "2", "--fidelity", "analytic", "--timeline", "{d}/t.json"],
    ["bench", "all_reduce", "--sizes", "1MB,2MB", "--png", "{d}/b.png"],
    ["plan", "--model", "gpt2-small", "--cluster", "dgx-a100-hdr", "--nodes", "1", "--global-batch", "16",
     "--simulate", "1", "--png", "{d}/p.png"],
    ["trace", "synth", "--model", "resnet50", "--device", "v100", "--out", "{d}/r.json"],
    ["trace", "show", "resnet50-v100-roofline", "--png", "{d}/s.png"],
    ["trace", "import", "{p}", "--allow-zero-params", "--out", "{d}/i.json"],
    pytest.param(["trace", "capture", "--module", "tests.traces.factories_traces:tiny", "--input-shape", "3,8,8",
                  "--batch", "2", "--iters", "1", "--warmup", "0", "--threads", "1", "--out", "{d}/c.json"],
                 marks=pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="captures with torch")),
    ["validate", "--write", "{d}/v.md"],
    ["calibrate", "--nccl-tests", "tests/data/nccl_tests/all_reduce_2x8_p4d_efa.txt", "--cluster", "aws-p4d",
     "--nodes", "2", "--out", "{d}/l.toml"],
    # measuring mode: refused before the ranks are spawned (a full disk is seen up front, not after minutes)
    pytest.param(["calibrate", "--ranks", "2", "--sizes", "1KB,4KB,16KB", "--coll-sizes", "1KB", "--repeats", "1",
                  "--rounds", "1", "--out", "{d}/m.toml"],
                 marks=pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="measures with torch")),
])
def test_a_full_disk_is_one_error_line_and_leaves_nothing(cli, full_disk, argv, tmp_path):
    profile = tmp_path / "prof.json"  # a Kineto profile for trace import: one step, one module's forward/backward
    profile.write_text(json.dumps({"traceEvents": [
        {"ph": "X", "name": "ProfilerStep#0", "cat": "user_annotation", "ts": 0, "dur": 500, "tid": 1},
        {"ph": "X", "name": "nn.Module: Linear_0", "cat": "python_function", "ts": 1, "dur": 100, "tid": 1,
         "args": {"Python id": 100}},
        {"ph": "X", "name": "aten::addmm", "cat": "cpu_op", "ts": 1, "dur": 100, "tid": 1, "args": {"Sequence number": 0}},
        {"ph": "X", "name": "autograd::engine::evaluate_function: AddmmBackward0", "cat": "cpu_op", "ts": 101,
         "dur": 10, "tid": 2, "args": {"Sequence number": 0}}]}))
    rc, _, err = cli([a.format(d=full_disk, p=profile) for a in argv])
    assert rc == 2 and len(err.splitlines()) == 1 and err.startswith("error: "), err
    assert "No space left on device" in err, err
    assert sorted(p.name for p in full_disk.iterdir()) == ["fill"]
