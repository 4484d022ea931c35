"""``simcomm bench --measured``: a user's nccl-tests output read back, predicted row by row, with errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simcomm.errors import ConfigError
from simcomm.nccl.measured import UNSETTLED, parse_measured

DATA = Path(__file__).resolve().parents[1] / "data" / "nccl_tests"
NEW = DATA / "all_reduce_2x8_h100.txt"
OLD = DATA / "all_reduce_1x8_v100_old_format.txt"


def test_new_layout_rows_header_and_log_lines():
    m = parse_measured(NEW.read_text())
    assert m.gpus_per_thread == 1 and m.ranks == 16  # "# nThread 1 nGpus 1", sixteen "#  Rank" lines
    assert [r.size for r in m.rows] == [8, 1024, 131072, 8388608, 134217728, 1073741824]
    first = m.rows[0]
    assert (first.count, first.type, first.time_us, first.inplace_us) == (2, "float", 45.72, 29.78)
    assert first.unsettled and UNSETTLED < 45.72 / 29.78  # the source disagrees with itself
    assert not m.rows[1].unsettled


def test_old_layout_without_a_root_column():
    m = parse_measured(OLD.read_text())
    assert m.gpus_per_thread == 8 and m.ranks == 8
    assert [(r.size, r.time_us) for r in m.rows] == [(8, 48.46), (32768, 51.06), (8388608, 203.8),
                                                     (134217728, 1818.8)]


def test_rows_of_count_zero_and_other_types():
    text = ("#  size count type redop root time algbw busbw #wrong time algbw busbw #wrong\n"
            "-8 -2 half sum -1 0.31 0.00 0.00 0 0.30 0.00 0.00 0\n"  # not a row: sizes are never negative
            "0 0 half sum -1 0.31 0.00 0.00 0 0.30 0.00 0.00 0\n"
            "64 32 half sum -1 12.5 0.01 0.01 0 12.4 0.01 0.01 N/A\n"
            "garbage line 1 2 3\n")
    m = parse_measured(text)
    assert [(r.size, r.count, r.type) for r in m.rows] == [(0, 0, "half"), (64, 32, "half")]
    assert m.gpus_per_thread is None and m.ranks is None


@pytest.mark.parametrize("text, msg", [
    ("nothing here\n# nThread 1 nGpus 1\n", "--measured: no nccl-tests rows found"),
    ("8 2 float sum -1 10.0 0 0 0\n8 4 half sum -1 10.0 0 0 0\n", "--measured: rows of several types (float, half)"),
])
def test_unreadable_tables_are_one_error(text, msg):
    with pytest.raises(ConfigError, match=msg.replace("(", r"\(").replace(")", r"\)")):
        parse_measured(text)


@given(st.text(max_size=400))
def test_any_text_parses_or_is_a_config_error(text):
    try:
        m = parse_measured(text)
    except ConfigError as exc:
        assert "\n" not in str(exc)
    else:
        assert m.rows and all(r.time_us >= 0 for r in m.rows)


def test_measured_table_golden(cli, golden):
    rc, out, err = cli(["bench", "all_reduce", "--cluster", "dgx-h100-ndr", "--nodes", "2", "--measured", str(NEW),
                        "--quiet"])
    assert rc == 0, err
    # the header names the file as given; make it machine-independent
    golden("bench/measured_all_reduce_dgx_h100_2x8.txt", out.replace(str(NEW), "all_reduce_2x8_h100.txt"))
    lines = out.splitlines()
    first_row = next(line for line in lines if not line.startswith("#"))
    assert "*" in first_row.split()[4]  # the unsettled 8 B row is marked ...
    assert lines[-2].startswith("# * unsettled") and lines[-1].startswith("# median |error|")


def test_measured_json_pairs_every_row_and_its_arithmetic(cli):
    rc, out, err = cli(["bench", "all_reduce", "--cluster", "dgx1-v100", "--measured", str(OLD), "--json"])
    assert rc == 0, err
    data = json.loads(out)
    assert data["gpus_per_thread"] == 8  # the file's nGpus (-g 8), not the default 1
    rows = data["rows"]
    assert [r["size"] for r in rows] == [8, 32768, 8388608, 134217728]
    for r in rows:
        assert r["error"] == pytest.approx((r["predicted_us"] - r["measured_us"]) / r["measured_us"], abs=1e-6)
        # nccl-tests' busbw of the measured time: size / time x 2(n-1)/n
        assert r["measured_busbw"] == pytest.approx(r["size"] / r["measured_us"] / 1e3 * 2 * 7 / 8, abs=1e-6)
    errs = sorted(abs(r["error"]) for r in rows)
    assert data["median_abs_error"]["all"] == pytest.approx((errs[1] + errs[2]) / 2, abs=1e-6)
    # the same sweep without the file, at the same sizes and -g, gives the same predictions
    rc, plain, _ = cli(["bench", "all_reduce", "--cluster", "dgx1-v100", "--sizes", "8,32768,8388608,134217728",
                        "--gpus-per-thread", "8", "--json"])
    assert [r["time_us"] for r in json.loads(plain)["rows"]] == [r["predicted_us"] for r in rows]


def test_count_zero_collectives_are_no_ops_in_the_comparison(cli, tmp_path):
    f = tmp_path / "zero.txt"
    # all_gather_perf's rows on 8 ranks: redop none, a per-rank count (256 B = 8 elements x 8 ranks x 4 B)
    f.write_text("0 0 float none -1 0.33 0.00 0.00 0 0.32 0.00 0.00 0\n"
                 "256 8 float none -1 10.50 0.00 0.00 0 10.40 0.00 0.00 0\n")
    rc, out, err = cli(["bench", "all_gather", "--cluster", "dgx-a100-hdr", "--measured", str(f), "--csv"])
    assert rc == 0, err
    lines = out.splitlines()
    assert lines[1].split(",")[:5] == ["0", "0", "0.33", "0.0", ""]  # no prediction, no error
    assert "no-op" in lines[1] and lines[2].split(",")[3] != ""


@pytest.mark.parametrize("extra, msg", [
    (["--measured", "/nonexistent/x.txt"], "error: --measured '/nonexistent/x.txt': cannot read (No such file"),
    (["--measured", str(NEW), "--sizes", "8B..1KB"], "error: --sizes and --measured: give one of them"),
    (["--measured", str(NEW), "--dtype", "half"], "error: --dtype and --measured: give one of them"),
    (["--measured", str(NEW), "--nodes", "1"], "error: --measured: the file lists 16 ranks"),
])
def test_measured_bad_input_is_one_line(cli, extra, msg):
    rc, out, err = cli(["bench", "all_reduce", "--cluster", "dgx-h100-ndr", "--quiet"] + extra)
    assert rc == 2 and out == "" and len(err.strip().splitlines()) == 1 and err.startswith(msg), err


def test_measured_reads_standard_input_and_refuses_what_could_block_or_flood(cli, tmp_path, monkeypatch):
    import io
    import os
    import sys

    class Stdin:
        buffer = io.BytesIO(NEW.read_bytes())

    monkeypatch.setattr(sys, "stdin", Stdin)
    rc, out, err = cli(["bench", "all_reduce", "--cluster", "dgx-h100-ndr", "--nodes", "2", "--measured", "-",
                        "--quiet"])
    assert rc == 0, err
    assert out.splitlines()[-1].startswith("# median |error|") and "measured: -" in out.splitlines()[0]
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    big = tmp_path / "big.txt"
    with open(big, "wb") as fh:  # sparse: 65 MiB on paper, nothing on disk
        fh.truncate(65 << 20)
    for path, msg in ((tmp_path, "not a regular file"), (fifo, "not a regular file"),
                      (big, "more than 64 MiB is not an nccl-tests table")):
        rc, out, err = cli(["bench", "all_reduce", "--measured", str(path), "--quiet"])
        assert rc == 2 and out == "" and err.count("\n") == 1 and msg in err, err


def test_a_file_of_another_collective_is_refused(cli, tmp_path):
    # recent nccl-tests name the test in the header: comparing all_gather_perf's rows with an all-reduce
    # prediction would be silently wrong
    f = tmp_path / "ag.txt"
    f.write_text("# Collective test starting: all_gather_perf\n"
                 "1048576 32768 float none -1 52.1 20.13 18.87 0 51.0 20.56 19.27 0\n")
    assert parse_measured(f.read_text()).test == "all_gather"
    rc, out, err = cli(["bench", "all_reduce", "--cluster", "dgx-a100-hdr", "--measured", str(f), "--quiet"])
    assert rc == 2 and out == "" and err.strip() == ("error: --measured: the file is all_gather_perf's output, not "
                                                     "all_reduce_perf's: run simcomm bench all_gather")
    rc, out, err = cli(["bench", "all_gather", "--cluster", "dgx-a100-hdr", "--measured", str(f), "--quiet"])
    assert rc == 0, err


def test_a_row_beyond_what_simcomm_sweeps_is_refused(cli, tmp_path):
    f = tmp_path / "huge.txt"
    f.write_text("99999999999999999999 1 float sum -1 10.0 0 0 0 10.0 0 0 0\n")
    rc, out, err = cli(["bench", "all_reduce", "--measured", str(f), "--quiet"])
    assert rc == 2 and out == "" and err.startswith("error: --measured: a row of 99,999,999,999,999,999,999 bytes")
