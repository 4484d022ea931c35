"""Calibration against published throughput: the data file, the fits, the predictions, trace_for, device names."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from simcomm.errors import ConfigError, UnknownNameError
from simcomm.traces import BUNDLED, DEVICES, MODELS, device_for_cluster, get_device, load_bundled, trace_for
from simcomm.traces.bundled import ROOFLINE_SET, regenerate_roofline
from simcomm.traces.calibration import (
    evaluate,
    fit_all,
    fit_row,
    load_memory_statements,
    load_published,
    predict_throughput,
    transfer_check,
)
from simcomm.traces.synth import synth_trace

ROWS = load_published()
FITS = fit_all()


def test_every_row_is_well_formed_and_sourced():
    ids = [r.id for r in ROWS]
    assert len(ids) == len(set(ids))
    for r in ROWS:
        assert r.device in DEVICES and r.model in MODELS, r.id
        assert r.batch >= 1 and r.value > 0 and r.gpus == 1, r.id
        assert r.dtype in ("fp32", "fp16", "bf16") and r.optimizer in ("sgd", "adam", "none"), r.id
        assert r.source and all(r.source) and r.row and r.framework, r.id
    for m in load_memory_statements():
        assert m.model in MODELS and m.kind in ("fits", "max", "oom") and m.statement and m.source, m.id


def test_one_fit_row_per_device_and_precision_and_it_is_never_a_prediction():
    fit_ids = {f.row for f in FITS.values()}
    assert len(fit_ids) == len(FITS) == sum(r.role == "fit" for r in ROWS)
    assert not fit_ids & {p.row.id for p in evaluate()}
    # seed-paper devices and today's are covered
    assert {("v100", "fp32"), ("v100", "fp16"), ("t4", "fp32"), ("t4", "fp16"), ("1080ti", "fp32"),
            ("a100-80g", "fp32"), ("a100-80g", "fp16"), ("h100", "fp32"), ("h100", "fp16")} <= set(FITS)


@pytest.mark.parametrize("key", sorted(FITS))
def test_registry_holds_the_fitted_factors(key):
    fit = FITS[key]
    eff = get_device(key[0]).efficiency(key[1])
    assert 0 < eff.compute <= 1 and 0 < eff.memory <= 1
    assert eff.compute == pytest.approx(fit.compute_eff, rel=5e-3)  # stored to 3 significant digits
    assert eff.memory == fit.memory_eff and fit.row in eff.source and eff.source.startswith("fitted")
    row = next(r for r in ROWS if r.id == fit.row)
    assert predict_throughput(row) == pytest.approx(row.value, rel=1e-2)


def test_fit_reproduces_its_row_exactly_and_refuses_the_unphysical():
    row = next(r for r in ROWS if r.id == "v100-rn50-fp32-dle2103")
    fit = fit_row(row)
    assert predict_throughput(row, fit.compute_eff, fit.memory_eff) == pytest.approx(row.value, rel=1e-9)
    fast = type(row)(**{**row.__dict__, "id": "too-fast", "value": 1e6})
    with pytest.raises(ConfigError, match="too-fast.*no physical fit"):
        fit_row(fast)


def test_prediction_errors_are_pinned():
    # the honest state of the calibrated roofline; docs/traces.md prints the full table
    preds = {p.row.id: p.error for p in evaluate()}
    assert len(preds) == 46
    assert statistics.median(abs(e) for e in preds.values()) == pytest.approx(0.231, abs=0.01)
    assert preds["v100-rn50-fp32-tfxla"] == pytest.approx(-0.108, abs=0.01)
    assert preds["a100-rn50-fp16-tfxla"] == pytest.approx(-0.111, abs=0.01)
    assert preds["a100-bertl-tf32-dle2111"] == pytest.approx(-0.284, abs=0.01)
    assert preds["h100-bertl-fp16-lambda"] == pytest.approx(-0.613, abs=0.01)
    assert preds["1080ti-bertb-fp32-lambda2020"] == pytest.approx(0.064, abs=0.01)
    assert preds["t4-rn50-fp16-inf-b256"] == pytest.approx(-0.003, abs=0.01)
    # ResNet-50 from another stack on the anchor's device: within 12 % except Lambda's mixed precision runs
    rn50 = [e for k, e in preds.items() if "-rn50-" in k and "-inf-" not in k and not k.endswith("fp16-lambda")]
    assert max(abs(e) for e in rn50) < 0.12


def test_forward_only_fit_carries_to_training_for_resnet50():
    # the T4 procedure, applied to V100 where training rows exist
    checks = {p.row.id: p.error for p in transfer_check() if "-rn50-" in p.row.id}
    assert checks and all(abs(e) < 0.35 for e in checks.values())
    assert abs(checks["v100-rn50-fp32-dle2103"]) < 0.12 and abs(checks["v100-rn50-fp16-dle2103"]) < 0.12


def test_fp32_on_ampere_and_later_uses_tf32_peak_and_mixed_uses_its_own_fit():
    assert get_device("a100").flops_for("fp32") == 156e12 and get_device("v100").flops_for("fp32") == 15.7e12
    t16 = synth_trace("resnet50", "v100", 64, "fp16")
    assert t16.meta["compute_eff"] == get_device("v100").efficiency("fp16").compute
    assert t16.meta["efficiency_source"].startswith("fitted on v100-rn50-fp16")
    assert get_device("h100").efficiency("bf16").source.startswith("borrowed")
    assert get_device("haswell").efficiency("fp32").source == "default (not calibrated)"
    assert synth_trace("resnet50", "v100", 8, compute_eff=0.3).meta["efficiency_source"] == "given on the command line"
    with pytest.raises(ConfigError, match="dtype: device '1080ti' has no documented fp16 peak; valid choices: fp32"):
        synth_trace("resnet50", "1080ti", 8, "fp16")


def test_device_for_cluster_maps_every_topology_device():
    from simcomm.topologies.devices import DEVICES as TOPO

    for name in TOPO:
        assert device_for_cluster(name) in DEVICES
    assert device_for_cluster("gtx-1080-ti") == "1080ti" and device_for_cluster("a100-80g") == "a100-80g"
    for name in ("h200", "b200", "l40s"):
        assert device_for_cluster(name) == name
    with pytest.raises(UnknownNameError, match=r"unknown cluster device 'k80'; valid choices: 1080ti, a100"):
        device_for_cluster("k80")


def test_new_devices_have_sourced_peaks():
    for name, mem_gib, bw in (("a100-80g", 80, 2039e9), ("h200", 141, 4.8e12), ("b200", 192, 8e12),
                              ("l40s", 48, 864e9)):
        dev = get_device(name)
        assert dev.memory == mem_gib * 2**30 and dev.mem_bw == bw
        assert {"fp32", "tf32", "fp16", "bf16"} <= set(dev.peak_flops)
        assert DEVICES.entry(name).reference


def test_trace_for_bundled_and_synthesized():
    trace, note = trace_for("resnet50", "t4")
    assert note == "trace: bundled resnet50-t4-roofline (T4, batch 64, calibrated roofline)"
    assert trace == load_bundled("resnet50-t4-roofline")
    trace, note = trace_for("resnet50", "gtx-1080-ti", 32)
    assert note == "trace: bundled resnet50-1080ti-roofline (GTX 1080 Ti, batch 32, calibrated roofline)"
    trace, note = trace_for("resnet50", "t4", 16, "fp16")
    assert (trace.batch, trace.dtype, trace.method) == (16, "fp16", "roofline-synth")
    assert note == "trace: roofline synthesis of resnet50 on T4 (batch 16, fp16, calibrated roofline)"
    _, note = trace_for("bert-large", "h200")
    assert note == ("trace: roofline synthesis of bert-large on H200 (batch 64 (default batch), fp32, "
                    "calibrated roofline, factors borrowed)")
    _, note = trace_for("resnet18", "haswell")
    assert note.endswith("(Haswell node, batch 32, uncalibrated roofline: default efficiencies)")
    with pytest.raises(UnknownNameError, match="unknown cluster device 'k80'"):
        trace_for("resnet50", "k80")
    with pytest.raises(UnknownNameError, match="unknown model 'resnet9'"):
        trace_for("resnet9", "v100")


def test_bundled_roofline_traces_regenerate_byte_identical(tmp_path):
    data = Path(str(Path(load_bundled.__code__.co_filename).parent / "data"))
    (tmp_path / "index.json").write_text((data / "index.json").read_text())
    regenerate_roofline(tmp_path)
    for model, device, _ in ROOFLINE_SET:
        name = f"{model}-{device}-roofline.json"
        assert (tmp_path / name).read_bytes() == (data / name).read_bytes(), name
    assert (tmp_path / "index.json").read_bytes() == (data / "index.json").read_bytes()
    summary = BUNDLED.entry("resnet50-v100-roofline").summary
    assert "calibrated (compute_eff 0.828, fitted on v100-rn50-fp32-dle2103)" in summary


def test_docs_print_the_current_tables():
    from simcomm.traces.calibration import markdown_tables

    doc = (Path(__file__).resolve().parents[2] / "docs" / "traces.md").read_text(encoding="utf-8")
    for block in markdown_tables().strip().split("\n\n"):
        assert block in doc, block.splitlines()[0]
