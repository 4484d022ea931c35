"""Calibration on allowed sources: the anchors, the one fit per device, the borrowed factors, trace_for, names."""

from __future__ import annotations

from pathlib import Path

import pytest

from simcomm.errors import ConfigError, UnknownNameError
from simcomm.traces import BUNDLED, DEVICES, MODELS, device_for_cluster, get_device, load_bundled, trace_for
from simcomm.traces.bundled import ROOFLINE_SET, regenerate_roofline
from simcomm.traces.calibration import (
    evaluate,
    fit_all,
    fit_row,
    load_anchors,
    predict_seconds,
)
from simcomm.traces.synth import synth_trace

ROWS = load_anchors()
FITS = fit_all()
DATA = Path(str(Path(load_bundled.__code__.co_filename).parent / "data"))


def test_every_anchor_is_well_formed_and_from_an_allowed_source():
    ids = [r.id for r in ROWS]
    assert len(ids) == len(set(ids))
    for r in ROWS:
        assert r.device in DEVICES and r.model in MODELS, r.id
        assert r.batch >= 1 and r.seconds > 0, r.id
        assert r.dtype in ("fp32", "fp16", "bf16") and r.optimizer in ("sgd", "adam", "none"), r.id
        assert r.source and r.row and r.stack, r.id
        # DEVELOPERS.md: seed papers and the project's own measurements; published benchmarks are not collected
        assert r.source.startswith(("seed 00", "benchmarks/gpu/")), r.id
        assert not any(w in (r.source + r.row + r.stack).lower() for w in ("lambda", "deeplearningexamples", "mlperf"))


def test_no_published_benchmark_is_collected_or_fitted():
    # the DeepLearningExamples and Lambda throughput rows were removed (an independent check, not collected)
    assert not (DATA / "published_throughput.json").exists()
    assert not (DATA / "published_memory.json").exists()  # nor their memory limits
    for name in DEVICES:
        dev = get_device(name)
        for _, eff in dev.fitted + dev.fitted_transformer:
            assert "published_throughput" not in eff.source and "dle" not in eff.source.lower(), name
        assert "lambda" not in DEVICES.entry(name).reference.lower() and "DLE" not in DEVICES.entry(name).reference


def test_one_fit_per_device_on_a_row_reported_only_as_a_calibration():
    assert set(FITS) == {"v100", "1080ti", "h100"}
    assert sum(r.role == "fit" for r in ROWS) == len(FITS)
    assert not {f.row for f in FITS.values()} & {p.row.id for p in evaluate()}
    for fit in FITS.values():
        row = next(r for r in ROWS if r.id == fit.row)
        assert row.reported_as and "calibration" in row.reported_as, row.id


def test_seed004_reports_its_worker_rows_as_calibrations():
    from simcomm.validation import seed004

    rows = {r.label: r for r in seed004.run().rows}
    for net, device, seconds in (("1 Gb/s", "1080ti", 0.388), ("56 Gb/s", "v100", 0.222)):
        row = rows[f"{net}, no drop: worker compute"]
        assert row.role == "calibration" and row.reported == seconds
        assert row.predicted == pytest.approx(seconds, rel=5e-3)  # the factor is stored to 3 significant digits
        anchor = next(r for r in ROWS if r.device == device and r.role == "fit")
        assert anchor.seconds == seconds and anchor.measures == "forward+backward" and anchor.batch == seed004.BATCH


@pytest.mark.parametrize("device", sorted(FITS))
def test_registry_holds_the_fitted_factor(device):
    fit = FITS[device]
    eff = get_device(device).efficiency(fit.dtype)
    assert 0 < eff.compute <= 1 and 0 < eff.memory <= 1
    assert eff.compute == pytest.approx(fit.compute_eff, rel=5e-3)  # stored to 3 significant digits
    assert eff.memory == fit.memory_eff and fit.row in eff.source and eff.source.startswith("fitted")
    row = next(r for r in ROWS if r.id == fit.row)
    assert predict_seconds(row) == pytest.approx(row.seconds, rel=1e-2)


def test_fit_reproduces_its_row_exactly_and_refuses_the_unphysical():
    row = next(r for r in ROWS if r.id == "seed004-v100-rn50-worker")
    fit = fit_row(row)
    assert predict_seconds(row, fit.compute_eff, fit.memory_eff) == pytest.approx(row.seconds, rel=1e-9)
    fast = type(row)(**{**row.__dict__, "id": "too-fast", "seconds": 1e-6})
    with pytest.raises(ConfigError, match="too-fast.*no physical fit"):
        fit_row(fast)


def test_fit_all_refuses_two_unknowns_on_one_device(monkeypatch):
    import simcomm.traces.calibration as cal

    twice = ROWS + (type(ROWS[0])(**{**ROWS[0].__dict__, "id": "second", "dtype": "fp16"}),)
    monkeypatch.setattr(cal, "load_anchors", lambda: twice)
    with pytest.raises(ConfigError, match="'seed004-v100-rn50-worker' and 'second' both fit v100"):
        cal.fit_all()


def test_prediction_errors_are_pinned():
    # the honest state on the project's own H100 runs (docs/traces.md prints the table): ResNet-50 at another
    # batch carries; the same fraction of the bf16 peak is too fast (one unknown per device); VGG-16 too slow
    preds = {p.row.id: p.error for p in evaluate()}
    assert set(preds) == {"h100-rn50-fp32-b256", "h100-rn50-bf16-b64", "h100-rn50-bf16-b256", "h100-vgg16-fp32-b32",
                          "h100-vgg16-fp32-b64"}
    assert preds["h100-rn50-fp32-b256"] == pytest.approx(0.035, abs=0.01)
    assert preds["h100-rn50-bf16-b64"] == pytest.approx(-0.363, abs=0.01)
    assert preds["h100-vgg16-fp32-b64"] == pytest.approx(0.719, abs=0.01)


def test_unfitted_devices_borrow_and_say_from_whom():
    assert get_device("a100-80g").flops_for("fp32") == 156e12 and get_device("v100").flops_for("fp32") == 15.7e12
    v100 = get_device("v100").efficiency("fp32")
    for name, dtype, lender in (("t4", "fp32", "v100"), ("t4", "fp16", "v100"), ("a100", "fp32", "h100"),
                                ("a100-80g", "bf16", "h100"), ("l40s", "fp16", "h100"), ("b200", "bf16", "h100"),
                                ("h200", "fp32", "h100")):
        eff = get_device(name).efficiency(dtype)
        assert eff.source.startswith(f"borrowed: from {lender}, "), (name, dtype)
        assert eff.origin.startswith(f"borrowed from {lender}, fitted on "), (name, dtype)
        assert eff.compute == get_device(lender).efficiency("fp32").compute
    # one unknown per device: the other precisions keep the fitted precision's fraction of their own peak
    v16 = get_device("v100").efficiency("fp16")
    assert v16.compute == v100.compute and v16.source.startswith("borrowed: from the fp32 fit")
    t16 = synth_trace("resnet50", "v100", 64, "fp16")
    assert t16.meta["compute_eff"] == v100.compute and t16.meta["efficiency_source"] == v16.source
    # transformers keep their own (allowed) fits
    assert get_device("a100-80g").efficiency("bf16", "transformer").compute == 0.784
    assert get_device("h100").efficiency("bf16", "transformer").compute == 0.675
    assert get_device("haswell").efficiency("fp32").source == "default (not calibrated)"
    assert synth_trace("resnet50", "v100", 8, compute_eff=0.3).meta["efficiency_source"] == "given on the command line"
    with pytest.raises(ConfigError, match="dtype: device '1080ti' has no documented fp16 peak; valid choices: fp32"):
        synth_trace("resnet50", "1080ti", 8, "fp16")


def test_docs_print_the_current_tables():
    from simcomm.traces.calibration import markdown_tables

    doc = (Path(__file__).resolve().parents[2] / "docs" / "traces.md").read_text(encoding="utf-8")
    for block in markdown_tables().strip().split("\n\n"):
        assert block in doc, block.splitlines()[0]


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
    assert note == ("trace: bundled resnet50-t4-roofline (T4, batch 64, calibrated roofline, factors borrowed from "
                    "v100, fitted on seed004-v100-rn50-worker)")
    assert trace == load_bundled("resnet50-t4-roofline")
    trace, note = trace_for("resnet50", "gtx-1080-ti", 32)
    assert note == "trace: bundled resnet50-1080ti-roofline (GTX 1080 Ti, batch 32, calibrated roofline)"
    trace, note = trace_for("resnet50", "t4", 16, "fp16")
    assert (trace.batch, trace.dtype, trace.method) == (16, "fp16", "roofline-synth")
    assert note == ("trace: roofline synthesis of resnet50 on T4 (batch 16, fp16, calibrated roofline, factors "
                    "borrowed from v100, fitted on seed004-v100-rn50-worker)")
    _, note = trace_for("bert-large", "h200")
    assert note == ("trace: roofline synthesis of bert-large on H200 (batch 64 (default batch), fp32, "
                    "calibrated roofline, factors borrowed from h100, fitted on h100-rn50-fp32-b64)")
    _, note = trace_for("resnet18", "haswell")
    assert note.endswith("(Haswell node, batch 32, uncalibrated roofline: default efficiencies)")
    with pytest.raises(UnknownNameError, match="unknown cluster device 'k80'"):
        trace_for("resnet50", "k80")
    with pytest.raises(UnknownNameError, match="unknown model 'resnet9'"):
        trace_for("resnet9", "v100")


def test_bundled_roofline_traces_regenerate_byte_identical(tmp_path):
    data = DATA
    (tmp_path / "index.json").write_text((data / "index.json").read_text())
    regenerate_roofline(tmp_path)
    for model, device, _ in ROOFLINE_SET:
        name = f"{model}-{device}-roofline.json"
        assert (tmp_path / name).read_bytes() == (data / name).read_bytes(), name
    assert (tmp_path / "index.json").read_bytes() == (data / "index.json").read_bytes()
    summary = BUNDLED.entry("resnet50-v100-roofline").summary
    assert "calibrated (compute_eff 0.593, fitted on seed004-v100-rn50-worker)" in summary

