"""Models given by a Hugging Face config, a zoo name with changes, or their shape alone, run end to end.

Each published config runs through ``simcomm run --strategy megatron --model-config`` at small scale: a few
layers (``--layers``, which changes exactly that) in the tensor/expert-parallel layout its source published,
with fewer pipeline stages and replicas to fit the layers and two nodes.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from simcomm.llm.hf import read_hf_config
from simcomm.llm.zoo import TRANSFORMERS

HF = Path(__file__).resolve().parents[1] / "data" / "hf"
RUN = ("run", "-s", "megatron", "--cluster", "dgx-h100-ndr", "--nodes", "2", "--precision", "bf16", "--batch", "1",
       "--no-baseline", "--fidelity", "analytic", "--json")

#: name -> (layers, seq, options, where the layout comes from)
LAYOUTS = {
    "llama3.1-405b": (4, 8192, ("tp=8", "pp=2"), "Llama 3 paper Table 4: TP 8, PP 16, seq 8192 (PP 2 here)"),
    "llama3.1-70b": (4, 8192, ("tp=8", "pp=2"), "405B's layout of Table 4 (the paper gives none for 70B)"),
    "llama3.1-8b": (4, 8192, ("tp=8", "pp=2"), "405B's layout of Table 4 (the paper gives none for 8B)"),
    "deepseek-v3": (4, 4096, ("pp=2", "experts_parallel=8", "zero=1"),
                    "DeepSeek-V3 report section 3.2: PP 16, EP 64, ZeRO-1, no TP, seq 4096 (PP 2, EP 8 here)"),
    "mixtral-8x22b": (4, 4096, ("tp=2", "pp=2", "experts_parallel=4"), "no published layout: tp 2, ep 4"),
    "qwen2.5-72b": (4, 4096, ("tp=8", "pp=2"), "no published layout: tp 8"),
    "qwen3-235b-a22b": (4, 4096, ("pp=2", "experts_parallel=8", "zero=1"), "no published layout: ep 8"),
}


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_published_configs_run(cli, name):
    layers, seq, opts, _source = LAYOUTS[name]
    path = HF / name / "config.json"
    args = [*RUN, "--model-config", str(path), "--layers", str(layers), "--seq", str(seq)]
    for opt in opts:
        args += ["--opt", opt]
    rc, out, err = cli(*args)
    assert rc == 0, err
    res = json.loads(out)
    small = replace(read_hf_config(path).config, layers=layers, seq=seq)
    label = f"{name}(seq={seq},layers={layers})"  # the keys in the vocabulary's order
    assert res["model"] == label
    line = f"model: {label}, {small.params:,} parameters"
    assert any(a.startswith(line) for a in res["assumed"]), res["assumed"]
    assert any(a.startswith(f"model: {name} from Hugging Face config {path} (model_type ") for a in res["assumed"])
    assert res["mean_s"] > 0


def test_a_zoo_model_at_another_sequence_length(cli):
    rc, out, err = cli(*RUN, "--model", "llama3-8b", "--seq", "2048", "--layers", "2", "--opt", "tp=8")
    assert rc == 0, err
    res = json.loads(out)
    assert res["model"] == "llama3-8b(seq=2048,layers=2)"
    assert "model: llama3-8b changed by the scenario: seq 2048 (was 8192), layers 2 (was 32)" in res["assumed"]
    small = replace(TRANSFORMERS["llama3-8b"][0], seq=2048, layers=2)
    assert f"model: llama3-8b(seq=2048,layers=2), {small.params:,} parameters" in res["assumed"]


def test_a_plain_zoo_transformer_states_its_count(cli):
    rc, out, err = cli(*RUN, "--model", "mixtral-8x7b", "--opt", "tp=8", "--opt", "experts_parallel=2",
                       "--opt", "microbatch=1", "--opt", "zero=1")
    assert rc == 0, err
    assert ("model: mixtral-8x7b, 46,702,792,704 parameters (12,879,925,248 active per token: 2 of 8 experts in 32 "
            "of 32 layers)") in json.loads(out)["assumed"]


def test_a_shape_given_by_keys_alone(cli):
    rc, out, err = cli(*RUN, "--layers", "2", "--hidden", "64", "--heads", "4", "--vocab", "1000", "--seq", "128",
                       "--opt", "tp=4")
    assert rc == 0, err
    res = json.loads(out)
    assert "model: given by its shape; defaults: mlp gelu, norm layernorm, bias true, tied true, kv_heads 4, ffn 256" \
        in res["assumed"]
    # 1000 x 64 embedding, per layer 4 x 64^2 + 4 x 64 attention, 2 x 64 x 256 + 256 + 64 MLP, 4 x 64 norms; final
    # norm 128: 64000 + 2 x (16640 + 33088 + 256) + 128
    assert "model: custom, 164,096 parameters" in res["assumed"]
    rc, out, err = cli(*RUN, "--layers", "2", "--hidden", "64")
    assert rc == 2 and err.count("\n") == 1 and "heads: a model given by its shape needs layers, hidden, heads, " \
        "vocab, seq (missing: heads, vocab, seq)" in err


def test_the_model_table_of_a_scenario_file(cli, tmp_path):
    (tmp_path / "hf").mkdir()
    (tmp_path / "hf" / "config.json").write_text((HF / "qwen2.5-72b" / "config.json").read_text())
    scn = tmp_path / "s.toml"
    scn.write_text('strategy = "megatron"\ncluster = "dgx-h100-ndr"\nnodes = 1\nbatch = 1\nfidelity = "analytic"\n'
                   '[workload]\nprecision = "bf16"\n[model]\nconfig = "hf/config.json"\nseq = 1024\nlayers = 2\n'
                   '[options]\ntp = 8\n')
    rc, out, err = cli("run", str(scn), "--no-baseline", "--json")
    assert rc == 0, err
    assert json.loads(out)["model"] == "hf(seq=1024,layers=2)"
    scn.write_text('[model]\nname = "llama3-8b"\nseq = 1024\nlayers = 2\nbogus = 1\n')
    rc, out, err = cli("run", str(scn), "--no-baseline")
    assert rc == 2 and "unknown key model.'bogus'" in err and "kv_heads" in err and err.count("\n") == 1


@pytest.mark.parametrize("args, message", [
    (("--model", "resnet50", "--layers", "2"), "layers: these keys shape a transformer; model 'resnet50' is not one"),
    (("--model", "llama3-8b", "--model-config", str(HF / "llama3.1-8b" / "config.json")),
     "model_config: give a zoo model or a Hugging Face config, not both"),
    (("--model", "mixtral-8x7b", "--ffn", "1024"), "ffn: every layer of mixtral-8x7b is a mixture-of-experts layer"),
    (("--model", "llama3-8b", "--expert-ffn", "1024"), "expert_ffn: the model has no experts"),
    (("--model", "llama3-8b", "--seq", "0"), "seq: 0 is out of range"),
    (("--model", "llama3-8b", "--mlp", "geglu"), "mlp: 'geglu' is not valid; valid choices: swiglu, gelu, relu2"),
])
def test_bad_shape_keys_are_one_line(cli, args, message):
    rc, out, err = cli("run", "-s", "megatron", "--cluster", "dgx-h100-ndr", "--nodes", "1", *args)
    assert rc == 2 and err.count("\n") == 1 and message in err, err


def test_shape_keys_with_a_ready_trace_are_refused(cli):
    rc, out, err = cli("run", "-s", "allreduce", "--model", "resnet50-v100-roofline", "--seq", "128")
    assert rc == 2 and "seq: the [model] keys shape a transformer the run synthesises" in err


def test_list_models_shows_the_zoo(cli):
    rc, out, err = cli("list", "models")
    assert rc == 0
    for name in ("llama3.1-405b", "deepseek-v3", "qwen3-235b-a22b", "falcon-180b", "bloom-176b", "gpt-22b"):
        assert name in out
