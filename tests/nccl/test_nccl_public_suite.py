"""The public nccl-tests suite (benchmarks/nccl): every run file is well formed, has a model, and the
accuracy section of docs/accuracy.md is exactly what `score.py` renders from them."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "benchmarks" / "nccl"
RUNS = sorted((SUITE / "runs").glob("*.toml"))


def _score():
    spec = importlib.util.spec_from_file_location("nccl_score", SUITE / "score.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_suite_holds_at_least_30_runs_with_a_model_each():
    models = tomllib.loads((SUITE / "models.toml").read_text(encoding="utf-8"))
    assert len(RUNS) >= 30
    for path in RUNS:
        run = tomllib.loads(path.read_text(encoding="utf-8"))
        assert run["id"] == path.stem and run["id"] in models, path.name
        # a URL where one is known; otherwise a description precise enough to find the document again
        assert len(run["source"]) > 20 and run["where"] and run["retrieved"], path.name


@pytest.mark.parametrize("path", RUNS, ids=[p.stem for p in RUNS])
def test_every_row_is_as_printed(path):
    # nccl-tests prints algbw = size / time (GB/s, time in us) rounded to 2 decimals: a mistyped digit shows
    d = tomllib.loads(path.read_text(encoding="utf-8"))["data"]
    assert len(d["size"]) == len(d["time_us"]) == len(d["algbw"]) > 0
    for size, t, algbw in zip(d["size"], d["time_us"], d["algbw"], strict=False):
        if t > 0 and size > 0:
            assert math.isclose(size / t / 1e3, algbw, rel_tol=0.02, abs_tol=0.011), (size, t, algbw)


def test_source_algorithm_notes_are_read_as_claims_only_when_they_say_what_ran():
    claims = _score().claims
    assert claims("CollNet chain (SHARP): NCCL_ALGO=COLLNETCHAIN") == ["CollNetChain"]
    assert claims("Simple protocol (aws-ofi-nccl sets NCCL_PROTO=simple)") == ["Simple"]
    assert claims("NVLS") == ["NVLS"] and claims("Ring/LL128") == ["Ring", "LL128"]
    assert claims("4 channels (Ring/Tree not forced)") == []
    assert claims("SHARP tree-group messages; algorithm per size not shown") == []
    assert claims("") == []


def test_unsettled_rows_are_the_ones_whose_source_disagrees_with_itself():
    score = _score()
    run = {"id": "x", "collective": "all_reduce", "source": "s", "data": {
        "size": [8, 1024, 1 << 20], "time_us": [10.0, 30.0, 100.0], "inplace_time_us": [10.5, 10.0, 149.0]}}
    model = {"cluster": "dgx-h100-ndr", "nodes": 1, "gpus_per_node": 8}
    rows = score.score_run(run, model)["rows"]
    assert [r["unsettled"] for r in rows] == [False, True, False]  # 3x and 1.49x


def test_count_zero_collectives_are_no_ops_but_count_zero_all_to_all_is_scored():
    # NCCL returns from a count-0 collective without launching anything: the source timed nccl-tests' own loop,
    # not a test of the model. Its grouped send/recv of zero bytes still runs, so all-to-all rows count.
    score = _score()
    model = {"cluster": "dgx-h100-ndr", "nodes": 1, "gpus_per_node": 8}
    for collective, counted in (("all_reduce", False), ("all_gather", False), ("alltoall", True)):
        run = {"id": "x", "collective": collective, "source": "s", "data": {
            "size": [0, 32], "count": [0, 1], "time_us": [0.3, 20.0]}}
        rows = score.score_run(run, model)["rows"]
        assert [r["counted"] for r in rows] == [counted, True], collective
        assert rows[0]["no_op"] is (not counted)
        assert (rows[0]["predicted_us"] > 5.0) is counted  # a launch and a handshake, or nothing at all
    summary = score.summary([{**score.score_run({"id": "x", "collective": "all_reduce", "source": "s", "data": {
        "size": [0, 32], "count": [0, 8], "time_us": [0.3, 20.0]}}, model), "class": ""}])
    assert summary["rows"] == 1 and summary["no_op"] == 1


def test_docs_accuracy_gpu_section_is_the_rendered_suite():
    score = _score()
    models = tomllib.loads((SUITE / "models.toml").read_text(encoding="utf-8"))
    results = [score.score_run(run, models[run["id"]])
               for run in (tomllib.loads(p.read_text(encoding="utf-8")) for p in RUNS)]
    text = score.render(results)
    doc = (ROOT / "docs" / "accuracy.md").read_text(encoding="utf-8")
    assert text in doc, "docs/accuracy.md is stale: python benchmarks/nccl/score.py --write docs/accuracy.md"


def test_every_run_missing_at_a_megabyte_says_why_and_no_other_does():
    # issue 25: every platform's residual at >= 1 MB explained. residuals.toml holds one entry (mechanism, status)
    # per counted run whose median |error| over its rows of at least 1 MB exceeds 15 %, and no stale entry: a run
    # that comes within 15 % loses its entry, a run that leaves gains one.
    score = _score()
    models = tomllib.loads((SUITE / "models.toml").read_text(encoding="utf-8"))
    results = [score.score_run(run, models[run["id"]])
               for run in (tomllib.loads(p.read_text(encoding="utf-8")) for p in RUNS)]
    why = tomllib.loads((SUITE / "residuals.toml").read_text(encoding="utf-8"))
    over = {r["id"] for r in score.needs_residual(results)}
    assert over == set(why), (f"residuals.toml lacks {sorted(over - set(why))}, has stale {sorted(set(why) - over)}")
    for rid, entry in why.items():
        assert set(entry) == {"mechanism", "status"} and all(v.strip() for v in entry.values()), rid
    # the rule can fail: a run within 15 % needs nothing, one over it does
    fake = {"id": "x", "anomalous": False, "calibration": False, "rows": [
        {"size": 2e6, "error": e, "counted": True} for e in (0.1, -0.2, 0.3)]}
    assert score.needs_residual([fake]) == [fake]
    fake["rows"][2]["error"] = 0.12
    assert score.needs_residual([fake]) == []


def test_the_calibration_run_is_held_out_of_every_score():
    from simcomm.nccl.execution import CALIBRATION_RUN, HELD_OUT_RUNS

    score = _score()
    models = tomllib.loads((SUITE / "models.toml").read_text(encoding="utf-8"))
    assert HELD_OUT_RUNS == (CALIBRATION_RUN,)
    results = []
    for p in RUNS:
        run = tomllib.loads(p.read_text(encoding="utf-8"))
        if run["id"] in HELD_OUT_RUNS or run["id"] == "spectrumx-h200-2x8-allreduce":
            results.append(score.score_run(run, models[run["id"]]))
    assert [r["calibration"] for r in results].count(True) == 1
    s = score.summary(results)
    assert s["runs"] == 1  # only the Spectrum-X run is counted


def test_the_derived_nvls_tree_fill_is_what_the_nebius_rows_ask_for():
    # Not a fit: F comes from the kernel's stages (execution.nvls_tree_fill_loops).  The F that would make each
    # NVLS-Tree row of the nebius 2 x 8 H100 run exact has median 1.91 (13 rows); the derivation gives 1.86.
    score = _score()
    models = tomllib.loads((SUITE / "models.toml").read_text(encoding="utf-8"))
    rid = "nebius-h100-2x8-ib-allreduce"
    run = tomllib.loads((SUITE / "runs" / f"{rid}.toml").read_text(encoding="utf-8"))
    med, fs = score.fit_fill(run, models[rid])
    assert len(fs) == 13
    assert score.derived_fill(models[rid]) == pytest.approx(1.859, abs=1e-3)
    assert abs(med - score.derived_fill(models[rid])) < 0.1


def test_the_target_set_leaves_out_only_the_named_classes():
    score = _score()
    models = tomllib.loads((SUITE / "models.toml").read_text(encoding="utf-8"))
    classes = {m["class"] for m in models.values()}
    assert set(score.OFF_TARGET) <= classes  # every excluded class exists, spelled as in models.toml
    picked = ("l40s-2x1-tcp-allreduce", "nebius-h100-2x8-ib-allreduce", "autodl-2080ti-2gpu-pcie-allgather")
    results = [score.score_run(tomllib.loads((SUITE / "runs" / f"{rid}.toml").read_text(encoding="utf-8")),
                               models[rid]) for rid in picked]
    assert score.summary(results)["runs"] == 3
    t = score.summary(results, target=True)
    assert t["runs"] == 1  # only nebius: TCP sockets and host-memory staging are outside the target
    assert t["rows"] == sum(x["counted"] for x in results[1]["rows"])
    text = score.render(results)
    assert all(why in text for why in score.OFF_TARGET.values())  # the reason is printed with the numbers


def test_fit_fill_needs_one_run(capsys):
    score = _score()
    assert score.main(["--fit-fill"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: --fit-fill needs --only")
    assert score.main(["--fit-fill", "--only", "no-such-run"]) == 2
    assert score.main(["--fit-fill", "--only", "oci-bm-gpu4-8-a100-1x8-allreduce"]) == 0  # no NVLS-Tree row
    assert capsys.readouterr().out.strip() == "oci-bm-gpu4-8-a100-1x8-allreduce: no NVLS-Tree row"


def test_by_algorithm_groups_counted_rows_by_band_and_what_ran():
    score = _score()

    def row(size, err, algo, unsettled=False):
        return {"size": size, "error": err, "algorithm": algo, "unsettled": unsettled, "no_op": False,
                "counted": not unsettled}

    def run(rid, cls, rows, anomalous=False):
        return {"id": rid, "class": cls, "anomalous": anomalous, "calibration": False, "rows": rows}

    cloud = next(iter(score.OFF_TARGET))
    results = [
        run("a", "NVSwitch with InfiniBand/RoCE", [row(1 << 20, -0.4, "NCCL Ring/LL128"),
                                                   row(2 << 20, -0.2, "NCCL Ring/LL128"),
                                                   row(4 << 20, 0.9, "NCCL Ring/LL128", unsettled=True),
                                                   row(8, 0.1, "NCCL Tree/LL")]),
        run("b", cloud, [row(16 << 20, -0.6, "NCCL Ring/LL128"), row(1 << 30, 0.05, "NCCL Ring/Simple")]),
        run("c", "NVSwitch with InfiniBand/RoCE", [row(1 << 20, -0.9, "NCCL Ring/LL128")], anomalous=True),
    ]
    g = score.by_algorithm(results)
    assert g[("1-16 MiB", "NCCL Ring/LL128")] == (3, 2, pytest.approx(0.4), pytest.approx(-0.4))
    assert g[("<= 64 KiB", "NCCL Tree/LL")] == (1, 1, pytest.approx(0.1), pytest.approx(0.1))
    assert g[(">= 128 MiB", "NCCL Ring/Simple")] == (1, 1, pytest.approx(0.05), pytest.approx(0.05))
    assert len(g) == 3  # the unsettled row and the anomalous run are not counted
    t = score.by_algorithm(results, target=True)
    assert t[("1-16 MiB", "NCCL Ring/LL128")] == (2, 1, pytest.approx(0.3), pytest.approx(-0.3))
    assert (">= 128 MiB", "NCCL Ring/Simple") not in t
    text = score.render_by_algorithm(results)
    assert "| all | 1-16 MiB | NCCL Ring/LL128 | 3 | 2 | 40 % | -40 % |" in text
    assert "| target | 1-16 MiB | NCCL Ring/LL128 | 2 | 1 | 30 % | -30 % |" in text


def test_by_algorithm_is_a_printout_not_a_section(capsys, tmp_path):
    score = _score()
    doc = tmp_path / "a.md"
    doc.write_text("x\n")
    assert score.main(["--by-algorithm", "--write", str(doc)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: --by-algorithm")
    assert doc.read_text() == "x\n"


@pytest.mark.parametrize("rid", ["nebius-h100-2x8-ib-allreduce", "autodl-2080ti-2gpu-pcie-alltoall",
                                 "v100-sxm2-1x8-hcm-allreduce"])
def test_bench_measured_on_a_suite_run_gives_the_suite_s_errors(rid):
    # the same run, printed as nccl-tests prints it and read back by `simcomm bench --measured`, is scored
    # exactly as benchmarks/nccl/score.py scores it (one model of a measurement, not two)
    from simcomm.bench import against_measured
    from simcomm.nccl.measured import parse_measured

    score = _score()
    models = tomllib.loads((SUITE / "models.toml").read_text(encoding="utf-8"))
    run = tomllib.loads((SUITE / "runs" / f"{rid}.toml").read_text(encoding="utf-8"))
    d = run["data"]
    inplace = d.get("inplace_time_us") or d["time_us"]
    text = "\n".join(f"{s} {c} {d['type']} {d.get('redop', 'sum')} -1 {t} 0 0 0 {i} 0 0 0"
                     for s, c, t, i in zip(d["size"], d["count"], d["time_us"], inplace, strict=False))
    topo, runtime = score.build(models[rid])
    got = against_measured(score.KIND[run["collective"]], topo, runtime, parse_measured(text),
                           gpus_per_thread=int(models[rid].get("gpus_per_thread", 1)))
    want = score.score_run(run, models[rid])["rows"]
    assert [c.measured_size for c in got] == [r["size"] for r in want]
    assert [c.error for c in got] == [r["error"] for r in want]
    assert [c.unsettled for c in got] == [r["unsettled"] for r in want]
