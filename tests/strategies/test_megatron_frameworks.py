"""Data-parallel and ZeRO/FSDP schedules as each framework runs them (simcomm.frameworks, megatron/zero.py).

Tiny hand-computed cases: the transformer of test_strategies_megatron (per block an attention layer of 256
gradient bytes and an MLP of 512, bf16: 128 and 256 parameters; forward 0.5 ms per layer, backward 1 ms)
on 2 ranks over one link class of 512 000 B/s and no latency: a 2-rank ring all-gather of n bytes sends
n/2, so the attention layer's gather takes 0.25 ms and the MLP's 0.5 ms.
"""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simcomm import engine
from simcomm.links.base import LinkClass
from simcomm.runtimes.mpi import MPICH
from simcomm.topologies.full_mesh import full_mesh
from tests.strategies.test_strategies_megatron import colls, plan_of, tiny

SLOW = LinkClass("slow", 512_000.0, 0.0, "nvlink")
MS = 1e-3


def timed(opts, n=2, **kw):
    plan, _ = plan_of(n, {"zero": 3, **opts}, **kw)
    tl = engine.simulate(plan, full_mesh(n, SLOW), runtime=MPICH)
    by = {op.label: op for op in plan.ops if op.ranks[0] == 0}
    return plan, tl, by


def span(tl, op):
    return round(tl.start[op.id] / MS, 9), round(tl.end[op.id] / MS, 9)


# -- prefetch depth and on-demand fetching ---------------------------------------------------------------------

def test_prefetch_one_overlaps_one_gather_with_the_compute_before():
    """g0 0-.25, g1 .25-.75 under F attn0 (.25-.75); g2 waits for attn0's compute: .75-1.0; F mlp0 .75-1.25;
    g3 waits for mlp0's compute: 1.25-1.75; F attn1 1.25-1.75; F mlp1 waits for g3: 1.75-2.25."""
    _, tl, by = timed({"prefetch": 1}, trace=tiny(2, ends=False))
    assert span(tl, by["zero3-allgather block0.mlp F0"]) == (0.25, 0.75)
    assert span(tl, by["zero3-allgather block1.attn F0"]) == (0.75, 1.0)
    assert span(tl, by["zero3-allgather block1.mlp F0"]) == (1.25, 1.75)
    assert span(tl, by["F block1.mlp F0"]) == (1.75, 2.25)


def test_prefetch_zero_fetches_on_demand_serial_with_compute():
    """Each gather after the compute before it: .25 + .5 + .5 + .5 + .25 + .5 + .5 + .5 = 3.5 ms of forward."""
    plan, tl, by = timed({"prefetch": 0}, trace=tiny(2, ends=False))
    assert by["F block0.attn F0"].id in by["zero3-allgather block0.mlp F0"].deps
    assert span(tl, by["zero3-allgather block1.mlp F0"]) == (2.5, 3.0)
    assert span(tl, by["F block1.mlp F0"]) == (3.0, 3.5)


def test_prefetch_two_starts_the_fourth_gather_after_the_first_compute():
    """prefetch 2: g3 waits for attn0's compute (.75), then for g2 on the all-gather stream (.75-1.0): 1.0-1.5."""
    _, tl, by = timed({"prefetch": 2}, trace=tiny(2, ends=False))
    assert by["F block0.attn F0"].id in by["zero3-allgather block1.mlp F0"].deps
    assert span(tl, by["zero3-allgather block1.attn F0"]) == (0.75, 1.0)
    assert span(tl, by["zero3-allgather block1.mlp F0"]) == (1.0, 1.5)


@pytest.mark.parametrize("limit, gate, ag2, ag3, f3", [
    # no limit (prefetch 2): g3 waits for attn0's compute only
    (0, "F block0.attn F0", (0.75, 1.0), (1.0, 1.5), (1.75, 2.25)),
    # 300: mlp0 + attn1 (384) live stops g3 until mlp0 is released, as prefetch 1 does
    (300, "F block0.mlp F0", (0.75, 1.0), (1.25, 1.75), (1.75, 2.25)),
    # 200: mlp0 (256) live alone holds g2 and g3 until its release (1.25)
    (200, "F block0.mlp F0", (1.25, 1.5), (1.5, 2.0), (2.0, 2.5)),
    # 100: every unit exceeds it: on demand, as prefetch 0
    (100, "F block1.attn F0", (1.75, 2.0), (2.5, 3.0), (3.0, 3.5)),
])
def test_live_parameter_limit_holds_the_next_gather_until_a_release(limit, gate, ag2, ag3, f3):
    """prefetch 2 with no prefetch while ``limit`` gathered parameters of the units before are live (attn 128,
    mlp 256 parameters; DeepSpeed's stage3_max_live_parameters test, live count before the next is added)."""
    _, tl, by = timed({"prefetch": 2, "max_live_params": limit}, trace=tiny(2, ends=False))
    assert by[gate].id in by["zero3-allgather block1.mlp F0"].deps
    assert span(tl, by["zero3-allgather block1.attn F0"]) == ag2
    assert span(tl, by["zero3-allgather block1.mlp F0"]) == ag3
    assert span(tl, by["F block1.mlp F0"]) == f3


def test_deepspeed_prefetches_small_units_up_to_its_bucket():
    """DeepSpeed's stage3_prefetch_bucket_size (5e7 elements) is far above the tiny units: each fetch prefetches
    every following unit, so the gathers run back to back from the start: g3 1.0-1.5 (no compute before it)."""
    plan, tl, by = timed({"framework": "deepspeed", "gather_unit": "layer"}, trace=tiny(2, ends=False))
    g3 = by["zero3-allgather block1.mlp F0"]
    assert not [d for d in g3.deps if plan.ops[d].label.startswith("F ")]
    assert span(tl, g3) == (1.0, 1.5)


# -- units and buckets -------------------------------------------------------------------------------------------

def test_block_units_gather_attention_and_mlp_together():
    plan, _ = plan_of(2, {"zero": 3, "gather_unit": "block"}, trace=tiny(2, ends=False))
    ag, rs = colls(plan, "allgather"), colls(plan, "reduce_scatter")
    assert [(o.label, o.nbytes) for o in ag] == [("zero3-allgather block0 F0", 768), ("zero3-allgather block1 F0", 768),
                                                 ("zero3-allgather block1 B0", 768), ("zero3-allgather block0 B0", 768)]
    assert [o.label for o in rs] == ["zero3-reduce_scatter block1 B0", "zero3-reduce_scatter block0 B0"]


def test_deepspeed_leaf_modules_split_each_layer():
    """attention: QKV (3 of 4 parameter rows, 192 B) and output projection (64 B); compute shares of the
    FLOPs: QKV 1536 + core 256 of 2304, output 512 (s 4, h 8, causal core); MLP: two matrices of 256 B."""
    plan, _ = plan_of(2, {"zero": 3, "gather_unit": "module"}, trace=tiny(1, ends=False))
    assert [(o.label, o.nbytes) for o in colls(plan, "allgather", " F0")] == [
        ("zero3-allgather block0.attn.0 F0", 192), ("zero3-allgather block0.attn.1 F0", 64),
        ("zero3-allgather block0.mlp.0 F0", 256), ("zero3-allgather block0.mlp.1 F0", 256)]
    fwd = {op.label: op.seconds for op in plan.ops if op.label.startswith("F block0.attn")}
    assert fwd == {"F block0.attn.0 F0": pytest.approx(0.5 * MS * 1792 / 2304, rel=1e-12),
                   "F block0.attn.1 F0": pytest.approx(0.5 * MS * 512 / 2304, rel=1e-12)}
    # backward visits the modules in reverse
    assert [o.label for o in colls(plan, "allgather", " B0")][:2] == ["zero3-allgather block0.mlp.1 B0",
                                                                       "zero3-allgather block0.mlp.0 B0"]


@pytest.mark.parametrize("cap, labels", [
    (300, ["block1.mlp", "block1.attn", "block0.mlp", "block0.attn"]),
    (600, ["block1.mlp+block1.attn", "block0.mlp+block0.attn"]),
])
def test_reduce_bucket_flushes_when_the_next_gradient_would_overflow(cap, labels):
    """DeepSpeed's reduce_bucket_size in parameters (mlp 256, attn 128): the bucket is reduce-scattered
    once the next gradient is ready and would not fit, after that gradient's backward."""
    plan, _ = plan_of(2, {"zero": 3, "reduce_bucket_params": cap}, trace=tiny(2, ends=False))
    rs = colls(plan, "reduce_scatter")
    assert [o.label.removeprefix("zero3-reduce_scatter ").removesuffix(" B0") for o in rs] == labels
    by = {op.label: op for op in plan.ops}
    if cap == 600:  # [mlp1, attn1] flushed when mlp0's gradient arrives
        assert by["B block0.mlp B0"].id in rs[0].deps and rs[0].nbytes == 768


# -- reshard after forward, streams --------------------------------------------------------------------------------

@pytest.mark.parametrize("policy, regathered", [
    ("true", {"embed", "block0.attn", "block0.mlp", "block1.attn", "block1.mlp", "head"}),
    ("false", set()),
    ("not-root", {"block0.attn", "block0.mlp", "block1.attn", "block1.mlp"}),
    ("not-last", {"block0.attn", "block0.mlp"}),
])
def test_reshard_after_forward_policies(policy, regathered):
    plan, _ = plan_of(2, {"zero": 3, "reshard_after_forward": policy}, trace=tiny(2))
    back = {o.label.split()[1] for o in colls(plan, "allgather", " B0")}
    assert back == regathered and len(colls(plan, "allgather", " F0")) == 6


@pytest.mark.parametrize("framework", ["fsdp2", "torchtitan"])
def test_a_model_without_blocks_has_no_root_to_keep(toy, framework):
    """FSDP2's root module is a transformer's embedding and head; a trace of other layers is re-gathered whole."""
    from simcomm.strategies import STRATEGIES
    from simcomm.strategies.base import make_params
    from simcomm.workload import build_workload

    w = build_workload(toy.make_trace(), 2, bucket_mb=0)
    cls = STRATEGIES.get("megatron")
    plan = cls(make_params(cls, {"zero": 3, "framework": framework})).plan(w, full_mesh(2, SLOW))
    assert len(colls(plan, "allgather", " B0")) == len(colls(plan, "allgather", " F0")) == len(w.layers)


def test_serial_reduce_runs_on_the_compute_stream():
    """DeepSpeed ZeRO-1/2's overlap_comm=false: the reduction blocks the rank's compute."""
    plan, _ = plan_of(2, {"zero": 1, "framework": "deepspeed", "microbatches": 1, "global_batch": 2},
                      trace=tiny(2, ends=False), bucket_mb=0.0)
    rs = colls(plan, "reduce_scatter")
    assert rs and {o.stream for o in rs} == {"compute"}
    upd = [op for op in plan.ops if op.label == "update" and op.rank == 0][0]
    assert rs[-1].id in upd.deps  # chained on rank 0's compute stream


def test_overlap_param_gather_gathers_during_the_next_forward():
    """NeMo (Megatron-core overlap_param_gather): zero 1's all-gather is issued before the forward, the
    layer's first forward waits for it, and nothing is gathered after the step."""
    plan, _ = plan_of(2, {"zero": 1, "framework": "nemo", "microbatches": 2, "global_batch": 4},
                      trace=tiny(2, ends=False), bucket_mb=0.0)
    ag = colls(plan, "allgather")
    assert len(ag) == 1 and ag[0].deps == () and "overlap_param_gather" in ag[0].label
    by = {op.label: op for op in plan.ops if op.ranks[0] == 0}
    assert ag[0].id in by["F block0.attn F0"].deps and ag[0].id not in by["F block0.attn F1"].deps


def test_megatron_core_reduces_after_backward_in_its_own_buckets():
    """Megatron-core: overlap_grad_reduce=False, buckets of max(40M, 1M x dp) parameters (one bucket here)."""
    plan, _ = plan_of(2, {"zero": 0, "framework": "megatron-core", "microbatches": 1, "global_batch": 2},
                      trace=tiny(2, ends=False), bucket_mb=1e-6)
    ar = colls(plan, "allreduce")
    assert len(ar) == 1 and ar[0].nbytes == 2 * (256 + 512)
    lines = [line for line in plan.info.assumed if line.startswith("framework megatron-core (Megatron-core 0.14)")]
    assert len(lines) == 2 and all("distributed_data_parallel_config.py" in line for line in lines)
    assert "after the whole backward" in lines[1] and "--opt overlap_grad_reduce=... changes it" in lines[1]


# -- no framework: today's schedule, exactly ------------------------------------------------------------------------

# sha256 of repr(plan.ops) built by main before frameworks existed (commit 8b0418c)
BEFORE = [
    (4, {"zero": 3}, {"trace": tiny(2)}, "a819875d03c3"),
    (4, {"zero": 3, "microbatches": 2, "global_batch": 8, "recompute": "full"}, {"trace": tiny(3)}, "f790efc3cf53"),
    (8, {"zero": 3, "pp": 2, "microbatches": 2, "global_batch": 8, "shard_group": 2}, {"trace": tiny(4)},
     "c523897b6ca3"),
    (8, {"zero": 1, "pp": 2, "microbatches": 2, "global_batch": 8}, {"trace": tiny(4), "bucket_mb": 1e-4},
     "9281b89c3d65"),
    # re-pinned when MoE layers became Megatron-core's dispatchers (h/moe: the token-count all-gather, the
    # probabilities with the dispatch, the grouped GEMM's tiles on this toy's 8-row experts)
    (8, {"zero": 3, "experts_parallel": 2, "microbatches": 2, "global_batch": 16}, {"trace": tiny(2, moe=True)},
     "aa07713d3ff8"),
]


@pytest.mark.parametrize("n, opts, kw, digest", BEFORE)
def test_no_framework_plans_are_the_ones_before(n, opts, kw, digest):
    plan, _ = plan_of(n, opts, **kw)
    assert hashlib.sha256(repr(plan.ops).encode()).hexdigest()[:12] == digest
    assert any(line.startswith("framework: none named") for line in plan.info.assumed)


# -- input errors: one line, exit 2 -----------------------------------------------------------------------------------

RUN = ["run", "--strategy", "megatron", "--model", "gpt2-small", "--cluster", "dgx-a100-hdr", "--nodes", "1",
       "--baseline", "none"]


@pytest.mark.parametrize("extra, message", [
    (["--framework", "megatron"], "framework: 'megatron' is not valid; valid choices: megatron-core, nemo"),
    (["--opt", "zero=3", "--opt", "prefetch=-1"], "prefetch: -1 must be a non-negative integer"),
    (["--opt", "zero=3", "--opt", "reshard_after_forward=sometimes"], "reshard-after-forward: 'sometimes' is not valid"),
    (["--opt", "zero=3", "--opt", "max_live_params=-5"], "max-live-params: -5.0 must be a non-negative number"),
    (["--opt", "zero=3", "--opt", "gather_unit=tensor"], "gather_unit: 'tensor' is not valid; valid choices: layer"),
    (["--opt", "reduce_stream=nccl"], "reduce_stream: 'nccl' is not valid; valid choices: separate, compute"),
])
def test_bad_framework_values_are_one_line(cli, extra, message):
    rc, out, err = cli(RUN + extra)
    assert rc == 2 and message in err and len(err.strip().splitlines()) == 1, err


def test_framework_on_a_strategy_without_one_is_one_line(cli):
    rc, _, err = cli(["run", "--strategy", "allreduce", "--model", "resnet50", "--nodes", "2", "--framework",
                      "deepspeed", "--baseline", "none"])
    assert rc == 2 and "framework: strategy 'allreduce' does not take a framework" in err
    assert len(err.strip().splitlines()) == 1


def test_framework_flag_runs_and_prints_its_defaults(cli):
    rc, out, err = cli(RUN + ["--framework", "fsdp2", "--opt", "zero=3", "--opt", "prefetch=2"])
    assert rc == 0, err
    lines = [x for x in out.splitlines() if "framework fsdp2 (PyTorch 2.5 FSDP2" in x]
    assert len(lines) == 5  # unit, prefetch, live limit, reshard, reduce-scatter
    assert [x for x in lines if "gathered 2 units ahead" in x and "(given: --opt prefetch)" in x]
    assert [x for x in lines if "root module" in x and "fully_shard.py reshard_after_forward=True" in x]


# -- invariant: a schedule moves the same bytes ------------------------------------------------------------------------

@settings(max_examples=40, deadline=None)
@given(framework=st.sampled_from(["none", "megatron-core", "nemo", "deepspeed", "deepspeed-0.3", "fsdp1", "fsdp2",
                                  "torchtitan"]),
       unit=st.sampled_from([None, "layer", "block", "module"]), prefetch=st.sampled_from([None, 0, 1, 3]),
       live=st.sampled_from([None, 0, 100, 400]), bucket=st.sampled_from([None, 0, 300, 10_000]),
       m=st.integers(1, 2), recompute=st.sampled_from(["none", "full"]))
def test_every_zero3_schedule_gathers_twice_and_reduces_once(framework, unit, prefetch, live, bucket, m, recompute):
    """Whatever the units, prefetch, live limit and buckets: 2 m Ψ gathered and m Ψ reduce-scattered when every
    unit is re-gathered for backward (the leaf-module shares of each layer add up to the layer)."""
    opts = {"zero": 3, "microbatches": m, "global_batch": 2 * m, "recompute": recompute,
            "reshard_after_forward": "true"}
    opts.update({k: v for k, v in (("framework", None if framework == "none" else framework), ("gather_unit", unit),
                                   ("prefetch", prefetch), ("max_live_params", live),
                                   ("reduce_bucket_params", bucket)) if v is not None})
    tr = tiny(2)
    psi = float(sum(layer.grad_bytes for layer in tr.layers))
    plan, _ = plan_of(2, opts, trace=tr)
    assert sum(o.nbytes for o in colls(plan, "allgather")) == pytest.approx(2 * m * psi, rel=1e-12)
    assert sum(o.nbytes for o in colls(plan, "reduce_scatter")) == pytest.approx(m * psi, rel=1e-12)
    engine.simulate(plan, full_mesh(2, SLOW), runtime=MPICH)  # and it runs (no deadlock, every dependency earlier)


@settings(max_examples=30, deadline=None)
@given(framework=st.sampled_from(["megatron-core", "nemo", "deepspeed", "deepspeed-0.3", "fsdp1", "fsdp2",
                                  "torchtitan"]),
       layout=st.sampled_from([(2, 1, 2, 1), (1, 2, 2, 1), (1, 2, 2, 2), (2, 2, 2, 1)]),
       zero=st.sampled_from([0, 1, 2, 3]), m=st.sampled_from([2, 4]), shard=st.booleans())
def test_frameworks_run_every_layout(framework, layout, zero, m, shard):
    """Any framework with tensor, pipeline (interleaved) and data parallelism, any ZeRO stage, HSDP: the plan
    runs, and a gradient of every layer is reduced over the replicas exactly once per micro-batch (ZeRO-3)
    or once per iteration (zero 0-2)."""
    tp, pp, dp, v = layout
    n = tp * pp * dp
    opts = {"tp": tp, "pp": pp, "zero": zero, "microbatches": m, "global_batch": m * dp, "framework": framework}
    if v > 1:
        opts.update(schedule="interleaved", virtual=v)
    if shard and zero == 3:
        opts["shard_group"] = 1 if dp == 2 else 2
    tr = tiny(4)
    plan, _ = plan_of(n, opts, trace=tr, bucket_mb=1e-4)
    engine.simulate(plan, full_mesh(n, SLOW), runtime=MPICH)
    psi = float(sum(layer.grad_bytes for layer in tr.layers))
    # each tensor-parallel lane of each stage reduces its Ψ/(tp·pp) share: Ψ over all the groups
    kind = "allreduce" if zero == 0 else "reduce_scatter"
    reduced = sum(o.nbytes for o in colls(plan, kind) if o.label.startswith(("dp-", "zero3-")))
    expected = 0.0 if opts.get("shard_group") == 1 else (m if zero == 3 else 1) * psi
    assert reduced == pytest.approx(expected, rel=1e-9)
