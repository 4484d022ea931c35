"""Seed 001's AWS timing loop: its host work, counted from the authors' code and priced by hand."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from simcomm.validation import aws_loop
from simcomm.validation.aws_loop import loop_cost, parameter_tensors


def _layer(name, kind, params, out=(), update=1e-4):
    return SimpleNamespace(name=name, module_type=kind, params=params, output_shape=out, update_s=update)


def test_resnet50_has_torchvisions_161_parameter_tensors():
    from simcomm.validation import seed001

    tensors = parameter_tensors(seed001._trace())
    assert len(tensors) == 161  # 53 conv weights, 53 x (bn weight, bias), fc weight and bias
    assert sum(1 for _, dims in tensors if dims >= 2) == 54  # the conv and fc weights LARS scales
    assert sum(n for n, _ in tensors) == 25_557_032


def test_per_tensor_counts_are_the_codes():
    # zero_grad 1 kernel; clip 1 norm (stacked on the GPU); norms 6 kernels, 4 reads; lars.py 16 kernels, 4 bools
    assert sum(op[0] for op in aws_loop.OPS.values()) == 24
    assert sum(op[1] for op in aws_loop.OPS.values()) == 8
    assert sum(op[2] for op in aws_loop.OPS.values()) == 128
    assert aws_loop.MATRIX_OPS == (8, 2, 0)
    assert aws_loop.CLIP_ONCE == (4, 1)  # stack, norm, add, div; clip_coef < 1 read back once


def test_loop_cost_by_hand():
    trace = SimpleNamespace(layers=(_layer("conv", "Conv2d", 1000), _layer("relu", "ReLU", 0, update=0.0),
                                    _layer("bn", "BatchNorm2d", 10)))
    device = SimpleNamespace(mem_bw=1e9, memory_eff=0.5, launch_s=1e-6)
    cost = loop_cost(trace, device, batch=1, image=(1, 2, 2), classes=10, dispatch_s=0.0)
    # conv weight (4-D): 32 kernels, 10 reads, 128 B x 1000 at 0.5 GB/s = 256 us > 32 us of launches
    conv = 256e-6 + 10e-6
    # each bn tensor (5 elements, 1-D): 24 launches (24 us) > 640 B / 0.5 GB/s, then 8 reads
    bn = 2 * (24e-6 + 8e-6)
    clip = 4e-6 + 1e-6  # once: 4 launches and one read
    assert cost.loops_s == pytest.approx(conv + bn + clip)
    assert (cost.tensors, cost.kernels, cost.syncs) == (3, 32 + 24 + 24 + 4 + 1, 10 + 8 + 8 + 1)
    assert cost.unscale_s == pytest.approx(1e-6 + 8 * 1010 / 0.5e9)
    # 4 floats drawn on the CPU, then 16 B of batch and 80 B of int64 target over PCIe
    assert cost.input_s == pytest.approx(4 * aws_loop.RAND_S_PER_ELEMENT + 96 / 12e9)
    assert cost.replaced_update_s == pytest.approx(2e-4)
    assert cost.total_s == pytest.approx(cost.input_s + conv + bn + clip + cost.unscale_s - 2e-4)


def test_linear_splits_weight_and_bias():
    trace = SimpleNamespace(layers=(_layer("fc", "Linear", 2 * 3 + 3, out=(3,)),))
    assert parameter_tensors(trace) == [(6, 2), (3, 1)]


def test_unknown_parameter_layer_is_refused():
    with pytest.raises(ValueError, match="LSTM"):
        parameter_tensors(SimpleNamespace(layers=(_layer("rnn", "LSTM", 8),)))


def test_seed001_reference_carries_the_loop(monkeypatch):
    """Every method's iteration and the reference get the loop's host work (the timer covers it in all); each
    flat method adds its own exchange function's (simcomm.validation.aws_exchange)."""
    from simcomm.validation import seed001

    seen = {}
    monkeypatch.setattr(seed001, "_run", lambda trace, strategy, nodes, options, batch, load:
                        seen.setdefault((strategy, nodes, options.get("groups")), load) and SimpleNamespace(mean_s=1.0))
    seed001.times(4)
    trace = seed001._trace()
    loop = seed001.host_loop(trace)
    assert seen[("allreduce", 1, None)] == loop.total_s  # the reference: no exchange
    for method in ("allreduce", "sgp", "crossover-sgd"):
        assert seen[(method, 4, None)] == loop.total_s + seed001.exchange_host(trace, method, 4)
    assert seen[("hierarchical-crossover-sgd", 4, 2)] == loop.total_s
    assert 0.05 < loop.total_s < 0.2  # tens of ms of CPU draw plus ~1 600 host reads


def test_aws_preset_names_the_loops_host_work():
    """The aws-g4dn preset leaves the loop to --dataload but says how much validate charges."""
    from simcomm.scenario.seed_settings import SETTINGS
    from simcomm.validation import seed001

    loop = seed001.host_loop(seed001._trace())
    assert f"~{loop.total_s * 1e3:.0f} ms for ResNet-50 at batch 64" in SETTINGS["aws-g4dn"].load_source


def test_a_call_is_dispatch_plus_launch():
    """Host-bound tensors pay the measured PyTorch dispatch on top of the launch for every call and read."""
    trace = SimpleNamespace(layers=(_layer("bn", "BatchNorm2d", 2, update=0.0),))
    device = SimpleNamespace(mem_bw=1e12, memory_eff=1.0, launch_s=1e-6)
    bare = loop_cost(trace, device, batch=1, image=(1, 1, 1), classes=1, dispatch_s=0.0)
    with_dispatch = loop_cost(trace, device, batch=1, image=(1, 1, 1), classes=1, dispatch_s=2e-6)
    calls = 2 * (24 + 8) + 4 + 1 + 1  # two 1-D tensors' kernels and reads, clip once, the unscale
    assert with_dispatch.total_s - bare.total_s == pytest.approx(calls * 2e-6)
    assert abs(32 * aws_loop.DISPATCH_S - 76.2e-6) < 1e-15  # the measured loop: 32 calls
