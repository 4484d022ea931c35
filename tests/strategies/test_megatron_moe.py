"""Mixture-of-experts layers as Megatron-core runs them (simcomm/strategies/megatron/moe.py), by hand.

The tiny MoE of test_strategies_megatron: one block, sequence s = 4, hidden h = 8, expert FFN 32, bf16 (2 bytes),
gelu experts (2 matrices), ``experts`` routed experts, top-k.  Sizes follow simcomm's conventions: an
all-to-all's bytes are what one rank sends, an all-gather's its gathered output, a reduce-scatter's its input.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simcomm.llm.placement import Placement
from simcomm.ops import Collective, Compute
from simcomm.runtimes.mpi import MPICH
from simcomm.strategies.megatron.moe import tile_efficiency
from tests.strategies.test_strategies_megatron import TF, plan_of, tiny


def moe_ops(opts, n, *, experts=2, top_k=2, microbatch=1):
    """(kind, ranks, bytes) of every expert-stream collective of one micro-batch, in plan order; the plan."""
    trace = tiny(1, moe=True, experts=experts, top_k=top_k, ends=False)
    plan, _ = plan_of(n, {"microbatch": microbatch, "microbatches": 1, **opts}, trace=trace, batch=microbatch)
    ops = [(o.kind, o.ranks, o.nbytes) for o in plan.ops if isinstance(o, Collective) and o.stream == "ep"]
    return ops, plan


def test_alltoall_dispatcher_two_experts_ep2():
    # ep 2 on 2 ranks, T = 4 tokens per rank, top-2: 8 rows of 8 bf16 = 128 bytes; the dispatch carries their
    # bf16 probabilities (8 x 2 = 16 bytes); the token counts (2 experts x int64) all-gathered over ep: 2 x 16
    ops, _ = moe_ops({"experts_parallel": 2, "global_batch": 2}, 2)
    g = (0, 1)
    assert ops == [("allgather", g, 32.0), ("alltoall", g, 144.0), ("alltoall", g, 128.0),  # forward
                   ("alltoall", g, 128.0), ("alltoall", g, 144.0)]  # backward: combine's, then dispatch's gradient


def test_alltoall_dispatcher_with_expert_tensor_parallelism():
    # tp 2 + sequence parallel, etp 2 (Megatron-core's default: etp = tp), ep 2, on 4 ranks (dp 2): T = 4/2 = 2
    # tokens, 4 rows: all-to-all 4 x 16 + 4 x 2 = 72 (64 back) over ep groups (0, 2), (1, 3) (stage index
    # t + tp·d re-cut as x + etp·e); all-gather-v over etp (0, 1), (2, 3) of 2 x 64 = 128; counts over tp_ep (all 4)
    ops, _ = moe_ops({"tp": 2, "sequence_parallel": True, "experts_parallel": 2, "global_batch": 2}, 4)
    ep, etp = [(0, 2), (1, 3)], [(0, 1), (2, 3)]
    want = ([("allgather", (0, 1, 2, 3), 64.0)] + [("alltoall", g, 72.0) for g in ep]
            + [("allgather", g, 128.0) for g in etp] + [("reduce_scatter", g, 128.0) for g in etp]
            + [("alltoall", g, 64.0) for g in ep]
            + [("alltoall", g, 64.0) for g in ep] + [("allgather", g, 128.0) for g in etp]
            + [("reduce_scatter", g, 128.0) for g in etp] + [("alltoall", g, 72.0) for g in ep])
    assert ops == want


def test_parallel_folding_etp1_ep_over_the_tensor_parallel_ranks():
    # tp 2 for attention, etp 1, ep 4 over all 4 ranks of the stage (Megatron-core's MoE parallel folding):
    # no expert all-gather; one ep group of 4
    ops, plan = moe_ops({"tp": 2, "sequence_parallel": True, "experts_parallel": 4, "etp": 1,
                         "global_batch": 2}, 4, experts=4)
    g = (0, 1, 2, 3)  # counts: 4 ranks x 4 experts x 8 bytes
    assert ops == [("allgather", g, 128.0), ("alltoall", g, 72.0), ("alltoall", g, 64.0),
                   ("alltoall", g, 64.0), ("alltoall", g, 72.0)]
    # no sequence-parallel all-gather / reduce-scatter at the MoE layer's edge (no shared experts)
    assert not [o for o in plan.ops if isinstance(o, Collective) and o.stream == "tp" and "block0.moe" in o.label]
    assert any("ep 4, etp 1" in line for line in plan.info.assumed)


def test_allgather_dispatcher():
    # ep 2 (etp 1), T = 4: hidden states 2 x 4 x 8 x 2 = 128 gathered, with the routing map and bf16 probabilities
    # 2 x 4 x 2 experts x (2 + 1) = 48; the output reduce-scattered (128); backward: all-gather 128, then the
    # hidden states' and probabilities' gradients reduce-scattered: 128 + 2 x 4 x 2 x 2 = 160
    ops, _ = moe_ops({"experts_parallel": 2, "moe_dispatcher": "allgather", "global_batch": 2}, 2)
    g = (0, 1)
    assert ops == [("allgather", g, 176.0), ("reduce_scatter", g, 128.0), ("allgather", g, 128.0),
                   ("reduce_scatter", g, 160.0)]


def _moe_forward(plan):
    return next(o.seconds for o in plan.ops if isinstance(o, Compute) and o.label.startswith("F block0.moe"))


#: routed experts' share of the tiny layer's FLOPs: top-2 x 2 x 2 h f = 2048 against the router's 2 h E = 32
ROUTED = 2048 / 2080


@pytest.mark.parametrize("opts, a2a, load", [
    ({}, 144.0, 1.0),  # dropless, balanced
    ({"moe_imbalance": 1.5}, 216.0, 1.5),  # the busiest rank's 12 rows priced for every rank
    ({"capacity_factor": 0.5, "pad_to_capacity": True}, 72.0, 0.5),  # ceil(8/2 x 0.5) = 2 rows per expert: 4 of 8
    ({"capacity_factor": 0.5}, 72.0, 0.5),  # dropped to capacity, not padded
    ({"capacity_factor": 2.0}, 144.0, 1.0),  # nothing to drop
    ({"capacity_factor": 1.25, "moe_imbalance": 1.5}, 180.0, 1.25),  # ceil(4 x 1.25) = 5 of the busiest's 6
    ({"capacity_factor": 1.25, "pad_to_capacity": True}, 180.0, 1.25),  # padded to 5 per expert: 10 rows
])
def test_routing_sets_rows_and_expert_time(opts, a2a, load):
    ops, plan = moe_ops({"experts_parallel": 2, "global_batch": 2, **opts}, 2)
    assert ops[1] == ("alltoall", (0, 1), a2a)  # 8 x load rows x (16 + 2) bytes
    # each of the 2 experts gets 8 x load rows (ep 2: 2 ranks x 8 rows / 2 experts) of a 32-column GEMM, tiled
    eff = tile_efficiency(8 * load, 32)
    assert _moe_forward(plan) == pytest.approx(TF / 2 * (1 - ROUTED + ROUTED * load / eff))
    assert any(line.startswith("moe routing: ") for line in plan.info.assumed)


def test_grouped_gemm_tile_quantisation():
    assert tile_efficiency(8192, 2048) == 1.0
    assert tile_efficiency(64, 128) == 0.5
    assert tile_efficiency(100, 100) == pytest.approx((100 / 128) ** 2)
    # the tiny model: 2 experts x 8 rows each (ep 2: 2 x 8 / 2 per expert) by 32 columns: 8/128 x 32/128
    _, plan = moe_ops({"experts_parallel": 2, "global_batch": 2}, 2)
    line = next(x for x in plan.info.assumed if x.startswith("moe experts: "))
    assert "1 local experts × 8 rows by 32 columns" in line and f"{(8 / 128) * (32 / 128):.4g}" in line


def test_expert_groups_of_parallel_folding():
    # tp 2, dp 4 on one stage (8 ranks): etp 1, ep 4 -> ep groups of 4 consecutive ranks, expert-dp pairs
    lay = Placement(2, 1, 4, ep=4, etp=1)
    assert lay.ep_groups(0) == [(0, 1, 2, 3), (4, 5, 6, 7)]
    assert lay.edp_groups(0) == [(0, 4), (1, 5), (2, 6), (3, 7)]
    assert lay.etp_groups(0) == [(r,) for r in range(8)]
    assert lay.tp_ep_groups(0) == [(0, 1, 2, 3), (4, 5, 6, 7)]
    # etp = tp (default): classic, the ep ranks are replicas of one tensor-parallel rank
    lay = Placement(2, 1, 4, ep=2)
    assert lay.ep_groups(0) == [(0, 2), (1, 3), (4, 6), (5, 7)] and lay.etp_groups(0) == [(0, 1), (2, 3), (4, 5), (6, 7)]
    assert lay.edp_groups(0) == [(0, 4), (1, 5), (2, 6), (3, 7)]
    # etp 4 > tp 2: an expert TP group spans two replicas; pipeline stages interleaved (order tp-pp-dp)
    lay = Placement(2, 2, 2, ep=1, etp=4)
    assert lay.etp_groups(1) == [(2, 3, 6, 7)] and lay.ep_groups(1) == [(2,), (3,), (6,), (7,)]


def test_routed_experts_reduce_over_expert_data_parallel_groups():
    # ep 2 on 4 ranks (dp 4), 2 experts of 2 x 8 x 32 = 512 parameters: the router and norm (8 x 2 + 8 = 24 of
    # 1048) over dp (0, 1, 2, 3), the routed experts' share / ep 2 over the expert-dp groups (0, 2), (1, 3)
    _, plan = moe_ops({"experts_parallel": 2, "global_batch": 4}, 4)
    dp = [o for o in plan.ops if isinstance(o, Collective) and o.label.startswith("dp-allreduce")]
    got = sorted((o.ranks, round(o.nbytes, 6)) for o in dp)
    assert got == sorted([((0, 1, 2, 3), round(256 + 512 * 24 / 1048, 6))]
                         + [(g, round(512 * 1024 / 1048 / 2, 6)) for g in ((0, 2), (1, 3))])


@pytest.mark.parametrize("opts, message", [
    (["--opt", "experts_parallel=3"],
     "error: experts-parallel: 3 does not divide the 8 experts of 'mixtral-8x7b' (each expert-parallel rank holds "
     "experts / ep of them); valid choices: 1, 2, 4, 8\n"),
    (["--opt", "experts_parallel=2", "--opt", "etp=3"],
     "error: etp: etp 3 × experts-parallel 2 = 6 does not divide the 8 ranks of a pipeline stage (tp 1 × dp 8; "
     "Megatron-core's MoE parallel folding re-cuts them into etp × ep × expert-data-parallel)\n"),
    (["--opt", "moe_dispatcher=flex"], "error: moe_dispatcher: 'flex' is not valid; valid choices: alltoall, allgather\n"),
    (["--opt", "etp=0"], "error: etp: 0 must be a positive integer\n"),
])
def test_bad_moe_input_is_one_line(cli, opts, message):
    rc, out, err = cli(["run", "--strategy", "megatron", "--model", "mixtral-8x7b", "--cluster", "dgx-h100-ndr",
                        "--nodes", "1", "--no-baseline", "--opt", "global_batch=8", *opts])
    assert (rc, out, err) == (2, "", message)


def test_etp_must_divide_the_expert_ffn():
    with pytest.raises(Exception, match=r"^etp: 3 does not divide the expert FFN size 32"):
        plan_of(6, {"experts_parallel": 2, "etp": 3, "global_batch": 6},
                trace=tiny(1, moe=True, experts=2, ends=False))


def test_without_sequence_parallelism_runs_as_deepspeed_moe():
    # tp 2, no sequence parallelism (Megatron-core refuses it): each rank dispatches its 1/2 slice of the
    # replicated tokens (T = 2: all-to-all 4 rows, 72 bytes) and all-gathers the layer's output (b·s·h = 64 bytes)
    # over tp after the combine, and the input gradient after the backward's last all-to-all
    ops, plan = moe_ops({"tp": 2, "experts_parallel": 2, "etp": 1, "global_batch": 2}, 4)
    assert ("alltoall", (0, 1), 72.0) in ops  # ep groups: stage indices 0-1 and 2-3 (etp 1)
    edge = [(o.kind, o.ranks, o.nbytes, o.label.split()[1]) for o in plan.ops
            if isinstance(o, Collective) and o.stream == "tp" and "block0.moe" in o.label]
    assert edge == [("allgather", (0, 1), 64.0, "block0.moe"), ("allgather", (2, 3), 64.0, "block0.moe")] * 2
    assert any("DeepSpeed-MoE does" in line for line in plan.info.assumed)


def test_expert_all_to_all_over_64_ranks_on_8_nodes_is_network_bound():
    # DeepSeek-V3's dispatch: 4 096 tokens x top-8 x 7 168 bf16 = 469.8 MB per rank over an expert-parallel group of
    # 64 ranks on 8 H800 nodes. 56/64 of it leaves the node through the rank's own 400 Gb/s NIC (50 GB/s, NCCL's
    # ~96 %): at least 8.22 ms; NCCL runs it as grouped point-to-point with PXN (docs/nccl.md)
    from simcomm import engine
    from simcomm.ops import PlanBuilder
    from simcomm.runtimes import NcclRuntime
    from simcomm.stacks import apply_stack, get_stack
    from simcomm.topologies.presets import preset

    topo = apply_stack(preset("hgx-h800", nodes=8), get_stack("nccl"))
    nbytes = 4096 * 8 * 7168 * 2
    b = PlanBuilder(topo.n_ranks)
    b.collective("alltoall", range(64), nbytes)
    tl = engine.simulate(b.build(), topo, fidelity="flow", runtime=NcclRuntime())
    bound = nbytes * 56 / 64 / 50e9
    assert bound <= tl.makespan <= 1.1 * bound


def test_moe_trace_without_expert_meta_is_one_line():
    from dataclasses import replace

    from simcomm.errors import ConfigError

    tr = tiny(1, moe=True, experts=2, ends=False)
    bare = replace(tr, meta={})
    with pytest.raises(ConfigError, match=r"^experts-parallel: the MoE layers' dispatch needs the trace's "
                                          r"transformer meta \(experts, top_k, hidden, ffn, seq missing\)"):
        plan_of(2, {"experts_parallel": 2, "global_batch": 2}, trace=bare)
    plan, _ = plan_of(2, {"global_batch": 2}, trace=bare)  # no expert parallelism: nothing to dispatch
    assert not [o for o in plan.ops if isinstance(o, Collective) and o.stream == "ep"]


@settings(max_examples=20, deadline=None)
@given(tp=st.sampled_from([1, 2]), etp=st.sampled_from([None, 1, 2, 4]), ep=st.sampled_from([1, 2, 4]),
       pp=st.sampled_from([1, 2]), dp=st.sampled_from([2, 4]), dispatcher=st.sampled_from(["alltoall", "allgather"]),
       sp=st.booleans(), zero=st.sampled_from([0, 1]), cf=st.sampled_from([None, 1.0]))
def test_any_moe_layout_folds_exactly(tp, etp, ep, pp, dp, dispatcher, sp, zero, cf):
    """Any small MoE layout either is one error line or runs, and its folded plan (whole expert groups live, one
    compute and one pipeline send per stage) times exactly like the full one on slow links (1 MB/s: traffic
    dominates); all 264 valid layouts of this grid were checked so once (2026-11-28)."""
    from simcomm import engine
    from simcomm.errors import ConfigError
    from simcomm.links.base import LinkClass
    from simcomm.topologies.full_mesh import full_mesh

    n = tp * pp * dp
    opts = {"tp": tp, "pp": pp, "experts_parallel": ep, "moe_dispatcher": dispatcher, "sequence_parallel": sp,
            "zero": zero, "microbatches": 2, "global_batch": 2 * dp, **({"etp": etp} if etp else {}),
            **({"capacity_factor": cf} if cf else {})}
    trace = tiny(2, moe=True, experts=4, top_k=2)
    try:
        full, _ = plan_of(n, {**opts, "replicas": "all"}, trace=trace, batch=2)
    except ConfigError as exc:
        assert "\n" not in str(exc)
        return
    one, _ = plan_of(n, {**opts, "replicas": "one"}, trace=trace, batch=2)
    full.validate()
    topo = full_mesh(n, LinkClass("slow", 1e6, 1e-6, "infiniband"))
    a = engine.simulate(full, topo, runtime=MPICH)
    b = engine.simulate(one, topo, traffic_weights=one.info.traffic_weights, runtime=MPICH)
    assert b.makespan == pytest.approx(a.makespan, rel=1e-12)
