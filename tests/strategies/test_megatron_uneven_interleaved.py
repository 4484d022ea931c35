"""Uneven first/last pipeline stages with the interleaved schedule (Megatron-core's
``--decoder-first/last-pipeline-num-layers`` with virtual pipeline stages).

Megatron-core (``transformer_block.get_num_layers_to_build``) gives pipeline stage k its ``n_k``
layers as ``virtual`` chunks of ``n_k / virtual``; model chunk c holds the c-th run of every stage in
stage order, so chunk c of stage k starts at ``c·L/v + sum(n_i / v for i < k)``
(``transformer_layer.get_transformer_layer_offset``).  Worked case: 16 blocks, pp 4, v 2, first 2
and last 2: stages of 2 + 6 + 6 + 2 layers, chunks of 1, 3, 3, 1; Megatron's offsets (first chunk,
second chunk) are stage 0: 0, 8; stage 1: 1, 9; stage 2: 4, 12; stage 3: 7, 15.
"""

from __future__ import annotations

import pytest

from simcomm.errors import ConfigError
from simcomm.memory import layout as memory_layout
from simcomm.ops import Compute
from simcomm.strategies.megatron import MegatronParams, stage_layers, virtual_stage_layers
from tests.strategies.test_strategies_megatron import TB, TF, plan_of, run, tiny

P16 = MegatronParams(pp=4, schedule="interleaved", virtual=2, first_stage_layers=2, last_stage_layers=2)


def megatron_offset(L, pp, v, first, last, k, c):
    """Megatron-core's get_transformer_layer_offset (uneven, interleaved), transcribed for the check."""
    middle_stages = pp - (first is not None) - (last is not None)
    f_c = 0 if first is None else first // v
    l_c = 0 if last is None else last // v
    m_c = (L - (first or 0) - (last or 0)) // v
    total = f_c + m_c + l_c
    if k == 0:
        return c * total
    middle_rank = k if first is None else k - 1
    return c * total + f_c + middle_rank * (m_c // middle_stages)


def test_chunk_counts_and_offsets_by_hand():
    assert stage_layers(P16, 16) == (2, 6, 6, 2)
    assert virtual_stage_layers(P16, 16) == (1, 3, 3, 1, 1, 3, 3, 1)  # u = c·pp + k
    starts = {(k, c): sum(virtual_stage_layers(P16, 16)[:c * 4 + k]) for k in range(4) for c in range(2)}
    assert starts == {(0, 0): 0, (0, 1): 8, (1, 0): 1, (1, 1): 9, (2, 0): 4, (2, 1): 12, (3, 0): 7, (3, 1): 15}
    assert starts == {(k, c): megatron_offset(16, 4, 2, 2, 2, k, c) for k in range(4) for c in range(2)}
    # only the first stage given: 10 blocks on 2 stages as 4 + 6, chunks of 2 and 3
    p = MegatronParams(pp=2, schedule="interleaved", virtual=2, first_stage_layers=4)
    assert virtual_stage_layers(p, 10) == (2, 3, 2, 3)
    assert [megatron_offset(10, 2, 2, 4, None, k, c) for c in range(2) for k in range(2)] == [0, 2, 5, 7]
    assert virtual_stage_layers(MegatronParams(pp=4, schedule="interleaved", virtual=2), 16) is None


def test_memory_model_places_the_same_blocks():
    assert [memory_layout.stage_blocks(16, 4, k, 2, (2, 6, 6, 2)) for k in range(4)] == \
        [[0, 8], [1, 2, 3, 9, 10, 11], [4, 5, 6, 12, 13, 14], [7, 15]]
    for k in range(4):  # an even split given as counts is the default placement
        assert memory_layout.stage_blocks(16, 4, k, 2, (4,) * 4) == memory_layout.stage_blocks(16, 4, k, 2)
    # a zoo model of 32 layers: each stage's activations follow its layer count (in-flight chunks unchanged)
    even = memory_layout.estimate_stages("llama3-8b", pp=4, schedule="interleaved", virtual_stages=2, microbatches=8)
    uneven = memory_layout.estimate_stages("llama3-8b", pp=4, schedule="interleaved", virtual_stages=2,
                                        microbatches=8, stage_layers=(6, 10, 10, 6))
    for k, n in enumerate((6, 10, 10, 6)):
        assert uneven[k].activations == pytest.approx(even[k].activations * n / 8, abs=1)
    with pytest.raises(ConfigError, match=r"^stage_layers: must be 4 positive layer counts summing to the 32 "
                                          r"layers of llama3-8b, each a multiple of virtual_stages 2, got \(7,"):
        memory_layout.estimate("llama3-8b", pp=4, schedule="interleaved", virtual_stages=2, stage_layers=(7, 9, 9, 7))


def _blocks_of(plan, rank):
    """The layers ``rank`` runs forward for micro-batch 0, chunk 0 then chunk 1 (labels ``F LAYER F0.CHUNK``)."""
    return [op.label.split()[1] for c in (0, 1) for op in plan.ops if isinstance(op, Compute) and op.rank == rank
            and op.label.split()[0] == "F" and op.label.split()[2] == f"F0.{c}"]


def test_plan_places_chunks_and_the_schedule_completes():
    """16 blocks on pp 4 × v 2 (2 + 6 + 6 + 2), 4 micro-batches, free links: every rank computes its blocks'
    forward and backward once per micro-batch, in Megatron's chunks, and the schedule runs to the end."""
    m = 4
    opts = {"pp": 4, "schedule": "interleaved", "virtual": 2, "first_stage_layers": 2, "last_stage_layers": 2,
            "microbatches": m, "global_batch": m}
    plan, tl = run(4, opts, trace=tiny(16, ends=False))
    want = {0: [0, 8], 1: [1, 2, 3, 9, 10, 11], 2: [4, 5, 6, 12, 13, 14], 3: [7, 15]}
    for r, blocks in want.items():
        names = [f"block{i}.{x}" for i in blocks for x in ("attn", "mlp")]
        assert _blocks_of(plan, r) == names
        comp = sum(op.seconds for op in plan.ops if isinstance(op, Compute) and op.rank == r
                   and op.category == "compute")
        assert comp == pytest.approx(m * len(blocks) * (TF + TB), rel=1e-12)
    assert len(tl.end) == len(plan.ops)
    # the critical stage's work plus at least one chunk's pass through each other stage bounds the step below
    assert max(tl.end) >= m * 6 * (TF + TB)


@pytest.mark.parametrize("opts, text", [
    ({"pp": 2, "first_stage_layers": 1}, "first-stage-layers: 1 is not a multiple of virtual 2 (each of the "
                                         "stage's 2 model chunks holds 1/2 of its layers, as in Megatron-core); "
                                         "valid choices: multiples of 2"),
    ({"pp": 2, "first_stage_layers": 2, "last_stage_layers": 3}, "last-stage-layers: 3 is not a multiple of virtual 2"),
    ({"pp": 4, "first_stage_layers": 2, "last_stage_layers": 2, "n": 14},
     "first-stage-layers/last-stage-layers: the other 2 stages get 5 layers each, not a multiple of virtual 2"),
    ({"pp": 4, "first_stage_layers": 2, "n": 13}, "first-stage-layers/last-stage-layers: 13 layers minus 2 leave 11, "
                                                 "which do not split evenly over the other 3 stages"),
])
def test_bad_counts_one_line(opts, text):
    opts = dict(opts)
    n = opts.pop("n", 5)
    with pytest.raises(ConfigError, match="^" + text.replace("(", r"\(").replace(")", r"\)")):
        plan_of(opts["pp"], {**opts, "schedule": "interleaved", "virtual": 2, "microbatches": opts["pp"],
                             "global_batch": opts["pp"]}, trace=tiny(n))


def test_memory_of_the_strategy_uses_the_uneven_interleaved_split():
    """``Megatron.memory`` hands the per-stage counts to the memory model (which would refuse a bad split)."""
    from simcomm.strategies import STRATEGIES
    from simcomm.strategies.base import make_params
    from simcomm.traces.zoo.transformer import transformer_trace
    from simcomm.workload import build_workload

    cls = STRATEGIES.get("megatron")
    w = build_workload(transformer_trace("llama3-8b", "h100"), 4, batch=1, bucket_mb=25.0)
    s = cls(make_params(cls, {"pp": 4, "schedule": "interleaved", "virtual": 2, "first_stage_layers": 6,
                              "last_stage_layers": 6, "global_batch": 8}))
    peak = s.memory(w)
    want = memory_layout.estimate("llama3-8b", pp=4, schedule="interleaved", virtual_stages=2, microbatches=8,
                               stage_layers=(6, 10, 10, 6))
    assert peak == want.peak() and peak.total == want.total
