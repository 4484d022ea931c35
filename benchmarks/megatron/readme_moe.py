"""Megatron-core's published Mixtral 8x7B throughput (its MoE README) against simcomm.

Megatron-core's MoE README (``megatron/core/transformer/moe/README.md``) prints "468 TFLOPS for Mixtral 8X7B
bf16 training" (MCore v0.9) and, under "Reference Best Parallel Mapping" (MCore v0.8), the layout: 64 H100
80 GB GPUs (8 per node, NVLink 4, 8 x 400 Gb/s InfiniBand), seq 4096, tp 1, ep 8, pp 4, vp 8, micro-batch 1,
global batch 256, bf16, dropless, all-to-all dispatcher; its MoE training example adds the distributed
optimizer, ``--overlap-grad-reduce --overlap-param-gather``, grouped GEMM, no dropout, no recomputation.  The
TFLOP/s are Megatron-LM's own count (``num_floating_point_operations`` in ``megatron/training/training.py`` of
that release: ``12 B s l h^2 ((1 + g/a + s/h) + F k (3/2) / h + V / (2 l h))``, no recomputation), which
:func:`megatron_flops` reproduces; simcomm predicts the iteration time and the script converts.

The row runs ``simcomm.pipeline.simulate`` as ``simcomm run --strategy megatron --model mixtral-8x7b
--cluster dgx-h100-ndr ...`` does, on the library's own roofline trace: the H100's compute factor is the one
``simcomm.traces.devices`` fitted on an H100 capture of megatron-1.7b (docs/traces.md), not on this row;
nothing is fitted here, so the row is a prediction.  The result is cached in ``results/readme-mixtral-8x7b.json``.

    python benchmarks/megatron/readme_moe.py
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import score  # noqa: E402  (layout_kind, RESULTS)

PUBLISHED_TFLOPS = 468.0
GPUS = 64
#: Mixtral 8x7B (Hugging Face config): layers, hidden, heads, KV groups, expert FFN, top-k, vocabulary; seq
SHAPE = {"layers": 32, "hidden": 4096, "heads": 32, "groups": 8, "ffn": 14336, "topk": 2, "vocab": 32000, "seq": 4096}
GLOBAL_BATCH = 256
FLAT = {"strategy": "megatron", "model": "mixtral-8x7b", "cluster": "dgx-h100-ndr", "nodes": GPUS // 8,
        "precision": "bf16", "seq": 4096, "batch": 1, "scaling": "weak", "tp": 1, "pp": 4, "experts_parallel": 8,
        "schedule": "interleaved", "virtual": 8, "microbatch": 1, "global_batch": GLOBAL_BATCH,
        "sequence_parallel": True, "zero": 1, "framework": "megatron-core", "overlap_grad_reduce": True,
        "overlap_param_gather": True, "moe_dispatcher": "alltoall"}


def megatron_flops(batch: int, layers: int, hidden: int, heads: int, groups: int, ffn: int, topk: int, vocab: int,
                   seq: int) -> float:
    """Megatron-LM's FLOP count of one iteration (training.py ``num_floating_point_operations``, 2024): swiglu."""
    b, s, l, h = batch, seq, layers, hidden
    return 12.0 * b * s * l * h * h * ((1 + groups / heads + s / h) + ffn / h * topk * 1.5 + vocab / (2 * l * h))


def published_s() -> float:
    return megatron_flops(GLOBAL_BATCH, **SHAPE) / (PUBLISHED_TFLOPS * 1e12 * GPUS)


def main() -> int:
    from simcomm.pipeline import simulate
    from simcomm.scenario import from_flat

    t0 = time.perf_counter()
    res = simulate(from_flat(FLAT), baseline=False, analytic=False)
    wall = time.perf_counter() - t0
    t = float(res.mean_s)
    pub = published_s()
    b = res.breakdown
    d = {"row": "megatron-readme/mixtral-8x7b", "source": "megatron-readme", "generation": "H100",
         "kind": score.layout_kind(1, 4, 8, ep=8), "role": "prediction", "published_s": round(pub, 4),
         "published_tflops": PUBLISHED_TFLOPS, "iteration_s": t, "compute_s": float(b.compute),
         "exposed_s": float(b.comm_exposed), "wall_s": round(wall, 1), "scenario": FLAT,
         "tflops": megatron_flops(GLOBAL_BATCH, **SHAPE) / (t * 1e12 * GPUS)}
    (score.RESULTS / "readme-mixtral-8x7b.json").write_text(json.dumps(d, indent=1, sort_keys=True) + "\n",
                                                            encoding="utf-8")
    print(f"mixtral-8x7b on {GPUS} H100: published {PUBLISHED_TFLOPS:g} TFLOP/s = {pub:.3f} s; simcomm {t:.3f} s "
          f"({d['tflops']:.0f} TFLOP/s, {100 * (t - pub) / pub:+.1f} % time); compute {b.compute:.3f} s, exposed "
          f"{b.comm_exposed:.3f} s; {wall:.0f} s wall")
    for line in res.notes if hasattr(res, "notes") else []:
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
