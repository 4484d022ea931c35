"""``simcomm calibrate --nccl-tests FILE...``: fit a cluster's NIC goodput and latency from its nccl-tests output.

The fit is :mod:`simcomm.calibrate.nccl_tests`; the cluster and its predictions
:mod:`simcomm.calibrate.nccl_cluster`.  Output: the ``calib-inter`` class as a ``--links`` file, the
record (fit, spread, per-table errors before and after) as JSON beside it, and a summary.
"""

from __future__ import annotations

import statistics
from pathlib import Path

from simcomm.calibrate.fit import Fit
from simcomm.cli.console import stdout
from simcomm.units import format_time

__all__ = ["calibrate_from_nccl_tests"]


def _median_abs(pred: list[float], meas: list[float]) -> float | None:
    errs = [abs(p - m) / m for p, m in zip(pred, meas, strict=True) if m > 0]
    return statistics.median(errs) if errs else None


def calibrate_from_nccl_tests(specs: list[str], flat: dict, out: Path, as_json: bool) -> None:
    """Read, fit, write and report (errors raise :class:`~simcomm.errors.ConfigError` before anything is written)."""
    import json

    from simcomm.calibrate.linkfile import LinkEstimate, write_json_atomic, write_link_file
    from simcomm.calibrate.nccl_cluster import ClusterPredictor, read_tables
    from simcomm.calibrate.nccl_tests import fit_network
    from simcomm.outpath import check_output_path
    from simcomm.scenario import from_flat

    out = check_output_path(out, "--out")  # a missing folder or a full disk, before any simulation
    tables = read_tables(specs)
    predictor = ClusterPredictor.from_scenario(from_flat({k: v for k, v in flat.items() if v is not None}), tables)
    big, small = predictor.measured("big"), predictor.measured("small")
    fit = fit_network(predictor, big, small, line_rate=predictor.nic.bandwidth, preset_alpha=predictor.preset_alpha)
    after = predictor(fit.goodput, fit.alpha, "big")
    before = predictor(predictor.nic.bandwidth, predictor.preset_alpha, "big")
    per_table = _per_table(predictor, before, after)
    sizes = [s for _, s, _ in predictor.rows("big")]
    record_fit = Fit("calib-inter", {"alpha": fit.alpha, "beta": 1.0 / fit.goodput}, tuple(sizes), tuple(big),
                     tuple(after), _r2(big, after))
    header = (f"fitted by simcomm calibrate --nccl-tests from {len(tables)} table(s) on {flat.get('cluster')}: "
              f"goodput per NIC {fit.goodput * 8 / 1e9:.4g} Gb/s (line rate {fit.line_rate * 8 / 1e9:.4g}), spread "
              f"{_spread(fit)} over {fit.rows_goodput} rows; latency {fit.alpha * 1e6:.4g} us "
              + (f"(fitted on {fit.rows_alpha} rows)" if fit.alpha_fitted else "(the preset's: no rows <= 64 KiB)")
              + f"\nuse it: --links {out} (it replaces the NICs' host links of the cluster you name)")
    record = {"source": "nccl-tests", "files": [t.path for t in tables], "scenario": {k: v for k, v in flat.items()
                                                                                     if v is not None},
              "fit": fit.as_dict(), "tables": per_table}
    # validate the JSON before the link file is written, so a failure leaves neither
    text = json.dumps(record, indent=2, sort_keys=True)
    write_link_file(out, [LinkEstimate("calib-inter", record_fit, predictor.nic.family, header.splitlines()[0])],
                    header)
    write_json_atomic(out.with_suffix(".json"), json.loads(text))
    if as_json:
        stdout().print_json(text)
        return
    con = stdout()
    con.print(f"calibrated from {len(tables)} nccl-tests table(s): {out}")
    con.print(f"goodput per NIC: {fit.goodput * 8 / 1e9:.4g} Gb/s ({fit.goodput / fit.line_rate:.0%} of the "
              f"{fit.line_rate * 8 / 1e9:.4g} Gb/s line rate); spread {_spread(fit)} over "
              f"{fit.rows_goodput} rows of at least 1 MiB")
    if fit.faster_than_line or fit.slower_than_grid:
        con.print(f"  not used: {fit.faster_than_line} row(s) faster than the line rate allows, "
                  f"{fit.slower_than_grid} slower than 1/64 of it")
    con.print(f"latency end to end: {format_time(fit.alpha)}"
              + (f" (fitted on {fit.rows_alpha} rows of at most 64 KiB)" if fit.alpha_fitted
                 else " (the preset's: no rows of at most 64 KiB across nodes)"))
    for row in per_table:
        b, a = row["before"], row["after"]
        con.print(f"  {row['file']}: {row['collective']} on {row['ranks']} ranks, median |error| at >= 1 MiB "
                  f"{'-' if b is None else f'{b:.1%}'} -> {'-' if a is None else f'{a:.1%}'}")
    con.print(f"use it: simcomm bench ... --links {out}")


def _spread(fit) -> str:
    return "unknown (one row)" if fit.goodput_spread is None else f"{fit.goodput_spread:.1%}"


def _per_table(predictor, before: list[float], after: list[float]) -> list[dict]:
    out, i = [], 0
    for t in predictor.network:
        meas = [m for s, m in zip(t.sizes, t.times_s, strict=True) if s >= 2 ** 20]
        n = len(meas)
        out.append({"file": t.path, "collective": t.kind, "ranks": t.ranks, "rows": n,
                    "before": _median_abs(before[i:i + n], meas), "after": _median_abs(after[i:i + n], meas)})
        i += n
    return out


def _r2(meas: list[float], pred: list[float]) -> float:
    mean = statistics.fmean(meas)
    total = sum((m - mean) ** 2 for m in meas)
    resid = sum((m - p) ** 2 for m, p in zip(meas, pred, strict=True))
    return 1.0 - resid / total if total > 0 else 1.0
