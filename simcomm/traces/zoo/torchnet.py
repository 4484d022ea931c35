"""Torch models from the zoo's architecture functions (imported only for capture).

:func:`build_module` runs an architecture once with :class:`_Builder` (the
analytic ops plus module creation under the same dotted names), then wraps it
in :class:`ZooNet` whose ``forward`` runs the architecture again with
:class:`_Exec`, which applies the created leaves to tensors.  Every leaf is
a distinct module called exactly once per forward, so forward/backward hooks
time each layer on its own.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from simcomm.traces.zoo.spec import SpecOps

__all__ = ["build_module", "ZooNet"]


class ClsPosEmbed(nn.Module):
    """Class token + learned position embedding as one leaf (so their parameters are timed and counted)."""

    def __init__(self, t: int, d: int):
        super().__init__()
        self.cls_token = nn.Parameter(torch.zeros(1, 1, d))
        self.pos_embed = nn.Parameter(torch.randn(1, t + 1, d) * 0.02)

    def forward(self, x):
        return torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos_embed


class LabelEmbedding(nn.Module):
    """ACGAN conditioning: latent * embedding(label); labels cycle 0..classes-1 over the batch."""

    def __init__(self, classes: int, d: int):
        super().__init__()
        self.classes = classes
        self.weight = nn.Parameter(torch.randn(classes, d))

    def forward(self, z):
        labels = torch.arange(z.shape[0], device=z.device) % self.classes
        return z * F.embedding(labels, self.weight)


class BertEmbedding(nn.Module):
    """Word + position + token-type embeddings summed; float inputs are mapped to token ids.

    Capture feeds random normal tensors, so ids are ``|x|*1000 mod vocab`` (any
    valid id exercises the same kernels); token type 0 for every position.
    """

    def __init__(self, vocab: int, max_pos: int, types: int, d: int):
        super().__init__()
        self.vocab = vocab
        self.word = nn.Parameter(torch.randn(vocab, d) * 0.02)
        self.position = nn.Parameter(torch.randn(max_pos, d) * 0.02)
        self.token_type = nn.Parameter(torch.randn(types, d) * 0.02)

    def forward(self, x):
        ids = x if not x.is_floating_point() else (x.abs() * 1000).long()
        ids = ids % self.vocab
        t = ids.shape[1]
        return F.embedding(ids, self.word) + self.position[:t] + self.token_type[0]


class PadShortcut(nn.Module):
    """Option-A shortcut: subsample by 2 and zero-pad channels (no parameters)."""

    def __init__(self, cout: int):
        super().__init__()
        self.cout = cout

    def forward(self, x):
        x = x[:, :, ::2, ::2]
        extra = self.cout - x.shape[1]
        return F.pad(x, (0, 0, 0, 0, extra // 2, extra - extra // 2))


class ScaledDotProductAttention(nn.Module):
    """Multi-head attention core on a fused qkv tensor (B, T, 3D) -> (B, T, D), dropout on the probabilities."""

    def __init__(self, heads: int, p: float = 0.0):
        super().__init__()
        self.heads = heads
        self.p = p

    def forward(self, qkv):
        b, t, d3 = qkv.shape
        q, k, v = qkv.reshape(b, t, 3, self.heads, d3 // (3 * self.heads)).permute(2, 0, 3, 1, 4)
        att = (q @ k.transpose(-2, -1)) * (q.shape[-1] ** -0.5)
        out = F.dropout(att.softmax(dim=-1), self.p, self.training) @ v
        return out.transpose(1, 2).reshape(b, t, d3 // 3)


def _last_step(base):
    """A leaf subclass of nn.RNN/LSTM/GRU that returns the last step's output (one tensor for hooks)."""

    def forward(self, x):
        return base.forward(self, x)[0][:, -1]

    return type(base.__name__, (base,), {"forward": forward, "__doc__": _last_step.__doc__})


_RECURRENT = {cell: _last_step(getattr(nn, cell)) for cell in ("RNN", "LSTM", "GRU")}


def _leaf(kind: str, kw: dict) -> nn.Module:
    if kind == "Conv2d":
        return nn.Conv2d(kw["cin"], kw["cout"], kw["k"], kw["s"], kw["p"], groups=kw["groups"], bias=kw["bias"])
    if kind in ("BatchNorm2d", "BatchNorm1d"):
        return getattr(nn, kind)(kw["c"], eps=kw["eps"])
    table = {
        "Linear": lambda: nn.Linear(kw["fin"], kw["fout"], bias=kw["bias"]),
        "LayerNorm": lambda: nn.LayerNorm(kw["d"], eps=1e-6),
        "ClsPosEmbed": lambda: ClsPosEmbed(kw["t"], kw["d"]),
        "LabelEmbedding": lambda: LabelEmbedding(kw["classes"], kw["d"]),
        "BertEmbedding": lambda: BertEmbedding(kw["vocab"], kw["max_pos"], kw["types"], kw["d"]),
        "ReLU": nn.ReLU, "GELU": nn.GELU, "Tanh": nn.Tanh, "Sigmoid": nn.Sigmoid,
        "LeakyReLU": lambda: nn.LeakyReLU(0.2),
        "Softmax": lambda: nn.Softmax(dim=1),
        "Dropout": lambda: nn.Dropout(kw.get("p", 0.5)),
        "MaxPool2d": lambda: nn.MaxPool2d(kw["k"], kw["s"], kw["p"]),
        "AdaptiveAvgPool2d": lambda: nn.AdaptiveAvgPool2d(kw["out"]),
        "Upsample": lambda: nn.Upsample(scale_factor=kw["factor"]),
        "PadShortcut": lambda: PadShortcut(kw["cout"]),
        "ScaledDotProductAttention": lambda: ScaledDotProductAttention(kw["heads"], kw.get("p", 0.0)),
    }
    if kind in ("RNN", "LSTM", "GRU"):
        return _RECURRENT[kind](kw["fin"], kw["hidden"], batch_first=True)
    return table[kind]()


class _Builder(SpecOps):
    def __init__(self, root: nn.Module):
        super().__init__()
        self.root = root

    def _make(self, name, kind, **kw):
        parent = self.root
        *path, leaf = name.split(".")
        for part in path:
            if not hasattr(parent, part):
                parent.add_module(part, nn.Module())
            parent = getattr(parent, part)
        parent.add_module(leaf, _leaf(kind, kw))


class _Exec:
    """Applies the built leaves; structural ops act on real tensors (batch dim first)."""

    def __init__(self, root: nn.Module):
        self.root = root

    def __getattr__(self, op):
        def call(name, x, *args, **kw):
            return self.root.get_submodule(name)(x)
        return call

    def add(self, a, b):
        return a + b

    def cat(self, xs):
        return torch.cat(xs, dim=1)

    def split(self, x):
        return x.chunk(2, dim=1)

    def shuffle(self, x, groups=2):
        b, c, h, w = x.shape
        return x.view(b, groups, c // groups, h, w).transpose(1, 2).reshape(b, c, h, w)

    def flatten(self, x):
        return torch.flatten(x, 1)

    def tokens(self, x):
        return x.flatten(2).transpose(1, 2)

    def take_cls(self, x):
        return x[:, 0]

    def reshape_chw(self, x, c, h, w):
        return x.reshape(x.shape[0], c, h, w)


class ZooNet(nn.Module):
    """A zoo model as an nn.Module; leaves live under their dotted trace names."""

    def __init__(self, arch, input_shape: tuple[int, ...]):
        super().__init__()
        self._arch = arch
        self.input_shape = tuple(input_shape)
        arch(_Builder(self), self.input_shape)

    def forward(self, x):
        return self._arch(_Exec(self), x)


def build_module(arch, input_shape: tuple[int, ...]) -> nn.Module:
    """Build the torch model of an architecture function (partial with its hyper-parameters)."""
    return ZooNet(arch, input_shape)
