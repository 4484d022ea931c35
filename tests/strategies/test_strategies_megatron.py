"""``megatron`` layouts on tiny hand-computable transformers (docs/strategies-llm.md).

Every number below is worked out by hand from the tiny model: ``L`` blocks of an
attention and an MLP (or MoE) layer, sequence ``s = 4``, hidden ``h = 8``, bf16
activations (2 bytes), so one sample's b·s·h activation is 64 bytes.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simcomm import engine
from simcomm.errors import ConfigError
from simcomm.links.base import LinkClass
from simcomm.llm.placement import Placement, schedule, structure
from simcomm.ops import Collective, Compute, Transfer
from simcomm.runtimes.mpi import MPICH
from simcomm.strategies import STRATEGIES, NotApplicable
from simcomm.strategies.base import make_params
from simcomm.topologies.full_mesh import full_mesh
from simcomm.traces.io import save_trace
from simcomm.traces.schema import Layer, Trace
from simcomm.workload import build_workload

S, H, ACT = 4, 8, 4 * 8 * 2  # sequence, hidden, bytes of one sample's b·s·h activation in bf16
FREE = LinkClass("free", 1e18, 0.0, "nvlink")  # communication costs ~1e-16 s: the schedule alone sets the time
TF, TB = 1e-3, 2e-3  # forward / backward seconds of one block at the trace's batch


def tiny(blocks=4, *, moe=False, ends=True, batch=1, update=0.0, heads=4, experts=4, top_k=2) -> Trace:
    """``blocks`` uniform blocks (attn + mlp/moe, TF/TB per block at ``batch``), optionally embed and head of zero time."""
    layers = []
    if ends:
        layers.append(Layer("embed", "Embedding", 100, 400, 0.0, 0.0, 0.0, (S,), (S, H)))
    for i in range(blocks):
        layers.append(Layer(f"block{i}.attn", "Attention", 64, 256, TF / 2, TB / 2, update, (S, H), (S, H)))
        layers.append(Layer(f"block{i}.{'moe' if moe else 'mlp'}", "MLP", 128, 512, TF / 2, TB / 2, update,
                            (S, H), (S, H)))
    if ends:
        layers.append(Layer("head", "Linear", 100, 400, 0.0, 0.0, 0.0, (S, H), (S, 100)))
    meta = {"transformer": {"layers": blocks, "hidden": H, "ffn": 4 * H, "heads": heads, "kv_heads": heads,
                            "vocab": 100, "seq": S, "experts": experts if moe else 0, "top_k": top_k if moe else 1,
                            "shared_experts": 0, "tied": False}}
    return Trace("tiny-gpt", batch, "bf16", "test", "gpu", "synthetic", tuple(layers), iteration_s=1.0, meta=meta)


def plan_of(n, opts, trace=None, batch=1, bucket_mb=0.0):
    w = build_workload(trace or tiny(), n, batch=batch, bucket_mb=bucket_mb)
    cls = STRATEGIES.get("megatron")
    return cls(make_params(cls, opts)).plan(w, full_mesh(n, FREE)), w


def run(n, opts, **kw):
    plan, w = plan_of(n, opts, **kw)
    return plan, engine.simulate(plan, full_mesh(n, FREE), runtime=MPICH)


def colls(plan, kind, text=""):
    return [op for op in plan.ops if isinstance(op, Collective) and op.kind == kind and text in op.label]


# -- tensor parallelism -------------------------------------------------------------------------------------

@pytest.mark.parametrize("mb, m", [(1, 3), (2, 2)])
def test_tp_four_allreduces_of_bsh_per_block_per_microbatch(mb, m):
    L = 2
    plan, _ = plan_of(2, {"tp": 2, "microbatch": mb, "microbatches": m, "global_batch": mb * m}, trace=tiny(L))
    blocks = colls(plan, "allreduce", "block")
    assert len(blocks) == 4 * L * m and {op.nbytes for op in blocks} == {mb * ACT}
    assert {op.ranks for op in blocks} == {(0, 1)}
    # the vocabulary-parallel embedding all-reduces its output in forward, the head its input gradient in backward
    assert len(colls(plan, "allreduce", "embed")) == m and len(colls(plan, "allreduce", "head")) == m
    assert len(colls(plan, "allreduce")) == 4 * L * m + 2 * m


def test_tp_allreduce_blocks_the_compute_that_follows():
    plan, tl = run(2, {"tp": 2, "microbatches": 1, "global_batch": 1}, trace=tiny(1, ends=False))
    by_label = {op.label: op for op in plan.ops}
    ar = by_label["tp-allreduce block0.attn F0"]
    mlp = by_label["F block0.mlp F0"]
    assert ar.id in mlp.deps and tl.start[mlp.id] >= tl.end[ar.id]


def test_sequence_parallel_turns_each_allreduce_into_reduce_scatter_plus_allgather():
    L, m = 2, 2
    opts = {"tp": 2, "microbatches": m, "global_batch": m}
    plain, _ = plan_of(2, opts, trace=tiny(L, ends=False))
    sp, _ = plan_of(2, {**opts, "sequence_parallel": "true"}, trace=tiny(L, ends=False))
    ar = colls(plain, "allreduce", "tp-")
    assert not colls(sp, "allreduce", "tp-")
    rs, ag = colls(sp, "reduce_scatter", "tp-"), colls(sp, "allgather", "tp-")
    assert len(rs) == len(ag) == len(ar) == 4 * L * m
    # same total volume: a ring all-reduce of n bytes is a reduce-scatter of n then an all-gather of n
    assert sum(o.nbytes for o in rs) == sum(o.nbytes for o in ag) == sum(o.nbytes for o in ar) == 4 * L * m * ACT
    e_plain = engine.simulate(plain, full_mesh(2, FREE), runtime=MPICH).link_class_bytes
    e_sp = engine.simulate(sp, full_mesh(2, FREE), runtime=MPICH).link_class_bytes
    assert sum(e_sp.values()) == pytest.approx(sum(e_plain.values()), rel=1e-12)


# -- pipeline schedules -------------------------------------------------------------------------------------

@pytest.mark.parametrize("sched", ["1f1b", "gpipe"])
@pytest.mark.parametrize("p, m", [(4, 8), (4, 4), (2, 5)])
def test_pipeline_bubble_fraction_emerges(sched, p, m):
    """Uniform stages, free links: step = (m + p - 1)(t_f + t_b), bubble fraction (p-1)/(m+p-1)."""
    plan, tl = run(p, {"pp": p, "schedule": sched, "microbatches": m, "global_batch": m}, trace=tiny(8))
    tf, tb = 8 * TF / p, 8 * TB / p  # one stage, one sample
    assert tl.makespan == pytest.approx((m + p - 1) * (tf + tb), rel=1e-9)
    busy = m * (tf + tb)
    assert 1 - busy / tl.makespan == pytest.approx((p - 1) / (m + p - 1), rel=1e-9)


@pytest.mark.parametrize("p, m, v", [(4, 8, 2), (4, 4, 2), (2, 4, 4), (4, 8, 1)])
def test_interleaving_cuts_the_bubble_by_v(p, m, v):
    """Interleaved 1F1B: bubble time (p-1)(t_f+t_b)/v, i.e. (p-1)/(v·m) of the ideal step (Narayanan et al. §2.2.2)."""
    plan, tl = run(p, {"pp": p, "schedule": "interleaved", "virtual": v, "microbatches": m, "global_batch": m},
                   trace=tiny(8))
    ideal = m * 8 * (TF + TB) / p
    assert (tl.makespan - ideal) / ideal == pytest.approx((p - 1) / (v * m), rel=1e-9)


def test_1f1b_orders_by_hand():
    assert schedule("1f1b", 3, 4)[0] == [("F", 0, 0), ("F", 1, 0), ("F", 2, 0), ("B", 0, 0), ("F", 3, 0),
                                         ("B", 1, 0), ("B", 2, 0), ("B", 3, 0)]
    assert schedule("1f1b", 3, 4)[2] == [("F", 0, 0), ("B", 0, 0), ("F", 1, 0), ("B", 1, 0), ("F", 2, 0),
                                         ("B", 2, 0), ("F", 3, 0), ("B", 3, 0)]
    # interleaved, pp 2, v 2, m 2 (= pp: every forward first, as Megatron-LM does)
    assert schedule("interleaved", 2, 2, 2)[1] == [("F", 0, 0), ("F", 1, 0), ("F", 0, 1), ("F", 1, 1),
                                                   ("B", 0, 1), ("B", 1, 1), ("B", 0, 0), ("B", 1, 0)]


def test_pipeline_sends_bsh_activations_and_gradients_between_neighbours():
    p, m, mb = 3, 2, 2
    plan, _ = plan_of(6, {"tp": 2, "pp": p, "microbatch": mb, "microbatches": m, "global_batch": mb * m},
                      trace=tiny(3))
    xs = [op for op in plan.ops if isinstance(op, Transfer)]
    # per micro-batch, each of the 2 TP lanes sends forward across p-1 boundaries and backward across p-1
    assert len(xs) == 2 * (p - 1) * m * 2
    assert {op.nbytes for op in xs} == {mb * ACT}
    fwd = {(op.src, op.dst) for op in xs if "activation" in op.label}
    assert fwd == {(0, 2), (1, 3), (2, 4), (3, 5)}  # rank = t + tp·stage: TP lanes talk to their own lane


# -- data parallel and ZeRO ---------------------------------------------------------------------------------

def _model_bytes(trace):
    return float(sum(layer.grad_bytes for layer in trace.layers))  # bf16 trace: gradients travel in bf16


@pytest.mark.parametrize("m", [1, 2])
def test_zero3_moves_three_models_per_microbatch(m):
    tr = tiny(2)
    psi = _model_bytes(tr)
    plan, tl = run(4, {"zero": 3, "microbatches": m, "global_batch": 4 * m}, trace=tr)
    ag, rs = colls(plan, "allgather"), colls(plan, "reduce_scatter")
    assert sum(o.nbytes for o in ag) == 2 * m * psi and sum(o.nbytes for o in rs) == m * psi
    assert not colls(plan, "allreduce")
    # each all-gather/reduce-scatter of n bytes over p ranks puts (p-1)/p·n on the wire per rank: (p-1)·n in all
    assert sum(tl.link_class_bytes.values()) == pytest.approx(3 * m * psi * 3, rel=1e-12)


def test_zero3_gathers_each_layer_before_forward_and_backward_prefetching_one_ahead():
    plan, tl = run(2, {"zero": 3}, trace=tiny(2, ends=False))
    by = {op.label: op for op in plan.ops}
    ag1 = by["zero3-allgather block0.mlp F0"]
    assert by["F block0.attn F0"].id not in ag1.deps  # issued before block0.attn's forward finishes
    assert ag1.id in by["F block0.mlp F0"].deps
    ag2 = by["zero3-allgather block1.attn F0"]
    assert by["F block0.attn F0"].id in ag2.deps  # ... but not more than one layer ahead
    rs = by["zero3-reduce_scatter block1.mlp B0"]
    assert by["B block1.mlp B0"].id in rs.deps


@pytest.mark.parametrize("zero, kinds", [(0, {"allreduce": 1}), (1, {"reduce_scatter": 1, "allgather": 1}),
                                         (2, {"reduce_scatter": 1, "allgather": 1})])
def test_zero_0_1_2_volume(zero, kinds):
    tr = tiny(2)
    psi = _model_bytes(tr)
    plan, _ = plan_of(4, {"zero": zero, "microbatches": 2, "global_batch": 8}, trace=tr, bucket_mb=0.0)
    for kind in ("allreduce", "reduce_scatter", "allgather"):
        assert sum(o.nbytes for o in colls(plan, kind)) == kinds.get(kind, 0) * psi
    upd = [op for op in plan.ops if isinstance(op, Compute) and op.category == "update"]
    assert len(upd) == 4


def test_dp_buckets_overlap_the_last_microbatch_backward():
    """With small buckets the first bucket's all-reduce depends on a backward op, not on the end of backward."""
    plan, _ = plan_of(2, {"microbatches": 2, "global_batch": 4}, trace=tiny(4), bucket_mb=1e-6)
    ars = colls(plan, "allreduce", "dp-")
    assert len(ars) == 4 * 2 + 2  # one per layer here (tiny bucket cap)
    first = plan.ops[ars[0].deps[0]]
    assert first.label == "B head B1"  # the last micro-batch's first backward layer
    assert plan.ops[ars[-1].deps[0]].label == "B embed B1"


def test_tied_embeddings_are_all_reduced_between_first_and_last_stage():
    tr = tiny(4)
    tied = Trace(tr.model, tr.batch, tr.dtype, tr.device, tr.device_kind, tr.method, tr.layers, tr.iteration_s,
                 meta={"transformer": {**tr.meta["transformer"], "tied": True}})
    plan, _ = plan_of(8, {"tp": 2, "pp": 2, "microbatches": 2}, trace=tied)
    emb = colls(plan, "allreduce", "embedding")
    assert sorted(o.ranks for o in emb) == [(0, 2), (1, 3), (4, 6), (5, 7)]
    assert {o.nbytes for o in emb} == {100 * H * 2 / 2}  # vocab·h in bf16, halved by tp
    upd = next(op for op in plan.ops if isinstance(op, Compute) and op.category == "update" and op.rank == 0)
    assert upd.id > emb[0].id and plan.ops[upd.deps[-1]].label.startswith(("embedding", "dp-"))
    assert not colls(plan_of(8, {"tp": 2, "pp": 2, "microbatches": 2}, trace=tr)[0], "allreduce", "embedding")


def test_without_overlap_every_bucket_waits_for_the_whole_backward():
    plan, tl = run(2, {"microbatches": 2, "global_batch": 4, "overlap_grad_reduce": "false"}, trace=tiny(4),
                   bucket_mb=1e-6)
    ars = colls(plan, "allreduce", "dp-")
    assert len(ars) == 10
    last = max(op.id for op in plan.ops if isinstance(op, Compute) and op.rank == 0 and op.label.startswith("B "))
    assert all(last in op.deps for op in ars)
    assert min(tl.start[op.id] for op in ars) >= tl.end[last]


# -- experts ------------------------------------------------------------------------------------------------

def test_moe_alltoall_volume():
    # 2 samples of 4 tokens, top-2: T·k = 16 rows of h = 8 bf16 values, 256 bytes, each way; the dispatch carries
    # the rows' bf16 probabilities too (32 bytes); capacity 1.25 drops nothing at balanced load (module moe.py)
    mb, k, cf = 2, 2, 1.25
    plan, tl = run(2, {"experts_parallel": 2, "microbatch": mb, "microbatches": 1, "global_batch": 2 * mb,
                       "capacity_factor": cf}, trace=tiny(1, moe=True, top_k=k, ends=False))
    a2a = colls(plan, "alltoall")
    assert len(a2a) == 4  # dispatch and combine, forward and backward
    rows = mb * S * k
    assert sorted(o.nbytes for o in a2a) == [rows * H * 2] * 2 + [rows * (H + 1) * 2] * 2
    assert {o.ranks for o in a2a} == {(0, 1)}
    # the routed experts' gradients are not all-reduced across the two expert-parallel ranks (they hold different
    # experts); the router (h × experts) and the norm (h) are: 40 of the layer's 40 + 4 x 512 parameters
    assert [o.label for o in colls(plan, "allreduce")] == ["dp-allreduce stage0"]
    assert colls(plan, "allreduce")[0].nbytes == pytest.approx(256 + 512 * 40 / 2088)


# -- recomputation ------------------------------------------------------------------------------------------

def _compute_sum(plan, rank):
    return sum(op.seconds for op in plan.ops if isinstance(op, Compute) and op.rank == rank
               and op.category == "compute")


def test_recompute_costs():
    tr = tiny(2, ends=False)
    none, _ = plan_of(1, {}, trace=tr)
    full, _ = plan_of(1, {"recompute": "full"}, trace=tr)
    sel, _ = plan_of(1, {"recompute": "selective"}, trace=tr)
    assert _compute_sum(none, 0) == pytest.approx(2 * (TF + TB))
    assert _compute_sum(full, 0) == pytest.approx(2 * (2 * TF + TB))
    # selective: the attention core's share of attention's forward, s = 4, h = 8, no meta (one head, no GQA):
    # causal core 2 s^2 h = 256 against projections 8 s h^2 = 2048: 256 / 2304 = 1 / 9 = s / (4h + s)
    assert _compute_sum(sel, 0) == pytest.approx(2 * (TF + TB) + 2 * (TF / 2) * 4 / 36)
    # Megatron-LM's unfused attention (meta attention_core = full) computes all 4 s^2 h: s / (2h + s) = 4 / 20
    meta = {**tr.meta, "transformer": {**tr.meta.get("transformer", {}), "attention_core": "full"}}
    sel_full, _ = plan_of(1, {"recompute": "selective"}, trace=replace(tr, meta=meta))
    assert _compute_sum(sel_full, 0) == pytest.approx(2 * (TF + TB) + 2 * (TF / 2) * 4 / 20)


def test_per_operator_recompute_reruns_every_second_mm():
    # torchtitan's op-level checkpointing re-runs wk and wo of the attention layer and the second mm of a GeLU
    # MLP (fc2); s = 4, h = 8, no GQA: QKV 6 s h^2 = 1536, core 2 s^2 h = 256, output 2 s h^2 = 512 FLOPs, so
    # wk + wo = (1536 / 3 + 512) / 2304 = 4/9 of the attention forward, and 1/2 of the MLP's
    tr = tiny(2, ends=False)
    op, _ = plan_of(1, {"recompute": "op"}, trace=tr)
    assert _compute_sum(op, 0) == pytest.approx(2 * (TF + TB) + 2 * (TF / 2) * 4 / 9 + 2 * (TF / 2) / 2)
    meta = {**tr.meta, "transformer": {**tr.meta.get("transformer", {}), "mlp": "swiglu"}}
    swiglu, _ = plan_of(1, {"recompute": "op"}, trace=replace(tr, meta=meta))  # w3: 1/3 of a SwiGLU MLP
    assert _compute_sum(swiglu, 0) == pytest.approx(2 * (TF + TB) + 2 * (TF / 2) * 4 / 9 + 2 * (TF / 2) / 3)


def test_offload_changes_memory_not_the_plan():
    from simcomm.llm.models import config_from_meta
    from simcomm.memory import layout as memory_layout

    tr = tiny(4, ends=False)
    tr = replace(tr, meta={"transformer": {**tr.meta["transformer"], "top_k": 0}})  # a whole, consistent shape
    w = build_workload(tr, 2, batch=1, bucket_mb=0.0)
    cls = STRATEGIES.get("megatron")
    opts = {"pp": 2, "microbatches": 4, "global_batch": 4}
    plain, off = cls(make_params(cls, opts)), cls(make_params(cls, {**opts, "offload_layers": 1}))
    assert off.memory(w).in_flight < plain.memory(w).in_flight
    assert off.memory(w) == memory_layout.estimate(config_from_meta(tr.meta["transformer"], tr.model), pp=2, dp=1,
                                                   microbatches=4, offload_layers=1).peak()
    assert len(plan_of(2, {**opts, "offload_layers": 1}, trace=tr)[0].ops) == len(plan_of(2, opts, trace=tr)[0].ops)
    assert any(a.startswith("activation offload: 1 block(s)") for a in off.assumed())
    with pytest.raises(ConfigError, match="offload-layers: -1 must be an integer >= 0"):
        make_params(cls, {"offload_layers": -1})


def test_full_recompute_repeats_the_forward_tp_allreduces():
    opts = {"tp": 2, "microbatches": 1, "global_batch": 1}
    a, _ = plan_of(2, opts, trace=tiny(1, ends=False))
    b, _ = plan_of(2, {**opts, "recompute": "full"}, trace=tiny(1, ends=False))
    assert len(colls(a, "allreduce")) == 4 and len(colls(b, "allreduce")) == 6


# -- bad layouts --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("n, opts, trace, message", [
    (8, {"tp": 3}, None, "layout: tp 3 × pp 1 = 3 does not divide the 8 GPUs"),
    (8, {"tp": 2, "pp": 2, "dp": 3}, None, "layout: tp 2 × pp 2 × dp 3 = 12 is not the 8 GPUs"),
    (3, {"pp": 3}, None, "layout: 4 layers do not divide into pp 3 × virtual 1 = 3 stages"),
    (4, {"pp": 2, "schedule": "interleaved", "virtual": 4}, None,
     "layout: 4 layers do not divide into pp 2 × virtual 4 = 8 stages"),
    (8, {"tp": 8}, None, "tp: 8 does not divide the 4 heads"),
    (4, {"microbatch": 3}, None, "microbatch: 3 does not divide the 2 samples per replica"),
    (4, {"global_batch": 6}, None, "global-batch: 6 .* does not divide over dp 4 replicas"),
    (4, {"microbatch": 1, "microbatches": 5}, None, "microbatch: 1 × microbatches 5 × dp 4 = 20, not the global batch 8"),
    (4, {"experts_parallel": 4}, tiny(2, moe=True, experts=6), "experts-parallel: 4 does not divide the 6 experts"),
    (4, {"experts_parallel": 3, "dp": 4}, tiny(2, moe=True, experts=6),
     "experts-parallel: etp 1 × experts-parallel 3 = 3 does not divide the 4 ranks of a pipeline stage"),
    (4, {"experts_parallel": 2}, None, "experts-parallel: 2 needs MoE layers"),
    (4, {"pp": 2, "schedule": "interleaved", "microbatches": 3, "global_batch": 6}, tiny(4),
     "microbatches: 3 is not a multiple of pp 2"),
])
def test_layout_mismatch_is_one_line(n, opts, trace, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")) as exc:
        plan_of(n, opts, trace=trace, batch=2)
    assert "\n" not in str(exc.value)


@pytest.mark.parametrize("opts, message", [
    ({"schedule": "zigzag"}, "schedule: 'zigzag' is not valid; valid choices: gpipe, 1f1b, interleaved"),
    ({"zero": "4"}, "zero: 4 is not valid; valid choices: 0, 1, 2, 3"),
    ({"recompute": "some"}, "recompute: 'some' is not valid; valid choices: none, selective, full, op"),
    ({"virtual": "2"}, "virtual: 2 chunks per rank need schedule interleaved"),
    ({"schedule": "interleaved"}, "schedule: interleaved needs pp >= 2"),
    ({"tp": "0"}, "tp: 0 must be a positive integer"),
    ({"capacity_factor": "-1"}, "capacity-factor: -1.0 must be a positive number"),
])
def test_bad_options_are_one_line(opts, message):
    cls = STRATEGIES.get("megatron")
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        make_params(cls, opts)


def test_non_transformer_trace_runs_data_parallel_only(toy):
    w = build_workload(toy.make_trace(), 4, bucket_mb=0)
    cls = STRATEGIES.get("megatron")
    plan = cls().plan(w, full_mesh(4, FREE))
    assert len(colls(plan, "allreduce")) == 1
    with pytest.raises(NotApplicable, match="need a transformer trace"):
        cls(make_params(cls, {"pp": 2})).plan(w, full_mesh(4, FREE))


def test_cli_layout_mismatch_exits_2_with_one_line(tmp_path, capsys):
    from simcomm.cli.app import main

    path = save_trace(tiny(4), tmp_path / "tiny.json")
    code = main(["run", "--trace", str(path), "--strategy", "megatron", "--opt", "tp=3",
                 "--cluster", "dgx-a100-hdr", "--nodes", "1", "--no-baseline"])
    assert code == 2
    assert capsys.readouterr().err == "error: layout: tp 3 × pp 1 = 3 does not divide the 8 GPUs\n"


def test_cli_run_is_deterministic(tmp_path, capsys):
    from simcomm.cli.app import main

    path = save_trace(tiny(4), tmp_path / "tiny.json")
    args = ["run", "--trace", str(path), "--strategy", "megatron", "--opt", "tp=2", "--opt", "pp=2",
            "--opt", "microbatches=4", "--cluster", "dgx-a100-hdr", "--nodes", "1", "--batch", "2", "--json",
            "--no-baseline"]
    assert main(args) == 0
    a = capsys.readouterr().out
    assert main(args) == 0
    assert capsys.readouterr().out == a
    out = json.loads(a)
    assert out["mean_s"] > 0 and any("layout tp 2 × pp 2 × dp 2" in x for x in out["assumed"])


# -- invariants ---------------------------------------------------------------------------------------------

def test_placement_tensor_parallel_innermost():
    lay = Placement(tp=2, pp=2, dp=2)
    assert [lay.rank(t, p, d) for d in range(2) for p in range(2) for t in range(2)] == list(range(8))
    assert lay.tp_group(1, 1) == (6, 7) and lay.dp_group(0, 1) == (2, 6)
    assert Placement(1, 1, 4, ep=2).ep_groups(0) == [(0, 1), (2, 3)]
    assert Placement(1, 1, 4, ep=2).edp_groups(0) == [(0, 2), (1, 3)]


def test_megatron_core_order_puts_replicas_inside_a_stage():
    lay = Placement(tp=2, pp=2, dp=2, order="tp-dp-pp")
    assert lay.tp_group(0, 1) == (2, 3) and lay.dp_group(0, 0) == (0, 2) and lay.stage_ranks(1) == [4, 5, 6, 7]
    plan, _ = plan_of(8, {"tp": 2, "pp": 2, "order": "tp-dp-pp", "microbatches": 2}, trace=tiny(2))
    fwd = {(op.src, op.dst) for op in plan.ops if isinstance(op, Transfer) and "activation" in op.label}
    assert fwd == {(0, 4), (1, 5), (2, 6), (3, 7)}


def test_structure_reads_blocks():
    s = structure(["embed", "block0.attn", "block0.mlp", "block1.attn", "block1.moe", "head"])
    assert s.pre == (0,) and s.blocks == ((1, 2), (3, 4)) and s.post == (5,)
    assert structure(["conv1", "fc"]) is None


@settings(max_examples=25, deadline=None)
@given(tp=st.sampled_from([1, 2]), pp=st.sampled_from([1, 2]), dp=st.sampled_from([1, 2]),
       sched=st.sampled_from(["gpipe", "1f1b", "interleaved"]), zero=st.sampled_from([0, 1, 2, 3]),
       sp=st.booleans(), rec=st.sampled_from(["none", "selective", "full"]), m=st.sampled_from([2, 4]),
       overlap=st.booleans(), order=st.sampled_from(["tp-pp-dp", "tp-dp-pp"]), moe=st.booleans())
def test_any_layout_runs_and_does_every_microbatch_on_every_rank(tp, pp, dp, sched, zero, sp, rec, m, overlap,
                                                                 order, moe):
    if sched == "interleaved" and pp == 1:
        sched = "1f1b"
    v = 2 if sched == "interleaved" else 1
    n = tp * pp * dp
    opts = {"tp": tp, "pp": pp, "dp": dp, "schedule": sched, "virtual": v, "zero": zero,
            "sequence_parallel": sp, "recompute": rec, "microbatches": m, "global_batch": m * dp,
            "overlap_grad_reduce": overlap, "order": order, "experts_parallel": dp if moe else 1}
    plan, w = plan_of(n, opts, trace=tiny(4, moe=moe), bucket_mb=0.001)
    plan.validate()
    tl = engine.simulate(plan, full_mesh(n, FREE), runtime=MPICH)
    tl2 = engine.simulate(plan, full_mesh(n, FREE), runtime=MPICH)
    assert list(tl.end) == list(tl2.end) and math.isfinite(tl.makespan)
    layers_per_stage = 4 * 2 // pp + (2 if pp == 1 else 1)  # embed on the first stage, head on the last
    for r in range(n):
        fwd = [op for op in plan.ops if isinstance(op, Compute) and op.rank == r and op.label.startswith("F ")]
        assert len(fwd) == m * layers_per_stage
        busy = _compute_sum(plan, r)
        assert tl.makespan >= busy * (1 - 1e-12)


@pytest.mark.parametrize("bucket_mb", [0.0, 5.0])
def test_data_parallel_only_matches_the_allreduce_strategy(toy, bucket_mb):
    """tp = pp = 1, one micro-batch: megatron is DDP, so it must time exactly like ``allreduce`` (overlap backward)."""
    w = build_workload(toy.make_trace(n_layers=6), 8, bucket_mb=bucket_mb)
    topo = toy.two_level(2, 4)
    mine = engine.simulate(STRATEGIES.get("megatron")().plan(w, topo), topo, runtime=MPICH)
    ddp = engine.simulate(STRATEGIES.get("allreduce")().plan(w, topo), topo, runtime=MPICH)
    assert mine.makespan == pytest.approx(ddp.makespan, rel=1e-12)
    assert mine.link_class_bytes == pytest.approx(ddp.link_class_bytes, rel=1e-12)


def test_the_layout_checks_its_own_memory(cli):
    """A zoo transformer under megatron is checked by the layout-aware memory model, not a full replica per GPU."""
    rc, out, err = cli("run", "-s", "megatron", "--model", "gpt3-175b", "--cluster", "dgx-a100-hdr", "--nodes", "1",
                       "--precision", "bf16", "--batch", "1", "--opt", "tp=8", "--no-baseline")
    # 175B on 8 GPUs, tp 8, no ZeRO: 16 bytes/param of state alone is ~350 GB per GPU
    assert rc == 2 and err.count("\n") == 1 and "(pipeline stage 0) needs 633.4 GB per GPU" in err, err
    assert "but a A100 80GB has 85.9 GB (short by 547.5 GB" in err
    rc, out, err = cli("run", "-s", "megatron", "--model", "megatron-1.7b", "--cluster", "dgx-a100-hdr", "--nodes",
                       "2", "--precision", "bf16", "--batch", "4", "--opt", "tp=2", "--opt", "pp=2", "--no-baseline")
    assert rc == 0, err
    assert "assumed: memory: peak " in out and "(pipeline stage " in out and "margin " in out


def test_exposed_time_splits_into_parallelisms_and_the_bubble():
    """Free links, 1F1B on 4 stages, 8 micro-batches: the critical rank's exposed time is the bubble alone,
    (p - 1)(t_f + t_b) = 3 x 6 ms of waiting; the links cost nothing, so no parallelism is charged."""
    from simcomm.result import exposed_by, iteration_time

    p, m = 4, 8
    plan, tl = run(p, {"pp": p, "schedule": "1f1b", "microbatches": m, "global_batch": m}, trace=tiny(8))
    cls = STRATEGIES.get("megatron")
    split = exposed_by(plan, tl, p, iteration_time(plan, tl)[1], cls.comm_streams)
    assert split["waiting"] == pytest.approx((p - 1) * 8 * (TF + TB) / p, rel=1e-9)
    assert split["pipeline"] == pytest.approx(0.0, abs=1e-12)
