"""``simcomm plan`` keeps the user's global batch exactly (never rounds it up to a multiple of the ranks)."""

from __future__ import annotations

import json

from simcomm.llm import search as plan
from simcomm.traces.zoo.transformer import transformer_config


def test_batch_skipped_lists_the_splits_whose_dp_does_not_divide():
    """gpt2-small (12 layers, 12 heads) on 8 GPUs, global batch 4: tp 1, 2, 4 (8 does not divide 12 heads); only
    tp 1 pp 1 dp 8 has a dp that does not divide 4 (tp 1 pp 8 does not divide the 12 layers)."""
    cfg = transformer_config("gpt2-small")
    assert plan.batch_skipped(cfg, 8, 4, 8) == [(1, 1, 8)]
    assert plan.batch_skipped(cfg, 8, 8, 8) == []
    assert plan.batch_skipped(cfg, 8, 3, 8) == [(1, 1, 8), (1, 2, 4), (1, 4, 2), (2, 1, 4), (2, 2, 2), (4, 1, 2)]
    kept = {(lay.tp, lay.pp, lay.dp) for lay in plan.enumerate_layouts(cfg, 8, 4, 8)}
    assert (1, 1, 8) not in kept and (1, 2, 4) in kept


def test_plan_smaller_batch_than_gpus_simulates_and_says_what_it_skipped(cli):
    """A global batch of 4 on 8 GPUs is valid for tp·pp >= 2; the simulation keeps 4 (no strong-scaling split)."""
    rc, out, err = cli(["plan", "--model", "gpt2-small", "--cluster", "dgx-a100-hdr", "--nodes", "1",
                        "--global-batch", "4", "--top", "2", "--simulate", "1", "--json"])
    assert rc == 0, err
    res = json.loads(out)
    assert res["global_batch"] == 4
    assert any(line.startswith("global batch 4 kept exactly (never rounded): 1 tp × pp × dp split(s) skipped "
                               "because dp does not divide it (tp 1 pp 1 dp 8)") for line in res["assumed"])
    sim = [r for r in res["rows"] if r["priced"] != plan.ESTIMATE]
    assert sim and all(r["samples_per_s"] == 4 / r["step_s"] for r in sim)
    for r in res["rows"] + res["estimates"]:
        assert r["dp"] * r["microbatch"] * r["microbatches"] == 4


def test_megatron_says_when_strong_scaling_rounded_the_batch_up(cli):
    """--scaling strong --batch 12 on 8 GPUs: the workload gives each rank ⌈12/8⌉ = 2, so 16; the run says so."""
    args = ["run", "--strategy", "megatron", "--model", "gpt2-small", "--cluster", "dgx-a100-hdr", "--nodes", "1",
            "--scaling", "strong", "--fidelity", "analytic", "--opt", "tp=2", "--no-baseline", "--json"]
    rc, out, err = cli([*args, "--batch", "12"])
    assert rc == 0, err
    line = next(x for x in json.loads(out)["assumed"] if x.startswith("layout tp 2"))
    assert "global batch 16 = " in line and "rounded up to a multiple of the ranks" in line
    rc, out, _ = cli([*args, "--batch", "12", "--opt", "global_batch=12"])
    line = next(x for x in json.loads(out)["assumed"] if x.startswith("layout tp 2"))
    assert rc == 0 and "global batch 12 = " in line and "rounded" not in line
