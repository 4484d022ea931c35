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


def test_a_baseline_that_cannot_fit_in_memory_is_said_to_be_hypothetical():
    # plain data parallelism holds llama3-8b whole with the trace's 64 sequences of 8 192 tokens: far over 80 GB
    scn = from_flat({"strategy": "megatron", "model": "llama3-8b", "cluster": "dgx-h100-ndr", "nodes": 1,
                     "precision": "bf16", "tp": 8, "global_batch": 8, "microbatch": 1})
    res = simulate(scn)
    line = [a for a in res.assumed if a.startswith("baseline does not fit in memory")]
    assert len(line) == 1 and "but a H100 has 85.9 GB" in line[0]
    assert line[0].endswith("its time is what the iteration would take if it did")
    # a baseline that fits says nothing (gpt2-small, DDP with 8 sequences per H100)
    fits = simulate(from_flat({**BASE, "batch": 8}))
    assert not [a for a in fits.assumed if a.startswith("baseline does not fit")]
