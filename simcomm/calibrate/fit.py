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

Bad measurements are refused with one line, never fitted into a silently
wrong link file: fewer than 3 distinct sizes, times that fall notably as the
size grows (see :func:`check_monotone`), non-finite values, or a fit whose
α or β comes out non-positive.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import least_squares

from simcomm.errors import ConfigError

__all__ = ["CalibrationError", "Fit", "fit_alpha_beta", "fit_bandwidth", "fit_linear", "fit_gamma",
           "check_monotone", "MIN_SIZES", "DIP_TOLERANCE"]

#: fewest distinct message sizes a fit accepts (two points always fit a line exactly)
MIN_SIZES = 3
#: a larger message may be this much faster than a smaller one before we call it non-monotone
DIP_TOLERANCE = 0.25


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
        return tuple(t - p for t, p in zip(self.times, self.predicted))

    @property
    def rel_errors(self) -> tuple[float, ...]:
        return tuple((p - t) / t for t, p in zip(self.times, self.predicted))

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
               name: str, *, strict: bool = True) -> Fit:
    """Fit ``t = Σ_k x_k · columns[k]`` in relative least squares; columns are per point.

    ``strict`` refuses a non-positive unknown (callers that refine the fit pass False).
    """
    n, t = _points(sizes, times, name)
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
    params = {k: float(v) for k, v in zip(keys, x)}
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


def fit_alpha_beta(sizes: Sequence[float], times: Sequence[float], name: str = "link") -> Fit:
    """Fit one-way point-to-point times to ``t = α + n·β``.

    First a joint fit in relative least squares.  Real stacks bend the line
    at small sizes (software latency that large transfers hide, token-bucket
    bursts), and a joint fit then trades bandwidth for latency.  So when at
    least two points are bandwidth-dominated (``n·β ≥ α`` in the joint fit)
    and at least one is latency-dominated, β is re-fitted on the former
    alone (relative least squares of ``t = c + n·β``: the slope is what
    matters for big messages) and α on the latter with that β held fixed.
    If that leaves α ≤ 0, the small messages went out faster than the
    sustained rate (a token-bucket burst): α is then their smallest time.
    """
    n = np.asarray(sizes, dtype=float).ravel()
    joint = fit_linear({"alpha": np.ones_like(n), "beta": n}, times, sizes, name, strict=False)
    t = np.asarray(times, float).ravel()
    big = n * joint.beta >= max(joint.alpha, 0.0)
    if not np.any(~big):  # no latency-dominated point: the smallest size stands for latency
        big = n > n.min()
    if len(np.unique(n[big])) < 2 or joint.beta <= 0:
        return fit_linear({"alpha": np.ones_like(n), "beta": n}, times, sizes, name)
    slope = least_squares(lambda x: (x[0] + n[big] * x[1] * 1e-9) / t[big] - 1.0,
                          [joint.alpha, joint.beta * 1e9], method="lm").x[1] * 1e-9
    small = ~big
    alpha = float(np.sum((t[small] - n[small] * slope) / t[small] ** 2) / np.sum(1.0 / t[small] ** 2))
    if slope > 0 and not alpha > 0:
        # Small messages that fit a token-bucket burst (or NIC/driver buffers) leave at line rate,
        # so n*beta at the sustained rate over-counts them: their time is latency alone.
        alpha = float(np.min(t[small]))
    for k, v in (("beta", slope), ("alpha", alpha)):
        if not v > 0:
            raise CalibrationError(
                f"{name}: fitted {k} = {v:.3g} is not positive; the measurements do not follow "
                f"t = alpha + n*beta (too noisy, or sizes too small to show bandwidth)")
    pred = alpha + n * slope
    ss_tot = float(np.sum((t - t.mean()) ** 2))
    r2 = 1.0 - float(np.sum((t - pred) ** 2)) / ss_tot if ss_tot > 0 else 1.0
    return Fit(name, {"alpha": alpha, "beta": float(slope)}, joint.sizes, joint.times,
               tuple(map(float, pred)), r2)


def fit_bandwidth(sizes: Sequence[float], times: Sequence[float], name: str = "link",
                  min_size: float = 262144) -> Fit:
    """β alone from the bandwidth-dominated points (``n >= min_size``): ``t = c + n·β``.

    For a path whose latency is known from another fit (the cross-leaf
    ping-pong of a two-tier cluster, where only the trunk's rate is new); α is
    reported as the intercept clipped at 0 and is not used.
    """
    n = np.asarray(sizes, float).ravel()
    t = np.asarray(times, float).ravel()
    big = n >= min_size
    if len(np.unique(n[big])) < 2:
        raise CalibrationError(f"{name}: needs at least 2 sizes >= {min_size:.0f} B to fit a bandwidth")
    beta, c = np.polyfit(n[big], t[big], 1)
    if not beta > 0:
        raise CalibrationError(f"{name}: fitted beta = {beta:.3g} is not positive; the times do not grow with size")
    alpha = max(float(c), 0.0)
    pred = alpha + n * beta
    ss_tot = float(np.sum((t - t.mean()) ** 2))
    r2 = 1.0 - float(np.sum((t - pred) ** 2)) / ss_tot if ss_tot > 0 else 1.0
    return Fit(name, {"alpha": alpha, "beta": float(beta)}, tuple(map(float, n)), tuple(map(float, t)),
               tuple(map(float, pred)), r2)


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
