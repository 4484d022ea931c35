"""Convolutional architectures of the seed papers: ResNet, VGG-16, ShuffleNetV2.

Each function is written once against the ops interface of
:mod:`simcomm.traces.zoo.spec` and serves both the analytic zoo and the torch
models.  Layer names follow torchvision's where torchvision has the model, so
traces line up with profiles users record with torchvision models; ReLUs are
separate modules per use (torchvision reuses one) so that every activation is
timed on its own.
"""

from __future__ import annotations

__all__ = ["resnet", "resnet_cifar_he", "vgg", "shufflenet_v2"]

_DEPTHS = {18: ("basic", (2, 2, 2, 2)), 34: ("basic", (3, 4, 6, 3)),
           50: ("bottleneck", (3, 4, 6, 3)), 101: ("bottleneck", (3, 4, 23, 3)),
           152: ("bottleneck", (3, 8, 36, 3))}


def _block(ops, x, pre, planes, stride, kind, shape):
    """One residual block; ``shape`` is the analytic input shape (decides the projection)."""
    expansion = 4 if kind == "bottleneck" else 1
    identity = x
    if kind == "basic":
        out = ops.conv(f"{pre}.conv1", x, planes, 3, stride, 1)
        out = ops.bn(f"{pre}.bn1", out)
        out = ops.act(f"{pre}.relu1", out)
        out = ops.conv(f"{pre}.conv2", out, planes, 3, 1, 1)
        out = ops.bn(f"{pre}.bn2", out)
    else:
        out = ops.conv(f"{pre}.conv1", x, planes, 1)
        out = ops.bn(f"{pre}.bn1", out)
        out = ops.act(f"{pre}.relu1", out)
        out = ops.conv(f"{pre}.conv2", out, planes, 3, stride, 1)
        out = ops.bn(f"{pre}.bn2", out)
        out = ops.act(f"{pre}.relu2", out)
        out = ops.conv(f"{pre}.conv3", out, planes * expansion, 1)
        out = ops.bn(f"{pre}.bn3", out)
    if stride != 1 or shape[0] != planes * expansion:
        identity = ops.conv(f"{pre}.downsample.0", x, planes * expansion, 1, stride)
        identity = ops.bn(f"{pre}.downsample.1", identity)
    return ops.act(f"{pre}.relu", ops.add(out, identity)), (planes * expansion,) + _down(shape, stride)


def _down(shape, stride):
    return tuple((d + stride - 1) // stride for d in shape[1:])


def resnet(ops, x, depth: int, classes: int, cifar_stem: bool):
    """He et al. 2016 ResNet; ``cifar_stem`` uses a 3x3 stride-1 stem and no max-pool (seed 000)."""
    kind, counts = _DEPTHS[depth]
    if cifar_stem:
        x = ops.conv("conv1", x, 64, 3, 1, 1)
        shape = (64, 32, 32)
    else:
        x = ops.conv("conv1", x, 64, 7, 2, 3)
        shape = (64, 112, 112)
    x = ops.bn("bn1", x)
    x = ops.act("relu", x)
    if not cifar_stem:
        x = ops.maxpool("maxpool", x, 3, 2, 1)
        shape = (64, 56, 56)
    for stage, (planes, n) in enumerate(zip((64, 128, 256, 512), counts, strict=False), start=1):
        for i in range(n):
            stride = 2 if stage > 1 and i == 0 else 1
            x, shape = _block(ops, x, f"layer{stage}.{i}", planes, stride, kind, shape)
    x = ops.avgpool("avgpool", x)
    return ops.linear("fc", ops.flatten(x), classes)


def resnet_cifar_he(ops, x, depth: int, classes: int = 10):
    """He et al. 2016 section 4.2 CIFAR ResNet (6n+2 layers, 16/32/64 channels, option-A shortcuts)."""
    n = (depth - 2) // 6
    x = ops.conv("conv1", x, 16, 3, 1, 1)
    x = ops.bn("bn1", x)
    x = ops.act("relu", x)
    cin = 16
    for stage, planes in enumerate((16, 32, 64), start=1):
        for i in range(n):
            stride = 2 if stage > 1 and i == 0 else 1
            pre = f"layer{stage}.{i}"
            out = ops.conv(f"{pre}.conv1", x, planes, 3, stride, 1)
            out = ops.bn(f"{pre}.bn1", out)
            out = ops.act(f"{pre}.relu1", out)
            out = ops.conv(f"{pre}.conv2", out, planes, 3, 1, 1)
            out = ops.bn(f"{pre}.bn2", out)
            identity = ops.pad_shortcut(f"{pre}.shortcut", x, planes) if stride != 1 or cin != planes else x
            x = ops.act(f"{pre}.relu2", ops.add(out, identity))
            cin = planes
    x = ops.avgpool("avgpool", x)
    return ops.linear("fc", ops.flatten(x), classes)


_VGG16 = (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M")


def vgg(ops, x, classes: int = 1000, cifar: bool = False):
    """VGG-16 (Simonyan & Zisserman 2015, configuration D); ``cifar``: BN after each conv, FC 512->10."""
    i = 0
    for v in _VGG16:
        if v == "M":
            x = ops.maxpool(f"features.{i}", x, 2, 2)
            i += 1
            continue
        x = ops.conv(f"features.{i}", x, v, 3, 1, 1, bias=True)
        i += 1
        if cifar:
            x = ops.bn(f"features.{i}", x)
            i += 1
        x = ops.act(f"features.{i}", x)
        i += 1
    if cifar:
        return ops.linear("classifier", ops.flatten(x), classes)
    x = ops.avgpool("avgpool", x, 7)
    x = ops.flatten(x)
    x = ops.linear("classifier.0", x, 4096)
    x = ops.act("classifier.1", x)
    x = ops.dropout("classifier.2", x, 0.5)
    x = ops.linear("classifier.3", x, 4096)
    x = ops.act("classifier.4", x)
    x = ops.dropout("classifier.5", x, 0.5)
    return ops.linear("classifier.6", x, classes)


def _shuffle_unit(ops, x, pre, inp, oup, stride):
    bf = oup // 2
    if stride == 1:
        x1, x2 = ops.split(x)
    else:
        b = ops.conv(f"{pre}.branch1.0", x, inp, 3, stride, 1, groups=inp)
        b = ops.bn(f"{pre}.branch1.1", b)
        b = ops.conv(f"{pre}.branch1.2", b, bf, 1)
        b = ops.bn(f"{pre}.branch1.3", b)
        x1 = ops.act(f"{pre}.branch1.4", b)
        x2 = x
    y = ops.conv(f"{pre}.branch2.0", x2, bf, 1)
    y = ops.bn(f"{pre}.branch2.1", y)
    y = ops.act(f"{pre}.branch2.2", y)
    y = ops.conv(f"{pre}.branch2.3", y, bf, 3, stride, 1, groups=bf)
    y = ops.bn(f"{pre}.branch2.4", y)
    y = ops.conv(f"{pre}.branch2.5", y, bf, 1)
    y = ops.bn(f"{pre}.branch2.6", y)
    y = ops.act(f"{pre}.branch2.7", y)
    return ops.shuffle(ops.cat([x1, y]))


def shufflenet_v2(ops, x, classes: int = 1000):
    """ShuffleNetV2 1x (Ma et al. 2018), torchvision layout: stages of 4/8/4 units, 116/232/464 channels."""
    x = ops.conv("conv1.0", x, 24, 3, 2, 1)
    x = ops.bn("conv1.1", x)
    x = ops.act("conv1.2", x)
    x = ops.maxpool("maxpool", x, 3, 2, 1)
    inp = 24
    for stage, (n, oup) in enumerate(zip((4, 8, 4), (116, 232, 464), strict=False), start=2):
        for i in range(n):
            x = _shuffle_unit(ops, x, f"stage{stage}.{i}", inp, oup, 2 if i == 0 else 1)
            inp = oup
    x = ops.conv("conv5.0", x, 1024, 1)
    x = ops.bn("conv5.1", x)
    x = ops.act("conv5.2", x)
    x = ops.avgpool("avgpool", x)
    return ops.linear("fc", ops.flatten(x), classes)

