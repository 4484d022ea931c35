"""``simcomm calibrate``: size parsing, --check output, and clean failures."""

import json
import socket

import pytest

from simcomm.calibrate.predict import ACK_SHARE
from simcomm.cli.app import main
from simcomm.cli.calibrate_cmd import parse_sizes

A, B = 1e-4, 1e6


def test_parse_sizes_range_and_list():
    assert parse_sizes("1KB..64KB") == (1000, 4000, 16000, 64000)
    assert parse_sizes("1MB,64KB,1MB") == (64000, 1000000)


def test_bad_backend_is_one_line(capsys):
    assert main(["calibrate", "--backend", "mpi"]) == 2
    assert capsys.readouterr().err == "error: backend: 'mpi' is not one of gloo, nccl\n"


def _record(tmp_path):
    sizes = [1024, 65536, 1048576, 4194304]
    rec = {"version": 1, "backend": "gloo", "world": 4, "nodes": ["h0", "h1", "h2", "h3"],
           "p2p": {"inter": {"sizes": sizes, "times": [A + n / B for n in sizes]}},
           "collectives": [{"kind": "allreduce", "ranks": 4, "nbytes": 4000000, "time": 6.6},
                           {"kind": "ps_pull", "ranks": 4, "nbytes": 1000000, "time": 3.0001}]}
    path = tmp_path / "rec.json"
    path.write_text(json.dumps(rec))
    return path


def test_check_prints_errors_per_case(tmp_path, capsys):
    assert main(["calibrate", "--check", str(_record(tmp_path)), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    ar, pull = out["rows"]
    want = 6 * (A + 1e6 / (B * ACK_SHARE))  # a ring: ACKs share each direction (predict.ACK_SHARE)
    assert ar["predicted_s"] == pytest.approx(want, rel=1e-9)
    assert ar["error"] == pytest.approx((want - 6.6) / 6.6, rel=1e-9)
    assert pull["error"] == pytest.approx(0.0, abs=1e-9)
    assert out["summary"]["cases"] == 2


def test_check_table(tmp_path, capsys):
    assert main(["calibrate", "--check", str(_record(tmp_path))]) == 0
    text = capsys.readouterr().out
    # ring prediction 6 (A + 1e6 / (B ACK_SHARE)) = 6.131 s against 6.6 s measured: -7.1 %
    assert "allreduce" in text and "-7.1%" in text and "median |error| 3.6%, worst 7.1% over 2 cases" in text


def test_check_of_a_missing_file_is_one_line(tmp_path, capsys):
    assert main(["calibrate", "--check", str(tmp_path / "nope.json")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: check: cannot read") and err.count("\n") == 1


def test_unreachable_master_is_one_line_and_writes_nothing(tmp_path, capsys, monkeypatch):
    pytest.importorskip("torch")
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(port))
    out = tmp_path / "links.toml"
    assert main(["calibrate", "--timeout", "2", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: rank 1: could not reach the other ranks at 127.0.0.1:{port} within 2 s")
    assert err.count("\n") == 1
    assert list(tmp_path.iterdir()) == []
