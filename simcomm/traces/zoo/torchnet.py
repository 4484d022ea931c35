"""Torch models from the zoo's architecture functions (imported only for capture).

:func:`build_module` runs an architecture once with :class:`_Builder` (the
analytic ops plus module creation under the same dotted names), then wraps it
in :class:`ZooNet` whose ``forward`` runs the architecture again with
:class:`_Exec`, which applies the created leaves to tensors.  Every leaf is
a distinct module called exactly once per forward, so forward/backward hooks
time each layer on its own.

Decoder-only transformers (:class:`~simcomm.traces.zoo.transformer.TransformerConfig`)
are built by :func:`build_transformer` instead: four leaf kinds named and
counted exactly as the analytic trace names and counts them (``embed``,
``block{i}.attn``, ``block{i}.mlp``, ``head``), each one module without child
modules, so the capture's hooks time a whole attention or MLP block as the
roofline models it.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from simcomm.traces.zoo.spec import SpecOps

__all__ = ["build_module", "build_transformer", "ZooNet", "TransformerNet"]


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
    from simcomm.traces.zoo.transformer import TransformerConfig

    if isinstance(arch, TransformerConfig):
        return build_transformer(arch)
    return ZooNet(arch, input_shape)


# -- decoder-only transformers -----------------------------------------------------------------------------

def _param(*shape: int, std: float = 0.02) -> nn.Parameter:
    # in-place init works on the meta device too (tests count parameters of 175B models without memory)
    return nn.Parameter(torch.empty(shape).normal_(0.0, std))


def _ones(n: int) -> nn.Parameter:
    return nn.Parameter(torch.ones(n))


def _zeros(n: int) -> nn.Parameter:
    return nn.Parameter(torch.zeros(n))


class _NormParams(nn.Module):
    """Pre-norm parameters: LayerNorm (weight + bias) or RMSNorm (weight), eps 1e-5 as GPT-2 and Llama use."""

    def _init_norm(self, cfg):
        self.norm_kind = cfg.norm
        self.norm_weight = _ones(cfg.hidden)
        self.norm_bias = _zeros(cfg.hidden) if cfg.norm == "layernorm" else None

    def _norm(self, x):
        if self.norm_kind == "layernorm":
            return F.layer_norm(x, (x.shape[-1],), self.norm_weight, self.norm_bias, 1e-5)
        return F.rms_norm(x, (x.shape[-1],), self.norm_weight, 1e-5)


class TransformerEmbedding(nn.Module):
    """Token embedding, plus a learned position table when the config has one (GPT; Llama is rotary)."""

    def __init__(self, cfg):
        super().__init__()
        self.weight = _param(cfg.vocab, cfg.hidden)
        self.position = _param(cfg.positions, cfg.hidden) if cfg.positions else None

    def forward(self, ids):
        x = F.embedding(ids, self.weight)
        return x + self.position[:ids.shape[1]] if self.position is not None else x


def _rotary(x, base: float = 10000.0):
    """Rotary position embedding (half rotation) on (b, heads, t, d); the angles only set values, not cost."""
    t, d = x.shape[-2], x.shape[-1]
    inv = base ** (-torch.arange(0, d, 2, device=x.device, dtype=torch.float32) / d)
    ang = torch.outer(torch.arange(t, device=x.device, dtype=torch.float32), inv)
    cos, sin = torch.cat([ang.cos()] * 2, -1).to(x.dtype), torch.cat([ang.sin()] * 2, -1).to(x.dtype)
    x1, x2 = x.chunk(2, dim=-1)
    return x * cos + torch.cat([-x2, x1], dim=-1) * sin


class TransformerAttention(_NormParams):
    """Pre-norm, fused QKV projection (grouped-query KV heads), causal attention, output projection, residual.

    The core is ``F.scaled_dot_product_attention(is_causal=True)``, which runs FlashAttention
    kernels on CUDA for fp16/bf16 (the roofline's FlashAttention-style core).  Grouped KV heads are
    expanded to the query heads before the call so every torch version takes the same fused path.
    """

    def __init__(self, cfg):
        super().__init__()
        self._init_norm(cfg)
        self.heads, self.kv_heads, self.head_dim = cfg.heads, cfg.kv_heads, cfg.head_dim
        self.rotary = cfg.positions == 0
        q, kv = cfg.heads * cfg.head_dim, cfg.kv_heads * cfg.head_dim
        self.qkv_weight = _param(q + 2 * kv, cfg.hidden)
        self.qkv_bias = _zeros(q + 2 * kv) if cfg.bias else None
        self.proj_weight = _param(cfg.hidden, q)
        self.proj_bias = _zeros(cfg.hidden) if cfg.bias else None

    def forward(self, x):
        b, t, _ = x.shape
        d, kv = self.head_dim, self.kv_heads
        qkv = F.linear(self._norm(x), self.qkv_weight, self.qkv_bias)
        q, k, v = qkv.split([self.heads * d, kv * d, kv * d], dim=-1)
        q = q.view(b, t, self.heads, d).transpose(1, 2)
        k = k.view(b, t, kv, d).transpose(1, 2)
        v = v.view(b, t, kv, d).transpose(1, 2)
        if self.rotary:
            q, k = _rotary(q), _rotary(k)
        if kv != self.heads:
            rep = self.heads // kv
            k = k[:, :, None].expand(b, kv, rep, t, d).reshape(b, self.heads, t, d)
            v = v[:, :, None].expand(b, kv, rep, t, d).reshape(b, self.heads, t, d)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return x + F.linear(out.transpose(1, 2).reshape(b, t, self.heads * d), self.proj_weight, self.proj_bias)


class TransformerMLP(_NormParams):
    """Pre-norm MLP with residual: GELU (tanh, GPT-2) with biases, or SwiGLU (gate and up fused) without."""

    def __init__(self, cfg, ffn: int):
        super().__init__()
        self._init_norm(cfg)
        self.swiglu = cfg.mlp == "swiglu"
        h = cfg.hidden
        self.in_weight = _param((2 if self.swiglu else 1) * ffn, h)
        self.in_bias = _zeros(ffn) if cfg.bias and not self.swiglu else None
        self.out_weight = _param(h, ffn)
        self.out_bias = _zeros(h) if cfg.bias and not self.swiglu else None

    def forward(self, x):
        y = F.linear(self._norm(x), self.in_weight, self.in_bias)
        if self.swiglu:
            gate, up = y.chunk(2, dim=-1)
            y = F.silu(gate) * up
        else:
            y = F.gelu(y, approximate="tanh")
        return x + F.linear(y, self.out_weight, self.out_bias)


class TransformerHead(_NormParams):
    """Final norm, output projection (its own matrix, or the embedding's when tied) and cross-entropy loss.

    Returns the mean next-token loss (a scalar), so the logits live only inside this leaf, as in the
    roofline's fused head.  A tied head holds the embedding leaf without registering it, so the shared
    matrix is counted (and hooked) once, under ``embed``.
    """

    def __init__(self, cfg, embed: TransformerEmbedding):
        super().__init__()
        self._init_norm(cfg)
        self.weight = None if cfg.tied else _param(cfg.vocab, cfg.hidden)
        self._embed = (embed,)  # a tuple: not a registered submodule

    def forward(self, x, labels):
        w = self._embed[0].weight if self.weight is None else self.weight
        logits = F.linear(self._norm(x), w)
        return F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten())


class TransformerNet(nn.Module):
    """A dense zoo transformer as an nn.Module; input: token ids (batch, seq), output: the scalar loss.

    ``vocab_size`` tells the capture to feed valid int64 token ids; ``returns_loss`` that the output is
    the loss to differentiate.  Labels are the inputs shifted by one position (next-token prediction).
    """

    returns_loss = True

    def __init__(self, cfg):
        super().__init__()
        self.config, self.vocab_size, self.layers = cfg, cfg.vocab, cfg.layers
        self.embed = TransformerEmbedding(cfg)
        for i in range(cfg.layers):
            block = nn.Module()
            block.attn = TransformerAttention(cfg)
            block.mlp = TransformerMLP(cfg, cfg.dense_ffn or cfg.ffn)
            self.add_module(f"block{i}", block)
        self.head = TransformerHead(cfg, self.embed)

    def forward(self, ids):
        x = self.embed(ids)
        for i in range(self.layers):
            block = getattr(self, f"block{i}")
            x = block.mlp(block.attn(x))
        return self.head(x, ids.roll(-1, dims=1))


def build_transformer(cfg) -> TransformerNet:
    """The torch module of a dense zoo transformer; mixture-of-experts models are refused in one line."""
    from simcomm.errors import ConfigError

    if cfg.experts:
        raise ConfigError(f"model: {cfg.name!r} is a mixture-of-experts analytic transformer (roofline synthesis "
                          "only); it has no torch module to build or capture; dense transformers (gpt2-*, gpt3-*, "
                          "megatron-*, llama*) can be captured")
    beyond = [k for k in ("qkv_bias", "qk_norm", "parallel", "embed_norm", "window", "kv_lora_rank")
              if getattr(cfg, k, 0)] + (["head_dim"] if cfg.head_dim * cfg.heads != cfg.hidden else []) + \
        ([f"mlp {cfg.mlp}"] if cfg.mlp == "relu2" else []) + ([f"norm {cfg.norm}"] if cfg.norm == "layernorm-nobias" else [])
    if beyond:
        raise ConfigError(f"model: {cfg.name!r} uses {', '.join(beyond)}, which the torch module does not build (it "
                          "builds GPT- and Llama-shaped blocks); it is priced by roofline synthesis only")
    if getattr(cfg, "attention", "flash") != "flash":
        # the module runs PyTorch's scaled_dot_product_attention (FlashAttention where it can): capturing it as
        # "unfused" would time FlashAttention and call it Megatron-LM's unfused core
        raise ConfigError(f"attention: {cfg.attention!r} is priced by synthesis only; a capture runs PyTorch's "
                          "fused attention; valid choices for capture: flash")
    return TransformerNet(cfg)
