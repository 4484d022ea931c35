"""Inputs finite on their own whose products overflow: one ``error:`` line, exit 2, never Infinity or NaN."""

import json

import pytest


@pytest.mark.parametrize(("argv", "names"), [
    (["--strategy", "gs-sgd", "--opt", "elem_s=1e308"], "elem_s=1e+308"),
    (["--strategy", "ps", "--opt", "server_s_per_byte=1e308"], "server_s_per_byte=1e+308"),
    (["--strategy", "ps-layer-drop", "--opt", "placeholder_bytes=1e308"], "placeholder_bytes=1e+308"),
])
def test_an_overflowing_option_is_one_error_line(cli, argv, names):
    rc, out, err = cli(["run", *argv, "--nodes", "4", "--fidelity", "analytic", "--json"])
    assert rc == 2 and out == "", out
    assert len(err.splitlines()) == 1 and err.startswith("error: the ") and names in err, err
    assert "overflow" in err


def test_a_trace_layer_longer_than_a_day_is_refused(cli, tmp_path):
    rc, _, err = cli(["trace", "synth", "--model", "resnet18", "--device", "t4", "--batch", "8", "--out",
                      str(tmp_path / "t.json")])
    assert rc == 0, err
    data = json.loads((tmp_path / "t.json").read_text())
    data["layers"][0]["forward_s"] = 1e308
    (tmp_path / "big.json").write_text(json.dumps(data))
    rc, out, err = cli(["run", "--strategy", "allreduce", "--nodes", "2", "--trace", str(tmp_path / "big.json")])
    assert rc == 2 and out == ""
    assert err.splitlines() == [f"error: trace file '{tmp_path / 'big.json'}': layers[0].forward_s: must be at "
                                "most 86400 s (a day) for one layer, got 1e+308"]


def test_cost_gamma_beyond_any_host_is_refused(cli):
    rc, out, err = cli(["cost", "allreduce", "--size", "100MB", "--ranks", "64", "--link", "ib-edr", "--gamma",
                        "1e308s"])
    assert rc == 2 and out == ""
    assert err == ("error: gamma: '1e308s' is more than 0.001 s per byte (1 KB/s of reduction); real hosts reduce "
                   "at GB/s, e.g. 0.1ns/B\n")


def test_a_megatron_plan_of_billions_of_ops_is_refused_before_it_is_built(cli):
    # dp 2: 5e8 micro-batches of one sample per replica; 2 ranks x 5e8 x 26 layers (12 blocks of attention + MLP,
    # the embedding, the head) x 2 phases (forward, backward) = 2.6e10 compute ops
    rc, out, err = cli(["run", "--strategy", "megatron", "--model", "gpt2-small", "--nodes", "2", "--batch",
                        "1000000000", "--opt", "microbatch=1", "--opt", "global_batch=1000000000", "--fidelity",
                        "analytic"])
    assert rc == 2 and out == ""
    assert len(err.splitlines()) == 1, err
    assert "1,000,000,000 samples in 500,000,000 micro-batches of 1 make a plan of 26,000,000,000 compute ops" in err
    assert "more than the 20,000,000 simcomm builds" in err


def test_plan_of_a_billion_samples_is_refused_before_enumerating(cli):
    # 1 node of 8 GPUs, micro-batches of at most 16: at least 1e9 / 128 = 7,812,500 per replica, each a forward and
    # a backward over gpt2-small's 12 blocks + embedding + head: 7,812,500 x 14 x 2 = 218,750,000 compute ops
    rc, out, err = cli(["plan", "--model", "gpt2-small", "--nodes", "1", "--global-batch", "1000000000"])
    assert rc == 2 and out == ""
    assert len(err.splitlines()) == 1, err
    assert "at least 7,812,500 micro-batches of 16 per replica, a plan of at least 218,750,000 compute ops" in err
