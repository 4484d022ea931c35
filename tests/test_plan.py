"""``simcomm plan`` (simcomm/plan.py, simcomm/cli/plan_cmd.py): enumeration, memory filter, ranking, CLI."""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from plancases import built_ops

from simcomm.llm import estimate
from simcomm.llm import search as plan
from simcomm.llm.layout import Layout
from simcomm.memory.fit import Budget
from simcomm.traces.zoo.transformer import TransformerConfig

TINY = TransformerConfig("tiny", layers=4, hidden=16, ffn=64, heads=4, kv_heads=4, vocab=32, seq=8, tied=True)
ONE = plan.Space(zeros=(0,), schedules=("1f1b", "interleaved"), recomputes=("none",), sequence_parallel=(False,),
                 max_microbatch=1)


def _bytes(n):
    """A GPU of ``n`` bytes without the allocator margin (the filter's own arithmetic)."""
    return Budget(n, "test GPU", margin=0, given=True)


def test_enumeration_count_by_hand():
    # 8 GPUs, 4 layers, 4 heads, global batch 8, micro-batch 1, ZeRO 0, no SP, no recompute:
    #   tp divides 8 and the 4 heads: 1, 2, 4 (8 does not divide 4 heads)
    #   tp 1: pp 1 (dp 8), pp 2 (dp 4, m 2: 1f1b + interleaved v2), pp 4 (dp 2: 1f1b; 1 layer per stage, no v)
    #   tp 2: pp 1 (dp 4), pp 2 (dp 2, m 4: 1f1b + v2), pp 4 (dp 1)
    #   tp 4: pp 1 (dp 2), pp 2 (dp 1, m 8: 1f1b + v2)          (pp 4 would need 16 GPUs)
    # = 1 + 2 + 1 + 1 + 2 + 1 + 1 + 2 = 11
    lays = plan.enumerate_layouts(TINY, 8, 8, 8, ONE)
    assert len(lays) == 11
    assert sorted((x.tp, x.pp, x.dp, x.virtual) for x in lays) == [
        (1, 1, 8, 1), (1, 2, 4, 1), (1, 2, 4, 2), (1, 4, 2, 1), (2, 1, 4, 1), (2, 2, 2, 1), (2, 2, 2, 2),
        (2, 4, 1, 1), (4, 1, 2, 1), (4, 2, 1, 1), (4, 2, 1, 2)]
    # every axis multiplies: 3 recomputes triple it; SP doubles the tp > 1 layouts (7 of the 11)
    three = plan.enumerate_layouts(TINY, 8, 8, 8, plan.Space(zeros=(0,), schedules=("1f1b", "interleaved"),
                                                              sequence_parallel=(False,), max_microbatch=1))
    assert len(three) == 33
    sp = plan.enumerate_layouts(TINY, 8, 8, 8, plan.Space(zeros=(0,), schedules=("1f1b", "interleaved"),
                                                           recomputes=("none",), max_microbatch=1))
    assert len(sp) == 11 + 7
    # ZeRO 1-3 only where dp > 1: 8 of the 11 (not tp 2 pp 4, nor tp 4 pp 2 twice), 3 more stages each
    zero = plan.enumerate_layouts(TINY, 8, 8, 8, plan.Space(schedules=("1f1b", "interleaved"), recomputes=("none",),
                                                             sequence_parallel=(False,), max_microbatch=1))
    assert len(zero) == 11 + 3 * 8


def test_max_tp_and_microbatch_and_interleaving_rule():
    lays = plan.enumerate_layouts(TINY, 8, 8, 2, ONE)  # 2 GPUs per node: tp <= 2
    assert {x.tp for x in lays} == {1, 2}
    many = plan.enumerate_layouts(TINY, 8, 8, 8, plan.Space(zeros=(0,), recomputes=("none",),
                                                             sequence_parallel=(False,)))
    for x in many:
        per = 8 // x.dp
        assert per % x.microbatch == 0 and x.microbatch <= 16
        assert x.tp * x.pp * x.dp == 8 and TINY.layers % (x.pp * x.virtual) == 0
        if x.schedule == "interleaved":
            assert x.microbatches(8) % x.pp == 0 and x.virtual > 1
        if x.pp == 1:
            assert x.schedule == "1f1b" and x.virtual == 1
    # tp 2 pp 2 dp 2: per-replica 4 -> micro-batch 1, 2, 4; interleaved needs m = 4/mb a multiple of 2 -> 1, 2
    il = {x.microbatch for x in many if (x.tp, x.pp, x.schedule) == (2, 2, "interleaved")}
    assert il == {1, 2}


def test_every_layout_is_one_the_strategy_and_memory_model_accept():
    from simcomm.strategies.megatron import MegatronParams

    for x in plan.enumerate_layouts(TINY, 8, 8, 8):
        opts = x.options(8)
        MegatronParams(**opts)  # raises on an option the strategy refuses
        plan.layout_memory(TINY, x, 8)  # raises on a size the memory model refuses


def test_memory_filter_refuses_and_reports_the_smallest():
    lays = plan.enumerate_layouts(TINY, 8, 8, 8)
    mems = [plan.layout_memory(TINY, x, 8).total for x in lays]
    lo = min(mems)
    fits, smallest = plan.fit_layouts(TINY, lays, 8, _bytes(lo - 1))
    assert fits == [] and smallest[1].total == lo
    fits, smallest = plan.fit_layouts(TINY, lays, 8, _bytes(lo))
    assert fits and all(m.total == lo for _, m in fits)
    fits, _ = plan.fit_layouts(TINY, lays, 8, _bytes(max(mems)))
    assert len(fits) == len(lays)
    # recomputation never needs more memory than none (full: each block's input, plus the rest of the one
    # block being recomputed, which reuses that input)
    by = {(x.tp, x.pp, x.dp, x.schedule, x.virtual, x.zero, x.microbatch, x.sequence_parallel, x.recompute): m
          for x, m in zip(lays, mems, strict=False)}
    for k, m in by.items():
        if k[-1] == "none":
            assert by[k[:-1] + ("selective",)] <= m and by[k[:-1] + ("full",)] <= m


def _row(lay, mem, step):
    return plan.Row(lay, mem, estimate.Estimate(step, 0.0, 0.0, 0.0, 0.0))


def test_ranking_is_deterministic_with_ties_broken_by_memory_then_layout():
    lays = plan.enumerate_layouts(TINY, 8, 8, 8, ONE)
    rows = [_row(x, 100 - i % 3, 1.0 + (i % 2)) for i, x in enumerate(lays)]
    want = plan.rank_rows(rows)
    for seed in range(5):
        shuffled = rows[:]
        random.Random(seed).shuffle(shuffled)
        assert [r.layout for r in plan.rank_rows(shuffled)] == [r.layout for r in want]
    keys = [(r.step_s, r.memory_bytes, r.layout) for r in want]
    assert keys == sorted(keys)
    # a simulated row outranks every estimate-only row, however slow it is
    slow = plan.Row(want[0].layout, want[0].memory_bytes, want[0].estimate, step_s=9.0, priced=plan.FLOW)
    assert plan.rank_rows([want[1], slow])[0] is slow


@pytest.fixture(scope="module")
def small_search():
    base = {"cluster": "dgx-a100-hdr", "model": "gpt2-small", "precision": "bf16"}
    return plan.search(plan_cfg("gpt2-small"), base, 1, 16, plan.Space(), "bf16")


def plan_cfg(name):
    from simcomm.traces.zoo.transformer import transformer_config

    return transformer_config(name)


def test_estimate_bubble_is_p_minus_1_over_v_stage_times(small_search):
    rows = small_search.rows
    for r in rows:
        e, lay = r.estimate, r.layout
        assert e.step == pytest.approx(e.compute + e.tp + e.bubble + e.dp + e.update)
        if lay.pp == 1:
            assert e.bubble == 0.0
        else:
            assert e.bubble > 0.0
        if lay.tp == 1:
            assert e.tp == 0.0
    # interleaving divides the fill and drain: same layout, v 2 vs v 1
    pick = {(r.layout.tp, r.layout.pp, r.layout.zero, r.layout.microbatch, r.layout.recompute,
             r.layout.sequence_parallel, r.layout.schedule, r.layout.virtual): r.estimate for r in rows}
    a, b = pick[(1, 4, 0, 1, "none", False, "1f1b", 1)], pick[(1, 4, 0, 1, "none", False, "interleaved", 3)]
    assert b.bubble < a.bubble and b.compute == pytest.approx(a.compute)


def test_plan_ops_matches_a_built_plan_within_a_factor():
    lay = Layout(2, 2, 2, "1f1b", 1, 0, 1, False, "none")
    n = built_ops(lay)
    guess = estimate.plan_ops(plan_cfg("gpt2-small"), lay, 8, 8)
    assert n / 2 <= guess <= 2 * n


# -- CLI ------------------------------------------------------------------------------------------------------
SMALL = ("plan", "--model", "gpt2-small", "--cluster", "dgx-a100-hdr", "--nodes", "1", "--global-batch", "16",
         "--quiet", "--top", "4", "--simulate", "3")


def test_cli_table_golden(cli, golden):
    rc, out, err = cli(*SMALL, "--no-prune")  # all K simulated (the default passes bounded rows over: below)
    assert rc == 0, err
    lines = out.splitlines()
    # the simulated rows, ranked by their simulated step, then the winner and its command, then estimates apart
    sim = [line.split("│") for line in lines if line.startswith("│") and len(line.split("│")) == 19]
    assert len(sim) == 3 and [float(r[14]) for r in sim] == sorted(float(r[14]) for r in sim)
    assert lines.index(next(x for x in lines if x.startswith("winner: "))) < lines.index(
        next(x for x in lines if x.startswith("estimate only")))
    assert sum(line.startswith("reproduce: simcomm run --strategy megatron ") for line in lines) == 1
    assert sum(line.startswith("assumed:") for line in lines) >= 5
    golden("plan_gpt2_small.txt", out)


def test_cli_winner_command_reproduces_its_step_time(cli):
    rc, out, err = cli(*SMALL, "--json")
    assert rc == 0, err
    d = json.loads(out)
    win = d["winner"]
    assert win["priced"] == "simulated flow" and win["step_s"] == d["rows"][0]["step_s"]
    words = win["command"].split()
    assert words[:2] == ["simcomm", "run"]
    rc, out, err = cli(*words[1:], "--json")
    assert rc == 0, err
    assert json.loads(out)["mean_s"] == win["step_s"]


def test_cli_json_is_deterministic_and_says_how_priced(cli):
    rc, out, _ = cli(*SMALL, "--json", "--top", "5000", "--no-prune")
    rc2, out2, _ = cli(*SMALL, "--json", "--top", "5000", "--no-prune")
    assert rc == rc2 == 0 and out == out2
    d = json.loads(out)
    assert d["gpus"] == 8 and d["fit"] <= d["layouts"] and len(d["rows"]) == d["simulated"] == 3
    assert len(d["rows"]) + len(d["estimates"]) == d["fit"]
    assert all(r["priced"] == "simulated flow" and r["simulated"] is not None for r in d["rows"])
    assert all(r["priced"] == "estimate" and r["simulated"] is None for r in d["estimates"])
    steps = [r["step_s"] for r in d["rows"]]
    assert steps == sorted(steps)
    # the simulated rows are the three best by estimate; the estimate-only rows follow in estimate order
    assert sorted(r["estimate_rank"] for r in d["rows"]) == [1, 2, 3]
    assert [r["estimate_rank"] for r in d["estimates"]] == list(range(4, d["fit"] + 1))
    for r in d["rows"] + d["estimates"]:
        assert r["tp"] * r["pp"] * r["dp"] == 8
        assert r["samples_per_s"] == pytest.approx(16 / r["step_s"])


def test_cli_default_passes_bounded_layouts_over_golden(cli, golden):
    # the default: a layout whose lower bound exceeds a step simulated before it is not simulated (docs/plan.md,
    # section 4); the winner and its command are the ones --no-prune gives (tests/llm/test_plan_prune.py)
    rc, out, err = cli(*SMALL)
    assert rc == 0, err
    lines = out.splitlines()
    sim = [line.split("│") for line in lines if line.startswith("│") and len(line.split("│")) == 19]
    assert len(sim) == 1
    assert sum("│ bound > best │" in line for line in lines) == 2
    assert sum("--no-prune simulates them" in line for line in lines) == 1
    golden("plan_gpt2_small_pruned.txt", out)


def test_cli_png_writes_a_pareto_plot(cli, tmp_path):
    path = tmp_path / "pareto.png"
    rc, out, err = cli("plan", "--model", "gpt2-small", "--nodes", "2", "--global-batch", "16", "--quiet",
                       "--simulate", "1", "--top", "1", "--zero", "0", "--recompute", "none", "--png", str(path))
    assert rc == 0, err
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"plot: {path}" in out


def test_pareto_front():
    from simcomm.report.plan_plot import pareto_front

    pts = [{"gpus": 8, "step_s": 4.0}, {"gpus": 16, "step_s": 5.0}, {"gpus": 32, "step_s": 1.0},
           {"gpus": 4, "step_s": 6.0}]
    assert [p["gpus"] for p in pareto_front(pts)] == [4, 8, 32]


@pytest.mark.parametrize("args, needle", [
    (("--model", "nope", "--global-batch", "8"), "model: 'nope' is unknown; valid choices: gpt2-small"),
    (("--model", "resnet50", "--global-batch", "8"), "model: 'resnet50' is not a transformer"),
    (("--model", "gpt2-small", "-g", "7", "--global-batch", "8"), "layout: no tp × pp × dp = 7 GPUs"),
    (("--model", "megatron-39b", "-g", "1", "--global-batch", "8"), "the smallest needs 660.4 GB per GPU"),
    (("--model", "gpt2-small", "--global-batch", "0"), "--global-batch: 0 must be >= 1"),
    (("--model", "gpt2-small", "--global-batch", "8", "--zero", "4"), "--zero: '4' is not valid"),
    (("--model", "gpt2-small", "--global-batch", "8", "--fidelity", "exact"), "--fidelity: 'exact'"),
    (("--model", "gpt2-small", "--global-batch", "8", "--simulate", "0"), "--simulate: 0 must be >= 1"),
    (("--model", "gpt2-small", "--global-batch", "8", "--ep", "2"), "--ep: 2 needs a mixture-of-experts model"),
    (("--model", "gpt2-small", "--global-batch", "8", "--max-ops", "10"), "--max-ops: none of the"),
    (("--model", "gpt2-small", "--global-batch", "8", "--cluster", "nope"), "nope"),
    (("--model", "gpt2-small", "--global-batch", "8", "--inter", "warp-drive"), "warp-drive"),
])
def test_cli_bad_input_is_one_error_line_exit_2(cli, args, needle):
    rc, out, err = cli("plan", *args, "--quiet")
    assert rc == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], err


@settings(max_examples=40, deadline=None)
@given(layers=st.sampled_from([1, 2, 3, 4, 6, 8]), heads=st.sampled_from([1, 2, 3, 4, 6]),
       gpus=st.integers(1, 12), per_node=st.sampled_from([1, 2, 4, 8]), batch=st.integers(1, 24))
def test_enumeration_matches_a_brute_force_of_the_rules(layers, heads, gpus, per_node, batch):
    cfg = TransformerConfig("h", layers=layers, hidden=heads * 4, ffn=heads * 16, heads=heads, kv_heads=heads,
                            vocab=16, seq=4, tied=True)
    space = plan.Space(zeros=(0, 3), schedules=("1f1b", "interleaved"), recomputes=("none",), max_microbatch=4)
    got = plan.enumerate_layouts(cfg, gpus, batch, per_node, space)
    want = set()
    for tp in range(1, gpus + 1):
        for pp in range(1, gpus + 1):
            for dp in range(1, gpus + 1):
                if tp * pp * dp != gpus or tp > per_node or heads % tp or layers % pp or batch % dp:
                    continue
                for v in range(1, layers + 1):
                    for sched in ("1f1b", "interleaved"):
                        if (sched == "interleaved") != (v > 1) or (pp == 1 and sched != "1f1b") or layers % (pp * v):
                            continue
                        for mb in range(1, 5):
                            m = batch // dp // mb if (batch // dp) % mb == 0 else 0
                            if not m or (sched == "interleaved" and m % pp):
                                continue
                            for zero in (0, 3):
                                for sp in (False, True):
                                    if (zero and dp == 1) or (sp and tp == 1):
                                        continue
                                    want.add(Layout(tp, pp, dp, sched, v, zero, mb, sp, "none"))
    assert len(got) == len(set(got)) and set(got) == want


@pytest.mark.parametrize("lay, batch", [
    (Layout(2, 1, 4, "1f1b", 1, 0, 1, False, "none"), 256),
    (Layout(2, 2, 2, "1f1b", 1, 0, 1, True, "none"), 512),
    (Layout(1, 1, 8, "1f1b", 1, 3, 1, False, "none"), 1024),
    (Layout(1, 1, 4, "1f1b", 1, 3, 1, False, "full", 2), 256),
])
def test_plan_ops_counts_the_folded_plan_megatron_builds(lay, batch):
    # above FOLD_ABOVE compute ops megatron (replicas=auto) simulates one data replica (and folds its
    # tensor-parallel lanes): plan's size check must count that plan, not the unfolded one
    n = built_ops(lay, batch=batch)
    full = built_ops(lay, batch=batch, replicas="all")
    guess = estimate.plan_ops(plan_cfg("gpt2-small"), lay, 8, batch)
    assert full > 1.5 * n
    assert 0.9 * n <= guess <= 1.1 * n

