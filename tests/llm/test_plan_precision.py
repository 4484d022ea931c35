"""``simcomm plan`` searching FP8 beside bf16, and per-operator recomputation (issue 24, item 7: the search covers
FP8 and recomputation).

Several precisions are one search per precision (its own trace) merged by estimate: a merged row is the same
row the single-precision search gives, tagged; the winner's command runs its precision; FP8 on a GPU without
FP8 tensor cores is one line before any search.
"""

from __future__ import annotations

import json

import pytest

from simcomm.cli.plan_cmd import check_precisions
from simcomm.llm import search as plan
from simcomm.llm import simulate as plan_sim
from simcomm.traces.zoo.transformer import transformer_config

SPACE = plan.Space(zeros=(0, 3), schedules=("1f1b",), recomputes=("none", "op"), sequence_parallel=(False,),
                   max_microbatch=2)


def _key(r):
    return (r.layout, r.memory_bytes, r.estimate)


@pytest.fixture(scope="module")
def searches():
    cfg = transformer_config("gpt2-small")
    base = {"cluster": "dgx-h100-ndr", "model": "gpt2-small"}
    both = plan.search_precisions(cfg, base, 1, 16, SPACE, ("bf16", "fp8"))
    alone = {p: plan.search_precisions(cfg, base, 1, 16, SPACE, (p,)) for p in ("bf16", "fp8")}
    return cfg, base, both, alone


def test_two_precisions_are_the_two_searches_merged_by_estimate(searches):
    _, _, both, alone = searches
    assert both.enumerated == alone["bf16"].enumerated + alone["fp8"].enumerated
    assert both.fit == len(both.rows) == len(alone["bf16"].rows) + len(alone["fp8"].rows)
    for p in ("bf16", "fp8"):
        assert all(r.precision is None for r in alone[p].rows)  # one precision: rows untagged, as before
        assert [_key(r) for r in both.rows if r.precision == p] == [_key(r) for r in alone[p].rows]
    steps = [r.estimate.step for r in both.rows]
    assert steps == sorted(steps) and [r.estimate_rank for r in both.rows] == list(range(1, len(steps) + 1))


def test_fp8_changes_the_compute_not_the_memory(searches):
    _, _, _, alone = searches
    bf16 = {r.layout: r for r in alone["bf16"].rows}
    for r in alone["fp8"].rows:
        # Transformer Engine keeps bf16 weights and activations: the memory is bf16's (the strategy's rule)
        assert r.memory_bytes == bf16[r.layout].memory_bytes
    # FP8 GEMMs on H100 run faster: the compute of every layout is smaller
    assert all(r.estimate.compute < bf16[r.layout].estimate.compute for r in alone["fp8"].rows)


def test_op_recomputation_is_searched_and_costs_backward_compute(searches):
    _, _, _, alone = searches
    rows = {(r.layout.tp, r.layout.pp, r.layout.dp, r.layout.zero, r.layout.microbatch, r.layout.recompute): r
            for r in alone["bf16"].rows}
    ops = [k for k in rows if k[-1] == "op"]
    assert ops and len(ops) == len(rows) // 2
    for k in ops:
        assert rows[k].estimate.compute > rows[k[:-1] + ("none",)].estimate.compute


def test_a_simulated_fp8_row_runs_its_precision(searches):
    cfg, base, both, _ = searches
    row = next(r for r in both.rows if r.precision == "fp8")
    keys = plan_sim.scenario_keys(row.layout, {**base, "nodes": 1}, 16, "flow", row.precision)
    assert keys["precision"] == "fp8"
    sim = plan_sim.simulate_row(row, {**base, "nodes": 1}, 16, "flow")
    from simcomm.pipeline import simulate
    from simcomm.scenario import from_flat

    assert sim.simulated and sim.step_s == simulate(from_flat(keys), baseline=False, analytic=False).mean_s


@pytest.mark.parametrize("device, want", [("h100", ("bf16", "fp8")), ("a100", ("bf16",)),
                                          ("b200", ("bf16", "fp8", "mxfp8"))])
def test_auto_adds_the_fp8_recipes_the_gpu_runs(device, want):
    assert check_precisions(("auto",), device, "gpt2-small") == want


def test_cli_fp8_on_a100_is_one_error_line(cli):
    rc, out, err = cli("plan", "--model", "gpt2-small", "--cluster", "dgx-a100-hdr", "--global-batch", "16",
                       "--precision", "bf16,fp8", "--quiet")
    lines = err.strip().splitlines()
    assert rc == 2 and out == "" and len(lines) == 1
    assert lines[0].startswith("error: --precision: fp8 needs FP8 tensor cores; device 'a100")


def test_cli_bad_precision_names_the_choices(cli):
    rc, out, err = cli("plan", "--model", "gpt2-small", "--global-batch", "16", "--precision", "fp9", "--quiet")
    assert rc == 2 and out == ""
    assert err.strip() == ("error: --precision: 'fp9' is not valid; valid choices: bf16, amp-bf16, fp16, amp-fp16, "
                           "fp32, fp8, fp8-tensorwise, mxfp8")


def test_cli_bf16_and_fp8_winner_command_reproduces_its_step(cli):
    rc, out, err = cli("plan", "--model", "gpt2-small", "--cluster", "dgx-h100-ndr", "--global-batch", "16",
                       "--precision", "auto", "--zero", "0", "--recompute", "none", "--max-microbatch", "2",
                       "--simulate", "4", "--quiet", "--json")
    assert rc == 0, err
    d = json.loads(out)
    assert {r["precision"] for r in d["rows"] + d["estimates"]} == {"bf16", "fp8"}
    assert any("precisions searched bf16, fp8" in line for line in d["assumed"])
    win = d["winner"]
    assert f"--precision {win['precision']}" in win["command"]
    rc, out, err = cli(*win["command"].split()[1:], "--json")
    assert rc == 0, err
    assert json.loads(out)["mean_s"] == win["step_s"]
