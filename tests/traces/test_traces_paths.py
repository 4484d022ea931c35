"""Paths: trace and profile inputs are bounded regular files; output paths are checked before any work."""

from __future__ import annotations

import os
import sys
import threading

import pytest

from simcomm.cli.app import main
from simcomm.errors import ConfigError, TraceFormatError
from simcomm.outpath import check_output_path
from simcomm.traces import io as trace_io
from simcomm.traces import kineto


def _error(capsys, argv, needle):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and needle in err, err
    return err


def _within(seconds, fn):
    """Run ``fn`` in a daemon thread; fail (instead of hanging the suite) if it blocks."""
    box = {}

    def target():
        try:
            box["rc"] = fn()
        except BaseException as exc:  # re-raised in the test's thread
            box["exc"] = exc
    th = threading.Thread(target=target, daemon=True)
    th.start()
    th.join(seconds)
    assert not th.is_alive(), f"blocked for more than {seconds} s"
    if "exc" in box:
        raise box["exc"]
    return box["rc"]


# --- inputs ---------------------------------------------------------------------------------------------

@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")
@pytest.mark.parametrize("argv", [["trace", "show", "/dev/zero"], ["trace", "import", "/dev/zero"]])
def test_dev_zero_is_refused_not_read_forever(capsys, tmp_path, argv):
    # was: read_text/read_bytes of an endless device until memory ran out
    _error(capsys, argv + (["--out", str(tmp_path / "t.json")] if argv[1] == "import" else []),
           "'/dev/zero' is a character device; only regular files are read")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
@pytest.mark.parametrize("what", ["show", "import", "load_trace"])
def test_a_fifo_is_refused_without_blocking(capsys, tmp_path, what):
    # was: open() of a FIFO with no writer blocks forever
    fifo = tmp_path / "trace.json"
    os.mkfifo(fifo)
    if what == "load_trace":
        with pytest.raises(TraceFormatError, match="is a FIFO"):
            _within(10, lambda: trace_io.load_trace(fifo))
        return
    argv = ["trace", what, str(fifo)] + (["--out", str(tmp_path / "t.json")] if what == "import" else [])
    assert _within(10, lambda: main(argv)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"'{fifo}' is a FIFO; only regular files are read" in err, err


def test_a_directory_as_the_trace_is_named(capsys, tmp_path):
    _error(capsys, ["trace", "show", str(tmp_path)], f"trace file '{tmp_path}' is a directory")


def test_a_huge_trace_file_is_refused_before_reading(capsys, tmp_path):
    big = tmp_path / "big.json"
    with open(big, "wb") as fh:
        fh.truncate(trace_io.TRACE_MAX_BYTES + 1)  # sparse: no disk used
    _error(capsys, ["trace", "show", str(big)], f"trace file '{big}' is 64.0 MiB, over the 64.0 MiB limit")


def test_a_huge_profile_is_refused_before_reading(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(kineto, "PROFILE_MAX_BYTES", 1000)
    big = tmp_path / "p.json"
    big.write_text("[" + " " * 2000 + "]")
    _error(capsys, ["trace", "import", str(big), "--out", str(tmp_path / "t.json")],
           f"profile '{big}' is 0.0 MiB, over the 0.0 MiB limit")


def test_read_regular_bounds_a_file_that_grows(tmp_path):
    p = tmp_path / "f"
    p.write_bytes(b"x" * 10)
    assert trace_io.read_regular(p, 10) == b"x" * 10
    with pytest.raises(TraceFormatError, match="over the"):
        trace_io.read_regular(p, 9)


def test_run_trace_dev_zero_is_one_line(capsys):
    # simcomm run --trace goes through the same loader (pipeline.load_trace_for -> load_trace)
    _error(capsys, ["run", "--strategy", "allreduce", "--trace", "/dev/zero"], "'/dev/zero' is a character device")


# --- outputs --------------------------------------------------------------------------------------------

def _bad_outputs(tmp_path):
    return [("", "the output path is empty"),
            (str(tmp_path), f"'{tmp_path}' is a directory; give a file path inside it"),
            (str(tmp_path / "missing" / "t.json"), f"directory '{tmp_path / 'missing'}' does not exist"),
            (str(tmp_path / "missing") + "/", "names a directory"),
            ("/dev/null", "'/dev/null' exists and is not a regular file")]


def test_check_output_path_refusals(tmp_path):
    for path, needle in _bad_outputs(tmp_path):
        with pytest.raises(ConfigError, match="^out: .*" + needle.replace("(", r"\(").replace(")", r"\)")):
            check_output_path(path, "out")
    assert check_output_path(tmp_path / "ok.json", "out") == tmp_path / "ok.json"
    assert list(tmp_path.iterdir()) == []  # the writability probe leaves nothing behind


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc is Linux's")
def test_check_output_path_unwritable_directory():
    # /proc accepts no new files, even for root (a chmod 555 directory does not stop root)
    with pytest.raises(ConfigError, match="out: cannot write in directory '/proc'"):
        check_output_path("/proc/simcomm-test.json", "out")


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root may write anywhere")
def test_check_output_path_read_only_directory(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        with pytest.raises(ConfigError, match=f"out: cannot write in directory '{ro}'"):
            check_output_path(ro / "t.json", "out")
    finally:
        ro.chmod(0o755)


@pytest.fixture
def no_work(monkeypatch):
    """Make every trace-producing call fail loudly: an output error must come before any of them."""
    from simcomm.traces import capture, synth
    from simcomm.traces import kineto as kin

    def boom(*a, **k):
        raise AssertionError("work started before the output path was checked")
    monkeypatch.setattr(synth, "synth_trace", boom)
    monkeypatch.setattr(capture, "capture_trace", boom)
    monkeypatch.setattr(kin, "import_profile", boom)
    monkeypatch.setattr("simcomm.traces.resolve_trace", boom)


@pytest.mark.parametrize("cmd", ["synth", "capture", "import", "show"])
@pytest.mark.parametrize("case", range(5))
def test_bad_output_paths_fail_first(capsys, tmp_path, no_work, cmd, case):
    path, needle = _bad_outputs(tmp_path)[case]
    argv = {"synth": ["trace", "synth", "--model", "resnet18", "--device", "v100", "--out", path],
            "capture": ["trace", "capture", "--model", "resnet18", "--out", path],
            "import": ["trace", "import", "no-such-profile.json", "--out", path],
            "show": ["trace", "show", "no-such-trace.json", "--png", path]}[cmd]
    field = "png" if cmd == "show" else "out"
    assert _error(capsys, argv, needle).startswith(f"error: {field}: ")
