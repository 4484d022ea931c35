"""The shape of a decoder-only transformer, with exact parameter counts and forward FLOPs per layer.

One frozen :class:`TransformerConfig` covers what people train: MHA, GQA and MQA (``kv_heads``), a head size
other than ``hidden / heads`` (Qwen3), DeepSeek's multi-head latent attention (``kv_lora_rank`` > 0), gated
(``swiglu``) or plain (``gelu``, Nemotron's squared-ReLU ``relu2``) MLPs, LayerNorm with or without bias or
RMSNorm, biases everywhere, nowhere or on QKV only (Qwen2), per-head q/k norms (Qwen3), tied embeddings,
learned positions, parallel attention and MLP (GPT-J/NeoX/Falcon), and mixture-of-experts layers (routed
experts with their own FFN size, shared experts, which layers are MoE).  The counts are those of the
weights the Hugging Face modeling files create (formulas in docs/transformers.md); a hypothesis test checks
them against a brute-force sum over every weight's shape.  FLOPs count matrix multiplies (2 per
multiply-add) per sequence of ``seq`` tokens, forward.
"""

from __future__ import annotations

import functools
from dataclasses import asdict, dataclass, fields
from typing import Any

from simcomm.errors import ConfigError

__all__ = ["TransformerConfig", "META_KEYS", "ATTENTIONS", "MLPS", "NORMS", "check_attention", "config_from_meta"]

#: keys of ``trace.meta["transformer"]`` that parallel layouts read (do not rename; new keys follow them)
META_KEYS = ("layers", "hidden", "ffn", "heads", "kv_heads", "vocab", "seq", "experts", "top_k",
             "shared_experts", "tied")

#: how a transformer's attention core is priced -> the words of the trace's ``assumed:`` line
ATTENTIONS = {
    "flash": "FlashAttention (causal half of the s×s core, scores stay on chip)",
    "unfused": "unfused (Megatron-LM 2021-22: full s×s core, scores through HBM: 6.5 two-byte elements per score "
               "per head, forward)",
}
#: MLP kinds -> weight matrices per MLP (gated: gate, up and down)
MLPS = {"gelu": 2, "swiglu": 3, "relu2": 2}
#: norm kinds -> parameters per channel
NORMS = {"layernorm": 2, "rmsnorm": 1, "layernorm-nobias": 1}


def check_attention(attention: str) -> str:
    """``attention`` itself when it is one of :data:`ATTENTIONS`, else one ConfigError line naming them."""
    if not isinstance(attention, str) or attention not in ATTENTIONS:
        raise ConfigError(f"attention: {attention!r} is not valid; valid choices: {', '.join(ATTENTIONS)}")
    return attention


def _count(name: str, value, low: int = 0) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ConfigError(f"{name}: {value!r} must be an integer >= {low}")


@dataclass(frozen=True)
class TransformerConfig:
    """Hyper-parameters of one decoder-only transformer.

    ``ffn`` is the MLP's FFN size; in a mixture-of-experts model it is each routed expert's, and
    ``dense_ffn`` (0: ``ffn``) that of the dense layers.  ``bias``: biases on the attention projections and
    on a non-gated MLP (a gated MLP has none); ``qkv_bias``: on the Q, K and V projections only (Qwen2).
    ``positions``: learned position rows (0: rotary or ALiBi, which have no parameters).  ``parallel``:
    attention and MLP read the same input (GPT-J, GPT-NeoX, Falcon), with one norm between them when
    ``shared_norm``.  ``embed_norm``: a norm after the embedding (BLOOM).  ``window``: sliding-window
    attention span (0: none).  MoE: ``experts`` routed experts, ``top_k`` per token, ``shared_experts``
    always-on experts of ``shared_ffn`` (0: ``ffn``) each, a router of ``hidden x experts`` (plus a bias per
    expert with ``router_bias``, DeepSeek-V3's correction bias; plus a ``hidden -> 1`` gate on the shared
    expert with ``shared_gate``, Qwen2-MoE); block ``i`` is MoE when ``i >= first_dense``, ``(i -
    first_dense) % moe_every == 0`` and ``i`` is not in ``dense_layers``.  Multi-head latent attention
    (``kv_lora_rank`` > 0): queries through a rank-``q_lora_rank`` bottleneck (0: a full projection), keys
    and values from a ``kv_lora_rank`` latent plus one shared rotary key of ``qk_rope_head_dim``.
    ``mtp_layers``: DeepSeek-V3's multi-token-prediction modules (counted apart: :meth:`mtp_params`).
    ``attention``: one of :data:`ATTENTIONS` (how the core is priced; not a property of the model).
    """

    name: str
    layers: int
    hidden: int
    ffn: int
    heads: int
    kv_heads: int
    vocab: int
    seq: int
    tied: bool
    mlp: str = "gelu"
    norm: str = "layernorm"
    bias: bool = True
    positions: int = 0
    experts: int = 0
    top_k: int = 0
    shared_experts: int = 0
    first_dense: int = 0
    dense_ffn: int = 0
    attention: str = "flash"
    head_dim: int = 0  # 0: hidden // heads (filled in)
    qkv_bias: bool = False
    qk_norm: bool = False
    parallel: bool = False
    shared_norm: bool = False
    embed_norm: bool = False
    window: int = 0
    shared_ffn: int = 0
    shared_gate: bool = False
    router_bias: bool = False
    moe_every: int = 1
    dense_layers: tuple[int, ...] = ()
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    qk_nope_head_dim: int = 0
    qk_rope_head_dim: int = 0
    v_head_dim: int = 0
    mtp_layers: int = 0

    def __post_init__(self):
        for key in ("layers", "hidden", "ffn", "heads", "kv_heads", "vocab", "seq", "moe_every"):
            _count(key, getattr(self, key), 1)
        for key in ("positions", "experts", "top_k", "shared_experts", "first_dense", "dense_ffn", "head_dim",
                    "window", "shared_ffn", "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim",
                    "v_head_dim", "mtp_layers"):
            _count(key, getattr(self, key))
        if self.mlp not in MLPS:
            raise ConfigError(f"mlp: {self.mlp!r} is not valid; valid choices: {', '.join(MLPS)}")
        if self.norm not in NORMS:
            raise ConfigError(f"norm: {self.norm!r} is not valid; valid choices: {', '.join(NORMS)}")
        if self.mla:
            if not (self.qk_nope_head_dim + self.qk_rope_head_dim and self.v_head_dim):
                raise ConfigError("kv_lora_rank: multi-head latent attention needs qk_nope_head_dim or "
                                  "qk_rope_head_dim, and v_head_dim")
            if self.kv_heads != self.heads:
                raise ConfigError(f"kv_heads: {self.kv_heads} must equal heads {self.heads} with multi-head latent "
                                  "attention (every head gets its own keys and values from the latent)")
            object.__setattr__(self, "head_dim", self.head_dim or self.qk_nope_head_dim + self.qk_rope_head_dim)
        elif self.q_lora_rank or self.qk_nope_head_dim or self.qk_rope_head_dim or self.v_head_dim:
            raise ConfigError("q_lora_rank/qk_nope_head_dim/qk_rope_head_dim/v_head_dim: multi-head latent attention "
                              "fields need kv_lora_rank > 0")
        if not self.head_dim:
            if self.hidden % self.heads:
                raise ConfigError(f"heads: {self.heads} does not divide hidden {self.hidden}; give head_dim")
            object.__setattr__(self, "head_dim", self.hidden // self.heads)
        if self.heads % self.kv_heads:
            raise ConfigError(f"kv_heads: {self.kv_heads} does not divide the {self.heads} heads")
        if self.experts and not 1 <= self.top_k <= self.experts:
            raise ConfigError(f"top_k: {self.top_k} must be between 1 and the {self.experts} experts")
        if not self.experts and (self.top_k or self.shared_experts or self.shared_ffn):
            raise ConfigError("top_k/shared_experts/shared_ffn: need experts > 0")
        if self.shared_norm and not self.parallel:
            raise ConfigError("shared_norm: one norm for attention and MLP needs parallel = true")
        layers = tuple(sorted(set(self.dense_layers)))
        if any(isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < self.layers for i in layers):
            raise ConfigError(f"dense_layers: {list(self.dense_layers)!r} must be layer indices in 0..{self.layers - 1}")
        object.__setattr__(self, "dense_layers", layers)
        if self.first_dense > self.layers:
            raise ConfigError(f"first_dense: {self.first_dense} is more than the {self.layers} layers")
        check_attention(self.attention)

    # -- shape ------------------------------------------------------------------------------------------
    @property
    def mla(self) -> bool:
        """True for multi-head latent attention (DeepSeek-V2/V3)."""
        return self.kv_lora_rank > 0

    @property
    def qk_head_dim(self) -> int:
        """Width of one head's queries and keys."""
        return self.qk_nope_head_dim + self.qk_rope_head_dim if self.mla else self.head_dim

    @property
    def v_dim(self) -> int:
        """Width of one head's values (and of its attention output)."""
        return self.v_head_dim if self.mla else self.head_dim

    def is_moe(self, i: int) -> bool:
        return (self.experts > 0 and i >= self.first_dense and (i - self.first_dense) % self.moe_every == 0
                and i not in self.dense_layers)

    def moe_blocks(self) -> int:
        return sum(self.is_moe(i) for i in range(self.layers))

    # -- parameter counts -----------------------------------------------------------------------------
    def norm_params(self, width: int | None = None) -> int:
        return NORMS[self.norm] * (width or self.hidden)

    def attn_matrices(self) -> int:
        """Weights of the attention's matrices (what its GEMMs multiply by), without biases and norms."""
        h, heads = self.hidden, self.heads
        if self.mla:
            q = (h * self.q_lora_rank + self.q_lora_rank * heads * self.qk_head_dim if self.q_lora_rank
                 else h * heads * self.qk_head_dim)
            kv = h * (self.kv_lora_rank + self.qk_rope_head_dim) + self.kv_lora_rank * heads * (
                self.qk_nope_head_dim + self.v_head_dim)
            return q + kv + heads * self.v_head_dim * h
        q, kv = heads * self.head_dim, self.kv_heads * self.head_dim
        return h * (q + 2 * kv) + q * h

    def attn_params(self) -> int:
        """The attention with its biases, its q/k norms or latent norms, and the pre-attention norm."""
        n = self.attn_matrices() + self.norm_params()
        if self.mla:  # RMSNorms on the query and key-value latents (DeepSeek's q_a_layernorm, kv_a_layernorm)
            return n + self.q_lora_rank + self.kv_lora_rank
        qkv = (self.heads + 2 * self.kv_heads) * self.head_dim
        n += qkv + self.hidden if self.bias else (qkv if self.qkv_bias else 0)
        return n + (2 * self.head_dim if self.qk_norm else 0)  # Qwen3: one RMSNorm(head_dim) for q, one for k

    def mlp_matrices(self, ffn: int | None = None) -> int:
        """Weights of one MLP's matrices (FFN ``ffn``, default ``self.ffn``)."""
        return MLPS[self.mlp] * self.hidden * (ffn or self.ffn)

    def expert_params(self, ffn: int | None = None) -> int:
        """One MLP of FFN size ``ffn`` (default ``self.ffn``), without its norm."""
        f = ffn or self.ffn
        return self.mlp_matrices(f) + (f + self.hidden if self.bias and self.mlp != "swiglu" else 0)

    def _mlp_norm(self) -> int:
        return 0 if self.shared_norm else self.norm_params()

    def mlp_params(self, i: int) -> int:
        """Block ``i``'s MLP or MoE layer with its pre-norm (a parallel block's one norm is the attention's)."""
        if not self.is_moe(i):
            return self.expert_params(self.dense_ffn or self.ffn) + self._mlp_norm()
        routed = self.experts * self.expert_params()
        shared = self.shared_experts * self.expert_params(self.shared_ffn or self.ffn)
        router = self.hidden * self.experts + (self.experts if self.router_bias else 0)
        return routed + shared + router + (self.hidden if self.shared_gate else 0) + self._mlp_norm()

    def embed_params(self) -> int:
        return (self.vocab + self.positions) * self.hidden + (self.norm_params() if self.embed_norm else 0)

    def head_params(self) -> int:
        """Final norm, plus the output projection when it is not tied to the embedding."""
        return self.norm_params() + (0 if self.tied else self.vocab * self.hidden)

    @property
    def params(self) -> int:
        """The main model's parameters (multi-token-prediction modules apart: :meth:`mtp_params`)."""
        blocks = sum(self.attn_params() + self.mlp_params(i) for i in range(self.layers))
        return self.embed_params() + blocks + self.head_params()

    @property
    def active_params(self) -> int:
        """Parameters one token uses: only ``top_k`` routed experts per MoE block (the router counts)."""
        return self.params - self.moe_blocks() * (self.experts - self.top_k) * self.expert_params()

    def mtp_params(self) -> int:
        """DeepSeek-V3's multi-token-prediction modules: per module two norms, a ``2h x h`` projection, one
        block (MoE like the last layer) and a final norm; the embedding and output head are the main model's
        (DeepSeek-V3 technical report, section 2.2)."""
        h = self.hidden
        block = self.attn_params() + self.mlp_params(self.layers - 1)
        return self.mtp_layers * (3 * self.norm_params() + 2 * h * h + block)

    def rank_block_params(self, i: int, tp: int = 1, ep: int = 1, etp: int | None = None) -> tuple[int, int]:
        """(dense, expert) parameters of block ``i`` on one rank: matrices and their column biases split over
        ``tp`` (routed experts over ``etp x ep``, ``etp`` the expert layers' tensor-parallel size, default
        ``tp`` as Megatron-core's ``expert_tensor_parallel_size``), norms, row biases, routers and gates
        replicated."""
        # a block's count depends on its index only through whether it is an MoE block: once per kind and split
        # (the memory model asks for every block of tens of thousands of layouts)
        return _cached_block_params(self, self.is_moe(i), tp, ep, tp if etp is None else etp)

    def _block_params_of_kind(self, moe: bool, tp: int, ep: int, etp: int) -> tuple[int, int]:
        def split(n: int, t: int) -> int:
            return -(-n // t)

        h = self.hidden
        norms = self.attn_params() - self.attn_matrices()  # its biases and norms (the output bias is not split)
        col = (self.heads + 2 * self.kv_heads) * self.head_dim if (self.bias or self.qkv_bias) and not self.mla else 0
        attn = split(self.attn_matrices() + col, tp) + norms - col
        mlp_row = h if self.bias and self.mlp != "swiglu" else 0

        def mlp(f: int) -> int:
            return split(self.expert_params(f) - mlp_row, tp) + mlp_row

        if not moe:
            return attn + mlp(self.dense_ffn or self.ffn) + self._mlp_norm(), 0
        shared = self.shared_experts * mlp(self.shared_ffn or self.ffn)
        router = h * self.experts + (self.experts if self.router_bias else 0) + (h if self.shared_gate else 0)
        routed = split(self.experts * (self.expert_params() - mlp_row), etp * ep) + self.experts // ep * mlp_row
        return attn + shared + router + self._mlp_norm(), routed

    # -- forward FLOPs per sequence ----------------------------------------------------------------------
    def attn_core_flops(self) -> float:
        """QK^T and PV of one sequence: ``2 s^2 heads (d_qk + d_v)`` over every pair; FlashAttention's causal
        half of it (only the ``window`` nearest keys with a sliding window), or all of it when unfused."""
        s = self.seq
        full = 2.0 * s * s * self.heads * (self.qk_head_dim + self.v_dim)
        if self.attention == "unfused":
            return full
        if self.window and self.window < s:  # causal pairs within the window: s^2/2 - (s - w)^2/2
            return full * (1 - (s - self.window) ** 2 / (s * s)) / 2
        return full / 2

    def attn_flops(self) -> float:
        """The attention's projections (``2 s`` per weight of its matrices) and its core."""
        return 2.0 * self.seq * self.attn_matrices() + self.attn_core_flops()

    def mlp_flops(self, i: int) -> float:
        """Block ``i``'s MLP, or its router, ``top_k`` routed and the shared experts."""
        s = self.seq
        if not self.is_moe(i):
            return 2.0 * s * self.mlp_matrices(self.dense_ffn or self.ffn)
        shared = self.shared_experts * self.mlp_matrices(self.shared_ffn or self.ffn)
        gate = self.hidden if self.shared_gate else 0
        return 2.0 * s * (self.hidden * self.experts + self.top_k * self.mlp_matrices() + shared + gate)

    def head_flops(self) -> float:
        return 2.0 * self.seq * self.hidden * self.vocab

    # (the analytic architecture, priced by roofline synthesis, is simcomm.traces.zoo.transformer's build_spec and
    # layer_specs of a config: the shapes here import no trace code, so traces may read them without a circle)

    # -- meta ------------------------------------------------------------------------------------------------
    def meta(self) -> dict:
        """The ``trace.meta["transformer"]`` dict: :data:`META_KEYS` first, then the other fields.

        The attention is stated as ``attention_core = "full"`` for ``unfused`` and left out for ``flash``;
        fields at their default are left out too, so a trace's meta names only what its model has.
        """
        d = asdict(self)
        d.pop("name")
        full = d.pop("attention") == "unfused"
        defaults = {f.name: f.default for f in fields(self) if f.name not in META_KEYS}
        defaults["head_dim"] = self.hidden // self.heads if not self.mla else 0
        rest = {k: (list(v) if isinstance(v, tuple) else v) for k, v in d.items()
                if k not in META_KEYS and (k in _LEGACY or v != defaults.get(k))}
        return {**{k: d[k] for k in META_KEYS}, **rest, **({"attention_core": "full"} if full else {})}


#: fields every trace's meta carried before the shape grew (kept even at their defaults)
_LEGACY = ("mlp", "norm", "bias", "positions", "first_dense", "dense_ffn")


def config_from_meta(meta: dict, name: str) -> TransformerConfig | None:
    """The shape a ``trace.meta["transformer"]`` states (None when it is not a complete, consistent shape)."""
    if not meta or any(k not in meta for k in META_KEYS):
        return None
    known = {f.name for f in fields(TransformerConfig)}
    kw: dict[str, Any] = {k: (tuple(v) if isinstance(v, list) else v) for k, v in meta.items()
                          if k in known and k != "name"}
    kw["attention"] = "unfused" if meta.get("attention_core") == "full" else "flash"
    try:
        return TransformerConfig(name=name, **kw)
    except (ConfigError, TypeError):  # a hand-written trace's meta need not be a whole, consistent shape
        return None


@functools.lru_cache(maxsize=1 << 12)
def _cached_block_params(cfg: TransformerConfig, moe: bool, tp: int, ep: int, etp: int) -> tuple[int, int]:
    """:meth:`TransformerConfig.rank_block_params` by block kind, cached (the config is frozen)."""
    return cfg._block_params_of_kind(moe, tp, ep, etp)
