"""benchmarks/nccl/small.py: the public suite's rows <= 64 KB by run and algorithm, and what each prediction
is made of (NCCL's table latency, the proxy's wait, the launches), pinned by hand."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import tomllib

SUITE = Path(__file__).resolve().parents[2] / "benchmarks" / "nccl"


def _small():
    sys.path.insert(0, str(SUITE))  # small.py imports score.py beside it
    spec = importlib.util.spec_from_file_location("nccl_small", SUITE / "small.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _row(size, err, algo, counted=True):
    return {"size": size, "error": err, "algorithm": algo, "counted": counted, "measured_us": 10.0,
            "predicted_us": 10.0 * (1 + err)}


def _run(rid, rows, anomalous=False, calibration=False):
    return {"id": rid, "class": "c", "anomalous": anomalous, "calibration": calibration, "rows": rows}


def test_groups_split_a_runs_small_rows_by_what_ran_and_count_those_within_15_percent():
    small = _small()
    results = [
        _run("a", [_row(8, -0.20, "NCCL Ring/Simple"), _row(64, -0.10, "NCCL Ring/Simple"),
                   _row(256, 0.30, "NCCL Tree/Simple"), _row(1024, 0.15, "NCCL Tree/Simple"),
                   _row(2048, 0.50, "NCCL Tree/Simple", counted=False),  # unsettled: not counted
                   _row(1 << 20, 0.0, "NCCL Tree/Simple")]),  # above 64 KB
        _run("b", [_row(8, 0.9, "NCCL Ring/LL")], anomalous=True),
        _run("c", [_row(8, 0.9, "NCCL Ring/LL")], calibration=True),
    ]
    g = small.groups(results)
    assert [(x["id"], x["algorithm"], x["rows"], x["within"]) for x in g] == [
        ("a", "NCCL Ring/Simple", 2, 1), ("a", "NCCL Tree/Simple", 2, 1)]
    assert g[0]["median"] == pytest.approx(-0.15) and g[1]["median"] == pytest.approx(0.225)
    assert g[0]["first"]["size"] == 8 and g[1]["first"]["size"] == 256
    # 4 counted rows, 2 within 15 %: a median of at most 15 % needs 3 of them
    assert small.needed(results) == (4, 2, 3)


def test_the_parts_of_a_small_prediction_pinned_by_hand(monkeypatch):
    import types

    # another benchmark's score.py imported first as ``score`` (as in a test process) must not be the one read
    monkeypatch.setitem(sys.modules, "score", types.ModuleType("score"))
    small = _small()
    models = tomllib.loads((SUITE / "models.toml").read_text(encoding="utf-8"))
    # 8 x A100 on one node, Ring/LL at 64 B, nccl-tests -g 8: NCCL's table 6.6 + 14 x 0.6 = 15.0 us, no
    # network (no proxy wait), 8 launches of 3.65 / 2 us = 14.6 us
    p = small.parts(models["oci-bm-gpu4-8-a100-1x8-allreduce"], "all_reduce", 64.0)
    assert p["table"] == pytest.approx(15.0) and p["proxy"] == 0.0 and p["launch"] == pytest.approx(14.6)
    assert p["fabric"] == 0.0
    # 2 x 8 H100 over InfiniBand, Tree/LL at 16 B, one GPU per process: 6.8 + 2 x (7 x 0.6 + 1 x 5.0) = 25.2
    # us; the proxy's wait 2 network steps x (1 channel - 1) sends ahead = 0 (LL: the receive is posted ahead and
    # the GPU polls the lines' flags); one launch 1.825 us
    p = small.parts(models["nebius-h100-2x8-ib-allreduce"], "all_reduce", 16.0)
    assert p["table"] == pytest.approx(25.2) and p["proxy"] == 0.0
    assert p["launch"] == pytest.approx(1.825) and p["fabric"] == 0.0  # InfiniBand: NCCL's table as it is
    # 2 x 1 T4 over EFA, Ring/Simple at 4 B (NCCL_PROTO=Simple, Intel host): the GPU waits for the tail the proxy
    # writes after each receive, so a step's send and receive serialise: 1 operation of 3 x 1 us at each of the
    # ring's 2 network steps = 6 us
    p = small.parts(models["aws-eks-efa-t4-2x1-allreduce"], "all_reduce", 4.0)
    assert p["proxy"] == pytest.approx(6.0)
    # 2 x 1 V100 over EFA (p3dn), Ring/LL at 8 B: 6.6 + 2 x 5.0 us; each of its 2 network steps waits EFA's
    # 9.87 us one way against InfiniBand's 1.4 us: 2 x 8.47 = 16.94 us
    p = small.parts(models["aws-p3dn-v100-2x1-efa-allreduce"], "all_reduce", 8.0)
    assert p["table"] == pytest.approx(16.6) and p["fabric"] == pytest.approx(16.94)
    # an all-to-all is grouped point-to-point: no table latency of a collective
    p = small.parts(models["nig-v100-2x2-alltoall"], "alltoall", 1024.0)
    assert p["table"] is None and p["launch"] == pytest.approx(3.65)
