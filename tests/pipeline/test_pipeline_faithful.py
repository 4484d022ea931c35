"""Precision on the wire, named baselines, the stack a cluster runs, compute on its device, the memory check."""

from __future__ import annotations

import json

import pytest

from simcomm.errors import ConfigError
from simcomm.pipeline import simulate
from simcomm.scenario import NO_BASELINE, BaselineSpec, Scenario, StackSpec, WorkloadSpec, load_scenario, parse_baseline
from simcomm.traces.synth import synth_trace
from simcomm.workload import build_workload


def test_wire_dtype_rescales_every_gradient_exactly():
    trace = synth_trace("resnet20-cifar", "v100", 32, "fp16")  # fp16 compute: 2 bytes per parameter
    half = build_workload(trace, 4)
    full = build_workload(trace, 4, wire_dtype="fp32")
    assert half.dtype_bytes == 2 and full.dtype_bytes == 4
    assert full.model_bytes == 2 * half.model_bytes == 4 * 269_722  # ResNet-20's 269 722 parameters in fp32
    assert [x.forward_s for x in full.layers] == [x.forward_s for x in half.layers]  # compute untouched


def test_amp_o1_computes_in_fp16_and_sends_fp32():
    res = simulate(Scenario(strategy="allreduce", nodes=2, cluster="aws-g4dn",
                            workload=WorkloadSpec(precision="amp-fp16")), baseline=False)
    lines = "\n".join(res.assumed)
    assert "fp16" in lines and "precision amp-fp16" in lines
    fp32 = simulate(Scenario(strategy="allreduce", nodes=2, cluster="aws-g4dn"), baseline=False)
    # same bytes on the wire (fp32 gradients both ways), less compute in fp16
    assert res.link_bytes == pytest.approx(fp32.link_bytes)
    assert res.breakdown.compute < fp32.breakdown.compute


@pytest.mark.parametrize("text,want", [
    ("none", NO_BASELINE), ("allreduce", BaselineSpec("allreduce")),
    ("allreduce:overlap=none,bucket-mb=0", BaselineSpec("allreduce", (("bucket_mb", "0"), ("overlap", "none")))),
    ({"strategy": "ps", "servers": 2}, BaselineSpec("ps", (("servers", 2),))),
])
def test_baselines_parse(text, want):
    assert parse_baseline(text) == want


@pytest.mark.parametrize("bad", ["none:x=1", "allreduce:overlap", "", 5])
def test_bad_baselines_are_one_line_errors(bad):
    with pytest.raises(ConfigError, match="baseline"):
        parse_baseline(bad)


def test_the_flagship_compares_with_the_baseline_seed_000_ran(cli):
    rc, out, _ = cli("run", "--strategy", "node-based", "--nodes", "20", "--json")
    assert rc == 0
    res = json.loads(out)
    assert res["stack"] == "mpi-tcp"  # deep-est-esb: seed 000 ran Open MPI over TCP
    assert res["baseline"].startswith("allreduce (overlap none, one buffer after backward")
    assert "on stack mpi-tcp" in res["baseline"]
    why = [a for a in res["assumed"] if a.startswith("baseline:")]
    assert len(why) == 1 and "ColossalAI" in why[0]
    assert res["speedup"] == pytest.approx(res["baseline_s"] / res["mean_s"])


def test_no_baseline_and_another_baseline(cli):
    rc, out, _ = cli("run", "--strategy", "node-based", "--nodes", "4", "--baseline", "none", "--json")
    res = json.loads(out)
    assert rc == 0 and res["speedup"] is None and res["baseline"] is None
    rc, out, _ = cli("run", "--strategy", "node-based", "--nodes", "4", "--baseline", "allreduce:overlap=backward",
                     "--json")
    res = json.loads(out)
    assert rc == 0 and "overlap backward" in res["baseline"]
    assert [a for a in res["assumed"] if a.startswith("baseline:") and "chosen with --baseline" in a]


@pytest.mark.parametrize("argv,err", [
    (["--strategy", "allreduce", "--nodes", "4", "--baseline", "hierarchical-allreduce"], "does not apply here"),
    (["--strategy", "gs-sgd", "--nodes", "4", "--wire-dtype", "fp16"], "narrower than strategy 'gs-sgd'"),
    (["--strategy", "allreduce", "--nodes", "4", "--precision", "fp9"], "precision: 'fp9' is not valid"),
    # fp8 on a GPU without FP8 tensor cores (the default cluster's V100s)
    (["--strategy", "allreduce", "--nodes", "4", "--precision", "fp8"], "precision: fp8 needs FP8 tensor cores; "
     "device 'v100' (V100) has none; devices with them: b200, gb200, gb300, h100, h200, h800, l40s"),
    (["--strategy", "megatron", "--cluster", "dgx-a100-hdr", "--nodes", "1", "--model", "megatron-3.6b",
      "--precision", "fp8", "--opt", "tp=4"], "device 'a100-80g' (A100 80GB) has none"),
    (["--strategy", "megatron", "--cluster", "dgx-h100-ndr", "--nodes", "1", "--model", "megatron-3.6b",
      "--precision", "mxfp8", "--opt", "tp=4"], "precision: mxfp8 needs MXFP8 (Blackwell) tensor cores"),
    (["--strategy", "allreduce", "--cluster", "dgx-h100-ndr", "--nodes", "2", "--precision", "fp8"],
     "prices the zoo's transformers only; model 'resnet50' is not one"),
    (["--strategy", "allreduce", "--nodes", "4", "--collectives", "bogus"], "stack.collectives"),
    (["--strategy", "allreduce", "--nodes", "4", "--nccl-algo", "bogus"], "stack.nccl_algo"),
    (["--strategy", "allreduce", "--cluster", "aws-g4dn", "--nodes", "4", "--batch", "20000"],
     "memory: resnet50 at batch 20000"),
])
def test_bad_input_is_one_line_and_exit_2(cli, argv, err):
    rc, out, e = cli("run", *argv)
    assert rc == 2 and out == "" and e.count("\n") == 1 and err in e


def test_each_cluster_runs_its_own_stack_and_device():
    g4dn = simulate(Scenario(strategy="allreduce", nodes=2, cluster="aws-g4dn"), baseline=False)
    assert g4dn.stack == "nccl-socket"
    assert any("T4" in a and "trace:" in a for a in g4dn.assumed)
    # the preset's link (AWS's 25 Gb/s burst, many NCCL sockets) is one assumed line while the user keeps it
    link = [a for a in g4dn.assumed if a.startswith("aws-g4dn link eth-25g")]
    assert len(link) == 1 and "10 Gb/s baseline" in link[0] and "single-flow" in link[0]
    from simcomm.scenario import from_flat

    flat = {"strategy": "allreduce", "nodes": 2, "cluster": "aws-g4dn"}
    kept, given = (simulate(from_flat(f), baseline=False) for f in (flat, {**flat, "inter": "eth-10g"}))
    assert not any(a.startswith("aws-g4dn link") for a in given.assumed)
    assert given.mean_s > kept.mean_s  # the 10 Gb/s baseline is slower than the burst
    h100 = simulate(Scenario(strategy="allreduce", nodes=2, cluster="dgx-h100-ndr"), baseline=False)
    assert h100.stack == "nccl" and any("H100" in a and "trace:" in a for a in h100.assumed)
    assert any("NCCL" in a and "allreduce algorithm auto ->" in a for a in h100.assumed)
    mpi = simulate(Scenario(strategy="allreduce", nodes=2, cluster="dgx-h100-ndr", stack=StackSpec("mpi-tcp")),
                   baseline=False)
    assert any("Open MPI's coll/tuned rules" in a for a in mpi.assumed)
    mpich = simulate(Scenario(strategy="allreduce", nodes=2, cluster="dgx-h100-ndr",
                              stack=StackSpec("mpi-tcp", collectives="mpich")), baseline=False)
    assert any("MPICH's rules" in a for a in mpich.assumed)


def test_scenario_files_speak_the_same_keys(tmp_path):
    f = tmp_path / "s.toml"
    f.write_text('strategy = "node-based"\nnodes = 4\nbaseline = "none"\n[workload]\nprecision = "amp-bf16"\n'
                 'wire_dtype = "bf16"\n[stack]\nname = "mpi-tcp"\ncollectives = "mpich"\nnccl_proto = "^ll128"\n')
    scn = load_scenario(f)
    assert scn.baseline == NO_BASELINE and scn.workload.precision == "amp-bf16" and scn.workload.wire_dtype == "bf16"
    assert scn.stack.collectives == "mpich" and scn.stack.nccl_proto == "ll,simple"
    f.write_text('strategy = "node-based"\n[baseline]\nstrategy = "allreduce"\noverlap = "none"\nbucket_mb = 0\n')
    assert load_scenario(f).baseline == BaselineSpec("allreduce", (("bucket_mb", 0), ("overlap", "none")))


def test_nccl_overrides_are_refused_off_nccl_and_printed_on_it(cli):
    rc, out, err = cli("run", "-s", "allreduce", "--nccl-algo", "tree", "--stack", "mpi-tcp")
    assert rc == 2 and err.strip().splitlines() == [
        "error: stack.nccl_algo: applies to NCCL's collectives only; this run uses openmpi's (stack mpi-tcp); "
        "use --stack nccl or drop --nccl-algo"]
    rc, out, err = cli("run", "-s", "allreduce", "--cluster", "dgx-a100-hdr", "--nodes", "2", "--nccl-algo", "tree",
                       "--overlap", "none", "--bucket-mb", "0", "--no-baseline")
    assert rc == 0, err
    assert "allreduce algorithm auto -> NCCL Tree/" in out and "(NCCL's tuning model within NCCL_ALGO=tree)" in out


def test_a_cluster_past_the_rank_limit_is_one_line(cli):
    rc, out, err = cli("run", "-s", "allreduce", "--nodes", "99999999999")
    assert rc == 2 and err.strip().splitlines() == [
        "error: nodes: 99999999999 is out of range; it must be >= 1 and <= 262144"]
    # within each key's bounds but not together: refused before any cluster is built
    rc, out, err = cli("run", "-s", "allreduce", "--cluster", "dgx-a100-hdr", "--nodes", "65536", "-g", "8")
    assert rc == 2 and err.strip().splitlines() == [
        "error: nodes x gpus_per_node: 65536 x 8 = 524,288 ranks is more than simcomm simulates (262,144)"]
    rc, out, err = cli("bench", "all_reduce", "--cluster", "dgx-h100-ndr", "--nodes", "32769")
    assert rc == 2 and "32,769 x 8 gives 262,152 ranks" in err


def test_a_language_model_has_no_guessed_epoch():
    """A transformer trace gets no ImageNet-sized epoch by default; --dataset-size gives one."""
    from simcomm.pipeline import simulate
    from simcomm.scenario import from_flat

    flat = {"strategy": "allreduce", "model": "gpt2-small", "cluster": "dgx-a100-hdr", "nodes": 1,
            "precision": "bf16", "batch": 2, "baseline": "none"}
    res = simulate(from_flat(flat))
    assert res.epoch_s is None and any(a.startswith("epoch: not reported") for a in res.assumed)
    res = simulate(from_flat({**flat, "dataset_size": 1600}))
    assert res.iterations_per_epoch == 100  # 1 600 sequences / (2 per rank x 8 ranks)


def test_megatron_fp8_runs_on_h100_faster_than_bf16(cli):
    """issue 24's must-show: `simcomm run --strategy megatron --precision fp8` on H100 (refused on A100 above)."""
    args = ["run", "--strategy", "megatron", "--cluster", "dgx-h100-ndr", "--nodes", "1", "--model", "megatron-3.6b",
            "--opt", "tp=4", "--opt", "microbatch=4", "--opt", "global_batch=64", "--baseline", "none", "--json"]
    runs = {}
    for p in ("bf16", "fp8"):
        rc, out, _ = cli(*args, "--precision", p)
        assert rc == 0
        runs[p] = json.loads(out)
    assert 1.0 < runs["bf16"]["mean_s"] / runs["fp8"]["mean_s"] < 2.0
    lines = [a for a in runs["fp8"]["assumed"] if a.startswith("precision fp8:")]
    assert len(lines) == 1 and "DelayedScaling" in lines[0] and "attention core, norms, softmax, embedding and LM " \
        "head in bf16" in lines[0] and "fp32 gradient reduction" in lines[0]
    again = cli(*args, "--precision", "fp8")[1]
    assert json.loads(again)["mean_s"] == runs["fp8"]["mean_s"]  # deterministic
