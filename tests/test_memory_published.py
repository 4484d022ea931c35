"""Layouts that ran, with their GPU memory: the memory check accepts every one; an impossible one is refused.

Each row states its source.  "Ran" rows are the setups their source trained (a run at that setup is a
statement that it fit); no slack is added for them: the default allocator margin (5 %) applies to all.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import pytest

from simcomm.errors import DoesNotFitError
from simcomm.memory.layout import check_fits, estimate
from simcomm.traces.zoo.transformer import transformer_config

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks" / "megatron"))
from score import load_tables, model_config  # noqa: E402  (benchmarks/megatron/tables.toml: the rows)

TABLE_ROWS, _ = load_tables()


@pytest.mark.parametrize("row", TABLE_ROWS, ids=[r.key for r in TABLE_ROWS])
def test_megatron_table_rows_fit_an_a100_80gb(row):
    """Narayanan et al. SC'21 Table 1 (1.7B..1T, the authors' run_table_1.sh: fp16, Adam, full recomputation,
    Megatron's own DDP, no distributed optimizer) and Korthikanti et al. 2022 Tables 3/5 (22B, 175B, 530B, 1T with
    full recomputation, or sequence parallelism + selective recomputation; 175B and 530B interleaved with 3 chunks)
    all ran on DGX A100 80 GB; Megatron-LM of 2021-22 ran unfused attention with dropout 0.1 (tables.toml)."""
    opts = row.options()
    mem = estimate(model_config(row), tp=row.tp, pp=row.pp, dp=row.dp, micro_batch=row.microbatch,
                   microbatches=row.microbatches, schedule=opts["schedule"], virtual_stages=row.virtual,
                   recompute=opts["recompute"], sequence_parallel=opts["sequence_parallel"], dtype="fp16")
    assert check_fits(mem, "a100-80g").startswith("memory: peak ")


@pytest.mark.parametrize("nodes", [280, 350, 420])
def test_mt_nlg_530b_fits(nodes):
    # Smith et al. 2022 (MT-NLG), sections 2.3-2.4 and 3.2: 530B (105 layers, h 20480, 128 heads), tp 8, pp 35,
    # A100 80 GB, micro-batch 1, seq 2048, global batch 1920 on 280, 350 and 420 DGX nodes x 8 (dp 8, 10, 12;
    # benchmarks/megatron/tables.toml [[smith]]), mixed precision, full activation recomputation, unfused attention
    dp = nodes * 8 // (8 * 35)
    cfg = replace(transformer_config("megatron-530b"), attention="unfused")
    mem = estimate(cfg, tp=8, pp=35, dp=dp, micro_batch=1, microbatches=1920 // dp, recompute="full", dtype="fp16")
    assert check_fits(mem, "a100-80g").startswith("memory: peak ")


# Megatron-core's MoE README (megatron/core/transformer/moe/README.md, "Reference Best Parallel Mapping", MCore
# v0.8; 8x H100 80GB per node): Mixtral 8x7B on 64 GPUs (tp 1, ep 8, pp 4, vp 8) and 8x22B on 128 (tp 4, ep 2, pp 8,
# vp 7), seq 4096, micro-batch 1, global batch 256, bf16, dropless all-to-all; its training example: the
# distributed optimizer, sequence parallelism, no dropout, no recomputation.  VP is the number of model chunks
# (32 layers / pp 4 / vp 8 = one layer per chunk; 56 / 8 / 7 likewise).
MOE_README = {
    "mixtral-8x7b": dict(tp=1, pp=4, dp=16, ep=8, virtual_stages=8, microbatches=256 // 16),
    "mixtral-8x22b": dict(tp=4, pp=8, dp=4, ep=2, virtual_stages=7, microbatches=256 // 4),
}


@pytest.mark.parametrize("model", sorted(MOE_README))
def test_megatron_core_moe_readme_layouts_fit_an_h100(model):
    layout = MOE_README[model]
    mem = estimate(model, micro_batch=1, seq=4096, sequence_parallel=True, zero=1, schedule="interleaved",
                   dropout=False, dtype="bf16", **layout)
    assert check_fits(mem, "h100").startswith("memory: peak ")
    # the experts' weights are split over ep (each rank holds 8 / ep experts' matrices) and their optimizer state
    # over the dp / ep ranks that hold the same experts: without ep the 8x7B stage 0 would not fit
    if model == "mixtral-8x7b":
        no_ep = estimate(model, micro_batch=1, seq=4096, sequence_parallel=True, zero=1, schedule="interleaved",
                         dropout=False, dtype="bf16", **{**layout, "ep": 1})
        assert no_ep.parameters > 5 * mem.parameters
        # interleaved 1F1B holds 2 (p - 1) + (v - 1) p + 1 = 35 one-layer chunks on stage 0
        assert mem.activations + mem.in_flight == pytest.approx(35 / 8 * mem.activations, rel=1e-9)


# SC'21 Table 2: DeepSpeed ZeRO-3 without model parallelism (benchmarks/megatron/zero3.py ROWS): full
# recomputation, fp16, A100 80 GB; DeepSpeed 0.3 gathers leaf modules (prefetch bucket 2.5e7, reduce bucket 5e8).
ZERO3_ROWS = [("175B", 384, 4), ("175B", 768, 2), ("175B", 1536, 1),
              ("530B", 640, 4), ("530B", 1120, 2), ("530B", 2240, 1)]
DS03 = dict(gather_unit="module", prefetch_params=2.5e7, reduce_bucket_params=5e8)


def _zero3(model, gpus, micro_batch, **kw):
    heads, hidden, layers = {"175B": (96, 12288, 96), "530B": (128, 20480, 105)}[model]
    row = TABLE_ROWS[0].__class__("zero3", model, heads, hidden, layers, 1, 1, gpus, gpus * micro_batch,
                                  micro_batch, 1, 1.0)
    return estimate(model_config(row), dp=gpus, zero=3, micro_batch=micro_batch, microbatches=1,
                    recompute="full", dtype="fp16", **kw)


@pytest.mark.parametrize("model,gpus,micro_batch", ZERO3_ROWS, ids=[f"{m}-{g}" for m, g, _ in ZERO3_ROWS])
def test_sc21_zero3_rows_fit_under_deepspeeds_leaf_modules(model, gpus, micro_batch):
    assert check_fits(_zero3(model, gpus, micro_batch, **DS03), "a100-80g").startswith("memory: peak ")


def test_zero3_530b_640_needed_the_leaf_module_unit():
    """Counting a whole 530B block (5.03e9 parameters: twice its fp16 weights and once its gradients, 30.2 GB) as
    the gathered working set refused the 640-GPU row that ran (103 GB); DeepSpeed gathers one leaf module at a
    time: the largest is the MLP's h x 4h matrix (4 x 20480^2 = 1.678e9), plus 2.5e7 prefetched and the 5e8 reduce
    bucket: 2 (1.678e9 + 2.5e7) + 2 (1.678e9 + 5e8) bytes."""
    block = _zero3("530B", 640, 4)
    leaf = _zero3("530B", 640, 4, **DS03)
    with pytest.raises(DoesNotFitError):
        check_fits(block, "a100-80g")
    h = 20480
    gathered_block = 12 * h * h + 13 * h  # the block's matrices, biases and norms
    assert block.buffers - leaf.buffers == 6 * gathered_block - (2 * (4 * h * h + 4 * h + 25_000_000)
                                                                 + 2 * (4 * h * h + 4 * h + 500_000_000))


def test_largest_leaf_by_hand():
    from simcomm.memory.layout import _largest_leaf

    cfg = transformer_config("megatron-530b")  # h 20480, 128 heads, GeLU MLP 4h with biases
    h = 20480
    assert _largest_leaf(cfg, 0) == 4 * h * h + 4 * h  # fc1 with its bias beats QKV (3h^2 + 3h)
    with pytest.raises(Exception, match="gather_unit"):
        estimate(cfg, dp=8, zero=3, gather_unit="leaf")


# The four layouts issue 24 lists as refused although they ran (each "published as run", on 80 GB GPUs).
ISSUE_24 = {
    # Llama 3.1 70B, tp 4, cp 2, pp 4 (virtual 5), micro-batch 1, seq 8192, no recomputation, H100 80 GB;
    # Megatron-core: sequence parallel with tp, distributed optimizer (ZeRO-1 over dp x cp); dp 1 (the fewest
    # GPUs, 32: the worst case for the sharded state); 16 micro-batches
    "llama3.1-70b-tp4-cp2-pp4-v5": ("llama3.1-70b", dict(
        tp=4, cp=2, pp=4, dp=1, schedule="interleaved", virtual_stages=5, micro_batch=1, microbatches=16,
        seq=8192, sequence_parallel=True, zero=1)),
    # GPT-3 175B, tp 4, pp 8 (virtual 12), sequence parallel, no recomputation; Megatron-core with
    # FlashAttention and the distributed optimizer; dp 8 (256 GPUs); micro-batch 1
    "gpt3-175b-tp4-pp8-v12-sp": ("gpt3-175b", dict(
        tp=4, pp=8, dp=8, schedule="interleaved", virtual_stages=12, micro_batch=1, microbatches=64,
        sequence_parallel=True, zero=1)),
    # Llama 3 8B, FSDP (ZeRO-3) on 8 GPUs, micro-batch 2, seq 8192, torchtitan's per-operator selective
    # checkpointing, no dropout (torchtitan's Llama)
    "llama3-8b-fsdp8-op": ("llama3-8b", dict(dp=8, zero=3, micro_batch=2, seq=8192, recompute="op",
                                             dropout=False)),
    # Llama 3 70B, tp 8 + sequence parallel, FSDP over 8 replicas, full recomputation, micro-batch 16,
    # seq 8192, no dropout
    "llama3-70b-tp8-sp-fsdp-full-mb16": ("llama3-70b", dict(
        tp=8, dp=8, zero=3, micro_batch=16, seq=8192, sequence_parallel=True, recompute="full", dropout=False)),
}


@pytest.mark.parametrize("key", sorted(ISSUE_24))
def test_issue_24_layouts_that_ran_fit_an_h100(key):
    model, layout = ISSUE_24[key]
    line = check_fits(estimate(model, **layout), "h100")
    assert line.startswith("memory: peak ")


def test_the_four_were_refused_for_the_stated_causes():
    """Each of the four needed one of the corrections: unfused scores charged under flash (the two Megatron
    rows), the selective constant applied to per-op checkpointing, full recomputation's input not / tp."""
    for key in ("llama3.1-70b-tp4-cp2-pp4-v5", "gpt3-175b-tp4-pp8-v12-sp"):
        model, layout = ISSUE_24[key]
        with pytest.raises(DoesNotFitError):  # the s×s scores and dropout masks of unfused attention
            check_fits(estimate(replace(transformer_config(model), attention="unfused"), **layout), "h100")
    model, layout = ISSUE_24["llama3-8b-fsdp8-op"]
    with pytest.raises(DoesNotFitError):  # Megatron's selective (core_attn) under flash keeps nearly everything
        check_fits(estimate(model, **{**layout, "recompute": "selective"}), "h100")
    model, layout = ISSUE_24["llama3-70b-tp8-sp-fsdp-full-mb16"]
    full = estimate(model, **layout)
    stored = full.activations + full.in_flight
    no_sp = estimate(model, **{**layout, "sequence_parallel": False})
    assert no_sp.activations + no_sp.in_flight > 4 * stored  # the 2sbh inputs are 8x under SP


def test_gpt3_175b_plain_data_parallel_is_refused_with_its_numbers():
    # 175B with plain data parallelism (no model parallelism, no ZeRO) on 80 GB: 16 bytes/param of state
    with pytest.raises(DoesNotFitError) as err:
        check_fits(estimate("gpt3-175b", dp=1024), "a100-80g")
    msg = str(err.value)
    assert msg.startswith("memory: gpt3-175b with tp 1, pp 1, dp 1024, ZeRO-0") and "\n" not in msg
    assert "weights 349.2 GB, gradients 349.2 GB, optimizer 2.095 TB" in msg
    assert "but a A100 80GB has 85.9 GB (short by" in msg
