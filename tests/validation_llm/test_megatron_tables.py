"""benchmarks/megatron: the published Megatron-LM tables, the SC'21 FLOP formula, and the scoring script."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HERE = ROOT / "benchmarks" / "megatron"


def _load():
    spec = importlib.util.spec_from_file_location("megatron_score", HERE / "score.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up while the class is built
    spec.loader.exec_module(mod)
    return mod


score = _load()

TINY = """
[calibration]
row = "korthikanti/tiny-full"
range = [0.05, 1.0]

[sources.narayanan]
paper = "tiny paper A"
url = "https://example.org/a"
table = "Table A"
metric = "TFLOP/s"

[sources.korthikanti]
paper = "tiny paper B"
url = "https://example.org/b"
table = "Table B"
metric = "s"

[[narayanan]]
id = "tiny"
heads = 8
hidden = 256
layers = 4
tp = 2
pp = 2
gpus = 16
global_batch = 16
microbatch = 2
virtual = 1
ddp = "local"
published = 30

[[korthikanti]]
id = "tiny-full"
mode = "full"
heads = 8
hidden = 256
layers = 4
tp = 8
pp = 1
gpus = 8
global_batch = 2
microbatch = 2
virtual = 1
published = 0.005
"""


# -- the data ---------------------------------------------------------------------------------------------
def test_tables_parse_every_published_row():
    rows, meta = score.load_tables()
    nar = [r for r in rows if r.table == "narayanan"]
    kor = [r for r in rows if r.table == "korthikanti"]
    assert [r.id for r in nar] == ["1.7B", "3.6B", "7.5B", "18.4B", "39.1B", "76.1B", "145.6B", "310.1B",
                                   "529.6B", "1008B"]
    assert [r.published for r in nar] == [137, 138, 142, 135, 138, 140, 148, 155, 163, 163]
    assert [r.gpus for r in nar] == [32, 64, 128, 256, 512, 1024, 1536, 1920, 2520, 3072]
    assert [r.published for r in kor] == [1.42, 1.10, 18.13, 13.75, 49.05, 37.83, 94.42, 71.49]
    assert [r.mode for r in kor] == ["full", "present"] * 4
    first = nar[0]
    assert (first.heads, first.hidden, first.layers, first.tp, first.pp, first.global_batch, first.microbatch,
            first.ddp) == (24, 2304, 24, 1, 1, 512, 16, "torch")
    assert (first.dp, first.microbatches) == (32, 1)
    # run_table_1.sh: 145.6B has 10 layers per stage in virtual stages of 5 -> 2 chunks, 48 micro-batches
    big = nar[6]
    assert (big.virtual, big.dp, big.microbatches, big.options()["schedule"]) == (2, 24, 48, "interleaved")
    assert meta["calibration"]["row"] == "korthikanti/22B-full"
    smith = [r for r in rows if r.table == "smith"]  # MT-NLG section 2.4
    assert [(r.gpus, r.dp, r.microbatches, r.published) for r in smith] == [
        (2240, 8, 240, 60.1), (2800, 10, 192, 50.2), (3360, 12, 160, 44.4)]
    assert all((r.tp, r.pp, r.virtual, r.unit, r.kind) == (8, 35, 1, "s", "TP+PP (1F1B)") for r in smith)
    for r in rows:
        assert r.dp * r.microbatch * r.microbatches == r.global_batch
        assert r.tp * r.pp * r.dp == r.gpus


def test_present_mode_is_sequence_parallel_with_selective_recompute():
    rows, _ = score.load_tables()
    by = {r.key: r for r in rows}
    full, present = by["korthikanti/175B-full"].options(), by["korthikanti/175B-present"].options()
    assert (full["recompute"], full["sequence_parallel"]) == ("full", False)
    assert (present["recompute"], present["sequence_parallel"]) == ("selective", True)
    assert full["virtual"] == present["virtual"] == 3
    assert by["narayanan/1.7B"].options()["overlap_grad_reduce"] is True  # PyTorch DDP
    assert by["narayanan/39.1B"].options()["overlap_grad_reduce"] is False  # Megatron local DDP


@pytest.mark.parametrize("old,new,needle", [("tp = 8\npp = 1\ngpus = 8", "tp = 0\npp = 1\ngpus = 8",
                                                 "tp must be a positive integer, got 0"),
                                                ("published = 0.005", "published = -1",
                                                 "published must be a positive number"),
                                                ('mode = "full"', 'mode = "fast"', "valid choices: full, present")])
def test_bad_table_is_one_error_line_exit_2(tmp_path, capsys, old, new, needle):
    assert TINY.count(old) == 1
    p = tmp_path / "t.toml"
    p.write_text(TINY.replace(old, new))
    assert score.main(["--tables", str(p)], results_dir=tmp_path) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: korthikanti[0] (tiny-full)") and needle in err[0]


def test_unreachable_calibration_is_one_error_line(tmp_path, capsys):
    p = tmp_path / "t.toml"
    p.write_text(TINY.replace("published = 0.005", "published = 0.0001"))
    assert score.main(["--tables", str(p), "--rows", "tiny-full"], results_dir=tmp_path) == 2
    err = [x for x in capsys.readouterr().err.strip().splitlines() if x.startswith("error:")]
    assert len(err) == 1 and "outside the simulated" in err[0] and "compute_eff in [0.05, 1.0]" in err[0]


def test_unknown_row_lists_the_choices(capsys):
    assert score.main(["--rows", "2B"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "'2B' is not a row" in err[0] and "1.7B" in err[0] and "1T-present" in err[0]


# -- the paper's FLOP formula -------------------------------------------------------------------------------
def test_sc21_flops_by_hand_for_the_1_7b_row():
    # 96 B s l h^2 = 96 * 512 * 2048 * 24 * 2304^2 = 12 824 703 626 379 264;
    # 1 + s/(6h) + V/(16 l h) = 1 + 2048/13824 + 51200/884736 = 1 + 4/27 + 25/432 = 521/432
    assert 96 * 512 * 2048 * 24 * 2304**2 == 12_824_703_626_379_264
    want = 12_824_703_626_379_264 * 521 / 432
    assert want == 15_466_830_067_924_992
    assert score.sc21_flops(512, 24, 2304) == pytest.approx(want, rel=1e-15)
    rows, _ = score.load_tables()
    r = rows[0]
    # at the paper's 137 TFLOP/s on 32 GPUs one iteration takes 15.4668e15 / (137e12 * 32) = 3.52802 s
    t = want / (137e12 * 32)
    assert t == pytest.approx(3.528018, rel=1e-6)
    assert score.tflops_per_gpu(r, t) == pytest.approx(137.0, rel=1e-12)


def test_trace_counts_the_full_attention_core():
    row = score.Row("korthikanti", "t", 8, 256, 4, 8, 1, 8, 2, 2, 1, 1.0)
    tr = score.build_trace(row, 0.5)
    attn = next(x for x in tr.layers if x.name == "block0.attn")
    s, h = 2048, 256
    # QKV + output projection (8 s h^2) plus the whole s x s core (4 s^2 h), per sample, times micro-batch 2
    assert attn.flops == pytest.approx(2 * (8 * s * h * h + 4 * s * s * h), rel=1e-12)
    assert tr.batch == 2 and tr.meta["compute_eff"] == 0.5 and tr.meta["transformer"]["vocab"] == 51200
    with pytest.raises(score.TableError, match="compute_eff"):
        score.build_trace(row, 1.5)


# -- the doc section ------------------------------------------------------------------------------------------
def test_write_section_replaces_only_between_markers(tmp_path):
    p = tmp_path / "doc.md"
    p.write_text("# head\n\ntext\n")
    score.write_section(p, f"{score.BEGIN}\nA\n{score.END}\n")
    assert p.read_text() == f"# head\n\ntext\n\n{score.BEGIN}\nA\n{score.END}\n"
    p.write_text(p.read_text() + "\n## after\n")
    score.write_section(p, f"{score.BEGIN}\nB\n{score.END}\n")
    assert p.read_text() == f"# head\n\ntext\n\n{score.BEGIN}\nB\n{score.END}\n\n## after\n"
    p.write_text(f"x\n{score.BEGIN}\nonly one marker\n")
    with pytest.raises(score.TableError, match="only one of the section markers"):
        score.write_section(p, "y")


def test_score_counts_predictions_only():
    rows = [score.Row("korthikanti", "a", 8, 256, 4, 8, 1, 8, 2, 2, 1, 1.0),
            score.Row("korthikanti", "b", 8, 256, 4, 8, 1, 8, 2, 2, 1, 2.0),
            score.Row("korthikanti", "c", 8, 256, 4, 8, 1, 8, 2, 2, 1, 4.0),
            score.Row("korthikanti", "d", 8, 256, 4, 8, 1, 8, 2, 2, 1, 4.0)]
    res = {"korthikanti/a": {"predicted": 3.0},  # calibration: +200 %, not counted
           "korthikanti/b": {"predicted": 2.1},  # +5 %
           "korthikanti/c": {"predicted": 3.0}}  # -25 %; d not run
    s = score.score(rows, res, "korthikanti/a")
    assert [x["role"] for x in s["rows"]] == ["calibration", "prediction", "prediction", "prediction"]
    assert s["n"] == 2 and s["median"] == pytest.approx(15.0) and s["within"] == 1
    assert s["missing"] == ["korthikanti/d"]


def test_smoke_calibrate_run_write_is_deterministic(tmp_path):
    """The whole script on a tiny table: calibration on its row, one prediction, the section written twice."""
    tables = tmp_path / "t.toml"
    tables.write_text(TINY)
    doc = tmp_path / "doc.md"
    doc.write_text("# Validation\n\nkept\n")
    argv = ["--tables", str(tables), "--rows", "all", "--write", str(doc)]
    assert score.main(argv, results_dir=tmp_path / "res") == 0
    cal = json.loads((tmp_path / "res" / "gemm-korthikanti-tiny-full.json").read_text())
    assert cal["iteration_s"] == pytest.approx(0.005, rel=1e-4)  # the fit reproduces its own row
    assert 0.05 < cal["compute_eff"] < 1.0
    first = doc.read_text()
    assert first.startswith("# Validation\n\nkept\n\n" + score.BEGIN)
    assert "| tiny | 16 | 2 x 2 x 4 | 2 x 2 | 1F1B | 30 |" in first
    assert "| calibration |" in first and "| prediction |" in first
    assert "Median |error| over the 1 predictions run" in first
    assert score.main(["--tables", str(tables), "--write", str(doc)], results_dir=tmp_path / "res") == 0
    assert doc.read_text() == first  # from the cache, byte-identical


def test_committed_results_match_the_tables():
    """Every cached result belongs to a row of tables.toml with the same setup and one common scalar."""
    rows, meta = score.load_tables()
    by = {r.key: r for r in rows}
    effs: dict = {}
    external = {p for pattern in score.EXTERNAL for p in (HERE / "results").glob(pattern)}
    for path in sorted(set((HERE / "results").glob("*.json")) - external):
        d = json.loads(path.read_text())
        r = by[d["row"]]
        assert d["setup"] == r.setup_hash() and d["published"] == r.published
        effs.setdefault(d.get("roofline", "max"), set()).add(d["compute_eff"])
        if r.table == "narayanan":
            assert d["predicted"] == pytest.approx(score.tflops_per_gpu(r, d["iteration_s"]), rel=1e-12)
        if d["row"] == meta["calibration"]["row"]:
            assert d["iteration_s"] == pytest.approx(r.published, rel=1e-3)
    assert set(effs) <= set(score.ROOFLINES) and all(len(v) == 1 for v in effs.values())


def test_committed_section_is_the_cache_rendered():
    """benchmarks/megatron/validation-section.md is exactly what --write renders from the committed cache."""
    rows, meta = score.load_tables()
    section, _ = score.section_from_cache(rows, meta)
    doc = (HERE / "validation-section.md").read_text(encoding="utf-8")
    assert doc == section


# -- every source together ------------------------------------------------------------------------------------
def test_layout_kind_names():
    assert score.layout_kind(1, 1) == "DP only"
    assert score.layout_kind(8, 1) == "TP"
    assert score.layout_kind(8, 8, 3, True) == "TP+PP interleaved + SP/selective"
    assert score.layout_kind(8, 64) == "TP+PP (1F1B)"
    assert score.layout_kind(1, 1, zero=3) == "ZeRO-3, no model parallelism"
    assert score.layout_kind(1, 4, 8, ep=8) == "MoE/EP + PP interleaved"


def test_committed_external_rows_are_predictions_with_their_tags():
    """zero3.py's and readme_moe.py's cached rows: six SC'21 Table 2 ZeRO-3 rows and the README's Mixtral row."""
    ext = score.load_external()
    assert [d["row"] for d in ext] == ["megatron-readme/mixtral-8x7b", "zero3/175B-384", "zero3/175B-768",
                                       "zero3/175B-1536", "zero3/530B-640", "zero3/530B-1120", "zero3/530B-2240"]
    assert {d["role"] for d in ext} == {"prediction"}
    assert [d["generation"] for d in ext] == ["H100"] + ["A100"] * 6
    # SC'21 Table 2 by eq. (3): 144 TFLOP/s on 384 GPUs at batch 1536 is 81.6 s; 138 on 640 at 2560 is 255.5 s
    assert ext[1]["published_s"] == pytest.approx(score.sc21_flops(1536, 96, 12288) / (144e12 * 384), rel=1e-4)
    assert ext[4]["published_s"] == pytest.approx(score.sc21_flops(2560, 105, 20480) / (138e12 * 640), rel=1e-4)
    assert all(d["compute_eff"] == 0.783998 for d in ext[1:])  # the tallied GEMM model's calibration


def test_summary_medians_by_group_count_predictions_only(tmp_path):
    rows = [score.Row("korthikanti", "a", 8, 256, 4, 8, 1, 8, 2, 2, 1, 1.0),
            score.Row("smith", "b", 8, 256, 4, 8, 2, 16, 4, 1, 1, 2.0)]
    res = {"korthikanti/a": {"predicted": 3.0}, "smith/b": {"predicted": 2.5}}  # calibration +200 %, +25 %
    ext = [{"row": "zero3/x", "source": "narayanan", "generation": "A100", "kind": "ZeRO-3, no model parallelism",
            "role": "prediction", "published_s": 10.0, "iteration_s": 8.0},  # TFLOP/s 10/8 - 1 = +25 %
           {"row": "readme/y", "source": "megatron-readme", "generation": "H100", "kind": "MoE/EP",
            "role": "not-a-test", "published_s": 1.0, "iteration_s": 4.0}]
    entries = score.summary_entries(rows, res, "korthikanti/a", ext)
    assert [(e["key"], e["role"], round(e["error"], 6)) for e in entries] == [
        ("korthikanti/a", "calibration", 200.0), ("smith/b", "prediction", 25.0),
        ("zero3/x", "prediction", 25.0), ("readme/y", "not-a-test", -75.0)]
    text = "\n".join(score.accuracy_section(entries))
    assert "| **all sources** | 2 | 25.0 % | 0 |" in text
    assert "| source: Smith et al. 2022 (MT-NLG) | 1 | 25.0 % | 0 |" in text
    assert "| GPU: A100 | 2 | 25.0 % | 0 |" in text and "GPU: H100" not in text  # not-a-test is not counted
    misses = "\n".join(score._misses(rows, res, ext))
    assert "`smith/b` +25.0 %" in misses and "`zero3/x` +25.0 %" in misses and "readme/y" not in misses
    (tmp_path / "zero3-bad.json").write_text(json.dumps({**ext[0], "role": "guess"}))
    with pytest.raises(score.TableError, match="role must be one of prediction, calibration, not-a-test"):
        score.load_external(tmp_path)


def test_megatron_moe_flop_count_by_hand():
    spec = importlib.util.spec_from_file_location("megatron_readme_moe", HERE / "readme_moe.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    # Mixtral 8x7B, batch 256, seq 4096: 12 B s l h^2 (2.25 + 3.5 * 2 * 1.5 + 32000 / (2 * 32 * 4096))
    want = 12 * 256 * 4096 * 32 * 4096**2 * (2.25 + 10.5 + 32000 / 262144)
    assert mod.megatron_flops(256, **mod.SHAPE) == pytest.approx(want, rel=1e-12)
    assert mod.published_s() == pytest.approx(want / (468e12 * 64), rel=1e-12)
    assert mod.published_s() == pytest.approx(2.9032, abs=1e-4)
