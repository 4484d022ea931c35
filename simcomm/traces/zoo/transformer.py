"""Decoder-only transformers (dense and mixture-of-experts) as analytic zoo models.

Each model is a :class:`TransformerConfig`: the hyper-parameters its paper or
model card states, and a ``__call__(ops, x)`` architecture written against the
analytic ops of :mod:`simcomm.traces.zoo.spec`.  A model is ``embed``, then per
block ``block{i}.attn`` (pre-norm + QKV + attention core + output projection)
and ``block{i}.mlp`` (pre-norm + MLP) or ``block{i}.moe`` (pre-norm + router +
top-k routed experts + shared experts), then ``head`` (final norm,
output projection and cross-entropy loss).  Parameter counts are exact for the
architecture (formula in docs/transformers.md); FLOPs count matrix multiplies
only (2 per multiply-add).  The attention core is priced as one of :data:`ATTENTIONS`:
``flash`` (the default) counts the causal half of ``4 s^2 h``, the convention
of FlashAttention's benchmarks, with the scores kept on chip; ``unfused``
(Megatron-LM of 2021-2022) counts the whole ``4 s^2 h`` and moves the scores
through HBM (:data:`SCORE_ELEMS`).

The dense models also have a torch module for capture, built leaf for leaf
under the same names by :func:`simcomm.traces.zoo.torchnet.build_transformer`
(MoE models are analytic only); :func:`transformer_trace` synthesises a trace with
``meta["transformer"]`` and supports ``fp8`` (GEMMs at the fp8 tensor peak,
everything else bf16, as NVIDIA Transformer Engine runs them).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

from simcomm.errors import ConfigError
from simcomm.traces.zoo.spec import SpecOps

__all__ = ["TransformerConfig", "TRANSFORMERS", "META_KEYS", "ATTENTIONS", "SCORE_ELEMS", "attention_kind",
           "check_attention", "transformer_config", "transformer_meta", "transformer_trace", "register"]

#: keys of ``trace.meta["transformer"]`` that parallel layouts read (do not rename)
META_KEYS = ("layers", "hidden", "ffn", "heads", "kv_heads", "vocab", "seq", "experts", "top_k",
             "shared_experts", "tied")

#: how a zoo transformer's attention core is priced -> the words of the trace's ``assumed:`` line
ATTENTIONS = {
    "flash": "FlashAttention (causal half of the s×s core, scores stay on chip)",
    "unfused": "unfused (Megatron-LM 2021-22: full s×s core, scores through HBM: 6.5 two-byte elements per score "
               "per head, forward)",
}

#: HBM traffic of the unfused attention scores per head per score element, forward, in two-byte elements:
#: QK^T writes them, the fused scale-mask-softmax reads and writes them, dropout reads and writes them (and a
#: one-byte mask, half an element), the attention-over-V GEMM reads them: 1 + 2 + 2.5 + 1
SCORE_ELEMS = 6.5


def check_attention(attention: str) -> str:
    """``attention`` itself when it is one of :data:`ATTENTIONS`, else one ConfigError line naming them."""
    if not isinstance(attention, str) or attention not in ATTENTIONS:
        raise ConfigError(f"attention: {attention!r} is not valid; valid choices: {', '.join(ATTENTIONS)}")
    return attention


def attention_kind(meta: dict) -> str:
    """``"unfused"`` for a ``trace.meta["transformer"]`` whose ``attention_core`` is ``"full"``, else ``"flash"``."""
    return "unfused" if (meta or {}).get("attention_core") == "full" else "flash"


@dataclass(frozen=True)
class TransformerConfig:
    """Hyper-parameters of one decoder-only transformer.

    ``mlp`` is ``"gelu"`` (two matrices with biases, GPT) or ``"swiglu"`` (three
    matrices, no biases, Llama); ``norm`` ``"layernorm"`` (weight + bias) or
    ``"rmsnorm"`` (weight); ``bias`` says whether the attention projections
    have biases; ``positions`` is the length of a learned position table (0 for
    rotary).  MoE: ``experts`` routed experts of FFN size ``ffn``, ``top_k`` of
    them per token, ``shared_experts`` always-on experts of the same size, and
    the first ``first_dense`` blocks dense with FFN ``dense_ffn``.  ``attention``: one of
    :data:`ATTENTIONS` (how the attention core is priced; not a property of the published model).
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

    def __post_init__(self):
        if self.hidden % self.heads or self.heads % self.kv_heads:
            raise ValueError(f"{self.name}: heads must divide hidden and kv_heads must divide heads")
        check_attention(self.attention)

    # -- parameter counts ----------------------------------------------------
    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    def norm_params(self) -> int:
        return (2 if self.norm == "layernorm" else 1) * self.hidden

    def attn_params(self) -> int:
        """Q, K, V and output projections (+ biases) and the pre-attention norm."""
        h, q, kv = self.hidden, self.heads * self.head_dim, self.kv_heads * self.head_dim
        weights = h * (q + 2 * kv) + q * h
        return weights + ((q + 2 * kv + h) if self.bias else 0) + self.norm_params()

    def expert_params(self, ffn: int | None = None) -> int:
        """One MLP of FFN size ``ffn`` (default ``self.ffn``), without its norm."""
        f, h = ffn or self.ffn, self.hidden
        return 3 * h * f if self.mlp == "swiglu" else 2 * h * f + (f + h if self.bias else 0)

    def is_moe(self, i: int) -> bool:
        return self.experts > 0 and i >= self.first_dense

    def mlp_params(self, i: int) -> int:
        """Block ``i``'s MLP or MoE layer with its pre-norm (router: ``hidden x experts``, no bias)."""
        if not self.is_moe(i):
            return self.expert_params(self.dense_ffn or self.ffn) + self.norm_params()
        routed = self.experts * self.expert_params()
        return routed + self.shared_experts * self.expert_params() + self.hidden * self.experts + self.norm_params()

    def embed_params(self) -> int:
        return (self.vocab + self.positions) * self.hidden

    def head_params(self) -> int:
        """Final norm, plus the output projection when it is not tied to the embedding."""
        return self.norm_params() + (0 if self.tied else self.vocab * self.hidden)

    @property
    def params(self) -> int:
        blocks = sum(self.attn_params() + self.mlp_params(i) for i in range(self.layers))
        return self.embed_params() + blocks + self.head_params()

    @property
    def active_params(self) -> int:
        """Parameters one token uses: only ``top_k`` routed experts per MoE block (the router counts)."""
        idle = sum((self.experts - self.top_k) * self.expert_params() for i in range(self.layers) if self.is_moe(i))
        return self.params - idle

    def meta(self) -> dict:
        """The ``trace.meta["transformer"]`` dict: :data:`META_KEYS` first, then the other fields.

        The attention is stated as ``attention_core = "full"`` for ``unfused`` (what
        :func:`simcomm.strategies.megatron.core_share` reads) and left out for ``flash``, so a
        FlashAttention trace's meta is what it was before the option existed.
        """
        d = asdict(self)
        d.pop("name")
        full = d.pop("attention") == "unfused"
        return {**{k: d.pop(k) for k in META_KEYS}, **d, **({"attention_core": "full"} if full else {})}

    # -- FLOPs and bytes per sample (forward) ----------------------------------
    def _attn_leaf(self, ops, name, x):
        s, h = self.seq, self.hidden
        q, kv = self.heads * self.head_dim, self.kv_heads * self.head_dim
        gemm = 2 * s * (h * (q + 2 * kv) + q * h)
        unfused = self.attention == "unfused"
        # QK^T and PV: FlashAttention with a causal mask computes half the score matrix, Megatron-LM's
        # unfused attention of 2021-2022 all of it (the mask is applied after the GEMM)
        core = 4 * s * s * q / (1 if unfused else 2)
        # every activation written once and read once; FlashAttention never materialises the s x s scores
        mem = s * (h + 2 * h + 2 * (q + 2 * kv) + 2 * q + h + 3 * h)  # in, norm, qkv, attn out, proj out, residual
        if unfused:
            mem += SCORE_ELEMS * self.heads * s * s  # the scores through HBM, per head (SCORE_ELEMS)
        # Korthikanti et al. 2022: attention keeps 11sbh + 5as^2b bytes, its LayerNorm 2sbh (fp16); as 2-byte
        # elements besides the output, with the two dropout masks (sbh + as^2 bytes) as one-byte masks
        saved = 5 * s * h + 2 * self.heads * s * s
        return ops._leaf(name, "TransformerAttention", self.attn_params(), x, (s, h), gemm + core, mem=mem,
                         saved=saved, masks=s * h + self.heads * s * s)

    def _mlp_leaf(self, ops, name, x, i):
        s, h = self.seq, self.hidden
        mats = 3 if self.mlp == "swiglu" else 2
        if self.is_moe(i):
            active = self.top_k + self.shared_experts
            flops = 2 * s * h * self.experts + active * 2 * s * mats * h * self.ffn
            inner = active * self.ffn
            kind = "TransformerMoE"
        else:
            f = self.dense_ffn or self.ffn
            flops, inner, kind = 2 * s * mats * h * f, f, "TransformerMLP"
        # in, norm out (w+r), up/gate out (w+r), activation out (w+r), down out, residual; MoE adds the
        # permutation of each token to its top_k experts and back (written and read twice)
        up = 2 if self.mlp == "swiglu" else 1
        dispatch = 4 * s * h * self.top_k if self.is_moe(i) else 0
        mem = s * (h + 2 * h + 2 * up * inner + 2 * inner + h + 3 * h) + dispatch
        # Korthikanti et al. 2022: MLP keeps 19sbh, its LayerNorm 2sbh (the dropout mask sbh as one byte)
        return ops._leaf(name, kind, self.mlp_params(i), x, (s, h), flops, mem=mem, saved=9 * s * h, masks=s * h)

    def layer_specs(self) -> tuple:
        """The analytic :class:`~simcomm.traces.zoo.spec.LayerSpec` list of one sequence (what synthesis prices)."""
        ops = SpecOps()
        self(ops, (self.seq,))
        return tuple(ops.layers)

    def __call__(self, ops, x):
        """The analytic architecture (torch modules come from ``torchnet.build_transformer``, not from here)."""
        if type(ops) is not SpecOps:
            raise ConfigError(f"model: {self.name!r} is built for capture by torchnet.build_transformer, not by "
                              "the analytic ops (roofline synthesis only)")
        s, h = self.seq, self.hidden
        # embedding gather: ids in, rows read, (s, h) out
        x = ops._leaf("embed", "TransformerEmbedding", self.embed_params(), x, (s, h), 0.0, mem=s + 2 * s * h)
        for i in range(self.layers):
            x = self._attn_leaf(ops, f"block{i}.attn", x)
            x = self._mlp_leaf(ops, f"block{i}.{'moe' if self.is_moe(i) else 'mlp'}", x, i)
        # final norm, logits (s, V) written and read by the fused softmax cross-entropy
        flops = 2 * s * h * self.vocab
        return ops._leaf("head", "TransformerHead", self.head_params(), x, (s, self.vocab), flops,
                         mem=3 * s * h + 2 * s * self.vocab)


def _gpt(name, layers, hidden, heads, vocab, seq, positions):
    return TransformerConfig(name, layers, hidden, 4 * hidden, heads, heads, vocab, seq, tied=True,
                             positions=positions)


def _llama(name, layers, hidden, ffn, heads, kv, vocab, seq, **kw):
    return TransformerConfig(name, layers, hidden, ffn, heads, kv, vocab, seq, tied=False, mlp="swiglu",
                             norm="rmsnorm", bias=False, **kw)


_GPT2 = ("Radford et al. 2019, Language Models are Unsupervised Multitask Learners, Table 2; counts: "
         "Hugging Face GPT2Model.num_parameters()")
_GPT3 = "Brown et al. 2020, Language Models are Few-Shot Learners, Table 2.1"
_MEG = ("Narayanan et al., SC 2021, Efficient Large-Scale Language Model Training on GPU Clusters Using "
        "Megatron-LM, Table 1")
_L2 = "Touvron et al. 2023, Llama 2 (Table 1); counts: Hugging Face LlamaForCausalLM.num_parameters()"
_L3 = "Llama Team 2024, The Llama 3 Herd of Models (Table 3); counts: Hugging Face model cards"
_MIX = "Jiang et al. 2024, Mixtral of Experts (Table 1); mistralai/Mixtral-8x7B-v0.1 model card"
_DSM = "Dai et al. 2024, DeepSeekMoE (section 5.1, Table 3); config: deepseek-ai/deepseek-moe-16b-base"

#: name -> (config, published count, how the source states it, summary, reference).  A published count that
#: the source rounds (e.g. "175B") is the rounded value; tests check the exact count lies within the rounding.
TRANSFORMERS: dict[str, tuple[TransformerConfig, int, str, str, str]] = {}


def _reg(cfg, published, stated, summary, reference):
    TRANSFORMERS[cfg.name] = (cfg, published, stated, summary, reference)


for _n, _l, _h, _a, _pub, _paper in (("small", 12, 768, 12, 124_439_808, "117M"),
                                      ("medium", 24, 1024, 16, 354_823_168, "345M"),
                                      ("large", 36, 1280, 20, 774_030_080, "762M"),
                                      ("xl", 48, 1600, 25, 1_557_611_200, "1542M")):
    _reg(_gpt(f"gpt2-{_n}", _l, _h, _a, 50257, 1024, 1024), _pub,
         f"{_pub:,} (Hugging Face gpt2{'' if _n == 'small' else '-' + _n}; the paper prints {_paper})",
         f"GPT-2 {_n}: {_l} layers, hidden {_h}, {_a} heads, vocab 50257, context 1024, tied", _GPT2)
# Table 2.1 is inconsistent twice: 13B prints d_model 5140 but 40 heads x d_head 128 = 5120 (used here), and XL
# prints 24 heads x d_head 128 = 3072 != d_model 2048; XL uses 16 heads of the printed d_head 128 (the parameter
# count, 12 L d^2 + ..., does not depend on the head count)
for _n, _l, _h, _a, _pub in (("125m", 12, 768, 12, 125e6), ("350m", 24, 1024, 16, 350e6),
                             ("760m", 24, 1536, 16, 760e6), ("1.3b", 24, 2048, 16, 1.3e9),
                             ("2.7b", 32, 2560, 32, 2.7e9), ("6.7b", 32, 4096, 32, 6.7e9),
                             ("13b", 40, 5120, 40, 13e9), ("175b", 96, 12288, 96, 175e9)):
    _reg(_gpt(f"gpt3-{_n}", _l, _h, _a, 50257, 2048, 2048), int(_pub),
         f"{_n.upper()} ({'a size label: the stated architecture has 355.9M' if _n == '350m' else 'rounded'})",
         f"GPT-3 {_n.upper()}: {_l} layers, hidden {_h}, {_a} heads, vocab 50257, sequence 2048, tied", _GPT3)
for _n, _a, _h, _l, _pub in (("1.7b", 24, 2304, 24, 1.7e9), ("3.6b", 32, 3072, 30, 3.6e9),
                             ("7.5b", 32, 4096, 36, 7.5e9), ("18b", 48, 6144, 40, 18.4e9),
                             ("39b", 64, 8192, 48, 39.1e9), ("76b", 80, 10240, 60, 76.1e9),
                             ("145b", 96, 12288, 80, 145.6e9), ("310b", 128, 16384, 96, 310.1e9),
                             ("530b", 128, 20480, 105, 529.6e9), ("1t", 160, 25600, 128, 1008.0e9)):
    _reg(_gpt(f"megatron-{_n}", _l, _h, _a, 51200, 2048, 2048), int(_pub), f"{_pub / 1e9:.1f}B (rounded to 0.1B)",
         f"Megatron-LM SC'21 Table 1 GPT {_n.upper()}: {_l} layers, hidden {_h}, {_a} heads, vocab 51200, "
         "sequence 2048", _MEG)
for _n, _l, _h, _f, _a, _kv, _pub in (("7b", 32, 4096, 11008, 32, 32, 6_738_415_616),
                                      ("13b", 40, 5120, 13824, 40, 40, 13_015_864_320),
                                      ("70b", 80, 8192, 28672, 64, 8, 68_976_648_192)):
    _reg(_llama(f"llama2-{_n}", _l, _h, _f, _a, _kv, 32000, 4096), _pub, f"{_pub:,}",
         f"Llama 2 {_n.upper()}: {_l} layers, hidden {_h}, SwiGLU {_f}, {_a} heads / {_kv} KV heads, "
         "vocab 32000, sequence 4096, untied", _L2)
for _v, _n, _l, _h, _f, _a, _pub in (("3", "8b", 32, 4096, 14336, 32, 8_030_261_248),
                                     ("3", "70b", 80, 8192, 28672, 64, 70_553_706_496),
                                     ("3.1", "8b", 32, 4096, 14336, 32, 8_030_261_248),
                                     ("3.1", "70b", 80, 8192, 28672, 64, 70_553_706_496),
                                     ("3.1", "405b", 126, 16384, 53248, 128, 405_000_000_000)):
    _stated = f"{_pub:,}" if _n != "405b" else "405B (a size label: the stated architecture has 405.85B)"
    _reg(_llama(f"llama{_v}-{_n}", _l, _h, _f, _a, 8, 128256, 8192), _pub, _stated,
         f"Llama {_v} {_n.upper()}: {_l} layers, hidden {_h}, SwiGLU {_f}, {_a} heads / 8 KV heads, vocab 128256, "
         "sequence 8192 (pre-training), untied", _L3)
_reg(_llama("mixtral-8x7b", 32, 4096, 14336, 32, 8, 32000, 4096, experts=8, top_k=2), int(46.7e9),
     "46.7B (Hugging Face model card, rounded; the paper prints 47B total, 13B active)",
     "Mixtral 8x7B: 32 layers, hidden 4096, 8 SwiGLU experts of 14336, top-2, 32/8 heads, vocab 32000, "
     "sequence 4096 (a choice: the paper states a 32k context, no training length), untied", _MIX)
_reg(_llama("deepseekmoe-16b", 28, 2048, 1408, 16, 16, 102400, 4096, experts=64, top_k=6, shared_experts=2,
            first_dense=1, dense_ffn=10944), int(16.4e9), "16.4B (rounded; 2.8B active)",
     "DeepSeekMoE 16B: 28 layers (first dense, FFN 10944), hidden 2048, 64 routed experts of 1408 top-6 + 2 "
     "shared, 16 heads, vocab 102400, sequence 4096, untied", _DSM)


def register(add) -> None:
    """Register every transformer with the zoo's ``_add(name, arch, shape, published, source, summary, ref)``."""
    for name, (cfg, published, stated, summary, reference) in TRANSFORMERS.items():
        add(name, cfg, (cfg.seq,), published, stated, summary, reference)


def transformer_config(name: str) -> TransformerConfig:
    """The config of a zoo transformer; unknown names (or non-transformers) list the transformer choices."""
    from simcomm.errors import UnknownNameError

    if name not in TRANSFORMERS:
        raise UnknownNameError("transformer model", name, TRANSFORMERS)
    return TRANSFORMERS[name][0]


def transformer_meta(model: str, attention: str = "flash") -> dict:
    """``{"transformer": {...}}`` for a zoo transformer, ``{}`` for any other model (for trace meta)."""
    if model not in TRANSFORMERS:
        return {}
    return {"transformer": replace(TRANSFORMERS[model][0], attention=attention).meta()}


#: fp8 dense tensor peaks of devices that have fp8 tensor cores (NVIDIA H100 SXM5 datasheet: 3958 TFLOPS with
#: sparsity, half of it dense; the H200 has the same GH100 compute)
FP8_PEAKS = {"h100": 1978.9e12, "h200": 1978.9e12}


def transformer_trace(model: str, device, batch: int = 1, dtype: str = "bf16", optimizer: str = "adam",
                      attention: str = "flash"):
    """A roofline trace of a zoo transformer with ``meta["transformer"]`` (``dtype``: bf16, fp16, fp32 or fp8).

    ``device`` is a trace device name or a :class:`~simcomm.traces.devices.DeviceSpec`; ``batch`` counts
    sequences of the model's ``seq`` tokens; ``attention`` is one of :data:`ATTENTIONS`.

    ``fp8`` follows Transformer Engine: GEMM inputs are cast to fp8, so every
    matrix multiply runs at the device's fp8 peak (with its bf16 efficiency
    factor, no fp8 row being calibrated), while weights, gradients and
    activations stay bf16; the trace's dtype is then ``bf16`` and
    ``meta["compute_dtype"]`` says ``fp8``.  A device without fp8 tensor
    cores (A100, V100) is refused naming the ones that have them.
    """
    from simcomm.traces.devices import get_device
    from simcomm.traces.synth import synth_trace

    transformer_config(model)
    compute = dtype
    dev = get_device(device) if isinstance(device, str) else device
    if dtype == "fp8":
        if dev.name not in FP8_PEAKS and "fp8" not in dev.peak_flops:
            raise ConfigError(f"dtype: device {dev.name!r} has no fp8 tensor cores; fp8 choices: "
                              f"{', '.join(sorted(FP8_PEAKS))}")
        fp8 = dev.peak_flops.get("fp8", FP8_PEAKS.get(dev.name))
        # the bf16 path with the bf16 GEMM peak replaced by the fp8 one; the bf16 efficiency factors are kept
        dev = replace(dev, peak_flops={**dev.peak_flops, "bf16": fp8})
        dtype = "bf16"
    trace = synth_trace(model, dev, batch, dtype, optimizer, attention=attention)
    meta = {**trace.meta, **transformer_meta(model, attention), "compute_dtype": compute}
    return replace(trace, meta=meta)
