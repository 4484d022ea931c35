"""``simcomm bench --png``: busbw against size, coloured by algorithm, with the measurement and its error."""

from __future__ import annotations

import json
from pathlib import Path

from simcomm.report.bench_plot import algorithm_runs, size_label

NEW = Path(__file__).resolve().parents[1] / "data" / "nccl_tests" / "all_reduce_2x8_h100.txt"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_size_labels_read_as_nccl_tests_sizes():
    assert [size_label(x) for x in (8, 1000, 1024, 65536, 1 << 20, 3 << 29, 1 << 33)] == \
        ["8B", "1000B", "1KiB", "64KiB", "1MiB", "1.5GiB", "8GiB"]


def test_algorithm_runs_are_the_stretches_between_switches():
    sizes = [1 << 20, 8, 128, 1 << 30, 1 << 16]
    algos = ["B", "A", "A", "B", "A"]
    assert algorithm_runs(sizes, algos) == [("A", 8, 1 << 16), ("B", 1 << 20, 1 << 30)]
    assert algorithm_runs([8, 16, 32], ["A", "B", "A"]) == [("A", 8, 8), ("B", 16, 16), ("A", 32, 32)]
    assert algorithm_runs([], []) == []


def test_png_of_a_sweep_and_of_a_comparison_is_written_the_same_every_time(cli, tmp_path):
    for extra in (["--sizes", "8B..1GBx16"], ["--measured", str(NEW)]):
        outs = []
        for name in ("a.png", "b.png"):
            path = tmp_path / name
            rc, out, err = cli(["bench", "all_reduce", "--cluster", "dgx-h100-ndr", "--nodes", "2", "--quiet",
                                "--png", str(path)] + extra)
            assert rc == 0, err
            assert out.splitlines()[-1] == f"# plot: {path}"  # a comment line: the table stays nccl-tests'
            outs.append(path.read_bytes())
        assert outs[0].startswith(PNG_MAGIC) and outs[0] == outs[1]


def test_png_with_json_keeps_stdout_json(cli, tmp_path):
    path = tmp_path / "p.png"
    rc, out, err = cli(["bench", "all_reduce", "--cluster", "dgx-a100-hdr", "--sizes", "1KB,1GB", "--json",
                        "--png", str(path)])
    assert rc == 0, err
    assert json.loads(out)["rows"] and path.read_bytes().startswith(PNG_MAGIC)


def test_an_unwritable_png_path_is_one_line_before_any_simulation(cli, tmp_path):
    rc, out, err = cli(["bench", "all_reduce", "--sizes", "8B..8GB", "--png", str(tmp_path / "no" / "x.png"),
                        "--quiet"])
    assert rc == 2 and out == "" and err.count("\n") == 1 and err.startswith("error: --png: directory")
