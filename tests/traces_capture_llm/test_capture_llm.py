"""Torch capture of the zoo's dense transformers: leaves, exact parameter counts, token ids, errors."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from simcomm.errors import ConfigError  # noqa: E402
from simcomm.traces.capture import CaptureConfig, _inputs, capture_trace  # noqa: E402
from simcomm.traces.io import load_trace  # noqa: E402
from simcomm.traces.zoo import build_model, model_spec  # noqa: E402
from simcomm.traces.zoo.spec import SpecOps  # noqa: E402
from simcomm.traces.zoo.transformer import build_spec, transformer_config  # noqa: E402

FACT = "tests.traces_capture_llm.factories_llm"


pytestmark = pytest.mark.usefixtures("factories_importable")


def _spec(cfg):
    ops = SpecOps()
    build_spec(cfg, ops, (cfg.seq,))
    return [(x.name, x.module_type, x.params) for x in ops.layers]


def _leaves(model):
    return [(n, type(m).__name__, sum(p.numel() for p in m.parameters()))
            for n, m in model.named_modules() if n and next(m.children(), None) is None]


@pytest.mark.parametrize("factory, total", [("tiny_gpt", 7904), ("tiny_llama", 9360)])
def test_tiny_leaves_match_the_analytic_split(factory, total):
    from tests.traces_capture_llm import factories_llm

    model = getattr(factories_llm, factory)()
    cfg = model.config
    assert cfg.params == total  # hand count in factories_llm's docstring
    assert sum(p.numel() for p in model.parameters()) == total
    assert _leaves(model) == _spec(cfg)
    assert [n for n, _, _ in _leaves(model)] == ["embed", "block0.attn", "block0.mlp", "block1.attn", "block1.mlp",
                                                 "head"]


@pytest.mark.parametrize("name, exact", [("gpt2-small", 124_439_808), ("llama2-7b", 6_738_415_616),
                                         ("llama3-70b", 70_553_706_496), ("megatron-1.7b", None),
                                         ("gpt3-175b", None)])
def test_zoo_transformers_on_meta_count_exactly(name, exact):
    with torch.device("meta"):  # no memory: 175B parameters are only shapes here
        model = build_model(name)
    cfg = transformer_config(name)
    n = sum(p.numel() for p in model.parameters())
    assert n == cfg.params and (exact is None or n == exact)
    spec = model_spec(name)
    assert _leaves(model) == [(x.name, x.module_type, x.params) for x in spec.layers]


def test_tied_head_shares_the_embedding_matrix():
    from tests.traces_capture_llm.factories_llm import tiny_gpt, tiny_llama

    gpt, llama = tiny_gpt(), tiny_llama()
    assert gpt.head.weight is None and list(gpt.head.parameters()) == [gpt.head.norm_weight, gpt.head.norm_bias]
    assert llama.head.weight.shape == (50, 16)


@pytest.mark.parametrize("factory", ["tiny_gpt", "tiny_llama"])
def test_cpu_capture_end_to_end(cli, tmp_path, factory):
    from tests.traces_capture_llm import factories_llm

    out = tmp_path / "t.json"
    rc, stdout, err = cli("trace", "capture", "--module", f"{FACT}:{factory}", "--input-shape", "32", "--batch", "2",
                          "--iters", "2", "--warmup", "1", "--threads", "1", "--optimizer", "adam", "--out", str(out))
    assert rc == 0 and "6 layers" in stdout
    t = load_trace(out)
    spec = _spec(getattr(factories_llm, factory)().config)
    assert [(x.name, x.module_type, x.params) for x in t.layers] == spec
    assert all(x.forward_s > 0 and x.backward_s > 0 for x in t.layers)
    assert t.layers[0].input_shape == (32,) and t.layers[1].input_shape == (32, 16)
    assert t.dtype == "fp32" and t.meta["loss"].startswith("the model's next-token cross-entropy")


def test_bf16_autocast_capture_keeps_fp32_parameters():
    t = capture_trace(CaptureConfig(module=f"{FACT}:tiny_llama", input_shape=(16,), batches=(1,), iters=1,
                                    warmup=0, threads=1, autocast="bf16"))
    assert t.meta["autocast"] == "bf16" and t.dtype == "fp32" and len(t.layers) == 6


def test_language_models_get_valid_token_ids():
    from tests.traces_capture_llm.factories_llm import tiny_gpt

    ids = _inputs(torch, tiny_gpt(), (64, 32), torch.Generator().manual_seed(1))
    assert ids.dtype == torch.int64 and ids.shape == (64, 32)
    assert int(ids.min()) >= 0 and int(ids.max()) < 50 and len(ids.unique()) > 40
    assert _inputs(torch, torch.nn.Linear(2, 2), (3, 2)).dtype == torch.float32


@pytest.mark.parametrize("argv, needle", [
    (["--model", "mixtral-8x7b"], "error: model: 'mixtral-8x7b' is a mixture-of-experts analytic transformer"),
    (["--module", f"{FACT}:tiny_moe", "--input-shape", "32"], "'tiny-moe' is a mixture-of-experts"),
    (["--module", f"{FACT}:tiny_gpt", "--input-shape", "33"], "error: input-shape: the model rejected an input of "
                                                               "shape (33,)"),
])
def test_bad_input_is_one_error_line(cli, tmp_path, argv, needle):
    out = tmp_path / "x.json"
    rc, stdout, err = cli(["trace", "capture", *argv, "--batch", "1", "--iters", "1", "--warmup", "0", "--out",
                           str(out)])
    assert rc == 2 and err.count("\n") == 1 and needle in err and "Traceback" not in err
    assert not out.exists()


def test_bad_autocast_is_refused_before_building():
    with pytest.raises(ConfigError, match="autocast: 'int8' is not one of bf16, fp16"):
        capture_trace(CaptureConfig(model="gpt3-175b", autocast="int8"))


def test_any_dense_config_builds_its_analytic_leaves():
    """Invariant: for any dense config the torch leaves equal the analytic (name, type, params), and the
    forward returns a finite scalar loss on valid token ids."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from simcomm.traces.zoo.torchnet import build_transformer
    from simcomm.traces.zoo.transformer import TransformerConfig

    @settings(max_examples=25, deadline=None)
    @given(layers=st.integers(1, 3), head_dim=st.sampled_from([2, 4]), kv=st.sampled_from([1, 2, 4]),
           groups=st.integers(1, 2), ffn=st.integers(1, 24), vocab=st.integers(2, 40), llama=st.booleans(),
           tied=st.booleans(), bias=st.booleans(), seq=st.integers(1, 8))
    def check(layers, head_dim, kv, groups, ffn, vocab, llama, tied, bias, seq):
        heads = kv * groups
        kw = dict(mlp="swiglu", norm="rmsnorm") if llama else dict(positions=seq)
        cfg = TransformerConfig("h", layers, heads * head_dim, ffn, heads, kv, vocab, seq, tied=tied, bias=bias,
                                **kw)
        model = build_transformer(cfg)
        assert _leaves(model) == _spec(cfg)
        assert sum(p.numel() for p in model.parameters()) == cfg.params
        loss = model(torch.randint(0, vocab, (2, seq), generator=torch.Generator().manual_seed(0)))
        assert loss.shape == () and torch.isfinite(loss)

    check()


def test_an_unfused_config_is_not_captured_as_if_it_were():
    # the torch module runs PyTorch's fused attention: an `unfused` config would be timed as FlashAttention
    from dataclasses import replace

    from simcomm.traces.zoo.torchnet import build_transformer

    cfg = replace(transformer_config("gpt2-small"), attention="unfused")
    with pytest.raises(ConfigError, match="attention: 'unfused' is priced by synthesis only"):
        build_transformer(cfg)
    assert build_transformer(transformer_config("gpt2-small")) is not None
