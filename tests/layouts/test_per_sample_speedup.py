"""A layout that trains its own global batch is compared with its baseline per sample, not per iteration."""

from __future__ import annotations

import json

import pytest

from simcomm.pipeline import per_sample_speedup


def test_per_sample_speedup_by_hand():
    # baseline: 16 samples in 65 ms; layout: 64 samples in 308 ms -> (65/16) / (308/64) = 0.8442
    assert per_sample_speedup(0.065, 16, 0.308, 64) == pytest.approx((0.065 / 16) / (0.308 / 64), rel=1e-12)
    assert per_sample_speedup(0.065, 16, 0.308, 16) == pytest.approx(0.065 / 0.308, rel=1e-12)  # plain ratio
    assert per_sample_speedup(1.0, 8, 0.0, 8) == float("inf")


def test_run_reports_the_layouts_samples(cli):
    rc, out, err = cli("run", "-s", "megatron", "--model", "gpt2-small", "--cluster", "dgx-a100-hdr", "--nodes", "1",
              "--batch", "1", "--precision", "bf16", "--fidelity", "analytic", "--opt", "global_batch=16",
              "--opt", "microbatch=2", "--opt", "tp=2", "--json")
    assert rc == 0, err
    d = json.loads(out)
    assert d["global_batch"] == 16 and d["samples_per_iteration"] == 16
    assert d["samples_per_s"] == pytest.approx(16 / d["mean_s"], rel=1e-12)
    assert d["speedup"] == pytest.approx((d["baseline_s"] / 8) / (d["mean_s"] / 16), rel=1e-12)
    assert any("speedup per sample" in line for line in d["assumed"])
