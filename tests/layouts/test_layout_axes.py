"""Layouts as axes: ``simcomm whatif --vary tp=... --vary cp=...`` and ``simcomm compare`` variants.

Strategy options are axes of the one scenario vocabulary already (``--vary tp=1,2``);
compare names a layout ``NAME:key=value,...`` as ``--baseline`` does.  A layout that
does not divide or fit is that point's one-line reason, never the sweep's failure.
Golden files hold the exposed-time split columns; SIMCOMM_UPDATE_GOLDEN=1 rewrites them.
"""

from __future__ import annotations

import csv
import io
import json

import pytest

from simcomm.cli.compare_cmd import parse_strategies
from simcomm.compare import split_variant
from simcomm.errors import ConfigError
from simcomm.traces.io import save_trace

COMMON = ["--cluster", "dgx-a100-hdr", "--nodes", "1", "--gpus-per-node", "4", "--fidelity", "analytic"]
SPLIT = ["exposed_tensor_s", "exposed_context_s", "exposed_data_s", "exposed_waiting_s"]


@pytest.fixture
def trace_file(tmp_path, lay):
    return str(save_trace(lay.tiny(4, ends=True, batch=2, seq=512), tmp_path / "tiny.json"))


def test_parse_variants():
    assert parse_strategies("megatron:tp=8,pp=2 megatron:tp=4,pp=4") == ["megatron:tp=8,pp=2", "megatron:tp=4,pp=4"]
    assert parse_strategies("allreduce,megatron:tp=2,pp=2,sgp") == ["allreduce", "megatron:tp=2,pp=2", "sgp"]
    assert parse_strategies("megatron:shard-group=2,zero=3") == ["megatron:shard_group=2,zero=3"]
    assert split_variant("megatron:tp=8,cp=2") == ("megatron", {"tp": "8", "cp": "2"})
    assert split_variant("allreduce") == ("allreduce", {})


@pytest.mark.parametrize("text, msg", [
    ("tp=2", "--strategies: 'tp=2' is an option with no variant before it"),
    ("allreduce,tp=2", "--strategies: 'tp=2' is an option with no variant before it"),
    ("megatron:tp=2 megatron:tp=2", "--strategies: 'megatron:tp=2' given twice"),
    ("megatron:tp=2,tp=4", "--strategies: option 'tp' given twice in 'megatron:tp=2,tp=4'"),
    ("megatron:cp=0", "--strategies megatron:cp=0: cp: 0 must be a positive integer"),
])
def test_bad_variants_are_one_line(text, msg):
    with pytest.raises(ConfigError) as e:
        parse_strategies(text)
    assert str(e.value).startswith(msg) and "\n" not in str(e.value)


def test_whatif_layout_axes_with_exposed_split(tmp_path, cli, golden, trace_file):
    out = tmp_path / "o"
    rc, _, err = cli(["whatif", "--strategies", "megatron", "--trace", trace_file, *COMMON, "--vary", "tp=1,2,3",
                      "--vary", "cp=1,2", "--set", "global_batch=4", "--sequential", "--no-html", "--out", str(out)])
    assert rc == 0, err
    rows = list(csv.DictReader((out / "results.csv").open()))
    assert [(r["tp"], r["cp"], r["status"]) for r in rows] == [
        ("1", "1", "ok"), ("1", "2", "ok"), ("2", "1", "ok"), ("2", "2", "ok"), ("3", "1", "failed"),
        ("3", "2", "failed")]
    header = list(rows[0])
    at = header.index("comm_hidden_s")
    assert header[at + 1:at + 5] == SPLIT  # the split sits right after the exposed/hidden totals
    assert rows[4]["error"] == "layout: tp 3 × pp 1 = 3 does not divide the 4 GPUs"
    assert rows[5]["error"] == "layout: tp 3 × pp 1 × cp 2 = 6 does not divide the 4 GPUs"
    assert rows[0]["exposed_context_s"] == "" and float(rows[1]["exposed_context_s"]) > 0
    assert rows[1]["exposed_tensor_s"] == "" and float(rows[2]["exposed_tensor_s"]) > 0
    for r in rows[:4]:  # the split never exceeds the exposed total
        parts = sum(float(r[c]) for c in SPLIT if r[c])
        assert parts == pytest.approx(float(r["iteration_s"]) - float(r["compute_s"]), rel=1e-6, abs=1e-12)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["tp", "cp", "status", "iteration_s", "comm_exposed_s", *SPLIT, "error"])
    for r in rows:
        w.writerow([r[c] for c in ("tp", "cp", "status", "iteration_s", "comm_exposed_s", *SPLIT, "error")])
    md = (out / "report.md").read_text()
    ranked = md[md.index("## Ranked configurations"):md.index("## Assumptions")]
    failed = md[md.index("## Failed and not-applicable points"):]
    golden("layouts/whatif_tp_cp.txt", buf.getvalue() + "\n" + ranked + failed)


def test_compare_layouts_side_by_side(cli, golden, trace_file):
    args = ["compare", "--strategies", "megatron:tp=2 megatron:cp=2,megatron:tp=2,cp=2 megatron:tp=3",
            "--trace", trace_file, *COMMON, "--opt", "global_batch=4", "--baseline", "none"]
    rc, out, err = cli([*args, "--json"])
    assert rc == 0, err
    rows = json.loads(out)
    assert [r["strategy"] for r in rows] == ["megatron:tp=2", "megatron:cp=2", "megatron:tp=2,cp=2",
                                             "megatron:tp=3"]
    assert rows[3]["not_applicable"] == "layout: tp 3 × pp 1 = 3 does not divide the 4 GPUs"
    assert rows[0]["exposed_context_s"] is None and rows[1]["exposed_context_s"] > 0
    assert all(rows[3][c] is None for c in SPLIT)
    rc, csv_out, _ = cli([*args, "--csv"])
    assert rc == 0 and csv_out.splitlines()[0] == ("strategy,nodes,ranks,mean_s,speedup," + ",".join(SPLIT)
                                                   + ",baseline,not_applicable")
    rc, table, _ = cli([*args, "--quiet"])
    assert rc == 0
    assert "exposed time by parallelism" in table
    assert "n/a: megatron:tp=3 at 1 nodes: layout: tp 3 × pp 1 = 3 does not divide the 4 GPUs" in table
    golden("layouts/compare_layouts.json", out + csv_out)


def test_compare_of_plain_strategies_keeps_its_columns(cli):
    """Strategies that do not split their exposed time add no columns (older outputs unchanged)."""
    rc, out, _ = cli(["compare", "--strategies", "allreduce", "--nodes", "2", "--fidelity", "analytic", "--csv"])
    assert rc == 0 and out.splitlines()[0] == "strategy,nodes,ranks,mean_s,speedup,baseline,not_applicable"


def test_compare_goes_on_without_a_baseline_that_cannot_fit(cli):
    """Plain data parallelism holds llama3-8b whole with 64 sequences of 8 192 tokens: far over 80 GB.  The
    layouts are still compared (no speedups at that size), and the assumed line says why; an explicit
    --baseline that fits gives speedups again."""
    args = ["compare", "--strategies", "megatron:tp=8,microbatch=1 megatron:tp=4,pp=2,microbatch=1,recompute=full", "--model",
            "llama3-8b", "--cluster", "dgx-h100-ndr", "--nodes", "1", "--precision", "bf16", "--opt",
            "global_batch=8", "--fidelity", "analytic"]
    rc, out, err = cli([*args, "--json"])
    assert rc == 0, err
    rows = json.loads(out)
    assert [r["speedup"] for r in rows] == [None, None] and all(r["mean_s"] > 0 for r in rows)
    rc, table, err = cli([*args, "--quiet"])
    assert rc == 0, err
    flat = " ".join(table.split())
    assert "assumed: baseline allreduce does not fit in GPU memory at 1 nodes (llama3-8b at batch 64" in flat
    assert "no speedups at this size (--baseline to choose another)" in flat
    rc, out, err = cli([*args, "--baseline", "megatron:tp=8,microbatch=1,global_batch=8", "--json"])
    assert rc == 0, err
    speedups = [r["speedup"] for r in json.loads(out)]
    assert speedups[0] == pytest.approx(1.0) and 0 < speedups[1] < 1
