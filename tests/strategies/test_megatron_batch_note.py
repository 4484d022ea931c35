"""The trace's per-rank batch is said only where the layout uses it: a megatron layout given its own
global batch trains that batch, and "per-rank batch 64 (the trace's)" beside it would contradict it."""

from simcomm.pipeline import simulate
from simcomm.scenario import from_flat

BASE = {"strategy": "megatron", "model": "gpt2-small", "cluster": "dgx-h100-ndr", "nodes": 1, "precision": "bf16",
        "tp": 4, "microbatch": 8}


def _batch_lines(**extra):
    res = simulate(from_flat({**BASE, **extra}), baseline=False)
    return [a for a in res.assumed if a.startswith("per-rank batch")], res


def test_a_given_global_batch_drops_the_trace_batch_line():
    lines, res = _batch_lines(global_batch=16)
    assert lines == []
    assert any("global batch 16 = micro-batch 8 × 1 micro-batches × dp 2" in a for a in res.assumed)


def test_the_workload_batch_keeps_it():
    lines, res = _batch_lines()
    assert lines == ["per-rank batch 64 (the trace's)"]
    assert any("global batch 512 = micro-batch 8 × 32 micro-batches × dp 2" in a for a in res.assumed)
