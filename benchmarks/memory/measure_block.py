"""Measure what a Llama-style block keeps for backward on a GPU, to check simcomm.memory.activations.

Plain PyTorch, as torchtitan's Llama runs it without RoPE: RMSNorm (F.rms_norm), separate wq/wk/wv/wo,
K and V repeated to every query head (torchtitan's repeat_kv), SDPA (FlashAttention forced, causal),
SwiGLU as F.silu(w1 x) * w3 x, w2, no dropout, bf16.  For each
recomputation mode (none; torchtitan's per-operator selective checkpointing, its policy re-implemented from
torchtitan/distributed/activation_checkpoint.py; full checkpointing of each block) it reports the bytes
allocated by the forward of N blocks per block and token (the saved tensors), and the peak during backward
above the forward's end.  Usage: python3 measure_block.py OUT.json
"""

import json
import sys
from collections import defaultdict

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts

H, HEADS, KV, FFN, SEQ, BATCH, BLOCKS = 4096, 32, 8, 14336, 4096, 1, 4
HD = H // HEADS
DT = torch.bfloat16


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        lin = lambda i, o: torch.nn.Linear(i, o, bias=False, dtype=DT)  # noqa: E731
        self.wq, self.wk, self.wv, self.wo = lin(H, H), lin(H, KV * HD), lin(H, KV * HD), lin(H, H)
        self.w1, self.w3, self.w2 = lin(H, FFN), lin(H, FFN), lin(FFN, H)
        self.n1 = torch.nn.Parameter(torch.ones(H, dtype=DT))
        self.n2 = torch.nn.Parameter(torch.ones(H, dtype=DT))

    @staticmethod
    def repeat_kv(x):
        """torchtitan's repeat_kv: every KV head copied to the query heads it serves."""
        b, s, kv, hd = x.shape
        return x[:, :, :, None, :].expand(b, s, kv, HEADS // KV, hd).reshape(b, s, HEADS, hd)

    def forward(self, x):
        b, s, _ = x.shape
        h = F.rms_norm(x, (H,), self.n1)
        q = self.wq(h).view(b, s, HEADS, HD).transpose(1, 2)
        k, v = (self.repeat_kv(w(h).view(b, s, KV, HD)).transpose(1, 2) for w in (self.wk, self.wv))
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.wo(o.transpose(1, 2).contiguous().view(b, s, H))
        h = F.rms_norm(x, (H,), self.n2)
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))


SAVE = {torch.ops.aten.mm.default, torch.ops.aten._scaled_dot_product_efficient_attention.default,
        torch.ops.aten._scaled_dot_product_flash_attention.default,
        torch.ops.aten._scaled_dot_product_cudnn_attention.default}


def op_context():
    meta = defaultdict(int)

    def policy(ctx, func, *args, **kwargs):
        key = f"{'recompute' if ctx.is_recompute else 'forward'}_mm_count"
        if func == torch.ops.aten.mm.default:
            meta[key] += 1
        keep = func in SAVE and not (func == torch.ops.aten.mm.default and meta[key] % 2 == 0)
        return CheckpointPolicy.MUST_SAVE if keep else CheckpointPolicy.PREFER_RECOMPUTE

    return create_selective_checkpoint_contexts(policy)


def run(mode, blocks):
    x = torch.randn(BATCH, SEQ, H, dtype=DT, device="cuda", requires_grad=True)
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    y = x
    for blk in blocks:
        if mode == "none":
            y = blk(y)
        elif mode == "full":
            y = checkpoint(blk, y, use_reentrant=False)
        else:
            y = checkpoint(blk, y, use_reentrant=False, context_fn=op_context)
    torch.cuda.synchronize()
    kept = torch.cuda.memory_allocated() - base - y.numel() * y.element_size()
    torch.cuda.reset_peak_memory_stats()
    end = torch.cuda.memory_allocated()
    y.float().sum().backward()
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - end
    grads = sum(p.numel() * p.element_size() for b in blocks for p in b.parameters())
    for b in blocks:
        b.zero_grad(set_to_none=True)
    del x, y
    torch.cuda.empty_cache()
    tokens = SEQ * BATCH
    return {"kept_per_block_token": kept / len(blocks) / tokens, "backward_peak_above_end_per_token": peak / tokens,
            "param_grad_bytes": grads}


def main():
    torch.manual_seed(0)
    blocks = [Block().cuda() for _ in range(BLOCKS)]
    out = {"shape": dict(hidden=H, heads=HEADS, kv_heads=KV, ffn=FFN, seq=SEQ, batch=BATCH, blocks=BLOCKS),
           "device": torch.cuda.get_device_name(), "torch": torch.__version__}
    for mode in ("none", "op", "full", "none"):  # none twice: the first warms up kernels and the allocator
        out[mode] = run(mode, blocks)
    print(json.dumps(out, indent=1))
    with open(sys.argv[1], "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
