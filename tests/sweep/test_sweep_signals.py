"""SIGTERM / SIGINT on a sweep running in worker processes leave no process behind."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

HERE = Path(__file__).parent

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc to find child processes")


def _children(pid: int) -> set[int]:
    out = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid:
            out.add(int(stat.parent.name))
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")  # a zombie has exited; only its exit status is left


def _wait_for(cond, deadline_s: float, what: str) -> None:
    """Poll ``cond`` until it holds; the generous deadline only bounds a failure, it is not a guess."""
    end = time.monotonic() + deadline_s
    while not cond():
        assert time.monotonic() < end, what
        time.sleep(0.05)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_signal_stops_the_pool_and_leaves_no_worker(tmp_path, signum):
    pids = tmp_path / "pids"
    pids.mkdir()
    script = f"""
import sys; sys.path.insert(0, {str(HERE)!r})
import sweep_points
from simcomm.sweep import ResultStore, parse_vary, run_sweep
run_sweep(sweep_points.sleepy, parse_vary(["x=1..4"]), ResultStore({str(tmp_path / "out")!r}),
          base={{"pids": {str(pids)!r}, "sleep": 600}}, executor="processes", workers=2)
"""
    proc = subprocess.Popen([sys.executable, "-c", script], start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    try:
        # Both workers are inside a point (each has written its pid) before the signal is sent.
        _wait_for(lambda: len(list(pids.iterdir())) >= 2 or proc.poll() is not None, 120, "workers never started")
        assert proc.poll() is None, proc.stderr.read().decode()
        workers = {int(p.name) for p in pids.iterdir()}
        children = _children(proc.pid)
        assert workers <= children
        proc.send_signal(signum)
        proc.wait(timeout=60)
        _wait_for(lambda: not any(_alive(p) for p in children), 60,
                  f"still running after the sweep stopped: {[p for p in children if _alive(p)]}")
        err = proc.stderr.read().decode()
        # SIGTERM arrives as SweepInterrupted (a KeyboardInterrupt), so the CLI reports it like Ctrl-C.
        assert proc.returncode != 0 and ("SweepInterrupted" if signum == signal.SIGTERM else "KeyboardInterrupt") in err
        assert not (tmp_path / "out" / "points.jsonl").exists()  # no point finished, none stored
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        for p in pids.iterdir():
            if _alive(int(p.name)):
                os.kill(int(p.name), signal.SIGKILL)
