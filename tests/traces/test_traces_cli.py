"""``simcomm trace`` and ``simcomm list`` for traces: golden output and one-line errors with exit 2."""

from __future__ import annotations

import json

import pytest

from simcomm.cli.app import main
from simcomm.traces.io import load_trace


def test_show_bundled_golden(capsys, golden):
    assert main(["trace", "show", "resnet20-cifar-v100-roofline"]) == 0
    golden("traces/show_resnet20_cifar_v100.txt", capsys.readouterr().out)


def test_synth_then_show_file_golden(tmp_path, capsys, golden):
    out = tmp_path / "t.json"
    assert main(["trace", "synth", "--model", "lstm-mnist", "--device", "t4", "--batch", "64", "--out", str(out)]) == 0
    capsys.readouterr()
    t = load_trace(out)
    assert t.model == "lstm-mnist" and t.device == "t4" and len(t.layers) == 7
    assert main(["trace", "show", str(out)]) == 0
    golden("traces/show_lstm_mnist_t4.txt", capsys.readouterr().out)


def test_show_png(tmp_path, capsys):
    png = tmp_path / "t.png"
    assert main(["trace", "show", "gan-generator-v100-roofline", "--png", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_list_catalogues(capsys):
    for cat, needle in (("models", "resnet20-cifar"), ("devices", "1080ti"), ("traces", "resnet18-cpu-capture")):
        assert main(["list", cat, "--json"]) == 0
        rows = json.loads(capsys.readouterr().out)
        assert needle in {r["name"] for r in rows}
        assert all(r["summary"] and r["reference"] for r in rows)


def _error(capsys, argv, needle):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and needle in err, err


@pytest.mark.parametrize("argv, needle", [
    (["trace", "synth", "--model", "resnet9", "--device", "v100"],
     "unknown model 'resnet9' (did you mean 'resnet50' or 'resnet34' or 'resnet18'?); valid choices:"),
    (["trace", "synth", "--model", "resnet18", "--device", "k80"], "unknown device 'k80'; valid choices: 1080ti"),
    (["trace", "synth", "--model", "resnet18", "--device", "v100", "--batch", "x"], "batch:"),
    (["trace", "synth", "--model", "resnet18", "--device", "v100", "--dtype", "int4"], "dtype:"),
    (["trace", "synth", "--model", "resnet18", "--device", "t4", "--dtype", "bf16"], "no documented bf16"),
    (["trace", "show", "no-such-trace"], "unknown trace (file or bundled name) 'no-such-trace'"),
    (["trace", "show", "missing.json"], "does not exist"),
    (["trace", "capture", "--model", "resnet9"], "unknown model 'resnet9'"),
    (["trace", "capture"], "exactly one of --model"),
    (["trace", "capture", "--module", "nodots"], "pkg.mod:factory"),
    (["trace", "capture", "--module", "no_such_pkg.mod:f", "--input-shape", "3"], "cannot import"),
    (["trace", "capture", "--model", "resnet18", "--device", "tpu"], "device: 'tpu'"),
    (["trace", "capture", "--model", "resnet18", "--input-shape", "3,a"], "input-shape"),
    (["trace", "import", "missing-profile.json"], "does not exist"),
])
def test_bad_input_one_line_exit_2(capsys, argv, needle):
    _error(capsys, argv, needle)


@pytest.mark.parametrize("content, needle", [
    ("{nope}", "malformed"),
    ("{", "truncated"),
    ('{"format": "simcomm-trace", "version": 9}', "unsupported trace version 9"),
    ('{"format": "simcomm-trace", "version": 1, "model": "m", "batch": 1, "dtype": "fp32", "device": "d", '
     '"device_kind": "cpu", "method": "cpu-timer", "iteration_s": 1.0, "layers": [{"name": "a", '
     '"module_type": "Linear", "params": 1, "grad_bytes": 4, "forward_s": -1, "backward_s": 0}]}',
     "layers[0].forward_s: must be a non-negative finite number"),
])
def test_show_bad_files(tmp_path, capsys, content, needle):
    p = tmp_path / "bad.json"
    p.write_text(content)
    _error(capsys, ["trace", "show", str(p)], needle)


def test_import_not_a_profile(tmp_path, capsys):
    p = tmp_path / "p.json"
    p.write_text('{"traceEvents": []}')
    _error(capsys, ["trace", "import", str(p)], "no 'nn.Module:' events")
    p.write_text("[1, 2")
    _error(capsys, ["trace", "import", str(p)], "not readable Chrome-trace JSON")
