"""A seed preset runs its paper's setting where the user gave none (simcomm.scenario.seed_settings)."""

from __future__ import annotations

import json

import pytest

from simcomm.scenario import from_flat
from simcomm.scenario.seed_settings import SETTINGS
from simcomm.validation import seed000
from simcomm.validation.base import Baseline


def test_loading_is_what_validate_fits():
    """The preset's per-image loading is validate's own fit (3 significant digits), test loading its measurement."""
    rep = seed000.reported()
    traces = {m: seed000._trace("t3", m, seed000.BATCH["t3"][m]) for m in ("resnet18",)}
    c3 = seed000._fit("t3", Baseline(rep, {seed000.CAL3}), seed000.CAL3, traces["resnet18"], 8, 128)[0]
    assert float(f"{c3:.3g}") == SETTINGS["deep-est-esb"].load_per_image
    t7 = seed000._trace("t7", "resnet18", 64)
    c7 = seed000._fit("t7", Baseline(rep, {seed000.CAL7}), seed000.CAL7, t7, 4, 64)[0]
    assert float(f"{c7:.3g}") == SETTINGS["ceta-ciemat"].load_per_image
    assert SETTINGS["deep-est-esb"].test_per_image == seed000.MEASURED_TEST["t3"]
    assert SETTINGS["ceta-ciemat"].test_per_image == seed000.MEASURED_TEST["t7"]


def test_flagship_is_validates_table3_row(capsys, cli):
    """`run --strategy node-based --nodes 20` is validate's Table III ResNet-50 / 20-node row (the same setting)."""
    rc, out, err = cli("run", "--strategy", "node-based", "--nodes", "20", "--json")
    assert rc == 0, err
    c = SETTINGS["deep-est-esb"].load_per_image
    tr = seed000._trace("t3", "resnet50", 128)
    gain = seed000.gain_pct("t3", tr, 20, 128 * c, 128)
    assert json.loads(out)["speedup"] == pytest.approx(1 + gain / 100, rel=1e-9)


def test_filled_in_values():
    scn = from_flat({"strategy": "node-based", "nodes": 8})
    assert (scn.model, scn.batch, scn.dataset_size) == ("resnet50-cifar", 128, 50_000)
    assert scn.workload.dataload_s == pytest.approx(128 * 2.05e-3)
    # the code's automatic K'; the test set sharded over 8 ranks: ceil(10 000 / 8) = 1250 images of 0.30 ms
    assert scn.options == {"k_prime": -1, "eval_s": pytest.approx(1250 * 0.30e-3), "eval_samples": 10_000}
    assert not any("never ran" in line for line in scn.assumed)
    # what the user gives is what runs: ResNet-101's batch 98 unless told, a given loading kept
    given = from_flat({"strategy": "node-based", "model": "resnet101-cifar", "dataload": "5ms", "k_prime": 7})
    assert given.batch == 98 and given.workload.dataload_s == pytest.approx(5e-3) and given.options["k_prime"] == 7
    assert from_flat({"strategy": "allreduce"}).options == {}  # node-based's options only for node-based


@pytest.mark.parametrize("flat, words", [
    ({"strategy": "sgp", "nodes": 24}, "strategy sgp (it ran node-based and allreduce); 24 nodes (it ran 4, 8, "
                                       "12, 16, 20)"),
    ({"strategy": "node-based", "gpus_per_node": 4}, "4 GPUs per node (it ran 1)"),
    ({"strategy": "node-based", "model": "vgg16"}, "model vgg16 (it ran resnet18-cifar"),
    ({"strategy": "node-based", "cluster": "ceta-ciemat", "nodes": 8}, "8 nodes (it ran 4)"),
])
def test_never_ran_is_one_line(flat, words):
    scn = from_flat(flat)
    lines = [x for x in scn.assumed if "never ran" in x]
    assert len(lines) == 1 and words in lines[0]


def test_model_it_never_ran_gets_no_loading():
    scn = from_flat({"strategy": "node-based", "model": "vgg16"})
    assert scn.workload.dataload_s == 0 and scn.batch is None and "no batch, loading or evaluation" in scn.assumed[-1]


def test_other_clusters_untouched():
    scn = from_flat({"strategy": "node-based", "cluster": "dgx-a100-hdr"})
    assert scn.assumed == () and scn.model is None and scn.options == {}


def test_other_seed_presets_run_their_papers_setting():
    aws = from_flat({"strategy": "hierarchical-crossover-sgd", "cluster": "aws-g4dn", "nodes": 16})
    assert (aws.model, aws.batch, aws.workload.precision, aws.workload.dataload_s) == ("resnet50", 64, "amp-fp16", 0)
    assert aws.options == {"mode": "blocking", "broadcast": "model"}  # the AWS timing code's
    assert any(line.startswith("setting: seed 001 Fig. 11") for line in aws.assumed)
    cori = from_flat({"strategy": "pcnn", "cluster": "cori-haswell", "nodes": 256})
    assert (cori.model, cori.batch, cori.workload.scaling) == ("vgg16", 256, "strong")  # global batch 256
    ps = from_flat({"strategy": "ps-layer-drop", "cluster": "seed004-ps"})
    assert ps.nodes == 2 and ps.batch == 64 and "2 nodes (seed 004 Table 1's)" in ps.assumed[1]
    gbe = from_flat({"strategy": "node-based", "cluster": "gbe-4gpu"})
    assert [x for x in gbe.assumed if "never ran" in x] == [
        "seed 002 never ran this on gbe-4gpu: strategy node-based (it ran gtopk and sketched-sgd and gs-sgd) "
        "(seed 002 Table II: CIFAR-10 ResNet-20 and VGG-16 on 4 GPUs over 1 GbE)"]


def test_compare_gives_each_strategy_and_node_count_its_setting(capsys, cli):
    """compare on a seed preset: node-based at 20 nodes runs K' = K as in `run`, without the evaluation (which the
    other strategies do not price), and no line names one node count's setting."""
    rc, out, err = cli("compare", "--strategies", "allreduce,node-based", "--nodes", "4,20", "--opt", "k_prime=-1",
                       "--quiet")
    assert rc == 0, err
    assert "setting: seed 000" not in out and "per-epoch evaluation left out" in out
    rc, run_out, err = cli("run", "-s", "node-based", "--nodes", "20", "--opt", "eval_s=0", "--opt", "eval_samples=0",
                           "--json")
    assert rc == 0, err
    assert f"{json.loads(run_out)['mean_s'] * 1e3:.4g} ms" in out  # the same node-based iteration as `run`
