"""The built-in model zoo: seed-paper models, analytic (torch-free) and as torch modules.

``MODELS`` maps a name to a :class:`ZooModel`; :func:`model_spec` gives the
analytic layer list without torch, :func:`build_model` the ``nn.Module``
(importing torch lazily).  ``published_params`` is the count the literature
states (checked by tests); ``None`` means no published count exists and the
analytic and torch counts are checked against each other only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from simcomm.registry import Registry
from simcomm.traces.zoo import cnn, other
from simcomm.traces.zoo.spec import LayerSpec, ModelSpec, SpecOps

__all__ = ["ZooModel", "MODELS", "model_spec", "build_model", "LayerSpec", "ModelSpec"]


@dataclass(frozen=True)
class ZooModel:
    """A zoo entry: architecture function with its hyper-parameters bound, and input shape per sample."""

    name: str
    arch: Callable
    input_shape: tuple[int, ...]
    published_params: int | None
    param_source: str


MODELS: Registry[ZooModel] = Registry("model", "simcomm.models")


def _add(name, arch, shape, published, source, summary, reference):
    MODELS.add(name, ZooModel(name, arch, shape, published, source), summary=summary, reference=reference)


_IMG, _CIFAR = (3, 224, 224), (3, 32, 32)
_HE = "He et al., Deep Residual Learning, CVPR 2016"
for _d, _pub in ((18, 11_689_512), (34, 21_797_672), (50, 25_557_032), (101, 44_549_160), (152, 60_192_808)):
    _add(f"resnet{_d}", partial(cnn.resnet, depth=_d, classes=1000, cifar_stem=False), _IMG, _pub,
         "torchvision model docs", f"ResNet-{_d}, ImageNet stem, 224x224, 1000 classes", _HE)
for _d, _pub in ((18, 11_173_962), (34, 21_282_122), (50, 23_520_842), (101, 42_512_970)):
    _add(f"resnet{_d}-cifar", partial(cnn.resnet, depth=_d, classes=10, cifar_stem=True), _CIFAR, _pub,
         "kuangliu/pytorch-cifar layout (count derived, not published)",
         f"ResNet-{_d}, CIFAR stem (3x3 conv, no max-pool), 32x32, 10 classes (seed 000 Table II)",
         _HE + "; seed 000 Table II")
_add("resnet20-cifar", partial(cnn.resnet_cifar_he, depth=20), _CIFAR, 269_722, "He et al. 2016 Table 6 (0.27M)",
     "ResNet-20 for CIFAR-10 (16/32/64 channels, option-A shortcuts), as in seed 002", _HE + " sec. 4.2")
_add("vgg16", partial(cnn.vgg, classes=1000), _IMG, 138_357_544, "torchvision model docs",
     "VGG-16 (configuration D), 224x224, 1000 classes (seeds 002, 003, 004)",
     "Simonyan & Zisserman, ICLR 2015")
_add("vgg16-cifar", partial(cnn.vgg, classes=10, cifar=True), _CIFAR, 14_728_266,
     "kuangliu/pytorch-cifar VGG16 (count derived, not published)",
     "VGG-16 with BatchNorm for CIFAR-10, one FC 512->10", "Simonyan & Zisserman, ICLR 2015")
_add("shufflenetv2", partial(cnn.shufflenet_v2, classes=1000), _IMG, 2_278_604, "torchvision model docs",
     "ShuffleNetV2 1x, 224x224, 1000 classes (seed 000 Table II)", "Ma et al., ECCV 2018")
_VIT = "Dosovitskiy et al., ICLR 2021; timm layout"
_add("vit-b", partial(other.vit, dim=768, depth=12, heads=12, patch=16, classes=1000), _IMG, 86_567_656,
     "timm vit_base_patch16_224", "ViT-B/16, 224x224, 1000 classes", _VIT)
_add("vit-b-384", partial(other.vit, dim=768, depth=12, heads=12, patch=16, classes=1000), (3, 384, 384),
     86_859_496, "timm vit_base_patch16_384; seed 000 Table II prints 8686 (x10^4)",
     "ViT-B/16 at 384x384 as in seed 000 Table II (Timm transfer)", _VIT + "; seed 000 Table II")
_add("vit-s", partial(other.vit, dim=384, depth=12, heads=6, patch=16, classes=1000), _IMG, 22_050_664,
     "timm vit_small_patch16_224", "ViT-S/16, 224x224, 1000 classes", _VIT)
_add("vit-s-cifar10", partial(other.vit, dim=384, depth=12, heads=6, patch=16, classes=10), _IMG, 21_669_514,
     "timm vit_small_patch16_224 with a 10-class head; seed 000 Table II prints 2166 (x10^4)",
     "ViT-S/16, 224x224, 10-class head, as fine-tuned on CIFAR-10 in seed 000", _VIT + "; seed 000 Table II")
_BERT = "Devlin et al., BERT, NAACL 2019; Hugging Face transformers layout"
_BERT_PUB = "KerasNLP presets bert_{base,large}_en_uncased (= HF BertModel); Devlin et al. print 110M/340M"
for _size, _dim, _depth, _heads, _pub in (("base", 768, 12, 12, 109_482_240), ("large", 1024, 24, 16, 335_141_888)):
    for _seq in (128, 512):
        _name = f"bert-{_size}" + ("" if _seq == 128 else f"-{_seq}")
        _add(_name, partial(other.bert, dim=_dim, depth=_depth, heads=_heads, head="pooler"), (_seq,), _pub,
             _BERT_PUB, f"BERT-{_size} encoder + pooler (BertModel), sequence {_seq} (pre-training heads omitted)",
             _BERT)
# the SQuAD span head replaces the pooler: HF BertForQuestionAnswering, counted from the layout (no printed count)
for _size, _dim, _depth, _heads, _pub in (("base", 768, 12, 12, 108_893_186), ("large", 1024, 24, 16, 334_094_338)):
    _add(f"bert-{_size}-squad", partial(other.bert, dim=_dim, depth=_depth, heads=_heads, head="squad"), (384,),
         _pub, "derived: BertModel count - pooler + Linear(D, 2) (HF BertForQuestionAnswering layout)",
         f"BERT-{_size} + SQuAD span head (BertForQuestionAnswering), sequence 384", _BERT)
_S0 = "seed 000 Table II"
_add("gan-generator", partial(other.gan_generator, img=32), (128,), None, "no published count",
     "Seed 000 ACGAN generator: latent 128 -> 32x32x1 MNIST image", _S0 + "; Odena et al. ACGAN 2017")
_add("gan-discriminator", other.gan_discriminator, (1, 32, 32), None, "no published count",
     "Seed 000 ACGAN discriminator: 32x32x1 -> validity + 10-class label", _S0 + "; Odena et al. ACGAN 2017")
for _cell in ("lstm", "gru", "rnn"):
    _add(f"{_cell}-mnist", partial(other.recurrent, cell=_cell.upper(), hidden=128), (28, 28), None,
         "no published count (hidden size 128 assumed)",
         f"Seed 000 MNIST {_cell.upper()}(128) + BN + FC(32) + FC(10), rows as a 28-step sequence", _S0)


def model_spec(name: str) -> ModelSpec:
    """Analytic layer list of a zoo model (no torch); unknown names list the choices."""
    from simcomm.traces.zoo.transformer import TransformerConfig, build_spec

    model = MODELS.get(name)
    ops = SpecOps()
    if isinstance(model.arch, TransformerConfig):  # a zoo transformer is its config (llm.models: shapes only)
        build_spec(model.arch, ops, model.input_shape)
    else:
        model.arch(ops, model.input_shape)
    return ModelSpec(name, model.input_shape, tuple(ops.layers))


def build_model(name: str):
    """The torch ``nn.Module`` of a zoo model (imports torch)."""
    model = MODELS.get(name)
    from simcomm.traces.zoo.torchnet import build_module
    return build_module(model.arch, model.input_shape)

# decoder-only transformers (dense and MoE): analytic only, see simcomm/traces/zoo/transformer.py
from simcomm.traces.zoo import transformer as _transformer  # noqa: E402

_transformer.register(_add)
