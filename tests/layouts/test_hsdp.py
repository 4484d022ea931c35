"""HSDP (``--opt zero=3 --opt shard_group=G``, FSDP's HYBRID_SHARD): bytes per step, memory, bad input.

Tiny model (conftest): per block the attention's gradient (= parameter) bytes are 256,
the MLP's 512.  With R replicas and shard group G, every micro-batch each layer's
parameters are all-gathered inside a group of G before its forward and again before its
backward, its gradient reduce-scattered inside the group after the backward, and the 1/G
gradient shard all-reduced across the R/G groups (one rank per group).
"""

from __future__ import annotations

from collections import Counter

import pytest

from simcomm.errors import ConfigError
from simcomm.memory import layout as memory_layout


def _bytes(plan, lay):
    out = Counter()
    for kind in ("allgather", "reduce_scatter", "allreduce"):
        for op in lay.colls(plan, kind):
            out[(kind, op.ranks)] += op.nbytes
    return out


@pytest.mark.parametrize("m", [1, 3])
def test_bytes_per_step_by_hand(lay, m):
    """4 replicas, G = 2, L = 2 blocks (768 bytes each), m micro-batches."""
    L, per_block = 2, 256 + 512
    plan, _ = lay.plan_of(4, {"zero": 3, "shard_group": 2, "microbatches": m, "global_batch": 4 * m,
                              "replicas": "all"}, trace=lay.tiny(L))
    got = _bytes(plan, lay)
    for g in ((0, 1), (2, 3)):  # shard groups: consecutive replicas
        assert got[("allgather", g)] == 2 * L * per_block * m  # forward and backward, every micro-batch
        assert got[("reduce_scatter", g)] == L * per_block * m
    for g in ((0, 2), (1, 3)):  # replica groups: the same shard in each shard group
        assert got[("allreduce", g)] == L * per_block / 2 * m
    assert set(got) == {(k, g) for k in ("allgather", "reduce_scatter") for g in ((0, 1), (2, 3))} | \
        {("allreduce", g) for g in ((0, 2), (1, 3))}


def test_each_allreduce_follows_its_reduce_scatter(lay):
    plan, _ = lay.plan_of(4, {"zero": 3, "shard_group": 2, "global_batch": 4, "replicas": "all"},
                          trace=lay.tiny(1))
    rs = {(op.label.split()[1], r): op for op in lay.colls(plan, "reduce_scatter") for r in op.ranks}
    for op in lay.colls(plan, "allreduce", "hsdp-"):
        layer = op.label.split()[1]
        assert all(rs[(layer, r)].id in op.deps for r in op.ranks)


def test_shard_group_of_all_replicas_is_plain_zero3(lay):
    opts = {"zero": 3, "global_batch": 4, "replicas": "all"}
    full, _ = lay.plan_of(4, opts, trace=lay.tiny(2))
    same, _ = lay.plan_of(4, {**opts, "shard_group": 4}, trace=lay.tiny(2))
    assert _bytes(full, lay) == _bytes(same, lay)
    assert not lay.colls(same, "allreduce", "hsdp-")


def test_hsdp_update_shards_over_the_group(lay):
    """The optimizer step covers 1/G of the parameters (update time of 1 s per layer: 2 layers / G 2 = 1 s)."""
    tr = lay.tiny(1)
    tr = lay.replace(tr, layers=tuple(lay.replace(x, update_s=1.0) for x in tr.layers))
    plan, _ = lay.plan_of(4, {"zero": 3, "shard_group": 2, "global_batch": 4, "replicas": "all"}, trace=tr)
    ups = [op for op in plan.ops if getattr(op, "label", "") == "update"]
    assert len(ups) == 4 and [op.seconds for op in ups] == pytest.approx([1.0] * 4)


def test_memory_is_sharded_within_the_group_only():
    hs = memory_layout.estimate("gpt2-small", dp=8, zero=3, shard_group=2)
    z2 = memory_layout.estimate("gpt2-small", dp=2, zero=3)
    z8 = memory_layout.estimate("gpt2-small", dp=8, zero=3)
    state = lambda m: (m.parameters, m.gradients, m.optimizer_state)  # noqa: E731
    assert state(hs) == state(z2) and hs.activations == z2.activations
    assert hs.total > z8.total
    assert "HSDP shard group 2" in hs.layout
    n = hs.params
    assert hs.optimizer_state == 12 * -(-n // 2)  # Adam, mixed precision: 12 bytes per parameter, 1/2 of them


def test_bad_shard_group_is_one_line(lay):
    with pytest.raises(ConfigError, match=r"^shard-group: 3 does not divide the 4 data-parallel replicas; "
                                          r"valid choices: 1, 2, 4$"):
        lay.plan_of(4, {"zero": 3, "shard_group": 3, "global_batch": 4})
    with pytest.raises(ConfigError, match=r"^shard-group: 2 shards .* needs zero 3, not zero 1$"):
        lay.plan_of(4, {"zero": 1, "shard_group": 2, "global_batch": 4})
    with pytest.raises(ConfigError, match=r"^shard_group: 3 does not divide the 4 data-parallel replicas"):
        memory_layout.estimate("gpt2-small", dp=4, zero=3, shard_group=3)
    with pytest.raises(ConfigError, match=r"^shard_group: 2 \(HSDP\) needs zero 3, not zero 0$"):
        memory_layout.estimate("gpt2-small", dp=4, shard_group=2)


def test_cli_bad_shard_group_exits_2_with_one_line(cli):
    rc, out, err = cli(["run", "--strategy", "megatron", "--model", "gpt2-small", "--cluster", "dgx-a100-hdr",
                        "--nodes", "1", "--opt", "zero=3", "--opt", "shard_group=3", "--no-baseline"])
    assert rc == 2 and out == ""
    assert err == "error: shard-group: 3 does not divide the 8 data-parallel replicas; valid choices: 1, 2, 4, 8\n"
