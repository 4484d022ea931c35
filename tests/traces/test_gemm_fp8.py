"""The GEMM model (tiles, waves, memory floor), the per-rank leaf times at tp/cp, and FP8 as Transformer Engine runs it.

Modules: simcomm/traces/gemm.py, simcomm/traces/transformer_cost.py, simcomm/llm/compute.py; docs/transformers.md.
"""

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simcomm.errors import ConfigError
from simcomm.llm.compute import sharded_layer_times
from simcomm.traces.devices import DeviceSpec, get_device
from simcomm.traces.gemm import GemmDevice, gemm_seconds, tensor_seconds, tile_efficiency, tile_rate, tile_waves
from simcomm.traces.schema import Trace
from simcomm.traces.synth import roofline_time, synth_trace
from simcomm.traces.transformer_cost import LeafPricing, Sharding, leaf_seconds
from simcomm.traces.zoo.transformer import layer_specs, transformer_config, transformer_trace
from simcomm.workload import layer_times

# 4 SMs at 1 TFLOP/s in all (0.25 each), bandwidth that never binds
TOY = GemmDevice(peak=1e12, sms=4, compute_eff=1.0, mem_bw=1e30, memory_eff=1.0)


# -- tiles and waves, by hand ------------------------------------------------------------------------------
def test_a_full_wave_runs_at_the_ideal_rate():
    # 256 x 256 on 4 SMs: four 128x128 tiles, one wave: 2*256*256*64 / 1e12 exactly
    assert tile_waves(256, 256, 4, (128, 128)) == 1
    assert tensor_seconds(256, 256, 64, TOY) == pytest.approx(2 * 256 * 256 * 64 / 1e12, rel=1e-12)
    assert tile_efficiency(256, 256, 4) == 1.0


def test_wave_quantisation_by_hand():
    # 640 x 128: five 128x128 tiles on 4 SMs are 2 waves (the second 1/4 full); 256x128 tiles: 3 tiles, 1 wave
    # of twice the work.  Either way 2 tile-times of 128x128x64 = 2 * (2*128*128*64) / 0.25e12 = 1.6x ideal;
    # ten 64x128 tiles are 3 waves at 2/3 rate (2.25 such times), twenty 64x64 5 waves at half rate (2.5)
    assert tile_waves(640, 128, 4, (128, 128)) == 2 and tile_waves(640, 128, 4, (256, 128)) == 1
    ideal = 2 * 640 * 128 * 64 / 1e12
    assert tensor_seconds(640, 128, 64, TOY) == pytest.approx(2 * 2 * 128 * 128 * 64 / 0.25e12, rel=1e-12)
    assert tensor_seconds(640, 128, 64, TOY) / ideal == pytest.approx(1.6, rel=1e-12)
    assert tile_efficiency(640, 128, 4) == pytest.approx(0.625, rel=1e-12)


def test_tile_quantisation_by_hand():
    # 100 x 100 in one 128x128 tile takes the tile's whole time, 2*128*128*32 / 0.25e12; four 64x64 tiles (one
    # wave on 4 SMs) at half rate (reuse 32 of 64) take half of that, and win
    assert tile_rate((64, 64)) == 0.5 and tile_rate((128, 128)) == tile_rate((128, 256)) == 1.0
    assert tile_rate((64, 128)) == pytest.approx(2 / 3, rel=1e-12)
    assert tensor_seconds(100, 100, 32, TOY) == pytest.approx(2 * 64 * 64 * 32 / (0.25e12 * 0.5), rel=1e-12)
    assert tensor_seconds(100, 100, 32, TOY) == pytest.approx(0.5 * 2 * 128 * 128 * 32 / 0.25e12, rel=1e-12)


def test_memory_floor_of_a_thin_gemm():
    dev = replace(TOY, mem_bw=1e9)
    # k = 1: reads 1000 + 1000 elements, writes 1000 x 1000, 2 bytes each -> 2.004e6 B / 1e9 B/s
    assert gemm_seconds(1000, 1000, 1, dev) == pytest.approx((2 * 1000 + 1000 * 1000) * 2 / 1e9, rel=1e-12)
    assert gemm_seconds(1000, 1000, 1, dev) > tensor_seconds(1000, 1000, 1, dev)
    assert gemm_seconds(1000, 1000, 1, dev, in_bytes=1, out_bytes=2) < gemm_seconds(1000, 1000, 1, dev)


def test_no_sms_is_the_plain_flop_time():
    cpu = replace(TOY, sms=0)
    assert tensor_seconds(640, 128, 64, cpu) == pytest.approx(2 * 640 * 128 * 64 / 1e12, rel=1e-12)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 5000), st.integers(1, 5000), st.integers(1, 5000), st.integers(1, 200))
def test_never_faster_than_the_ideal_and_monotone(m, n, k, sms):
    dev = replace(TOY, sms=sms, mem_bw=2e11)
    ideal = 2 * m * n * k / 1e12
    t = gemm_seconds(m, n, k, dev)
    assert t >= ideal * (1 - 1e-12)
    assert gemm_seconds(m + 1, n, k, dev) >= t * (1 - 1e-12)  # more rows never take less time


# -- the leaves ------------------------------------------------------------------------------------------
def test_without_tiles_a_leaf_is_the_additive_roofline():
    """sms = 0: every leaf's time is F / (P e_c) + Q / (W e_m) + t_launch of the zoo's own FLOPs and bytes,
    so the GEMM list and the traffic formulas here agree with simcomm.traces.zoo.transformer's leaves."""
    dev = replace(get_device("h100"), sms=0)
    for model in ("gpt2-small", "llama3-8b", "mixtral-8x7b"):
        cfg = transformer_config(model)
        specs = {s.name: s for s in layer_specs(cfg)}
        pricing = LeafPricing(dev.flops_for("bf16"), 0, 0.6, 0.7, dev.mem_bw, dev.launch_s, 2)
        eff = replace(dev, compute_eff=0.6, memory_eff=0.7)
        for name in ("block0.attn", "block0.mlp", "block0.moe", "head"):
            if name not in specs:
                continue
            s = specs[name]
            f, b = leaf_seconds(s.module_type, cfg.meta(), s.params, 2, pricing)
            flops, nbytes = 2 * s.flops, 2 * (s.params + 2 * s.mem_elems)
            floor = (0.0, 0.0)
            if name == "block0.moe":  # the router (T x experts x h, 8 columns) sits on its memory floor
                tok, h, e = 2 * cfg.seq, cfg.hidden, cfg.experts
                mem = lambda m, n, k: ((m * k + k * n) * 2 + m * n * 2) / (dev.mem_bw * 0.7)  # noqa: E731
                gemm = 2 * tok * h * e / (dev.flops_for("bf16") * 0.6)
                floor = (mem(tok, e, h) - gemm, mem(tok, h, e) + mem(h, e, tok) - 2 * gemm)
                assert floor[0] > 0 and floor[1] > 0
            assert f == pytest.approx(roofline_time(flops, nbytes, eff, "bf16", additive=True) + floor[0],
                                      rel=1e-9), name
            assert b == pytest.approx(roofline_time(2 * flops, 2 * nbytes, eff, "bf16", additive=True) + floor[1],
                                      rel=1e-9), name


def test_tp_sharded_gemms_are_slower_than_a_tp_th_of_the_whole():
    """megatron-3.6b with tp 4 on an A100 at micro-batch 4: every GEMM-bearing leaf takes longer than 1/4 of
    the whole (emptier waves, 768-wide attention output), which the scalar model could not say."""
    t = synth_trace("megatron-3.6b", "a100-80g", 4, "bf16", "adam")
    for layer in t.layers:
        f, b = sharded_layer_times(t, layer, 4, tp=4)
        f1, b1 = layer_times(layer, t.batch, 4)
        if layer.module_type in ("TransformerAttention", "TransformerMLP"):
            assert f > f1 * 1.01 and b > b1 * 1.04
        elif layer.module_type == "TransformerEmbedding":
            assert (f, b) == (f1, b1)  # no GEMM: 1/tp of the trace's time, as before


def test_sharded_times_are_the_trace_at_tp_1_and_scale_an_edited_trace():
    t = synth_trace("gpt2-small", "h100", 8, "bf16", "adam")
    for layer in t.layers:
        assert sharded_layer_times(t, layer, 8) == (layer.forward_s, layer.backward_s)
    layer = t.layers[1]
    doubled = replace(layer, forward_s=2 * layer.forward_s, backward_s=2 * layer.backward_s)
    f, b = sharded_layer_times(t, layer, 8, tp=4, cp=2)
    f2, b2 = sharded_layer_times(t, doubled, 8, tp=4, cp=2)
    assert (f2, b2) == pytest.approx((2 * f, 2 * b), rel=1e-12)  # the model gives the ratio, the trace the scale


def test_a_trace_without_gemm_meta_keeps_a_tp_th():
    t = synth_trace("gpt2-small", "h100", 8, "bf16", "adam")
    bare = Trace(**{**t.__dict__, "meta": {k: v for k, v in t.meta.items() if k != "gemm"}})
    layer = bare.layers[1]
    assert sharded_layer_times(bare, layer, 2, tp=4) == layer_times(layer, 8, 2)


def test_cp_splits_the_tokens_and_the_core():
    t = synth_trace("llama3-8b", "h100", 1, "bf16", "adam")
    attn = t.layers[1]
    pricing = LeafPricing.from_meta(t.meta)
    one = leaf_seconds(attn.module_type, t.meta["transformer"], attn.params, 1, pricing)
    two = leaf_seconds(attn.module_type, t.meta["transformer"], attn.params, 1, pricing, Sharding(cp=2))
    assert one is not None and two is not None
    assert 0.45 * one[0] < two[0] < 0.56 * one[0]  # half the tokens, half the core: about half (waves)


# -- FP8 ---------------------------------------------------------------------------------------------------
TOY8 = DeviceSpec("toy8", "gpu", {"fp32": 1e12, "bf16": 1e12, "fp8": 2e12}, mem_bw=1e12, compute_eff=1.0,
                  memory_eff=1.0, launch_s=0.0)


def _mlp(trace):
    return next(x for x in trace.layers if x.name == "block0.mlp")


def test_fp8_mlp_by_hand():
    """gpt2-small's MLP (s 1024, h 768, f 3072, GeLU) at batch 1 on a device with no SMs, 1 TB/s, fp8 2 TF/s.

    FC1 and FC2 are 2*1024*3072*768 FLOPs each, at the FP8 peak; the traffic Q is 2 bytes x (params +
    1024 x (7h + 4f)); delayed scaling casts FC2's input (1024 x 3072, 4 bytes each: read bf16, write the
    row- and column-wise FP8 copies) and FC1's comes quantised out of the LayerNorm; backward casts both
    output gradients (1024 x (3072 + 768), 4 bytes each)."""
    bf16 = transformer_trace("gpt2-small", TOY8, 1, "bf16", "none")
    fp8 = transformer_trace("gpt2-small", TOY8, 1, "fp8", "none")
    gemm = 2 * 2 * 1024 * 3072 * 768
    q = 2 * ((2 * 768 * 3072 + 3072 + 768 + 2 * 768) + 1024 * (7 * 768 + 4 * 3072))
    cast_f, cast_b = 4 * 1024 * 3072, 4 * 1024 * (3072 + 768)
    assert _mlp(bf16).forward_s == pytest.approx(gemm / 1e12 + q / 1e12, rel=1e-12)
    assert _mlp(fp8).forward_s == pytest.approx(gemm / 2e12 + (q + cast_f) / 1e12, rel=1e-12)
    assert _mlp(fp8).backward_s == pytest.approx(2 * gemm / 2e12 + (2 * q + cast_b) / 1e12, rel=1e-12)
    head8, head16 = (next(x for x in t.layers if x.name == "head") for t in (fp8, bf16))
    assert head8.forward_s == head16.forward_s  # Megatron's output layer is no TE module: bf16
    assert fp8.dtype == "bf16" and fp8.meta["compute_dtype"] == "fp8" and fp8.meta["gemm"]["fp8"]["recipe"] == "delayed"
    assert _mlp(fp8).grad_bytes == _mlp(bf16).grad_bytes  # bf16 weights and gradients


def test_current_scaling_and_mxfp8_cost_more_casts():
    b200 = get_device("b200")
    times = {d: _mlp(transformer_trace("llama3-8b", b200, 1, d)).forward_s for d in ("fp8", "fp8-tensorwise", "mxfp8")}
    assert times["fp8"] < times["mxfp8"] < times["fp8-tensorwise"]


def test_fp8_faster_than_bf16_but_less_than_twice_on_h100():
    """A GEMM-bound layout (gpt3-175b, batch 1, a whole iteration with Adam): FP8 helps, but the attention core,
    the norms, the bf16 head, the casts and the optimizer keep it well under 2x."""
    bf16 = transformer_trace("gpt3-175b", "h100", 1, "bf16")
    fp8 = transformer_trace("gpt3-175b", "h100", 1, "fp8")
    assert 1.2 < bf16.iteration_s / fp8.iteration_s < 2.0
    gemm_only = sum(x.forward_s + x.backward_s for x in bf16.layers if x.module_type == "TransformerMLP") / sum(
        x.forward_s + x.backward_s for x in fp8.layers if x.module_type == "TransformerMLP")
    assert 1.5 < gemm_only < 2.0


@pytest.mark.parametrize("device, dtype, needle", [
    ("a100-80g", "fp8", "device 'a100-80g' (A100 80GB) has none; devices with them: b200, gb200, gb300, h100, h200, h800, l40s"),
    ("v100", "fp8", "device 'v100' (V100) has none"),
    ("h100", "mxfp8", "needs MXFP8 (Blackwell) tensor cores; device 'h100' (H100) has none; devices with them: "
                      "b200, gb200"),
])
def test_fp8_refused_without_the_tensor_cores(device, dtype, needle):
    with pytest.raises(ConfigError, match="dtype: ") as exc:
        synth_trace("gpt3-1.3b", device, 1, dtype, "adam")
    assert needle in str(exc.value)


def test_fp8_refused_for_a_non_transformer():
    with pytest.raises(ConfigError, match="prices the zoo's transformers only; model 'resnet50'"):
        synth_trace("resnet50", "h100", 32, "fp8")


def test_fp8_is_deterministic():
    a = transformer_trace("llama3-70b", "h200", 2, "fp8")
    b = transformer_trace("llama3-70b", "h200", 2, "fp8")
    assert a == b and a.meta == b.meta
