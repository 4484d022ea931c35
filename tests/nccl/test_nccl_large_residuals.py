"""benchmarks/nccl/large.py: the public suite's rows >= 1 MB by what ran and size, and run by run, pinned by hand."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

SUITE = Path(__file__).resolve().parents[2] / "benchmarks" / "nccl"
MiB = 1 << 20


def _large():
    sys.path.insert(0, str(SUITE))  # large.py imports small.py (and through it score.py) beside it
    spec = importlib.util.spec_from_file_location("nccl_large", SUITE / "large.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _row(size, err, algo, counted=True):
    return {"size": size, "error": err, "algorithm": algo, "counted": counted}


def _run(rid, rows, anomalous=False, calibration=False):
    return {"id": rid, "class": "c", "anomalous": anomalous, "calibration": calibration, "rows": rows}


RESULTS = [
    # a: right at 128 MiB and up, too fast at 1-16 MiB (LL128), one row too slow at 32 MiB
    _run("a", [_row(64 << 10, -0.9, "NCCL Ring/LL"),  # below 1 MB: not in the band
               _row(1 * MiB, -0.40, "NCCL Ring/LL128"), _row(2 * MiB, -0.30, "NCCL Ring/LL128"),
               _row(32 * MiB, 0.20, "NCCL Ring/Simple"), _row(128 * MiB, -0.05, "NCCL Ring/Simple"),
               _row(256 * MiB, 0.10, "NCCL Ring/Simple"), _row(512 * MiB, 0.9, "NCCL Ring/Simple", counted=False)]),
    # b: its rate misses (>= 128 MiB at -50 %): no mid-size mechanism brings its rows in
    _run("b", [_row(4 * MiB, -0.60, "NCCL Ring/Simple"), _row(1 << 30, -0.50, "NCCL Ring/Simple")]),
    _run("x", [_row(4 * MiB, 0.9, "NCCL Ring/Simple")], anomalous=True),
    _run("y", [_row(4 * MiB, 0.9, "NCCL Ring/Simple")], calibration=True),
]


def test_rows_of_at_least_1_mb_grouped_by_what_ran_and_size():
    large = _large()
    g = {(x["algorithm"], x["sizes"]): (x["rows"], x["fast"], x["slow"], x["median"])
         for x in large.by_algorithm(RESULTS)}
    assert g == {
        ("NCCL Ring/LL128", "1-16 MiB"): (2, 2, 0, pytest.approx(-0.35)),
        ("NCCL Ring/Simple", "1-16 MiB"): (1, 1, 0, pytest.approx(-0.60)),
        ("NCCL Ring/Simple", "32-64 MiB"): (1, 0, 1, pytest.approx(0.20)),
        ("NCCL Ring/Simple", ">= 128 MiB"): (3, 1, 0, pytest.approx(-0.05)),  # -0.05, +0.10, -0.50
    }
    # most rows outside 15 % first: LL128 (2), then the 1-row groups by size group
    assert [x["algorithm"] for x in large.by_algorithm(RESULTS)][:1] == ["NCCL Ring/LL128"]


def test_runs_and_the_most_a_mid_size_mechanism_could_bring_in():
    large = _large()
    runs = {g["id"]: g for g in large.by_run(RESULTS)}
    assert set(runs) == {"a", "b"}
    a, b = runs["a"], runs["b"]
    assert (a["rows"], a["outside"]) == (5, 3)
    assert a["mid"] == pytest.approx(-0.30) and a["big"] == pytest.approx(0.025)  # medians of (-.4, -.3, .2), (-.05, .1)
    assert a["ran"] == ["NCCL Ring/LL128", "NCCL Ring/Simple"]
    assert (b["rows"], b["outside"], b["big"]) == (2, 2, pytest.approx(-0.50))
    # 7 counted rows >= 1 MB, 2 within 15 %; a median of at most 15 % needs 4
    assert large.needed(RESULTS) == (7, 2, 4)
    # only run a's rows >= 128 MiB are right: its 3 rows outside (2 too fast, 1 too slow) are all a mid-size
    # mechanism could bring in; run b's miss at every size
    assert large.mid_size_only(RESULTS) == (2, 1)
    text = large.render(RESULTS)
    assert "needs 4 (2 more)" in text and "3 (2 too fast, 1 too slow)" in text
    assert "| a | c | 5 | 3 | -30 % | +2 % | Ring/LL128, Ring/Simple |" in text
