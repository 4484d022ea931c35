"""Torch-free analytic model descriptions: layers, shapes, parameters and FLOPs.

Each zoo architecture is one Python function ``arch(ops, x)`` written against
an *ops* interface.  Run with :class:`SpecOps`, ``x`` is a per-sample shape and
every call appends a :class:`LayerSpec`; run with the torch builder/executor
(:mod:`simcomm.traces.zoo.torchnet`) the same function creates and then runs
real ``nn.Module`` leaves under the same dotted names.  One source of truth
keeps the analytic zoo and the torch models in agreement layer by layer.

FLOP conventions (forward, per sample; a multiply-add counts 2): see
docs/traces.md.  ``mem_elems`` counts the elements a layer reads and writes per
sample (input + output activations, plus attention scores); weights are added
once per batch by the roofline.  ``saved_elems`` counts what backward keeps
besides a layer's output, ``mask_elems`` its one-byte masks, and ``input_kept``
marks a leaf whose input came from a structural op (residual sum, concat)
rather than from a leaf (all for the memory estimate, :mod:`simcomm.memory`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["LayerSpec", "ModelSpec", "NewTensor", "SpecOps", "numel"]


def numel(shape: tuple[int, ...]) -> int:
    return math.prod(shape) if shape else 1


@dataclass(frozen=True)
class LayerSpec:
    """One leaf module as the analytic zoo sees it (shapes per sample, FLOPs per sample)."""

    name: str
    module_type: str
    params: int
    input_shape: tuple[int, ...]
    output_shape: tuple[int, ...]
    flops: float
    mem_elems: float
    # elements per sample that backward keeps besides the output (attention probabilities, recurrent gates)
    saved_elems: float = 0.0
    # one-byte mask elements per sample kept besides the output (attention-probability dropout)
    mask_elems: float = 0.0
    # the input is a tensor no earlier leaf produced (a residual sum, a concatenation): backward keeps it too
    input_kept: bool = False


@dataclass(frozen=True)
class ModelSpec:
    """A model: its input shape per sample and leaf layers in execution order."""

    name: str
    input_shape: tuple[int, ...]
    layers: tuple[LayerSpec, ...]

    @property
    def params(self) -> int:
        return sum(layer.params for layer in self.layers)

    @property
    def flops(self) -> float:
        return sum(layer.flops for layer in self.layers)


class NewTensor(tuple):
    """A shape whose tensor a structural op created (``add``, ``cat``, ``shuffle``), not a leaf.

    The memory estimate counts such a tensor when a leaf consumes it: backward
    keeps the leaf's input, and no leaf output accounts for it.
    """


def _conv_out(size: int, k: int, s: int, p: int) -> int:
    return (size + 2 * p - k) // s + 1


class SpecOps:
    """Shape-tracking ops: each leaf call records a LayerSpec and returns the output shape.

    Subclasses override :meth:`_make` to build real modules from the same
    constructor arguments (the names and order of calls are the model).
    """

    def __init__(self) -> None:
        self.layers: list[LayerSpec] = []

    # -- hook for builders -------------------------------------------------
    def _make(self, name: str, kind: str, **kw) -> None:
        """Called once per leaf with the constructor arguments; no-op here."""

    def _leaf(self, name, kind, params, x, y, flops, mem=None, saved=0.0, masks=0.0, **kw):
        self._make(name, kind, **kw)
        mem = numel(x) + numel(y) if mem is None else mem
        self.layers.append(LayerSpec(name, kind, int(params), tuple(x), tuple(y), float(flops), float(mem),
                                     float(saved), float(masks), isinstance(x, NewTensor)))
        return tuple(y)

    # -- leaves with parameters --------------------------------------------
    def conv(self, name, x, cout, k, s=1, p=0, groups=1, bias=False):
        cin, h, w = x
        y = (cout, _conv_out(h, k, s, p), _conv_out(w, k, s, p))
        params = cout * (cin // groups) * k * k + (cout if bias else 0)
        flops = 2 * (cin // groups) * k * k * numel(y) + (numel(y) if bias else 0)
        return self._leaf(name, "Conv2d", params, x, y, flops, cin=cin, cout=cout, k=k, s=s, p=p,
                          groups=groups, bias=bias)

    def bn(self, name, x, eps=1e-5):
        kind = "BatchNorm2d" if len(x) == 3 else "BatchNorm1d"
        return self._leaf(name, kind, 2 * x[0], x, x, 5 * numel(x), c=x[0], eps=eps)

    def linear(self, name, x, out, bias=True):
        tokens = numel(x[:-1])
        y = tuple(x[:-1]) + (out,)
        params = x[-1] * out + (out if bias else 0)
        flops = 2 * x[-1] * out * tokens + (out * tokens if bias else 0)
        return self._leaf(name, "Linear", params, x, y, flops, fin=x[-1], fout=out, bias=bias)

    def layernorm(self, name, x):
        return self._leaf(name, "LayerNorm", 2 * x[-1], x, x, 5 * numel(x), d=x[-1])

    def cls_pos(self, name, x):
        """Prepend a class token and add learned position embeddings: (T, D) -> (T+1, D)."""
        t, d = x
        y = (t + 1, d)
        return self._leaf(name, "ClsPosEmbed", d + (t + 1) * d, x, y, numel(y), t=t, d=d)

    def token_embed(self, name, x, vocab, max_pos, types, dim):
        """BERT embeddings: word + position + token-type lookups summed, (T,) ids -> (T, D).

        One leaf owns the three tables (their gradients are dense in PyTorch's
        default nn.Embedding, so all of them are communicated).  FLOPs: two adds
        per output element; bytes: ids in, three gathered rows and the sum out.
        """
        (t,) = x
        y = (t, dim)
        return self._leaf(name, "BertEmbedding", (vocab + max_pos + types) * dim, x, y, 2 * numel(y),
                          mem=t + 4 * numel(y), vocab=vocab, max_pos=max_pos, types=types, d=dim)

    def label_embed(self, name, x, classes):
        """Multiply the latent by a class embedding (ACGAN generator conditioning)."""
        return self._leaf(name, "LabelEmbedding", classes * x[-1], x, x, numel(x), classes=classes, d=x[-1])

    def rnn(self, name, x, hidden, cell):
        """One recurrent layer over (T, I); returns the last step's hidden state (H,)."""
        t, i = x
        gates = {"RNN": 1, "GRU": 3, "LSTM": 4}[cell]
        params = gates * (i * hidden + hidden * hidden + 2 * hidden)
        flops = t * (2 * gates * hidden * (i + hidden) + 6 * gates * hidden)
        return self._leaf(name, cell, params, x, (hidden,), flops, mem=numel(x) + t * hidden * (gates + 1),
                          saved=t * hidden * (gates + 1), cell=cell, fin=i, hidden=hidden)

    # -- parameter-free leaves ---------------------------------------------
    def act(self, name, x, kind="ReLU"):
        cost = {"ReLU": 1, "LeakyReLU": 2, "GELU": 8, "Tanh": 4, "Sigmoid": 4, "Softmax": 5, "Dropout": 1}[kind]
        return self._leaf(name, kind, 0, x, x, cost * numel(x))

    def dropout(self, name, x, p):
        return self._leaf(name, "Dropout", 0, x, x, numel(x), p=p)

    def maxpool(self, name, x, k, s, p=0):
        c, h, w = x
        y = (c, _conv_out(h, k, s, p), _conv_out(w, k, s, p))
        return self._leaf(name, "MaxPool2d", 0, x, y, k * k * numel(y), k=k, s=s, p=p)

    def avgpool(self, name, x, out=1):
        y = (x[0], out, out)
        return self._leaf(name, "AdaptiveAvgPool2d", 0, x, y, numel(x), out=out)

    def upsample(self, name, x, factor=2):
        y = (x[0], x[1] * factor, x[2] * factor)
        return self._leaf(name, "Upsample", 0, x, y, numel(y), factor=factor)

    def pad_shortcut(self, name, x, cout):
        """He et al. option A shortcut: stride-2 subsample, zero-pad channels to ``cout``."""
        y = (cout, (x[1] + 1) // 2, (x[2] + 1) // 2)
        return self._leaf(name, "PadShortcut", 0, x, y, numel(y), cout=cout)

    def attn_core(self, name, x, heads, dropout=0.0):
        """softmax(Q K^T / sqrt(d)) V on a fused qkv tensor (T, 3D) -> (T, D), optional dropout on the probabilities.

        Backward keeps the probabilities (heads x T^2) and, with dropout, the
        dropped probabilities and their one-byte mask.
        """
        t, d3 = x
        d = d3 // 3
        flops = 4 * t * t * d + 5 * heads * t * t
        scores = heads * t * t
        return self._leaf(name, "ScaledDotProductAttention", 0, x, (t, d), flops,
                          mem=numel(x) + t * d + 2 * scores, saved=scores * (2 if dropout else 1),
                          masks=scores if dropout else 0.0, heads=heads, p=dropout)

    # -- structure (no layer recorded) -------------------------------------
    def add(self, a, b):
        return NewTensor(a)

    def cat(self, xs):
        return NewTensor((sum(x[0] for x in xs),) + tuple(xs[0][1:]))

    def split(self, x):
        half = (x[0] // 2,) + tuple(x[1:])
        return half, half

    def shuffle(self, x, groups=2):
        return NewTensor(x)  # channel shuffle copies (transpose + reshape)

    def flatten(self, x):
        return (numel(x),)

    def tokens(self, x):
        return (x[1] * x[2], x[0])

    def take_cls(self, x):
        return (x[-1],)

    def reshape_chw(self, x, c, h, w):
        return (c, h, w)
