"""benchmarks/nccl/rate.py: the public suite's rate misses by platform group, and the rows a counterfactual
moves, pinned by hand."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

SUITE = Path(__file__).resolve().parents[2] / "benchmarks" / "nccl"
MiB = 1 << 20


def _rate():
    sys.path.insert(0, str(SUITE))  # rate.py imports large.py and small.py beside it
    spec = importlib.util.spec_from_file_location("nccl_rate", SUITE / "rate.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _row(size, err, counted=True):
    return {"size": size, "error": err, "algorithm": "NCCL Ring/Simple", "counted": counted}


def _run(rid, rows, anomalous=False, calibration=False):
    return {"id": rid, "class": "c", "anomalous": anomalous, "calibration": calibration, "rows": rows}


SHM, GIB = "rtx4090-2gpu-docker-allreduce", "gke-dranet-h200-2x1-allreduce"
RESULTS = [
    # a host-staged run whose rate misses: 3 rows >= 1 MB, all outside 15 %
    _run(SHM, [_row(8 << 10, 0.05), _row(4 * MiB, -0.6), _row(256 * MiB, -0.7), _row(1 << 30, -0.7)]),
    # a gIB run: >= 128 MiB median -0.20, two of its three rows >= 1 MB outside
    _run(GIB, [_row(2 * MiB, -0.10), _row(256 * MiB, -0.20), _row(512 * MiB, -0.20)]),
    # right at >= 128 MiB (median -0.05): not a rate miss, even with a 1-16 MiB row outside
    _run("some-run", [_row(2 * MiB, -0.4), _row(256 * MiB, -0.05)]),
    _run("odd", [_row(256 * MiB, -0.9)], anomalous=True),
]


def test_rate_misses_and_their_groups():
    rate = _rate()
    assert rate.group_of(SHM) == "host memory in the middle (SHM without P2P)"
    assert rate.group_of("no-such-run") == rate.OTHER
    assert [g["id"] for g in rate.rate_misses(RESULTS)] == [SHM, GIB]  # most rows outside first
    groups = rate.by_group(RESULTS)
    assert [(g["group"], g["runs"], g["rows"], g["outside"]) for g in groups] == [
        ("host memory in the middle (SHM without P2P)", 1, 3, 3),
        ("Google's gIB environment (not shown)", 1, 3, 2),
    ]
    text = rate.render(RESULTS, {})
    assert "Rate misses: 2 runs, 5 rows >= 1 MB outside 15 % (of 6)." in text
    assert "| Google's gIB environment (not shown) | 1 | 3 | 2 |" in text


def test_rows_a_counterfactual_moves_into_and_out_of_15_percent():
    rate = _rate()
    after = [
        _run(SHM, [_row(8 << 10, 0.20), _row(4 * MiB, -0.10), _row(256 * MiB, -0.14), _row(1 << 30, -0.7)]),
        _run(GIB, [_row(2 * MiB, -0.10), _row(256 * MiB, -0.20), _row(512 * MiB, -0.20)]),  # unchanged
        _run("some-run", [_row(2 * MiB, -0.4), _row(256 * MiB, 0.30)]),
        _run("odd", [_row(256 * MiB, 0.0)], anomalous=True),  # not counted: never reported
    ]
    large = {m["id"]: m for m in rate.moved(RESULTS, after, "large")}
    assert set(large) == {SHM, "some-run"}
    assert (large[SHM]["changed"], large[SHM]["into"], large[SHM]["out_of"]) == (2, 2, 0)
    assert large[SHM]["before"] == pytest.approx(-0.65) and large[SHM]["after"] == pytest.approx(-0.12)
    assert (large["some-run"]["changed"], large["some-run"]["into"], large["some-run"]["out_of"]) == (1, 0, 1)
    small = rate.moved(RESULTS, after, "small")
    assert [(m["id"], m["changed"], m["into"], m["out_of"]) for m in small] == [(SHM, 1, 0, 1)]
    # >= 1 MB, sorted |errors|: .05 .1 .2 .2 .4 .6 .7 .7 (2 within 15 %, median .3); after: .1 .1 .14 .2 .2 .3 .4 .7
    assert rate.band_summary(RESULTS, "large") == (pytest.approx(0.3), 2, 8)
    assert rate.band_summary(after, "large") == (pytest.approx(0.2), 3, 8)


def test_the_host_shares_are_scaled_inside_a_counterfactual_and_restored_after():
    rate = _rate()
    from simcomm.nccl import execution

    kept = execution.HOST_BIDIR_SHARE, dict(execution.HOST_BIDIR_SHARE_BY_KIND)
    with pytest.raises(RuntimeError), rate._scaled(2.0):
        assert execution.host_bidir_share("allreduce") == pytest.approx(2 * 3.9 / 10.31)
        assert execution.host_bidir_share("allgather") == pytest.approx(2 * 3.17 / 10.31)
        assert execution.host_bidir_share("reduce_scatter") == pytest.approx(2 * 3.17 / 10.31)
        raise RuntimeError
    assert kept == (execution.HOST_BIDIR_SHARE, execution.HOST_BIDIR_SHARE_BY_KIND)
