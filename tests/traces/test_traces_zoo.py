"""The zoo: published parameter counts, and analytic specs equal to the torch modules layer by layer."""

from __future__ import annotations

import pytest

from simcomm.traces.zoo import MODELS, build_model, model_spec

PUBLISHED = {"resnet50": 25_557_032, "vgg16": 138_357_544, "resnet18": 11_689_512, "resnet101": 44_549_160,
             "resnet34": 21_797_672, "shufflenetv2": 2_278_604, "vit-b": 86_567_656, "resnet20-cifar": 269_722,
             "vit-s": 22_050_664, "vit-b-384": 86_859_496, "resnet152": 60_192_808,
             # KerasNLP presets bert_{base,large}_en_uncased (= Hugging Face BertModel)
             "bert-base": 109_482_240, "bert-large": 335_141_888, "bert-large-512": 335_141_888}
# derived, not printed anywhere: BertModel - pooler + Linear(D, 2) (BertForQuestionAnswering)
DERIVED = {"bert-base-squad": 109_482_240 - (768 * 768 + 768) + 768 * 2 + 2,
           "bert-large-squad": 335_141_888 - (1024 * 1024 + 1024) + 1024 * 2 + 2}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_analytic_counts_equal_published(name):
    assert model_spec(name).params == PUBLISHED[name] == MODELS.get(name).published_params


@pytest.mark.parametrize("name", sorted(DERIVED))
def test_squad_heads_replace_the_pooler(name):
    assert model_spec(name).params == DERIVED[name] == MODELS.get(name).published_params
    assert model_spec(name).input_shape == (384,) and model_spec(name).layers[-1].output_shape == (384, 2)


def test_bert_large_flops_hand_check():
    # per token, 24 layers x 2 x (4 D^2 + 2 x 4 D^2) weights (D = 1024) = 604 MFLOP; attention adds 4 T D per layer
    spec = model_spec("bert-large")
    gemm = sum(x.flops for x in spec.layers if x.module_type == "Linear" and x.name.startswith("encoder"))
    assert gemm == pytest.approx(128 * 24 * 2 * 12 * 1024 ** 2, rel=1e-3)
    attn = sum(x.flops for x in spec.layers if x.module_type == "ScaledDotProductAttention")
    assert attn == 24 * (4 * 128 * 128 * 1024 + 5 * 16 * 128 * 128)


def test_every_model_has_a_spec_and_summary():
    for entry in MODELS.entries():
        spec = model_spec(entry.name)
        assert spec.layers and entry.summary and entry.reference
        assert all(x.flops >= 0 and x.params >= 0 for x in spec.layers)
        assert len({x.name for x in spec.layers}) == len(spec.layers)


def test_resnet50_flops_hand_check():
    # ResNet-50 is ~4.1 GMACs per 224x224 image (He et al. 2016 Table 1: 3.8e9 FLOPs counted as MACs
    # for the convolutions alone); our count adds BN/ReLU/pool element ops
    conv = sum(x.flops for x in model_spec("resnet50").layers if x.module_type in ("Conv2d", "Linear"))
    assert 8.0e9 < conv < 8.4e9


torch = pytest.importorskip("torch")

# big ImageNet models take a few seconds each on 2 shared cores; the small ones cover every op kind
AGREE = ["resnet18", "resnet20-cifar", "resnet50-cifar", "vgg16-cifar", "shufflenetv2", "vit-s-cifar10",
         "gan-generator", "gan-discriminator", "lstm-mnist", "gru-mnist", "rnn-mnist", "bert-base", "bert-base-squad"]


def _torch_leaves(name):
    torch.manual_seed(0)
    model = build_model(name)
    seen = []
    for path, mod in model.named_modules():
        if path and next(mod.children(), None) is None:
            mod.register_forward_hook(lambda m, a, o, path=path: seen.append(
                (path, type(m).__name__, sum(p.numel() for p in m.parameters()), tuple(o.shape[1:]))))
    with torch.no_grad():
        model(torch.randn(2, *MODELS.get(name).input_shape))
    return model, seen


@pytest.mark.parametrize("name", AGREE)
def test_torch_module_agrees_layer_by_layer(name):
    model, seen = _torch_leaves(name)
    spec = [(x.name, x.module_type, x.params, x.output_shape) for x in model_spec(name).layers]
    assert seen == spec
    assert sum(p.numel() for p in model.parameters()) == model_spec(name).params


@pytest.mark.parametrize("name", ["resnet50", "vgg16", "resnet101", "resnet34", "vit-b", "bert-large"])
def test_torch_param_counts_published(name):
    # construction only (no forward): cheap even for the large models
    model = build_model(name)
    assert sum(p.numel() for p in model.parameters()) == PUBLISHED[name]
