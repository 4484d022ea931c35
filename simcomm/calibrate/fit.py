"""Least-squares fits of the Hockney α-β(-γ) model to measured (size, time) points.

A point-to-point ping-pong gives one-way times ``t(n) = α + n·β``; a
collective of a known algorithm gives ``t(n) = A·α + n·(B·β + G·γ)`` with the
algorithm's coefficients A, B, G.  Both are linear in the unknowns, so
:func:`fit_linear` solves one weighted least-squares problem with
``scipy.optimize.least_squares``.

Residuals are weighted by ``1/t``: sizes in a sweep span several decades,
and an unweighted fit would let the largest message decide everything and
leave α (which only shows at small sizes) to chance.  Minimising relative
error treats every size alike.

The point-to-point fit is robust rather than squeamish: repeats of a size
are reduced to their median, β is the Theil-Sen slope (median of pairwise
slopes) of the bandwidth-dominated sizes and α the smallest excess
``t - n·β`` of the latency-dominated ones (host delays only ever add time),
so one preempted message is out-voted instead of refusing the whole run.
What is still refused, with one line, never fitted into a silently wrong
link file: fewer than 3 distinct sizes, non-finite values, a fit whose α or
β comes out non-positive, a fit that explains the times poorly (R² below
:data:`MIN_R2`, or the bandwidth-dominated points off the line by more than
:data:`MAX_BIG_ERROR` in the median), and a bandwidth above the stated line
rate (:func:`check_line_rate`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import least_squares

from simcomm.errors import ConfigError

__all__ = ["CalibrationError", "Fit", "fit_alpha_beta", "fit_bandwidth", "fit_linear", "fit_gamma",
           "check_monotone", "check_quality", "check_line_rate", "theil_sen", "spread",
           "MIN_SIZES", "DIP_TOLERANCE", "MIN_R2", "MAX_BIG_ERROR", "MIN_BURST",
           "BUCKET_LINE_ERROR", "BUCKET_SHARE"]

#: fewest distinct message sizes a fit accepts (two points always fit a line exactly)
MIN_SIZES = 3
#: a larger message may be this much faster than a smaller one before we call it non-monotone
DIP_TOLERANCE = 0.25
#: lowest R² of the times a written fit may have (a real link's sweep gives > 0.999; the
#: accuracy suite's records give 0.9997; the bad 2-host fit of issue 15 had 0.78)
MIN_R2 = 0.98
#: largest median |relative error| a fit may leave at the bandwidth-dominated points (those
#: that decide β); latency-dominated points are bent by bursts and wake-ups and only reported
MAX_BIG_ERROR = 0.10
#: smallest token-bucket burst (bytes) a ping-pong fit models as one: below it, the messages that beat
#: the sustained rate are set aside as before (the 20 KB and 64 KB buckets of the emulator fit that way)
MIN_BURST = 128 * 1024
#: a burst at least this share of the second-largest size is read as a bucket even when the sustained
#: fit passes (a 512 KB bucket under 1 KB .. 4 MB: 0.47; 1 % noise on the two largest sizes: a few %)
BUCKET_SHARE = 0.25
#: how far (relative) any size above a token-bucket burst may lie off the line through them
BUCKET_LINE_ERROR = 0.10


class CalibrationError(ConfigError):
    """Measurements that cannot be turned into a trustworthy link class."""


@dataclass(frozen=True)
class Fit:
    """A fitted α-β(-γ) model and how well it explains the points.

    ``params`` holds the fitted unknowns by name (``alpha`` s, ``beta`` s/B,
    ``gamma`` s/B); ``predicted`` and ``rel_errors`` are per input point,
    in the caller's order; ``r2`` is the coefficient of determination of the
    times (not of the weighted residuals, so it reads as usual).
    """

    name: str
    params: dict
    sizes: tuple[float, ...]
    times: tuple[float, ...]
    predicted: tuple[float, ...]
    r2: float

    @property
    def alpha(self) -> float:
        return float(self.params.get("alpha", 0.0))

    @property
    def beta(self) -> float:
        return float(self.params.get("beta", 0.0))

    @property
    def bandwidth(self) -> float:
        """Bytes/s (1/β)."""
        return 1.0 / self.beta

    @property
    def residuals(self) -> tuple[float, ...]:
        return tuple(t - p for t, p in zip(self.times, self.predicted, strict=False))

    @property
    def rel_errors(self) -> tuple[float, ...]:
        return tuple((p - t) / t for t, p in zip(self.times, self.predicted, strict=False))

    @property
    def max_rel_error(self) -> float:
        return max(abs(e) for e in self.rel_errors)

    @property
    def median_rel_error(self) -> float:
        return float(np.median(np.abs(self.rel_errors)))

    def as_dict(self) -> dict:
        return {"name": self.name, "params": dict(self.params), "r2": self.r2,
                "sizes": list(self.sizes), "times": list(self.times),
                "predicted": list(self.predicted), "rel_errors": list(self.rel_errors)}


def _points(sizes: Sequence[float], times: Sequence[float], name: str) -> tuple[np.ndarray, np.ndarray]:
    n = np.asarray(sizes, dtype=float).ravel()
    t = np.asarray(times, dtype=float).ravel()
    if n.shape != t.shape:
        raise CalibrationError(f"{name}: {len(n)} sizes but {len(t)} times; need one time per size")
    if not (np.all(np.isfinite(n)) and np.all(np.isfinite(t))):
        raise CalibrationError(f"{name}: measurements contain NaN or infinite values")
    if np.any(n < 0) or np.any(t <= 0):
        raise CalibrationError(f"{name}: sizes must be >= 0 and times > 0")
    distinct = len(np.unique(n))
    if distinct < MIN_SIZES:
        raise CalibrationError(f"{name}: only {distinct} distinct message sizes; a fit needs at least {MIN_SIZES}")
    return n, t


def check_monotone(sizes: Sequence[float], times: Sequence[float], name: str = "measurement",
                   tolerance: float = DIP_TOLERANCE) -> None:
    """Raise if time falls notably as size grows.

    Robust to noise: the repeats of each size are reduced to their median,
    and only a drop of more than ``tolerance`` (relative) below the slowest
    *smaller* size counts, so a jittery latency floor passes while a sweep
    with a broken link or a mixed-up column does not.
    """
    n, t = np.asarray(sizes, float), np.asarray(times, float)
    uniq = np.unique(n)
    med = np.array([np.median(t[n == u]) for u in uniq])
    worst = np.maximum.accumulate(med)
    for i in range(1, len(uniq)):
        if med[i] < (1.0 - tolerance) * worst[i - 1]:
            raise CalibrationError(
                f"{name}: non-monotone measurement: {uniq[i]:.0f} B took {med[i]:.3g} s but a smaller "
                f"message took {worst[i - 1]:.3g} s; re-run on a quiet machine")


def fit_linear(columns: dict[str, np.ndarray], times: Sequence[float], sizes: Sequence[float],
               name: str, *, strict: bool = True, monotone: bool = True) -> Fit:
    """Fit ``t = Σ_k x_k · columns[k]`` in relative least squares; columns are per point.

    ``strict`` refuses a non-positive unknown (callers that refine the fit pass False);
    ``monotone`` refuses times that fall notably with size (:func:`check_monotone`).
    """
    n, t = _points(sizes, times, name)
    if monotone:
        check_monotone(n, t, name)
    keys = list(columns)
    X = np.column_stack([np.asarray(columns[k], float).ravel() for k in keys])
    scale = np.abs(X).max(axis=0)
    scale[scale == 0] = 1.0
    Xs = X / scale  # columns of order 1 so α (1e-5 s) and β (1e-8 s/B) converge alike
    w = 1.0 / t
    x0 = np.linalg.lstsq(Xs * w[:, None], np.ones_like(t), rcond=None)[0]
    sol = least_squares(lambda x: (Xs @ x) * w - 1.0, x0, method="lm", xtol=1e-15, ftol=1e-15, gtol=1e-15)
    x = sol.x / scale
    params = {k: float(v) for k, v in zip(keys, x, strict=False)}
    for k, v in params.items():
        if strict and not v > 0:
            raise CalibrationError(
                f"{name}: fitted {k} = {v:.3g} is not positive; the measurements do not follow "
                f"t = alpha + n*beta (too noisy, or sizes too small to show bandwidth)")
    pred = X @ x
    ss_res = float(np.sum((t - pred) ** 2))
    ss_tot = float(np.sum((t - t.mean()) ** 2))
    r2 = 1.0 - ss_res / ss_tot if ss_tot > 0 else 1.0
    return Fit(name, params, tuple(map(float, n)), tuple(map(float, t)), tuple(map(float, pred)), r2)


def theil_sen(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Theil-Sen line ``y = c + m·x``: m the median of pairwise slopes, c the median of ``y - m·x``.

    One wild point among three or more moves neither (breakdown point 29 %);
    with two points it is the line through both.
    """
    x, y = np.asarray(x, float), np.asarray(y, float)
    i, j = np.triu_indices(len(x), 1)
    keep = x[j] != x[i]
    m = float(np.median((y[j] - y[i])[keep] / (x[j] - x[i])[keep]))
    return m, float(np.median(y - m * x))


def spread(values: Sequence[float]) -> float:
    """``(max - min) / median`` of positive values: how far repeated estimates disagree."""
    v = np.asarray(values, float)
    return float((v.max() - v.min()) / np.median(v)) if len(v) else 0.0


def _r2(t: np.ndarray, pred: np.ndarray) -> float:
    ss_tot = float(np.sum((t - t.mean()) ** 2))
    return 1.0 - float(np.sum((t - pred) ** 2)) / ss_tot if ss_tot > 0 else 1.0


def fit_alpha_beta(sizes: Sequence[float], times: Sequence[float], name: str = "link", *,
                   bucket: bool = True) -> Fit:
    """Fit one-way point-to-point times to ``t = α + n·β``, robustly.

    Repeats of a size (several entries with the same ``n``) are reduced to
    their median.  A joint relative least-squares fit only decides which
    sizes are bandwidth-dominated (``n·β ≥ α``); at least two of those give
    β as their Theil-Sen slope (large messages decide bandwidth, and one
    preempted message among three or more does not move it).  α is the
    smallest excess ``t - n·β`` of the latency-dominated sizes: a host only
    ever adds time (a sleeping vCPU's wake-up, preemption), never removes it,
    so the fastest excess is the link's.  A message faster than the sustained
    rate (``t < n·β``: a token-bucket burst) decides neither; if every small
    message was one, α is their smallest time (latency alone).  Then
    :func:`check_quality`.  A sweep whose two largest sizes show a token bucket of
    :data:`BUCKET_SHARE` of the second-largest size, or of :data:`MIN_BURST` when the
    sustained fit is refused, is fitted above the burst instead (:func:`_bucket`); not with
    ``bucket=False`` (a loopback or shared-memory class: no shaper, and its largest sizes
    slow down when they leave the cache, which bends the line the same way).
    """
    n_all, t_all = _points(sizes, times, name)
    n = np.unique(n_all)
    t = np.array([np.median(t_all[n_all == u]) for u in n])
    joint = fit_linear({"alpha": np.ones_like(n), "beta": n}, t, n, name, strict=False, monotone=False)
    big = n * joint.beta >= max(joint.alpha, 0.0)
    if not np.any(~big):  # no latency-dominated point: the smallest size stands for latency
        big = n > n.min()
    if np.count_nonzero(big) < 2 or joint.beta <= 0:
        big = n >= n[-2]  # the data do not say; the two largest sizes decide bandwidth
    if not np.any(~big):
        big = n > n.min()
    slope, _ = theil_sen(n[big], t[big])
    # A message that beat the sustained rate (t < n*beta) left in a token-bucket burst or NIC/driver
    # buffers: it carries neither the sustained rate nor the latency alone, so it decides neither.
    burst = t < n * slope
    if np.any(big & burst) and np.count_nonzero(big & ~burst) >= 2:
        big = big & ~burst
        slope, _ = theil_sen(n[big], t[big])
        burst = t < n * slope
    # Small ping-pongs that passed a token bucket bend the line: read the link above the burst, first
    # when the burst is plain (a quarter of the second-largest size or more: 1 % noise on the two
    # largest sizes fakes a few %), then when the sustained fit is refused.
    found = _bucket(n, t, name, share=BUCKET_SHARE) if bucket else None
    if found is not None:
        return found
    try:
        return _sustained(n, t, big, burst, slope, name)
    except CalibrationError:
        found = _bucket(n, t, name) if bucket else None
        if found is None:
            raise
        return found


def _sustained(n: np.ndarray, t: np.ndarray, big: np.ndarray, burst: np.ndarray, slope: float, name: str) -> Fit:
    """α from the latency-dominated sizes beside the slope of the bandwidth-dominated ones; checked."""
    small = ~big & ~burst
    if np.any(small):  # noqa: SIM108 (each branch says which sizes the latency comes from)
        alpha = float(np.min(t[small] - n[small] * slope))
    else:
        # Every small message fit a burst: n*beta at the sustained rate over-counts them, and
        # their time is latency alone.
        alpha = float(np.min(t[~big]))
    for k, v in (("beta", slope), ("alpha", alpha)):
        if not v > 0:
            raise CalibrationError(
                f"{name}: fitted {k} = {v:.3g} is not positive; the measurements do not follow "
                f"t = alpha + n*beta (too noisy, or sizes too small to show bandwidth)")
    pred = alpha + n * slope
    fit = Fit(name, {"alpha": alpha, "beta": float(slope)}, tuple(map(float, n)), tuple(map(float, t)),
              tuple(map(float, pred)), _r2(t, pred))
    check_quality(fit, tuple(bool(b) for b in big & ~burst))
    return fit


def _bucket(n: np.ndarray, t: np.ndarray, name: str, share: float = 0.0) -> Fit | None:
    """A token bucket's sweep, ``t = α + max(0, n - b)·β``, or None when the sizes show no bucket.

    A bucket of ``b`` bytes passes a message up to ``b`` at memory speed and the rest at
    the shaped rate, refilling between ping-pongs; so the large sizes lie on a line of the
    right slope whose intercept ``α - b·β`` is below zero, and the small ones at about α.
    Seen when the line through the two largest sizes, extended to n = 0, is below the
    smallest size's time by more than :data:`MIN_BURST` bytes' worth (on the emulator at
    100 Mb/s with a 512 KB bucket, 256 KB took 6.7 ms, a third of its time at the rate: any
    line through it and the larger sizes underestimates the burst); then β is the Theil-Sen slope
    of the sizes above the burst (at least 2 on one line, else refused with the sizes to
    run), α the smallest time, ``b = (α - c)/β``, and the fit carries ``burst`` (bytes).
    """
    # the line through the two largest sizes decides: a size inside the burst bends any other
    if len(n) < 3 or not t[-1] > t[-2]:
        return None
    slope = (t[-1] - t[-2]) / (n[-1] - n[-2])
    intercept = float(t[-1] - n[-1] * slope)
    alpha = float(np.min(t))
    burst = (alpha - intercept) / slope
    if burst < max(MIN_BURST, share * n[-2]):
        return None
    # The sizes above the burst: the largest set, smallest size first, whose own line puts the
    # burst below its smallest size and explains each of its sizes within BUCKET_LINE_ERROR.
    for k in range(len(n) - 1):
        above = n >= n[k]
        slope, intercept = theil_sen(n[above], t[above])
        if not slope > 0:
            continue
        burst = (alpha - intercept) / slope
        line = intercept + n[above] * slope
        if 0 < burst < n[k] and np.max(np.abs(line / t[above] - 1)) <= BUCKET_LINE_ERROR:
            break
    else:
        want = 1024
        while want < 32 * burst:  # a size of --sizes' x4 steps from 1 KB, well above the burst
            want *= 4
        raise CalibrationError(
            f"{name}: messages up to about {burst / 1024:.0f} KB pass at memory speed (a token-bucket burst) "
            f"and the sizes above it do not lie on one line, so the shaped rate cannot be read from them; "
            f"re-run with larger sizes (--sizes 1KB..{want >> 20}MB)")
    # A bucket only ever speeds a message up: the sweep still rises with size, and no size inside
    # the burst is slower than the sustained line (else the bend is noise or a broken run, not a bucket).
    # (only sizes inside the burst whose time at the rate would show: n*beta >= alpha; the smallest
    # ones are latency and its jitter)
    inside = ~above & (n * slope >= alpha)
    if np.any(np.diff(t) < -DIP_TOLERANCE * t[:-1]) or \
            np.any(t[inside] > (1 + MAX_BIG_ERROR) * (alpha + n[inside] * slope)):
        return None
    pred = alpha + np.maximum(n - burst, 0.0) * slope
    fit = Fit(name, {"alpha": alpha, "beta": float(slope), "burst": float(burst)}, tuple(map(float, n)),
              tuple(map(float, t)), tuple(map(float, pred)), _r2(t, pred))
    check_quality(fit, tuple(bool(b) for b in above))
    return fit


def check_quality(fit: Fit, big: Sequence[bool] | None = None) -> None:
    """Refuse a fit that does not explain its points.

    R² of the times below :data:`MIN_R2`, or a median |relative error| over the
    bandwidth-dominated points ``big`` above :data:`MAX_BIG_ERROR` (the median, so one
    preempted message does not refuse a run whose other points agree).
    """
    if not fit.r2 >= MIN_R2:
        raise CalibrationError(
            f"{fit.name}: the fit explains the times poorly (R^2 = {fit.r2:.3f}, below {MIN_R2}); "
            f"the measurements do not follow t = alpha + n*beta; re-run on a quiet machine")
    errs = np.abs(fit.rel_errors)
    sel = np.asarray(big if big is not None else [True] * len(errs), bool)
    if np.any(sel) and float(np.median(errs[sel])) > MAX_BIG_ERROR:
        raise CalibrationError(
            f"{fit.name}: the bandwidth-dominated sizes are {float(np.median(errs[sel])):.0%} off the fitted line "
            f"(median; limit {MAX_BIG_ERROR:.0%}); the measurements do not follow t = alpha + n*beta; "
            f"re-run on a quiet machine")


def check_line_rate(fit: Fit, line_rate: float | None, what: str = "line rate") -> None:
    """Refuse a bandwidth above ``line_rate`` (B/s): goodput can never exceed the wire."""
    if line_rate is not None and fit.bandwidth > line_rate:
        raise CalibrationError(
            f"{fit.name}: fitted bandwidth {fit.bandwidth / 1e6:.4g} MB/s is above the {what} "
            f"{line_rate / 1e6:.4g} MB/s, which no transfer can beat (R^2 = {fit.r2:.3f}); "
            f"the measurement is wrong (timer, preemption or a mis-stated rate)")


def fit_bandwidth(sizes: Sequence[float], times: Sequence[float], name: str = "link",
                  min_size: float = 262144) -> Fit:
    """β alone from the bandwidth-dominated points (``n >= min_size``): ``t = c + n·β``.

    For a path whose latency is known from another fit (the cross-leaf
    ping-pong of a two-tier cluster, where only the trunk's rate is new); α is
    reported as the intercept clipped at 0 and is not used.
    """
    n = np.asarray(sizes, float).ravel()
    t = np.asarray(times, float).ravel()
    if n.shape != t.shape or not (np.all(np.isfinite(n)) and np.all(np.isfinite(t))) or np.any(t <= 0):
        raise CalibrationError(f"{name}: sizes and times must be finite, one time (> 0) per size")
    big = n >= min_size
    if len(np.unique(n[big])) < 2:
        raise CalibrationError(f"{name}: needs at least 2 sizes >= {min_size:.0f} B to fit a bandwidth")
    beta, c = theil_sen(n[big], t[big])  # robust slope, as in fit_alpha_beta
    if not beta > 0:
        raise CalibrationError(f"{name}: fitted beta = {beta:.3g} is not positive; the times do not grow with size")
    alpha = max(float(c), 0.0)
    pred = alpha + n * beta
    fit = Fit(name, {"alpha": alpha, "beta": float(beta)}, tuple(map(float, n)), tuple(map(float, t)),
              tuple(map(float, pred)), _r2(t, pred))
    # judged against the fitted line itself (c + n*beta, c unclipped), in the median like check_quality
    err = float(np.median(np.abs((c + n[big] * beta - t[big]) / t[big])))
    if err > MAX_BIG_ERROR:
        raise CalibrationError(
            f"{name}: the sizes >= {min_size:.0f} B are {err:.0%} off the fitted line (median; limit "
            f"{MAX_BIG_ERROR:.0%}); the times do not follow t = c + n*beta; re-run on a quiet machine")
    return fit


def fit_gamma(sizes: Sequence[float], times: Sequence[float], comm_times: Sequence[float],
              reduced_bytes: Sequence[float], name: str = "reduction") -> float | None:
    """γ (s/B) from the excess of measured over predicted communication time.

    ``reduced_bytes[i]`` is the number of bytes the critical path reduces for
    point i (``(p-1)/p·n`` for ring all-reduce).  Returns ``None`` when the
    excess is not significant, that is when reductions hide behind the
    transfers (gloo overlaps them) or the fitted γ is not positive; the link
    file then carries no γ rather than a number made of noise.
    """
    t = np.asarray(times, float)
    excess = t - np.asarray(comm_times, float)
    r = np.asarray(reduced_bytes, float)
    if len(t) < MIN_SIZES or not np.any(r > 0):
        return None
    w = 1.0 / t
    g = float(np.sum(w * w * r * excess) / np.sum(w * w * r * r))
    explained = np.abs(g * r) / t
    return g if g > 0 and float(np.median(explained)) > 0.02 else None
