"""Validation machinery: roles, leak guard, hand-computed numbers, determinism and the golden document."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from simcomm.cli.app import main
from simcomm.errors import PlanError
from simcomm.validation import CASES, render_markdown, run_cases
from simcomm.validation.base import Baseline, Reported, Row, error_pct, verdict
from simcomm.validation import seed002, seed003, seed004

DOC = Path(__file__).resolve().parents[2] / "docs" / "validation.md"


@pytest.fixture(scope="module")
def results():
    return run_cases()


def test_error_and_verdict_thresholds():
    assert error_pct(1.15, 1.0) == pytest.approx(15.0)
    assert error_pct(0.5, 2.0) == pytest.approx(-75.0)
    assert verdict(Row("a", 1.0, 1.15, "s", "prediction")) == "match"
    assert verdict(Row("a", 1.0, 1.29, "s", "prediction")) == "near miss"
    assert verdict(Row("a", 1.0, 0.5, "s", "prediction")) == "miss"
    assert verdict(Row("a", 1.0, 9.0, "s", "calibration")) == "calibrated"
    with pytest.raises(PlanError):
        Row("a", 1.0, 1.0, "s", "guess")


def test_baseline_refuses_rows_outside_the_calibration_set():
    rep = {"base": Reported("base", 2.0, "s", "T1"), "pred": Reported("pred", 3.0, "s", "T1")}
    b = Baseline(rep, {"base"})
    assert b["base"] == 2.0
    with pytest.raises(PlanError, match="pred"):
        b["pred"]
    assert b.used == {"base"}


def test_calibration_only_reads_baseline_rows(monkeypatch):
    """Spy on Baseline: every case reads only the rows it marks as calibration."""
    seen = []
    orig = Baseline.__getitem__

    def spy(self, key):
        seen.append(key)
        return orig(self, key)

    monkeypatch.setattr(Baseline, "__getitem__", spy)
    assert seed004.REPORTED and seed002.REPORTED
    res = seed002.run()
    assert sorted(seen) == ["resnet20.gtopk", "vgg16.gtopk"]
    cal = {r.label for r in res.rows if r.role == "calibration"}
    assert cal == {"resnet20 gtopk: throughput", "vgg16 gtopk: throughput"}


def test_every_case_has_predictions_and_calibrated_rows_fit(results):
    assert [r.name for r in results] == list(CASES.names())
    for res in results:
        assert res.predictions(), res.name
        assert len([c for c in res.calibrated]) <= 4  # at most two unknowns per baseline (two networks in 004)
        for row in res.rows:
            if row.role == "calibration" and "total" not in row.label:
                assert abs(row.error_pct) < 1.0, row.label


def test_seed004_hand_numbers(results):
    res = next(r for r in results if r.name == "seed004-table1")
    rows = {r.label: r for r in res.rows}
    # 1 Gb/s line-rate PS: 2 x 4 workers x 102.228 MB over 0.125 GB/s, serialized push then pull
    assert "6.5" in res.calibrated[1]
    assert 2 * 4 * 102_228_128 / 0.125e9 == pytest.approx(6.543, abs=1e-3)
    # dropping rows use the paper's stated overheads: PS compute 0.073 x 1.15
    assert rows["1 Gb/s, drop: PS compute"].predicted == pytest.approx(0.073 * 1.15, rel=1e-6)


def test_seed003_eq11_volume_ratio():
    # N N' / (N'K/P + N K) with N'=25088, N=4096, K=256, P=256: 102760448 / (25088 + 1048576)
    assert seed003.fc1_ratio(256) == pytest.approx(102_760_448 / 1_073_664)
    assert all(seed003.fc1_ratio(p) > 1 for p in (2, 16, 256))


def test_markdown_is_deterministic_and_matches_committed_doc(results):
    text = render_markdown(results)
    assert text == render_markdown(run_cases())
    if os.environ.get("SIMCOMM_UPDATE_GOLDEN") == "1":
        DOC.write_text(text, encoding="utf-8")
    assert DOC.read_text(encoding="utf-8") == text


def test_cli_unknown_case_is_one_line_exit_2(capsys):
    assert main(["validate", "--case", "nope"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "seed004-table1" in err[0]


def test_cli_json_one_case(capsys):
    import json

    assert main(["validate", "--case", "seed002-table2", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data[0]["name"] == "seed002-table2"
    assert {r["role"] for r in data[0]["rows"]} == {"calibration", "prediction"}


def test_cli_write_leaves_only_the_file(tmp_path, capsys):
    out = tmp_path / "v.md"
    assert main(["validate", "--case", "seed002-table2", "--write", str(out)]) == 0
    assert out.read_text(encoding="utf-8").startswith("# Validation against the seed papers")
    assert [p.name for p in tmp_path.iterdir()] == ["v.md"]
    assert main(["validate", "--write", str(tmp_path / "missing" / "v.md")]) == 2


def test_seed000_calibration_reads_only_its_two_baseline_rows(monkeypatch):
    from simcomm.validation import seed000

    seen = []
    orig = Baseline.__getitem__
    monkeypatch.setattr(Baseline, "__getitem__", lambda self, key: seen.append(key) or orig(self, key))
    res = seed000.run()
    assert sorted(seen) == [seed000.CAL3, seed000.CAL7]
    cal = [r for r in res.rows if r.role == "calibration"]
    assert [r.label for r in cal] == ["Table III resnet18, 8 nodes: speedup", "Table VII resnet18, R=16 M=4: speedup"]
    assert all(abs(r.error_pct) < 1.0 for r in cal)  # blocking loading is additive, so the solve is exact


def test_seed000_dataload_solve_is_the_closed_form(monkeypatch):
    from simcomm.validation import seed000

    # T_a = 75 ms, T_n = 62 ms at d = 0; a 5 % gain needs (0.075 + d) = 1.05 (0.062 + d) -> d = 0.1988 s
    times = {"allreduce": 0.075, "node-based": 0.062}
    monkeypatch.setattr(seed000, "iteration", lambda table, trace, strategy, nodes, d: times[strategy] + d)
    d = seed000.solve_dataload("t3", None, 8, 5.0)
    assert d == pytest.approx((0.075 - 1.05 * 0.062) / 0.05)
    assert seed000.gain_pct("t3", None, 8, d) == pytest.approx(5.0)
    assert seed000.solve_dataload("t3", None, 8, 50.0) == 0.0  # gain above the no-loading gain: clamped


def test_seed001_efficiency_composition_for_accumulation(monkeypatch):
    from types import SimpleNamespace

    from simcomm.validation import seed001

    # every gossip run: 41 local steps of 1.0 s and one exchange step; mean 1.1 s
    def fake(trace, strategy, nodes, options):
        if strategy == "allreduce":
            return SimpleNamespace(mean_s=1.0 if nodes == 1 else 1.5)
        kinds = (SimpleNamespace(weight=41.0, time_s=1.0), SimpleNamespace(weight=1.0, time_s=5.2))
        return SimpleNamespace(mean_s=1.1, kinds=kinds)

    monkeypatch.setattr(seed001, "_run", fake)
    e = seed001.efficiencies(None, 42, nodes=8)
    # allreduce with accumulation: (41 x 1.0 + 1.5) / 42 against (41 x 1.0 + 1.0) / 42
    assert e["allreduce"] == pytest.approx(42.0 / 42.5)
    assert e["sgp"] == pytest.approx(1.0 / 1.1)
    e1 = seed001.efficiencies(None, 1, nodes=8)
    assert e1["allreduce"] == pytest.approx(1.0 / 1.5)


def test_seed001_has_no_calibration_and_reports_the_crossover_finding(results):
    res = next(r for r in results if r.name == "seed001-time-efficiency")
    assert res.calibrated == () and all(r.role == "prediction" for r in res.rows)
    assert any("overlap=compute" in f and "future work" in f for f in res.findings)
    rows = {r.label: r for r in res.rows}
    # SGP hides its exchange behind forward+backward, so at interval 1 it beats AllReduce
    assert rows["interval 1: SGP - AllReduce efficiency"].predicted > 0


def test_render_units_for_trend_rows():
    from simcomm.validation.render import _num

    assert _num(1.0, "bool") == "yes" and _num(0.0, "bool") == "no"
    assert _num(15.0, "count") == "15" and _num(12.345, "pp") == "12.3 pp"
