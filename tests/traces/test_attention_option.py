"""The attention option of zoo transformers: ``flash`` (default) or ``unfused`` (Megatron-LM 2021-22).

Exact FLOPs and bytes of a tiny config by hand, the meta that ``megatron``'s selective recomputation reads,
and the option through every door: library, scenario keys and TOML, ``run``/``whatif``/``plan``/``trace synth``.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from simcomm.errors import ConfigError
from simcomm.llm.compute import attention_shares, core_share
from simcomm.scenario import KEY, from_flat, load_scenario, to_flat
from simcomm.traces.devices import get_device
from simcomm.traces.synth import synth_layers, synth_trace
from simcomm.traces.zoo.transformer import (
    ATTENTIONS,
    SCORE_ELEMS,
    TRANSFORMERS,
    TransformerConfig,
    attention_kind,
    layer_specs,
    transformer_meta,
    transformer_trace,
)

# s = 4 tokens, h = 8, 2 heads of 4 (q = kv = 8), GPT-style (biases, LayerNorm)
TINY = TransformerConfig("tiny", layers=1, hidden=8, ffn=32, heads=2, kv_heads=2, vocab=16, seq=4, tied=True,
                         positions=4)


def _attn(cfg):
    return next(s for s in layer_specs(cfg) if s.module_type == "TransformerAttention")


def test_tiny_attention_flops_and_bytes_by_hand():
    flash, unfused = _attn(TINY), _attn(replace(TINY, attention="unfused"))
    # projections 2 s (h (q + 2 kv) + q h) = 2*4*(8*24 + 64) = 2048; core 4 s^2 q = 4*16*8 = 512, causal half 256
    assert flash.flops == 2048 + 256 == 2304
    assert unfused.flops == 2048 + 512 == 2560
    # activations s (h + 2h + 2(q + 2kv) + 2q + h + 3h) = 4 * 120 = 480; unfused adds 6.5 * heads * s^2 = 208
    assert SCORE_ELEMS == 6.5
    assert flash.mem_elems == 480
    assert unfused.mem_elems == 480 + 6.5 * 2 * 16 == 688
    assert (flash.params, flash.saved_elems, flash.mask_elems) == (unfused.params, unfused.saved_elems, unfused.mask_elems)
    assert flash.params == 8 * 24 + 64 + 32 + 16 == 304  # weights, biases, LayerNorm
    # nothing else moves
    others = [[s for s in layer_specs(c) if s.module_type != "TransformerAttention"]
              for c in (TINY, replace(TINY, attention="unfused"))]
    assert others[0] == others[1]


def test_tiny_attention_roofline_times_by_hand():
    """Additive roofline on a made-up device: 1000 FLOP/s, 100 B/s, efficiencies 1, no launch cost, bf16."""
    dev = replace(get_device("a100"), peak_flops={"bf16": 1000.0}, mem_bw=100.0, compute_eff=1.0, memory_eff=1.0,
                  launch_s=0.0, fitted=())
    (fl,), (un,) = (synth_layers([_attn(c)], [1], dev, "bf16", "none", additive=True)
                    for c in (TINY, replace(TINY, attention="unfused")))
    # forward F/P + 2 bytes (params + mem)/W; backward 2F/P + 2x the bytes
    assert fl.forward_s == pytest.approx(2304 / 1000 + 2 * (304 + 480) / 100, rel=1e-14)  # 17.984
    assert un.forward_s == pytest.approx(2560 / 1000 + 2 * (304 + 688) / 100, rel=1e-14)  # 22.4
    assert un.backward_s == pytest.approx(2 * 2560 / 1000 + 4 * (304 + 688) / 100, rel=1e-14)  # 44.8
    assert (fl.flops, un.flops) == (2304, 2560)


def test_meta_says_full_core_only_when_unfused_and_core_share_reads_it():
    flash, unfused = TINY.meta(), replace(TINY, attention="unfused").meta()
    assert "attention_core" not in flash and "attention" not in flash  # the default meta is as before
    assert unfused == {**flash, "attention_core": "full"} and list(unfused)[-1] == "attention_core"
    assert (attention_kind(flash), attention_kind(unfused), attention_kind({})) == ("flash", "unfused", "flash")
    # core share: projections 2048; core 256 (flash) or 512 (unfused): 1/9 and 1/5, s/(4h+s) and s/(2h+s)
    assert core_share(4, 8, flash) == pytest.approx(256 / 2304, rel=1e-15) == pytest.approx(4 / 36)
    assert core_share(4, 8, unfused) == pytest.approx(512 / 2560, rel=1e-15) == pytest.approx(4 / 20)
    assert attention_shares(4, 8, unfused)[1] == pytest.approx(0.2, rel=1e-15)
    # a synthesised trace carries it, and the registry's models keep their old meta by default
    t = transformer_trace("gpt2-small", "a100", attention="unfused")
    assert t.meta["transformer"]["attention_core"] == "full"
    assert transformer_meta("gpt2-small") == {"transformer": TRANSFORMERS["gpt2-small"][0].meta()}
    assert "attention_core" not in transformer_meta("gpt2-small")["transformer"]


def test_synth_trace_default_is_flash_and_unfused_moves_only_attention():
    none = synth_trace("gpt2-small", "a100", 2, "bf16", "adam")
    flash = synth_trace("gpt2-small", "a100", 2, "bf16", "adam", attention="flash")
    unfused = synth_trace("gpt2-small", "a100", 2, "bf16", "adam", attention="unfused")
    assert none == flash and none.meta == flash.meta
    for a, b in zip(flash.layers, unfused.layers, strict=False):
        if a.module_type == "TransformerAttention":
            assert b.forward_s > a.forward_s and b.backward_s > a.backward_s and b.update_s == a.update_s
            assert b.flops == a.flops + 2 * 2 * 1024 * 1024 * 768  # batch 2 x the other half of 4 s^2 h
        else:
            assert a == b


@pytest.mark.parametrize("model, attention, message", [
    ("gpt2-small", "fused", "attention: 'fused' is not valid; valid choices: flash, unfused"),
    ("resnet50", "unfused", "attention: 'unfused' prices the zoo's decoder-only transformers only; model "
                            "'resnet50' is not one"),
    ("bert-large", "flash", "model 'bert-large' is not one"),
    ("resnet9", "unfused", "unknown model 'resnet9'"),
])
def test_synth_refuses_bad_attention_in_one_line(model, attention, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")) as exc:
        synth_trace(model, "a100", attention=attention)
    assert "\n" not in str(exc.value)


def test_config_refuses_a_bad_attention():
    with pytest.raises(ConfigError, match="attention: 'full' is not valid; valid choices: flash, unfused"):
        replace(TINY, attention="full")


# -- the scenario vocabulary ----------------------------------------------------------------------------------
def test_key_declared_once_with_the_library_choices():
    k = KEY["attention"]
    assert (k.section, k.attr, k.kind, k.choices) == ("workload", "attention", "choice", tuple(ATTENTIONS))
    assert from_flat({}).workload.attention is None  # not given: the model's own (flash)
    scn = from_flat({"model": "gpt2-small", "attention": "unfused"})
    assert scn.workload.attention == "unfused" and from_flat(to_flat(scn)) == scn
    with pytest.raises(ConfigError, match="^attention: 'Unfused' is not valid; valid choices: flash, unfused$"):
        from_flat({"attention": "Unfused"})


@pytest.mark.parametrize("body", ['attention = "unfused"\n', '[workload]\nattention = "unfused"\n'])
def test_toml_key_top_level_or_workload(tmp_path, body):
    p = tmp_path / "s.toml"
    p.write_text('strategy = "allreduce"\nmodel = "gpt2-small"\n' + body)
    assert load_scenario(p).workload.attention == "unfused"
    p.write_text('strategy = "allreduce"\n[workload]\nattention = 3\n')
    with pytest.raises(ConfigError, match="^attention: 3 is not valid; valid choices: flash, unfused$"):
        load_scenario(p)


_RUN = ("run", "--strategy", "allreduce", "--model", "gpt3-125m", "--batch", "1", "--cluster", "dgx-a100-hdr",
        "--nodes", "1", "--precision", "bf16", "--fidelity", "analytic", "--json")


def test_run_unfused_is_slower_and_says_so(cli):
    out = {}
    for att in ("flash", "unfused"):
        rc, text, err = cli(*_RUN, "--attention", att)
        assert rc == 0, err
        out[att] = json.loads(text)
    lines = {a: [x for x in out[a]["assumed"] if x.startswith("trace:")] for a in out}
    assert lines["flash"][0].endswith("; attention: " + ATTENTIONS["flash"])
    assert lines["unfused"][0].endswith("; attention: " + ATTENTIONS["unfused"])
    assert "6.5 two-byte elements per score per head" in lines["unfused"][0]
    # seq 2048 > h 768: the full core and the score traffic cost more than the rest of the change
    assert out["unfused"]["breakdown"]["compute"] > 1.3 * out["flash"]["breakdown"]["compute"]
    assert out["unfused"]["mean_s"] > out["flash"]["mean_s"]
    rc, text, _ = cli(*_RUN)  # the default is flash, bit for bit
    assert rc == 0 and json.loads(text) == out["flash"]


@pytest.mark.parametrize("argv, needle", [
    (("--model", "gpt2-small", "--attention", "fast"), "attention: 'fast' is not valid; valid choices: flash, unfused"),
    (("--model", "resnet50", "--attention", "unfused"), "attention: 'unfused' prices the zoo's decoder-only"),
    (("--model", "resnet50-v100-roofline", "--attention", "flash"), "attention: prices a zoo transformer's"),
])
def test_run_bad_attention_is_one_error_line_exit_2(cli, argv, needle):
    rc, out, err = cli("run", "--strategy", "allreduce", "--fidelity", "analytic", *argv)
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("error: " + needle)


def test_run_trace_file_with_attention_is_refused(cli, tmp_path):
    rc, _, err = cli("trace", "synth", "--model", "gpt2-small", "--device", "a100", "--batch", "1", "--attention",
                     "unfused", "--out", str(tmp_path / "t.json"))
    assert rc == 0, err
    saved = json.loads((tmp_path / "t.json").read_text())
    assert saved["meta"]["transformer"]["attention_core"] == "full"
    rc, _, err = cli("run", "--strategy", "allreduce", "--trace", str(tmp_path / "t.json"), "--attention", "unfused")
    assert rc == 2 and err.startswith("error: attention: prices a zoo transformer's synthesised trace")
    rc, _, err = cli("trace", "synth", "--model", "vgg16", "--device", "a100", "--attention", "unfused",
                     "--out", str(tmp_path / "v.json"))
    assert rc == 2 and err.startswith("error: attention:") and not (tmp_path / "v.json").exists()


def test_whatif_axis_points():
    from simcomm.whatif.point import evaluate

    base = {"strategy": "allreduce", "model": "gpt3-125m", "batch": 1, "cluster": "dgx-a100-hdr", "nodes": 1,
            "precision": "bf16", "fidelity": "analytic"}
    rows = {a: evaluate({**base, "attention": a}) for a in ("flash", "unfused")}
    assert all(r["status"] == "ok" for r in rows.values())
    assert rows["unfused"]["compute_s"] > 1.3 * rows["flash"]["compute_s"]
    assert any(ATTENTIONS["unfused"] in line for line in rows["unfused"]["assumed"])


def test_whatif_vary_bad_value_is_one_line(cli, tmp_path):
    rc, _, err = cli("whatif", "--strategies", "allreduce", "--model", "gpt2-small", "--vary",
                     "attention=flash,fused", "--out", str(tmp_path / "w"))
    assert rc == 2 and err == "error: attention: 'fused' is not valid; valid choices: flash, unfused\n"
    assert not (tmp_path / "w").exists()


def test_plan_prices_unfused_attention(cli):
    argv = ("plan", "--model", "gpt2-small", "--global-batch", "8", "--simulate", "1", "--top", "3", "--json")
    rc, flash, err = cli(*argv)
    assert rc == 0, err
    rc, unfused, err = cli(*argv, "--attention", "unfused")
    assert rc == 0, err
    flash, unfused = json.loads(flash), json.loads(unfused)
    # the default is said too: it changes every row's compute
    assert ("attention: " + ATTENTIONS["flash"] + " (the default; --attention unfused for Megatron-LM 2021-22's)"
            in flash["assumed"])
    assert "attention: " + ATTENTIONS["unfused"] in unfused["assumed"]
    assert unfused["rows"][0]["step_s"] > flash["rows"][0]["step_s"]
    rc, _, err = cli(*argv, "--attention", "half")
    assert rc == 2 and err == "error: attention: 'half' is not valid; valid choices: flash, unfused\n"
