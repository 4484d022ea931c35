"""Module-level point functions for the sweep tests (they must pickle to other processes)."""

import os
import time
from pathlib import Path


def square(inputs):
    if inputs.get("fail") and inputs["x"] == inputs["fail"]:
        raise ValueError("boom")
    return {"y": inputs["x"] ** 2 + inputs.get("offset", 0)}


def slow_logged(inputs):
    """Log each evaluation to a file so a test can count re-runs."""
    log = Path(inputs["log"])
    with log.open("a") as fh:
        fh.write(f"{inputs['x']}\n")
    time.sleep(inputs.get("sleep", 0.0))
    return {"y": inputs["x"] * 10, "pid": 0 * os.getpid()}


def file_length(inputs):
    """A point that reads a file named by an input (as a trace would be)."""
    return {"n": len(Path(inputs["trace"]).read_bytes()), "x": inputs["x"]}


def sleepy(inputs):
    """Record this worker's pid, then sleep long enough to be interrupted."""
    Path(inputs["pids"], f"{os.getpid()}").write_text("")
    time.sleep(inputs["sleep"])
    return {"x": inputs["x"]}
