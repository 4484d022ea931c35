"""simcomm calibrate --nccl-tests: the fit on hand-computable predictors, its refusals, and the CLI's bad input."""

from __future__ import annotations

import pytest

from simcomm.calibrate.fit import CalibrationError
from simcomm.calibrate.nccl_tests import fit_network, row_crossings

BIG = [2.0 ** k for k in range(20, 31, 2)]      # 1 MiB .. 1 GiB
SMALL = [2.0 ** k for k in range(3, 17, 2)]     # 8 B .. 32 KiB
LINE = 50e9


def alpha_beta(sizes_big, sizes_small, floor=0.0):
    """time = alpha + size / goodput (+ a floor the NIC does not move)"""
    def predict(goodput, alpha, which):
        sizes = sizes_big if which == "big" else sizes_small
        return [alpha + s / goodput + floor for s in sizes]
    return predict


def test_row_crossing_interpolates_in_log_log_exactly_for_a_power_law():
    # t = 1 / b: between grid points 1 and 4, t = 0.5 is met at b = 2 exactly in log-log
    assert row_crossings([1.0, 4.0], [[1.0], [0.25]], [0.5], log_x=True) == [pytest.approx(2.0)]
    assert row_crossings([0.0, 10.0], [[1.0], [3.0]], [2.0], log_x=False) == [5.0]
    assert row_crossings([1.0, 4.0], [[1.0], [0.25]], [5.0], log_x=True) == [None]


def test_goodput_and_latency_recovered_from_an_alpha_beta_cluster():
    true_goodput, true_alpha = 20e9, 12e-6
    predict = alpha_beta(BIG, SMALL)
    big = [true_alpha + s / true_goodput for s in BIG]
    small = [true_alpha + s / true_goodput for s in SMALL]
    fit = fit_network(predict, big, small, line_rate=LINE, preset_alpha=3e-6)
    assert fit.goodput == pytest.approx(true_goodput, rel=2e-3)
    assert fit.alpha == pytest.approx(true_alpha, rel=1e-2) and fit.alpha_fitted and fit.rows_alpha == len(SMALL)
    assert fit.goodput_spread < 0.01 and fit.rows_goodput == len(BIG)


def test_one_row_fits_with_its_spread_unknown_and_no_small_rows_keep_the_preset_latency():
    predict = alpha_beta(BIG[-1:], [])
    fit = fit_network(predict, [BIG[-1] / 10e9], [], line_rate=LINE, preset_alpha=3e-6)
    assert fit.goodput == pytest.approx(10e9, rel=2e-3) and fit.goodput_spread is None
    assert fit.alpha == 3e-6 and not fit.alpha_fitted


def test_refusals_name_what_to_do():
    predict = alpha_beta(BIG, SMALL)
    # faster than the NIC's line rate allows: 4 x the line rate
    with pytest.raises(CalibrationError, match="faster than the NIC's 400 Gb/s line rate"):
        fit_network(predict, [s / (4 * LINE) for s in BIG], [], line_rate=LINE, preset_alpha=0.0)
    # rows that disagree: goodputs 5 .. 40 GB/s
    spread = [s / g for s, g in zip(BIG, [5e9, 10e9, 20e9, 40e9, 5e9, 40e9], strict=True)]
    with pytest.raises(CalibrationError, match="goodputs disagree"):
        fit_network(predict, spread, [], line_rate=LINE, preset_alpha=0.0)
    # a cluster the NIC does not limit (a floor 100x the NIC's time) that the line rate already predicts
    floor = alpha_beta(BIG, SMALL, floor=1.0)
    with pytest.raises(CalibrationError, match="not limited by the NIC .* nothing to fit"):
        fit_network(floor, [1.0 + s / LINE for s in BIG], [], line_rate=LINE, preset_alpha=0.0)
    with pytest.raises(CalibrationError, match="no row of at least 1 MiB"):
        fit_network(predict, [], [], line_rate=LINE, preset_alpha=0.0)


@pytest.mark.parametrize("args, words", [
    (["--nccl-tests", "tests/data/nccl_tests/all_reduce_2x8_h100.txt"], "give --cluster"),
    (["--nccl-tests", "tests/data/nccl_tests/all_reduce_2x8_h100.txt", "--cluster", "dgx-h100-ndr"],
     "does not name its test"),
    (["--nccl-tests", "tests/data/nccl_tests/all_reduce_2x8_h100.txt:bogus", "--cluster", "dgx-h100-ndr"],
     "test 'bogus' is not valid"),
    (["--nccl-tests", "tests/data/nccl_tests/all_reduce_1x8_v100_old_format.txt:all_reduce", "--cluster",
      "dgx1-v100"], "every table ran on one node"),
    (["--cluster", "dgx-h100-ndr"], "--cluster: applies to --nccl-tests only"),
])
def test_bad_input_is_one_line(cli, args, words, tmp_path):
    rc, out, err = cli("calibrate", *args, "--out", str(tmp_path / "links.toml"))
    assert rc == 2 and err.startswith("error: ") and err.count("\n") == 1 and words in err, err
    assert not (tmp_path / "links.toml").exists()


def test_a_table_the_nic_does_not_limit_is_refused_without_a_file(cli, tmp_path):
    """2 x 8 H100 on NDR: NVLS-Tree is not limited by the NICs there, and the preset predicts the rows already."""
    rc, _, err = cli("calibrate", "--nccl-tests", "tests/data/nccl_tests/all_reduce_2x8_h100.txt:all_reduce",
                     "--cluster", "dgx-h100-ndr", "--out", str(tmp_path / "links.toml"))
    assert rc == 2 and "limited by the NIC" in err and not list(tmp_path.iterdir())


def test_a_cloud_table_calibrates_a_links_file_every_command_accepts(cli, tmp_path):
    """AWS p4d, 2 x 8 A100 on 4 x 100 Gb/s EFA, one 1 GiB all-reduce row (35 215 us): the preset at line rate is
    28.8 % fast; the fitted goodput is 70 % of the line rate, the record says so, and bench runs with the file."""
    import json

    out = tmp_path / "p4d.toml"
    rc, text, err = cli("calibrate", "--nccl-tests", "tests/data/nccl_tests/all_reduce_2x8_p4d_efa.txt",
                        "--cluster", "aws-p4d", "--nodes", "2", "--out", str(out))
    assert rc == 0, err
    record = json.loads(out.with_suffix(".json").read_text())
    fit = record["fit"]
    assert 0.65 < fit["goodput_Bps"] / fit["line_rate_Bps"] < 0.75 and fit["goodput_spread"] is None
    assert not fit["alpha_fitted"] and record["tables"][0]["before"] > 0.25 and record["tables"][0]["after"] < 0.05
    assert "spread unknown (one row)" in text
    rc, text, err = cli("bench", "all_reduce", "--cluster", "aws-p4d", "-n", "3", "--links", str(out), "--sizes",
                        "1GiB", "--quiet")
    assert rc == 0, err
