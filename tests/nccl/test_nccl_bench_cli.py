"""``simcomm bench``: nccl-tests' table layout (golden files), machine output, bad input."""

from __future__ import annotations

import csv
import io
import json

import pytest

ARGS = ["bench", "all_reduce", "--cluster", "dgx-h100-ndr", "--nodes", "2", "--sizes", "8B..1GBx16", "--quiet"]


def test_bench_table_golden(cli, golden):
    rc, out, err = cli(ARGS)
    assert rc == 0, err
    golden("bench/all_reduce_dgx_h100_2x8.txt", out)
    lines = out.splitlines()
    # nccl-tests' columns, and its closing average line
    columns = next(line for line in lines if line.split()[:2] == ["#", "size"])
    assert columns.split() == ["#", "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "algorithm"]
    # what the numbers assume is said above the table, as nccl-tests' own comment lines
    assert [line for line in lines if line.startswith("# assumed: ")][1].startswith("# assumed: kernel launch 1.825 us")
    assert lines[-1].startswith("# Avg bus bandwidth")


def test_bench_rows_obey_nccl_tests_arithmetic(cli):
    rc, out, _ = cli(ARGS[:-1] + ["--json"])
    data = json.loads(out)
    assert rc == 0 and data["ranks"] == 16
    for row in data["rows"]:
        # algbw = size / time; all-reduce busbw = algbw x 2(n-1)/n (nccl-tests' PERFORMANCE.md)
        algbw = row["size"] / (row["time_us"] * 1e-6) / 1e9
        assert row["algbw"] == pytest.approx(algbw, rel=1e-9)
        assert row["busbw"] == pytest.approx(algbw * 2 * 15 / 16, rel=1e-9)
        assert row["count"] == row["size"] // 4


def test_bench_broadcast_csv_golden(cli, golden):
    rc, out, err = cli(["bench", "broadcast", "--cluster", "dgx-a100-hdr", "--nodes", "1", "--sizes", "1KB,1MB,1GB",
                        "--root", "3", "--csv"])
    assert rc == 0, err
    golden("bench/broadcast_dgx_a100_1x8.csv", out)
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [int(r["size"]) for r in rows] == [1000, 1000000, 1000000000]
    assert {r["root"] for r in rows} == {"3"}


@pytest.mark.parametrize("argv, msg", [
    (["bench", "all_reduce", "--json", "--csv"], "error: --json and --csv: give one of them"),
    (["bench", "all_reduce", "--sizes", "8GB..8B"], "error: --sizes: '8GB..8B' ends below where it starts"),
    (["bench", "all_reduce", "--sizes", "1e400"], "error: --sizes: '1e400' is not a finite number"),
    (["bench", "nope"], "error: collective: 'nope' is not valid; valid choices: all_reduce, all_gather, "
                        "reduce_scatter, broadcast, reduce, alltoall, sendrecv"),
    (["bench", "all_reduce", "--cluster", "dgx-h100-ndr", "--nccl-proto", "ll9"], "error: stack.nccl_proto: 'll9'"),
])
def test_bench_bad_input_is_one_line(cli, argv, msg):
    rc, out, err = cli(argv + ["--quiet"] if "--json" not in argv else argv)
    assert rc == 2 and out == "" and len(err.strip().splitlines()) == 1 and err.startswith(msg)


def test_one_thread_driving_eight_gpus_launches_eight_kernels(cli):
    from simcomm.nccl.execution import LAUNCH_PER_GPU_S

    # nccl-tests -g 8: one host thread launches each call on its 8 GPUs in turn; -g 1: one launch per thread
    assert pytest.approx((12.25e-6 - 8.60e-6) / 2) == LAUNCH_PER_GPU_S  # the calibration row: -g 2, 8 B
    times = {}
    for g in (1, 8):
        rc, out, err = cli(["bench", "all_reduce", "--cluster", "dgx-h100-ndr", "--nodes", "2", "--sizes", "8B",
                            "--gpus-per-thread", str(g), "--json"])
        assert rc == 0, err
        data = json.loads(out)
        assert data["gpus_per_thread"] == g
        times[g] = data["rows"][0]["time_us"]
    assert times[8] - times[1] == pytest.approx(7 * LAUNCH_PER_GPU_S * 1e6, rel=1e-9)
    rc, out, err = cli(["bench", "all_reduce", "--cluster", "dgx-h100-ndr", "--gpus-per-thread", "9", "--quiet"])
    assert rc == 2 and err.strip() == ("error: --gpus-per-thread: 9 must be an integer from 1 to 8, the GPUs per node "
                                       "(nccl-tests' -g: the GPUs one host thread drives)")


def test_grouped_point_to_point_pays_the_kernel_launch_too(cli):
    from simcomm.nccl.execution import LAUNCH_PER_GPU_S

    # NCCL's all-to-all is one kernel of grouped sends and receives: its launch is charged like a
    # collective's, on top of each message's own route latency
    times = {}
    for g in (1, 4):
        rc, out, err = cli(["bench", "alltoall", "--cluster", "dgx-a100-hdr", "--nodes", "1", "--gpus-per-node", "4",
                            "--sizes", "16B", "--gpus-per-thread", str(g), "--json"])
        assert rc == 0, err
        row = json.loads(out)["rows"][0]
        assert row["algorithm"] == "NCCL P2P"
        times[g] = row["time_us"]
    assert times[4] - times[1] == pytest.approx(3 * LAUNCH_PER_GPU_S * 1e6, rel=1e-9)


def test_bench_says_what_its_nccl_numbers_assume(cli):
    def assumed(argv):
        rc, out, err = cli(["bench"] + argv + ["--sizes", "1KiB", "--json"])
        assert rc == 0, err
        return json.loads(out)["assumed"]

    nccl = assumed(["all_reduce", "--cluster", "dgx-h100-ndr"])
    assert len(nccl) == 2 and "2.30" in nccl[0] and nccl[1].startswith("kernel launch 1.825 us")
    p2p = assumed(["alltoall", "--cluster", "dgx-h100-ndr"])
    assert len(p2p) == 3 and "NCCL has no p2p latency model" in p2p[2]
    mpi = assumed(["all_reduce", "--cluster", "dgx-h100-ndr", "--stack", "mpi-tcp"])
    assert len(mpi) == 1 and "rendezvous" in mpi[0] and "64 KiB" in mpi[0]
