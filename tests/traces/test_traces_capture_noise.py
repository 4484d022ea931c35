"""Capture noise: per-iteration spread and CV in the trace (as ``compute_jitter``) and one warning line."""

from __future__ import annotations

import statistics

import pytest

from simcomm.traces.capture import CV_WARN, capture_warning
from simcomm.traces.schema import Layer, Trace


def _trace(**meta) -> Trace:
    return Trace(model="m", batch=1, dtype="fp32", device="cpu", device_kind="cpu", method="cpu-timer",
                 layers=(Layer("a", "Linear", 1, 4, 1e-3, 1e-3),), iteration_s=2e-3, iters=10, meta=meta)


def test_warning_thresholds():
    assert CV_WARN == 0.10
    assert capture_warning(_trace(iteration_cv=0.10, load_avg_1m=2.0, cpu_count=2)) is None  # at, not above
    assert capture_warning(_trace()) is None  # traces made before these fields existed
    cv = capture_warning(_trace(iteration_cv=0.234, load_avg_1m=0.5, cpu_count=2))
    assert "iteration times vary by CV 23.4% over 10 iterations (threshold 10%)" in cv and "load" not in cv
    load = capture_warning(_trace(iteration_cv=0.01, load_avg_1m=5.0, cpu_count=2))
    assert "the 1-minute load average 5.00 exceeded the 2 CPUs" in load and "CV" not in load
    both = capture_warning(_trace(iteration_cv=0.5, load_avg_1m=5.0, cpu_count=2))
    assert "CV 50.0%" in both and "load average 5.00" in both and "\n" not in both


torch = pytest.importorskip("torch")

FACT = "tests.traces.factories_traces"


pytestmark = pytest.mark.usefixtures("factories_importable")


def test_capture_records_spread_cv_and_load(tmp_path, capsys, monkeypatch):
    from simcomm.cli.app import main
    from simcomm.traces import capture
    from simcomm.traces.io import load_trace

    loads = iter([3.0, 7.5])  # before and after: the larger one is kept
    monkeypatch.setattr(capture, "_load_1m", lambda: next(loads))
    monkeypatch.setattr(capture.os, "cpu_count", lambda: 4)
    out = tmp_path / "t.json"
    argv = ["trace", "capture", "--module", f"{FACT}:tiny", "--input-shape", "3,8,8", "--batch", "2",
            "--iters", "5", "--warmup", "1", "--threads", "1", "--out", str(out)]
    assert main(argv) == 0
    cap = capsys.readouterr()
    t = load_trace(out)
    its = t.meta["iterations_s"]
    assert len(its) == 5
    assert t.meta["compute_jitter"] == t.meta["iteration_cv"] == statistics.stdev(its) / statistics.fmean(its)
    assert t.meta["iteration_spread_s"] == max(its) - min(its) and t.meta["iteration_min_s"] == min(its)
    q = statistics.quantiles(its, n=4)
    assert t.meta["iteration_cv_robust"] == pytest.approx((q[2] - q[0]) / 1.349 / statistics.median(its), rel=1e-12)
    assert t.meta["load_avg_1m"] == 7.5 and t.meta["cpu_count"] == 4
    # exactly one warning line (the load average; the CV may add its reason to the same line)
    lines = cap.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("warning: capture of tests.traces.factories_traces:tiny: ")
    assert "the 1-minute load average 7.50 exceeded the 4 CPUs" in lines[0]
    assert cap.out.startswith(f"wrote {out}")
