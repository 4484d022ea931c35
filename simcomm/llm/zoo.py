"""Published decoder-only transformers as :class:`~simcomm.llm.models.TransformerConfig` shapes.

``TRANSFORMERS`` maps a name to (config, published count, how the source states it, summary, reference).
A published count that the source rounds (e.g. "175B") is the rounded value; tests check the exact count
lies within the rounding, and pin it.  ``seq`` is the pre-training sequence length the source states
(or, said in the summary, a choice); ``--seq`` runs any of them at another length.
"""

from __future__ import annotations

from simcomm.llm.models import TransformerConfig

__all__ = ["TRANSFORMERS"]

TRANSFORMERS: dict[str, tuple[TransformerConfig, int, str, str, str]] = {}


def _reg(cfg, published, stated, summary, reference):
    TRANSFORMERS[cfg.name] = (cfg, published, stated, summary, reference)


def _gpt(name, layers, hidden, heads, vocab, seq, positions):
    return TransformerConfig(name, layers, hidden, 4 * hidden, heads, heads, vocab, seq, tied=True,
                             positions=positions)


def _llama(name, layers, hidden, ffn, heads, kv, vocab, seq, **kw):
    return TransformerConfig(name, layers, hidden, ffn, heads, kv, vocab, seq, tied=kw.pop("tied", False),
                             mlp="swiglu", norm="rmsnorm", bias=False, **kw)


_GPT2 = ("Radford et al. 2019, Language Models are Unsupervised Multitask Learners, Table 2; counts: "
         "Hugging Face GPT2Model.num_parameters()")
_GPT3 = "Brown et al. 2020, Language Models are Few-Shot Learners, Table 2.1"
_MEG = ("Narayanan et al., SC 2021, Efficient Large-Scale Language Model Training on GPU Clusters Using "
        "Megatron-LM, Table 1")
_L2 = "Touvron et al. 2023, Llama 2 (Table 1); counts: Hugging Face LlamaForCausalLM.num_parameters()"
_L3 = ("Llama Team 2024, The Llama 3 Herd of Models (Table 3); counts: Hugging Face model API safetensors.total "
       "of meta-llama/Llama-3.1-{8B,70B,405B}")
_MIX = "Jiang et al. 2024, Mixtral of Experts (Table 1); mistralai/Mixtral-8x7B-v0.1 model card"
_DSM = "Dai et al. 2024, DeepSeekMoE (section 5.1, Table 3); config: deepseek-ai/deepseek-moe-16b-base"
_HF = "Hugging Face model API safetensors.total of "

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
for _n, _l, _h, _a, _size in (("125m", 12, 768, 12, 125e6), ("350m", 24, 1024, 16, 350e6),
                             ("760m", 24, 1536, 16, 760e6), ("1.3b", 24, 2048, 16, 1.3e9),
                             ("2.7b", 32, 2560, 32, 2.7e9), ("6.7b", 32, 4096, 32, 6.7e9),
                             ("13b", 40, 5120, 40, 13e9), ("175b", 96, 12288, 96, 175e9)):
    _reg(_gpt(f"gpt3-{_n}", _l, _h, _a, 50257, 2048, 2048), int(_size),
         f"{_n.upper()} ({'a size label: the stated architecture has 355.9M' if _n == '350m' else 'rounded'})",
         f"GPT-3 {_n.upper()}: {_l} layers, hidden {_h}, {_a} heads, vocab 50257, sequence 2048, tied", _GPT3)
for _n, _a, _h, _l, _size in (("1.7b", 24, 2304, 24, 1.7e9), ("3.6b", 32, 3072, 30, 3.6e9),
                             ("7.5b", 32, 4096, 36, 7.5e9), ("18b", 48, 6144, 40, 18.4e9),
                             ("39b", 64, 8192, 48, 39.1e9), ("76b", 80, 10240, 60, 76.1e9),
                             ("145b", 96, 12288, 80, 145.6e9), ("310b", 128, 16384, 96, 310.1e9),
                             ("530b", 128, 20480, 105, 529.6e9), ("1t", 160, 25600, 128, 1008.0e9)):
    _reg(_gpt(f"megatron-{_n}", _l, _h, _a, 51200, 2048, 2048), int(_size), f"{_size / 1e9:.1f}B (rounded to 0.1B)",
         f"Megatron-LM SC'21 Table 1 GPT {_n.upper()}: {_l} layers, hidden {_h}, {_a} heads, vocab 51200, "
         "sequence 2048", _MEG)
_reg(_gpt("gpt-22b", 48, 6144, 64, 51200, 2048, 2048), int(22e9), "22B (rounded)",
     "Korthikanti et al. 22B GPT: 48 layers, hidden 6144, 64 heads, vocab 51200, sequence 2048, tied",
     "Korthikanti et al. 2022, Reducing Activation Recomputation in Large Transformer Models, Table 3 "
     "(benchmarks/megatron/tables.toml rows 22B-*)")
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
                                     ("3.1", "405b", 126, 16384, 53248, 128, 405_853_388_800)):
    _reg(_llama(f"llama{_v}-{_n}", _l, _h, _f, _a, 8, 128256, 8192), _pub,
         f"{_pub:,}" + (" (the paper's label: 405B)" if _n == "405b" else ""),
         f"Llama {_v} {_n.upper()}: {_l} layers, hidden {_h}, SwiGLU {_f}, {_a} heads / 8 KV heads, vocab 128256, "
         "sequence 8192 (pre-training), untied", _L3)
_reg(_llama("mixtral-8x7b", 32, 4096, 14336, 32, 8, 32000, 4096, experts=8, top_k=2), int(46.7e9),
     "46.7B (Hugging Face model card, rounded; the paper prints 47B total, 13B active)",
     "Mixtral 8x7B: 32 layers, hidden 4096, 8 SwiGLU experts of 14336, top-2, 32/8 heads, vocab 32000, "
     "sequence 4096 (a choice: the paper states a 32k context, no training length), untied", _MIX)
_reg(_llama("mixtral-8x22b", 56, 6144, 16384, 48, 8, 32000, 4096, experts=8, top_k=2), 140_620_634_112,
     "140,620,634,112 (141B on the model card; 39B active)",
     "Mixtral 8x22B: 56 layers, hidden 6144, 8 SwiGLU experts of 16384, top-2, 48/8 heads, vocab 32000, "
     "sequence 4096 (a choice: the config states a 65536 context, no training length), untied",
     _HF + "mistral-community/Mixtral-8x22B-v0.1 (the released weights; config.json of the same repository)")
_reg(_llama("deepseekmoe-16b", 28, 2048, 1408, 16, 16, 102400, 4096, experts=64, top_k=6, shared_experts=2,
            first_dense=1, dense_ffn=10944), int(16.4e9), "16.4B (rounded; 2.8B active)",
     "DeepSeekMoE 16B: 28 layers (first dense, FFN 10944), hidden 2048, 64 routed experts of 1408 top-6 + 2 "
     "shared, 16 heads, vocab 102400, sequence 4096, untied", _DSM)
_reg(_llama("qwen2.5-72b", 80, 8192, 29568, 64, 8, 152064, 4096, qkv_bias=True), 72_706_203_648,
     "72,706,203,648 (the model card: 72.7B, 70.0B non-embedding)",
     "Qwen2.5 72B: 80 layers, hidden 8192, SwiGLU 29568, 64/8 heads, QKV biases, vocab 152064, sequence 4096 "
     "(the report's first pre-training stage), untied", _HF + "Qwen/Qwen2.5-72B; Qwen Team 2024, Qwen2.5 "
     "Technical Report, Table 1")
_reg(_llama("qwen3-235b-a22b", 94, 4096, 1536, 64, 4, 151936, 4096, head_dim=128, qk_norm=True, experts=128,
            top_k=8, dense_ffn=12288), 235_093_634_560, "235,093,634,560 (235B, 22B active)",
     "Qwen3-235B-A22B: 94 MoE layers, hidden 4096, 128 SwiGLU experts of 1536 top-8, 64/4 heads of 128, q/k "
     "norms, vocab 151936, sequence 4096 (the report's general stage), untied",
     _HF + "Qwen/Qwen3-235B-A22B; Qwen Team 2025, Qwen3 Technical Report, Table 2")
_DS_MLA = dict(q_lora_rank=1536, kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128)
_reg(_llama("deepseek-v2", 60, 5120, 1536, 128, 128, 102400, 4096, experts=160, top_k=6, shared_experts=2,
            first_dense=1, dense_ffn=12288, **_DS_MLA), int(236e9), "236B (rounded; 21B active)",
     "DeepSeek-V2: 60 layers (first dense, FFN 12288), hidden 5120, MLA (128 heads, q rank 1536, kv rank 512), "
     "160 routed experts of 1536 top-6 + 2 shared, vocab 102400, sequence 4096, untied",
     "DeepSeek-AI 2024, DeepSeek-V2 (section 3.1.2); config: deepseek-ai/DeepSeek-V2")
_reg(_llama("deepseek-v3", 61, 7168, 2048, 128, 128, 129280, 4096, experts=256, top_k=8, shared_experts=1,
            first_dense=3, dense_ffn=18432, router_bias=True, mtp_layers=1, **_DS_MLA), int(671e9),
     "671B main model (rounded; 37B active); the Hugging Face checkpoint's 685B adds the 14B MTP module",
     "DeepSeek-V3: 61 layers (first 3 dense, FFN 18432), hidden 7168, MLA (128 heads, q rank 1536, kv rank 512), "
     "256 routed experts of 2048 top-8 + 1 shared, vocab 129280, sequence 4096, untied; its MTP module is "
     "counted apart", "DeepSeek-AI 2024, DeepSeek-V3 Technical Report (sections 2, 4.2); config: "
     "deepseek-ai/DeepSeek-V3")
for _n, _l, _h, _a, _f, _pub, _stated in (
        ("15b", 32, 6144, 48, 24576, int(15.7e9), "3.2B embedding + 12.5B non-embedding (rounded)"),
        ("340b", 96, 18432, 96, 73728, int(341e9), "9.4B embedding + 331.6B non-embedding (rounded)")):
    _reg(TransformerConfig(f"nemotron-4-{_n}", _l, _h, _f, _a, 8, 256000, 4096, tied=False, mlp="relu2",
                           bias=False), _pub, _stated,
         f"Nemotron-4 {_n.upper()}: {_l} layers, hidden {_h}, squared-ReLU MLP {_f}, {_a}/8 heads, no biases, "
         "vocab 256000, sequence 4096, untied",
         "Parmar et al. 2024, Nemotron-4 15B Technical Report (section 2, Table 1); NVIDIA 2024, Nemotron-4 340B "
         "Technical Report (Table 1)")
for _n, _l, _h, _a, _seq, _pub, _stated in (
        ("7b", 32, 4096, 32, 2048, int(6.7e9), "6.7B (a size label: the stated architecture has 6.65B)"),
        ("30b", 48, 7168, 64, 8192, int(30e9), "30B (rounded)")):
    _reg(TransformerConfig(f"mpt-{_n}", _l, _h, 4 * _h, _a, _a, 50432, _seq, tied=True, norm="layernorm-nobias",
                           bias=False), _pub, _stated,
         f"MPT-{_n.upper()}: {_l} layers, hidden {_h}, {_a} heads, GELU 4h, no biases (LayerNorm without bias), "
         f"ALiBi, vocab 50432, sequence {_seq}, tied", "MosaicML 2023, MPT model cards and config.json "
         f"(mosaicml/mpt-{_n})")
for _n, _l, _h, _a, _kv, _pub, _stated, _one in (
        ("7b", 32, 4544, 71, 1, int(7e9), "7B (a size label: the stated architecture, untied like the 40B and "
         "180B checkpoints, has 7.22B)", True),
        ("40b", 60, 8192, 128, 8, 41_835_970_560, "41,835,970,560 (40B)", False),
        ("180b", 80, 14848, 232, 8, 179_522_565_120, "179,522,565,120 (180B)", False)):
    _reg(TransformerConfig(f"falcon-{_n}", _l, _h, 4 * _h, _a, _kv, 65024, 2048, tied=False, bias=False,
                           head_dim=64, parallel=True, shared_norm=_one), _pub, _stated,
         f"Falcon {_n.upper()}: {_l} layers, hidden {_h}, {_a} heads of 64 / {_kv} KV heads, parallel attention "
         f"and MLP ({'one norm' if _one else 'two norms'}), GELU 4h, no biases, vocab 65024, sequence 2048, untied",
         "Almazrouei et al. 2023, The Falcon Series of Open Language Models; config.json of tiiuae/falcon-"
         f"{_n}" + ("" if _n == "7b" else "; count: " + _HF + f"tiiuae/falcon-{_n}"))
_reg(TransformerConfig("bloom-176b", 70, 14336, 4 * 14336, 112, 112, 250880, 2048, tied=True, embed_norm=True),
     176_247_271_424, "176,247M (rounded to the million)",
     "BLOOM: 70 layers, hidden 14336, 112 heads, GELU 4h, biases, LayerNorm after the embedding, ALiBi, vocab "
     "250880, sequence 2048, tied", "BigScience 2022, BLOOM: A 176B-Parameter Open-Access Multilingual Language "
     "Model, Table 3")
_reg(TransformerConfig("gpt-neox-20b", 44, 6144, 4 * 6144, 64, 64, 50432, 2048, tied=False, parallel=True),
     20_554_567_680, "20,554,567,680", "GPT-NeoX-20B: 44 layers, hidden 6144, 64 heads, parallel attention and MLP "
     "(two norms), GELU 4h, biases, rotary, vocab 50432, sequence 2048, untied",
     "Black et al. 2022, GPT-NeoX-20B: An Open-Source Autoregressive Language Model (Table 1, README)")
_reg(_llama("grok-1", 64, 6144, 32768, 48, 8, 131072, 8192, experts=8, top_k=2, tied=True), int(314e9),
     "314B (xAI's size label: the stated architecture has 315.7B)",
     "Grok-1: 64 layers, hidden 6144, 8 gated experts of 32768 top-2, 48/8 heads, vocab 131072, sequence 8192, "
     "tied (its two extra RMSNorms per block, 12k parameters each, are not modelled)",
     "xAI 2024, github.com/xai-org/grok-1 (model.py, run.py: widening factor 8, 8 experts, 2 selected)")
