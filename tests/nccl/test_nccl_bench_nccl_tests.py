"""``simcomm bench`` speaks nccl-tests: -b/-e/-f/-i sweeps, K/M/G suffixes, whole elements, the file's collective."""

from __future__ import annotations

import json

import pytest

from simcomm.bench import check_measured, nccl_tests_sweep, parse_sizes, whole_elements
from simcomm.errors import ConfigError
from simcomm.nccl.measured import parse_measured, what_rows_say

GiB = 1 << 30


def test_nccl_tests_sweep_is_its_loop():
    # all_reduce_perf -b 8 -e 8G -f 2: 8 B doubling to 8 GiB inclusive (the "stops at 4 GiB" case)
    sizes = nccl_tests_sweep("8", "8G", 2, None)
    assert len(sizes) == 31 and sizes[0] == 8 and sizes[-1] == 8 * GiB
    # -f 1 adds -i: 1M .. 4M step 1M; nccl-tests' own defaults are -b 32M -e 32M
    assert nccl_tests_sweep("1M", "4M", None, "1M") == [float(k << 20) for k in (1, 2, 3, 4)]
    assert nccl_tests_sweep(None, None, None, None) == [float(32 << 20)]
    # lower-case suffixes too, and a factor that overshoots stops below -e
    assert nccl_tests_sweep("1k", "10k", 3, None) == [1024.0, 3072.0, 9216.0]


def test_both_unit_systems_in_sizes():
    assert parse_sizes("8..8G")[-1] == 8 * GiB          # nccl-tests' G: 2^30
    assert parse_sizes("8B..8GB")[-1] == 4 * GiB        # simcomm's GB: 1e9, so doubling stops at 4 GiB
    assert parse_sizes("1GiB,1GB,1G") == [GiB, 1e9, GiB]


@pytest.mark.parametrize("kind, sizes, ranks, expected", [
    ("allreduce", [1000.0, 1001.0, 4.0], 8, [1000.0, 1000.0, 4.0]),        # count = size / 4
    ("allgather", [1000.0, 1024.0], 8, [992.0, 1024.0]),                   # count / 8 ranks, whole
    ("alltoall", [100.0], 2, [96.0]),
])
def test_sizes_rounded_down_to_whole_elements(kind, sizes, ranks, expected):
    out, notes = whole_elements(kind, sizes, "float", ranks)
    assert out == expected and len(notes) == sum(a != b for a, b in zip(sizes, expected, strict=False))


def test_a_size_below_one_element_is_refused():
    with pytest.raises(ConfigError, match=r"--sizes: 3 bytes is below one float element \(4 B\)"):
        whole_elements("allreduce", [3.0], "float", 8)
    with pytest.raises(ConfigError, match=r"per rank \(8 ranks: 16 B\)"):
        whole_elements("allgather", [8.0], "half", 8)


@pytest.mark.parametrize("argv, msg", [
    (["-b", "3", "-e", "3"], "error: -b/-e/-i: 3 bytes is below one float element (4 B)"),
    (["--sizes", "2"], "error: --sizes: 2 bytes is below one float element (4 B)"),
    (["-b", "1K", "--sizes", "8"], "error: --sizes and -b: give one of them"),
    (["-b", "1K", "-e", "8G"], "error: -b/-e/-f/-i: the sweep has 8192 sizes; at most 64"),
    (["-b", "1M", "-e", "1K", "-f", "2"], "error: -e/--maxbytes: 1024 bytes is below -b/--minbytes, 1048576 bytes"),
    (["-b", "8X"], "error: -b/--minbytes: cannot parse '8X'"),
    (["-b", "8", "-e", "1K", "-f", "0"], "error: -f/--stepfactor: 0 must be a whole number"),
])
def test_nccl_tests_options_bad_input_is_one_line(cli, argv, msg):
    rc, out, err = cli(["bench", "all_reduce", "--cluster", "dgx-h100-ndr", "--quiet"] + argv)
    assert rc == 2 and out == "" and len(err.strip().splitlines()) == 1 and err.startswith(msg), err


def test_nccl_tests_options_run_and_print_both_units(cli):
    rc, out, err = cli(["bench", "all_gather", "--cluster", "dgx-h100-ndr", "-b", "1000", "-e", "4K", "-f", "2",
                        "--quiet"])
    assert rc == 0, err
    lines = out.splitlines()
    assert lines[0].endswith("sizes 992 B .. 3.906 KiB (4,000 B at most), 3 sizes")
    assert "# assumed: 1000 B -> 992 B, 2000 B -> 1984 B rounded down to whole float elements " \
           "per rank, as nccl-tests runs them" in lines
    rows = [line.split() for line in lines if not line.startswith("#")]
    # nccl-tests prints all-gather's count per rank: size / 8 ranks / 4 B
    assert [(int(r[0]), int(r[1])) for r in rows] == [(992, 31), (1984, 62), (4000, 125)]
    rc, js, _ = cli(["bench", "all_gather", "--cluster", "dgx-h100-ndr", "-b", "1000", "-e", "4K", "-f", "2",
                     "--json"])
    assert [r["size"] for r in json.loads(js)["rows"]] == [992, 1984, 4000]


ALLREDUCE_ROW = "1048576 262144 float sum -1 52.1 20.13 37.74 0 51.0 20.56 38.48 0\n"
RANKS = "".join(f"#  Rank {r} Group 0 Pid 1 on host device {r} [0x00] NVIDIA H100\n" for r in range(8))


@pytest.mark.parametrize("text, tests, ranks", [
    (ALLREDUCE_ROW, ("all_reduce", "sendrecv"), None),
    ("1048576 32768 float none -1 52.1 20.13 18.87 0 51.0 20.56 19.27 0\n", ("all_gather", "alltoall"), 8),
    ("1048576 32768 float sum -1 52.1 20.13 18.87 0 51.0 20.56 19.27 0\n", ("reduce_scatter",), 8),
    ("1048576 262144 float none 0 52.1 20.13 20.13 0 51.0 20.56 20.56 0\n", ("broadcast",), None),
    ("1048576 262144 float sum 3 52.1 20.13 20.13 0 51.0 20.56 20.56 0\n", ("reduce",), None),
])
def test_what_the_columns_say(text, tests, ranks):
    said, implied, _ = what_rows_say(parse_measured(text))
    assert said == tests and implied == ranks


def test_a_table_of_another_collective_or_rank_count_is_one_line(cli, tmp_path):
    f = tmp_path / "ar.txt"
    f.write_text(RANKS + ALLREDUCE_ROW)
    rc, out, err = cli(["bench", "broadcast", "--cluster", "dgx-h100-ndr", "--measured", str(f), "--quiet"])
    assert rc == 2 and out == "" and err.strip() == (
        "error: --measured: the file's rows (redop sum, root -1, size = count x 4 B) are all_reduce_perf's or "
        "sendrecv_perf's, not broadcast_perf's: run simcomm bench all_reduce")
    rc, out, err = cli(["bench", "all_reduce", "--cluster", "dgx-h100-ndr", "--nodes", "2", "--measured", str(f),
                        "--quiet"])
    assert rc == 2 and err.strip().startswith("error: --measured: the file lists 8 ranks (its '# Rank' lines); "
                                              "the cluster has 16")
    # an all-gather table without Rank lines still says its ranks: size = count x ranks x width
    ag = tmp_path / "ag.txt"
    ag.write_text("1048576 32768 float none -1 52.1 20.13 18.87 0 51.0 20.56 19.27 0\n")
    rc, out, err = cli(["bench", "all_gather", "--cluster", "dgx-h100-ndr", "--nodes", "2", "--measured", str(ag),
                        "--quiet"])
    assert rc == 2 and "the file lists 8 ranks (its per-rank sizes); the cluster has 16" in err


def test_a_table_without_rank_lines_is_compared_with_a_warning(cli, tmp_path):
    f = tmp_path / "ar.txt"
    f.write_text(ALLREDUCE_ROW)
    rc, out, err = cli(["bench", "all_reduce", "--cluster", "dgx-h100-ndr", "--measured", str(f), "--quiet"])
    assert rc == 0 and err == ("warning: --measured: the file has no '# Rank' lines, so the rank count it ran on "
                               "is unknown; compared on the cluster's 8 ranks\n")
    assert check_measured("allreduce", parse_measured(RANKS + ALLREDUCE_ROW), 8) is None


def test_size_parser_reads_both_unit_systems_and_prints_binary():
    from simcomm.units import UnitError, format_size_iec, parse_nccl_tests_size

    assert [parse_nccl_tests_size(x) for x in ("8", "1k", "1K", "2m", "8G", "8GB", "8GiB", "1.5K")] == [
        8.0, 1024.0, 1024.0, 2.0 * 2**20, 8.0 * 2**30, 8e9, 8.0 * 2**30, 1536.0]
    with pytest.raises(UnitError, match="or nccl-tests' K, M, G"):
        parse_nccl_tests_size("8T", "-e/--maxbytes")  # nccl-tests has no T; simcomm's needs its B
    assert [format_size_iec(x) for x in (8, 1536, 2**33)] == ["8 B", "1.5 KiB", "8 GiB"]
