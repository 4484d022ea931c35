"""Roofline synthesis: exact reproduction of a hand-computed single layer, and the bundled catalogue."""

from __future__ import annotations

import pytest

from simcomm.errors import ConfigError, UnknownNameError
from simcomm.traces import BUNDLED, default_trace, load_bundled
from simcomm.traces.devices import DeviceSpec
from simcomm.traces.synth import roofline_time, synth_layers, synth_trace
from simcomm.traces.zoo import LayerSpec

DEV = DeviceSpec("toy", "gpu", {"fp32": 1e12}, mem_bw=1e11, compute_eff=0.5, memory_eff=0.8, launch_s=1e-6)


def test_single_layer_hand_computed():
    # Linear 1000 -> 1000 with bias, batch 10, fp32:
    #   forward FLOPs 10 * (2*1000*1000 + 1000) = 20 010 000 -> 20.01e6 / (1e12*0.5) = 40.02 us
    #   forward bytes 4 * (1 001 000 + 10*(1000+1000)) = 4 084 000 -> / (1e11*0.8) = 51.05 us  (memory-bound)
    #   backward: 2x FLOPs = 80.04 us, 2x bytes = 102.1 us (memory-bound)
    #   update (SGD momentum): 5 words * 4 B * 1 001 000 = 20.02 MB / 8e10 = 250.25 us
    spec = LayerSpec("fc", "Linear", 1_001_000, (1000,), (1000,), 2_001_000.0, 2000.0)
    (layer,) = synth_layers([spec], [10], DEV, "fp32", "sgd")
    assert layer.forward_s == pytest.approx(51.05e-6 + 1e-6, rel=1e-12)
    assert layer.backward_s == pytest.approx(102.1e-6 + 1e-6, rel=1e-12)
    assert layer.update_s == pytest.approx(250.25e-6 + 1e-6, rel=1e-12)
    assert layer.flops == 20_010_000.0
    assert layer.grad_bytes == 4_004_000


def test_compute_bound_branch_and_param_free_backward():
    # 1e9 FLOPs, 1 kB: compute-bound, 1e9 / 5e11 = 2 ms; a parameter-free layer's backward costs 1x FLOPs
    assert roofline_time(1e9, 1e3, DEV, "fp32") == pytest.approx(2e-3 + 1e-6, rel=1e-12)
    spec = LayerSpec("act", "ReLU", 0, (10,), (10,), 1e8, 0.0)
    (layer,) = synth_layers([spec], [1], DEV, "fp32", "adam")
    assert layer.backward_s == layer.forward_s == pytest.approx(2e-4 + 1e-6, rel=1e-12)
    assert layer.update_s == 0.0


def test_synth_trace_is_deterministic_and_scales():
    a = synth_trace("resnet20-cifar", "v100", 64)
    assert a == synth_trace("resnet20-cifar", "v100", 64)
    assert a.method == "roofline-synth" and a.iteration_s == pytest.approx(a.layer_sum_s)
    multi = synth_trace("resnet20-cifar", "v100", [16, 64])
    assert multi.layers[5].by_batch[1][1] == pytest.approx(a.layers[5].forward_s)
    fast = synth_trace("resnet20-cifar", "h100", 64)
    assert fast.iteration_s < a.iteration_s


def test_synth_errors():
    with pytest.raises(UnknownNameError, match="unknown model 'resnet9'"):
        synth_trace("resnet9", "v100", 8)
    with pytest.raises(UnknownNameError, match="valid choices: 1080ti, a100"):
        synth_trace("resnet18", "k80", 8)
    with pytest.raises(ConfigError, match="dtype"):
        synth_trace("resnet18", "1080ti", 8, dtype="bf16")
    with pytest.raises(ConfigError, match="batch"):
        synth_trace("resnet18", "v100", 0)


def test_bundled_catalogue_loads():
    assert "resnet50-v100-roofline" in BUNDLED and "resnet18-cpu-capture" in BUNDLED
    for name in BUNDLED.names():
        t = load_bundled(name)
        assert t.layers and t.iteration_s > 0
    d = default_trace()
    assert (d.model, d.device, d.batch, d.params) == ("resnet50", "v100", 64, 25_557_032)
    cap = load_bundled("resnet18-cpu-capture")
    assert cap.method == "cpu-timer" and cap.batch == 32
    assert abs(cap.iteration_s - cap.layer_sum_s) / cap.iteration_s < 0.15
