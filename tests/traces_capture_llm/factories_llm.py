"""Tiny decoder-only transformers for the capture tests (imported by dotted path through --module).

Hand-countable parameters (hidden 16, FFN 64, vocab 50, 2 layers):

* ``tiny_gpt`` (4 heads, 32 learned positions, LayerNorm, GELU, biases, tied): embedding (50 + 32) x 16 =
  1312; attention 16 x 48 + 48 + 16 x 16 + 16 + 2 x 16 = 1120; MLP 2 x 16 x 64 + 64 + 16 + 32 = 2160;
  head (final LayerNorm only, tied) 32; total 1312 + 2 x (1120 + 2160) + 32 = 7904.
* ``tiny_llama`` (4 heads / 2 KV heads of 4, RMSNorm, SwiGLU, no biases, untied): embedding 50 x 16 = 800;
  attention 16 x (16 + 2 x 8) + 16 x 16 + 16 = 784; MLP 3 x 16 x 64 + 16 = 3088; head 16 + 50 x 16 = 816;
  total 800 + 2 x (784 + 3088) + 816 = 9360.
"""

from simcomm.traces.zoo.transformer import TransformerConfig

GPT = TransformerConfig("tiny-gpt", 2, 16, 64, 4, 4, 50, 32, tied=True, positions=32)
LLAMA = TransformerConfig("tiny-llama", 2, 16, 64, 4, 2, 50, 32, tied=False, mlp="swiglu", norm="rmsnorm",
                          bias=False)
MOE = TransformerConfig("tiny-moe", 2, 16, 64, 4, 4, 50, 32, tied=False, mlp="swiglu", norm="rmsnorm",
                        bias=False, experts=4, top_k=2)


def tiny_gpt():
    from simcomm.traces.zoo.torchnet import build_transformer

    return build_transformer(GPT)


def tiny_llama():
    from simcomm.traces.zoo.torchnet import build_transformer

    return build_transformer(LLAMA)


def tiny_moe():
    from simcomm.traces.zoo.torchnet import build_transformer

    return build_transformer(MOE)
