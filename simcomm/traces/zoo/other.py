"""Non-convolutional architectures: ViT, BERT, and seed 000's ACGAN pair and MNIST recurrent nets.

Written against the ops interface of :mod:`simcomm.traces.zoo.spec` (see
that module).  Sizes follow seed 000's Table II where it gives them; where it
does not (recurrent hidden size, GAN image size), the choice is stated in
docs/traces.md.
"""

from __future__ import annotations

__all__ = ["vit", "bert", "gan_generator", "gan_discriminator", "recurrent"]


def vit(ops, x, dim: int, depth: int, heads: int, patch: int, classes: int, mlp_ratio: int = 4):
    """Vision Transformer (Dosovitskiy et al. 2021) in timm's layout (pre-norm, class token)."""
    x = ops.conv("patch_embed.proj", x, dim, patch, patch, 0, bias=True)
    x = ops.cls_pos("pos_embed", ops.tokens(x))
    for i in range(depth):
        pre = f"blocks.{i}"
        h = ops.layernorm(f"{pre}.norm1", x)
        h = ops.linear(f"{pre}.attn.qkv", h, 3 * dim)
        h = ops.attn_core(f"{pre}.attn.core", h, heads)
        h = ops.linear(f"{pre}.attn.proj", h, dim)
        x = ops.add(x, h)
        h = ops.layernorm(f"{pre}.norm2", x)
        h = ops.linear(f"{pre}.mlp.fc1", h, dim * mlp_ratio)
        h = ops.act(f"{pre}.mlp.act", h, "GELU")
        h = ops.linear(f"{pre}.mlp.fc2", h, dim)
        x = ops.add(x, h)
    x = ops.layernorm("norm", x)
    return ops.linear("head", ops.take_cls(x), classes)


def bert(ops, x, dim: int, depth: int, heads: int, head: str, vocab: int = 30522, max_pos: int = 512,
         types: int = 2, ffn_ratio: int = 4, dropout: float = 0.1):
    """BERT (Devlin et al. 2019) encoder, post-LayerNorm, in Hugging Face's module layout.

    ``head`` is ``"pooler"`` (BertModel: tanh pooler on the first token) or
    ``"squad"`` (BertForQuestionAnswering: a 2-way span Linear on every token,
    no pooler).  Query, key and value are one fused Linear (same parameters and
    FLOPs as three); the attention mask and the attention-probability dropout
    are inside the attention core (the padding mask is not applied).  Pre-training heads (masked-LM transform,
    tied decoder, next-sentence) are not modelled.
    """
    x = ops.token_embed("embeddings.tokens", x, vocab, max_pos, types, dim)
    x = ops.layernorm("embeddings.LayerNorm", x)
    x = ops.dropout("embeddings.dropout", x, dropout)
    for i in range(depth):
        pre = f"encoder.layer.{i}"
        h = ops.linear(f"{pre}.attention.self.qkv", x, 3 * dim)
        h = ops.attn_core(f"{pre}.attention.self.core", h, heads, dropout)
        h = ops.linear(f"{pre}.attention.output.dense", h, dim)
        h = ops.dropout(f"{pre}.attention.output.dropout", h, dropout)
        x = ops.layernorm(f"{pre}.attention.output.LayerNorm", ops.add(x, h))
        h = ops.linear(f"{pre}.intermediate.dense", x, dim * ffn_ratio)
        h = ops.act(f"{pre}.intermediate.act", h, "GELU")
        h = ops.linear(f"{pre}.output.dense", h, dim)
        h = ops.dropout(f"{pre}.output.dropout", h, dropout)
        x = ops.layernorm(f"{pre}.output.LayerNorm", ops.add(x, h))
    if head == "squad":
        return ops.linear("qa_outputs", x, 2)
    x = ops.linear("pooler.dense", ops.take_cls(x), dim)
    return ops.act("pooler.activation", x, "Tanh")


def gan_generator(ops, x, img: int = 32, channels: int = 1, classes: int = 10):
    """Seed 000 Table II generator: latent 128 -> FC (img/4)^2 + BN -> UP+3x3x128 -> UP+3x3x64 -> 3x3x32 -> image."""
    s = img // 4
    x = ops.label_embed("label_emb", x, classes)
    x = ops.linear("l1", x, 128 * s * s)
    x = ops.reshape_chw(x, 128, s, s)
    x = ops.bn("conv_blocks.0", x)
    j = 1
    for cout, up in ((128, True), (64, True), (32, False)):
        if up:
            x = ops.upsample(f"conv_blocks.{j}", x)
            j += 1
        x = ops.conv(f"conv_blocks.{j}", x, cout, 3, 1, 1, bias=True)
        x = ops.bn(f"conv_blocks.{j + 1}", x, eps=0.8)
        x = ops.act(f"conv_blocks.{j + 2}", x, "LeakyReLU")
        j += 3
    x = ops.conv(f"conv_blocks.{j}", x, channels, 3, 1, 1, bias=True)
    return ops.act(f"conv_blocks.{j + 1}", x, "Tanh")


def gan_discriminator(ops, x, classes: int = 10):
    """Seed 000 Table II discriminator: 3x3x16/32/64/128 stride-2 convs -> validity and label heads."""
    j = 0
    for cout, bn in ((16, False), (32, True), (64, True), (128, True)):
        x = ops.conv(f"conv_blocks.{j}", x, cout, 3, 2, 1, bias=True)
        x = ops.act(f"conv_blocks.{j + 1}", x, "LeakyReLU")
        x = ops.dropout(f"conv_blocks.{j + 2}", x, 0.25)
        j += 3
        if bn:
            x = ops.bn(f"conv_blocks.{j}", x, eps=0.8)
            j += 1
    flat = ops.flatten(x)
    adv = ops.act("adv_layer.1", ops.linear("adv_layer.0", flat, 1), "Sigmoid")
    aux = ops.act("aux_layer.1", ops.linear("aux_layer.0", flat, classes), "Softmax")
    return ops.cat([adv, aux])


def recurrent(ops, x, cell: str, hidden: int = 128, classes: int = 10):
    """Seed 000 Table II MNIST net: (RNN|LSTM|GRU) + BN + DP(0.25) -> FC(32) + DP(0.5) + FC(10)."""
    x = ops.rnn("rnn", x, hidden, cell)
    x = ops.bn("bn", x)
    x = ops.dropout("dropout1", x, 0.25)
    x = ops.linear("fc1", x, 32)
    x = ops.act("relu", x)
    x = ops.dropout("dropout2", x, 0.5)
    return ops.linear("fc2", x, classes)
