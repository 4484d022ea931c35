"""Calibrate a cluster's network from its own nccl-tests output (``simcomm calibrate --nccl-tests``).

What no datasheet gives is what a user's ``all_reduce_perf`` already measured: the goodput one NIC
really delivers through its network stack (a cloud's EFA or TCPXO, a RoCE fabric's congestion control)
and the latency one message really pays end to end.  Everything else (the NVLink domain, the PCIe tree,
NCCL's algorithms, channels and protocols) stays simcomm's model of the cluster the user named.  The
two unknowns become the ``calib-inter`` class of a ``--links`` file (:mod:`simcomm.topologies.calibrated`
puts it on the NICs' host links, latency split per hop), which every command accepts.

The fit, given ``predict(goodput, alpha) -> predicted times`` (simcomm's own model with ``calib-inter``
on the cluster):

1. **goodput** from the rows of at least :data:`BIG` bytes: the predicted time of a row falls as the
   goodput grows, so on a geometric grid of goodputs from the NIC's line rate / :data:`RANGE` up to
   its line rate, each row's own goodput is where its prediction crosses its measurement
   (interpolated in log-log).  The fit is their median; the spread is their interquartile range over
   the median (unknown, and said so, from a single row: nccl-tests ``-b 1G -e 1G``).  A row faster
   than the line rate allows, or slower than the grid's bottom, is not limited by the NIC as
   described and is counted, not used; so is a row the NIC does not limit near its line rate (one
   grid step slower moves it less than :data:`SENSITIVE`) that the line rate already predicts
   within :data:`AGREE`: it agrees with the datasheet and informs no fit;
2. **latency** likewise from the rows of at most :data:`SMALL` bytes, with the goodput fixed, on a
   grid from 0 to :data:`ALPHA_MAX`; without such rows the preset's latency stays, said so;
3. the goodput once more with the fitted latency (the two interact only through the middle sizes).

Refused, in one line naming what to run instead: tables from a single node (their rates are NVLink or
PCIe, which datasheets give), no usable row (or fewer than :data:`MIN_ROWS` when there are more),
most rows agreeing with the line rate (nothing to fit), a goodput spread over
:data:`MAX_SPREAD` (the rows disagree: the cluster is described wrong, or the runs are of different
machines), and most rows faster than the line rate (the machine that ran has more or faster NICs than
the one described).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import pairwise

from simcomm.calibrate.fit import CalibrationError

__all__ = ["NetworkFit", "fit_network", "row_crossings", "BIG", "SMALL", "RANGE", "ALPHA_MAX", "MAX_SPREAD",
           "MIN_ROWS"]

#: rows at least this many bytes fit the goodput (the issue's >= 1 MB band); at most SMALL bytes the latency
BIG, SMALL = float(1 << 20), float(64 << 10)
#: the goodput grid spans line rate / RANGE .. line rate; the latency grid 0 .. ALPHA_MAX seconds
RANGE, ALPHA_MAX = 64.0, 200e-6
#: grid points (a goodput step of RANGE ** (1 / (GRID - 1)) = 1.3x, interpolated in log-log)
GRID, ALPHA_GRID = 17, 13
#: the most relative interquartile range of the per-row goodputs a fit may have
MAX_SPREAD = 0.25
#: the fewest rows the latency fit needs; the goodput takes one row (a -b 1G -e 1G run), its spread then unknown
MIN_ROWS = 3
#: a row moves less than SENSITIVE when the NIC is one grid step slower: the NIC does not limit it; if the line
#: rate predicts it within AGREE, it agrees with the datasheet and informs no fit
SENSITIVE, AGREE = 0.02, 0.10

#: (goodput B/s, latency s, which rows: "big" or "small") -> predicted times, one per chosen row, in order
Predictor = Callable[[float, float, str], Sequence[float]]


@dataclass(frozen=True)
class NetworkFit:
    """The fitted ``calib-inter`` class and how well the rows agree."""

    goodput: float            # bytes/s one NIC delivers
    alpha: float              # end-to-end latency of one message between hosts, seconds
    goodput_spread: float | None  # interquartile range of the rows' own goodputs over their median; None: one row
    alpha_fitted: bool        # False: no small rows; alpha is the preset's
    rows_goodput: int         # rows the goodput is the median of
    rows_alpha: int
    faster_than_line: int     # big rows faster than the NIC's line rate allows (not used)
    slower_than_grid: int     # big rows slower than line rate / RANGE allows (not used)
    line_rate: float
    agree_with_line: int = 0  # big rows the NIC does not limit, predicted within AGREE at the line rate (not used)

    def as_dict(self) -> dict:
        return {"goodput_Bps": self.goodput, "alpha_s": self.alpha, "goodput_spread": self.goodput_spread,
                "alpha_fitted": self.alpha_fitted, "rows_goodput": self.rows_goodput, "rows_alpha": self.rows_alpha,
                "faster_than_line": self.faster_than_line, "slower_than_grid": self.slower_than_grid,
                "agree_with_line": self.agree_with_line,
                "line_rate_Bps": self.line_rate}


def _cross(xs: Sequence[float], ys: Sequence[float], target: float, log_x: bool) -> float | None:
    """The x where the piecewise (log-)linear curve ``ys(xs)`` meets ``target``; None when it never does."""
    for (x0, y0), (x1, y1) in pairwise(zip(xs, ys, strict=True)):
        lo, hi = min(y0, y1), max(y0, y1)
        if not lo <= target <= hi:
            continue
        if y1 == y0:
            return x0
        if log_x and x0 > 0:
            # times scale as a power of the goodput between grid points: interpolate in log-log
            f = (math.log(target) - math.log(y0)) / (math.log(y1) - math.log(y0))
            return math.exp(math.log(x0) + f * (math.log(x1) - math.log(x0)))
        return x0 + (target - y0) / (y1 - y0) * (x1 - x0)
    return None


def row_crossings(grid: Sequence[float], predicted: Sequence[Sequence[float]], measured: Sequence[float],
                  log_x: bool) -> list[float | None]:
    """Per row, the grid value where its prediction meets its measurement (``predicted[g][row]``)."""
    return [_cross(grid, [p[i] for p in predicted], m, log_x) for i, m in enumerate(measured)]


def _iqr_over_median(values: list[float]) -> float | None:
    if len(values) < 2:
        return None
    q = statistics.quantiles(values, n=4, method="inclusive")
    return (q[2] - q[0]) / statistics.median(values)


@dataclass(frozen=True)
class _Rows:
    own: list[float]       # the usable rows' own goodputs
    faster: int            # faster than the line rate allows
    slower: int            # slower than the grid's bottom
    agree: int             # within AGREE of the line rate's prediction where the NIC does not limit them
    agree_error: float     # those rows' median |error| at the line rate


def _fit_goodput(predict: Predictor, measured: Sequence[float], line_rate: float, alpha: float) -> _Rows:
    grid = [line_rate / RANGE ** (1 - k / (GRID - 1)) for k in range(GRID)]
    predicted = [list(predict(b, alpha, "big")) for b in grid]
    crossings = row_crossings(grid, predicted, measured, log_x=True)
    own: list[float] = []
    errors: list[float] = []
    faster = slower = agree = 0
    for i, m in enumerate(measured):
        at_line, step_below = predicted[-1][i], predicted[-2][i]
        error = abs(at_line - m) / m
        # A row the NIC does not limit near its line rate (one grid step slower moves it < 2 %) and that the line
        # rate already predicts says nothing about the NIC: its crossing, if any, is an artefact of the grid.
        if step_below < (1 + SENSITIVE) * at_line and error <= AGREE:
            agree += 1
            errors.append(error)
        elif (crossing := crossings[i]) is not None:
            own.append(crossing)
        elif m < at_line:
            faster += 1
        else:
            slower += 1
    return _Rows(own, faster, slower, agree, statistics.median(errors) if errors else 0.0)


def fit_network(predict: Predictor, big_times: Sequence[float], small_times: Sequence[float], *,
                line_rate: float, preset_alpha: float) -> NetworkFit:
    """Fit ``calib-inter``'s goodput and latency to measured times (seconds) of the big and small rows."""
    if not math.isfinite(line_rate) or line_rate <= 0:
        raise CalibrationError(f"--nccl-tests: the NIC's line rate {line_rate!r} is not a positive rate")
    if not big_times:
        raise CalibrationError(f"--nccl-tests: no row of at least {BIG / 2 ** 20:g} MiB across nodes to fit the "
                               "goodput on: run nccl-tests with -e 1G (or larger) on 2+ nodes")
    rows = _fit_goodput(predict, big_times, line_rate, preset_alpha)
    _check_goodput_rows(rows, len(big_times), line_rate)
    goodput = statistics.median(rows.own)
    alpha, alpha_rows = preset_alpha, 0
    if len(small_times) >= MIN_ROWS:
        grid = [ALPHA_MAX * k / (ALPHA_GRID - 1) for k in range(ALPHA_GRID)]
        predicted = [list(predict(goodput, a, "small")) for a in grid]
        alphas = [a for a in row_crossings(grid, predicted, small_times, log_x=False) if a is not None]
        if len(alphas) >= MIN_ROWS:
            alpha, alpha_rows = statistics.median(alphas), len(alphas)
            rows = _fit_goodput(predict, big_times, line_rate, alpha)
            _check_goodput_rows(rows, len(big_times), line_rate)
            goodput = statistics.median(rows.own)
    return NetworkFit(goodput=goodput, alpha=alpha, goodput_spread=_iqr_over_median(rows.own),
                      alpha_fitted=alpha_rows > 0, rows_goodput=len(rows.own), rows_alpha=alpha_rows,
                      faster_than_line=rows.faster, slower_than_grid=rows.slower, line_rate=line_rate,
                      agree_with_line=rows.agree)


def _check_goodput_rows(found: _Rows, rows: int, line_rate: float) -> None:
    """Refuse a goodput fit outside physical bounds or whose rows disagree, naming what to try instead."""
    gbps = line_rate * 8 / 1e9
    own, faster, slower = found.own, found.faster, found.slower
    if found.agree > rows / 2:
        raise CalibrationError(
            f"--nccl-tests: {found.agree} of {rows} rows of at least 1 MiB are not limited by the NIC on the cluster "
            f"described (a slower NIC barely moves them) and its {gbps:g} Gb/s line rate predicts them within "
            f"{found.agree_error:.1%} (median): there is nothing to fit; use the cluster as it is")
    if faster > rows / 2:
        raise CalibrationError(
            f"--nccl-tests: {faster} of {rows} rows of at least 1 MiB are faster than the NIC's {gbps:g} Gb/s line rate "
            "allows on the cluster described: the machine that ran has more or faster NICs (check --nics-per-node, "
            "--inter) or a path simcomm was not told of (NVLink across nodes, SHARP)")
    if len(own) < min(MIN_ROWS, rows):
        raise CalibrationError(
            f"--nccl-tests: only {len(own)} of {rows} rows of at least 1 MiB are limited by the NIC as described "
            f"({faster} faster than its line rate, {slower} slower than 1/{RANGE:g} of it, {found.agree} not limited "
            "by it); check the cluster flags, or run nccl-tests to larger sizes (-e 8G)")
    spread = _iqr_over_median(own)
    if spread is not None and spread > MAX_SPREAD:
        raise CalibrationError(
            f"--nccl-tests: the rows' own goodputs disagree (interquartile range {spread:.0%} of their median, at "
            f"most {MAX_SPREAD:.0%}): the tables are of different machines or the cluster is described wrong; "
            "calibrate on one platform's tables at a time")
