"""The validation case machinery: a paper's setup, its reported numbers and our predictions.

A *case* reproduces one quantitative result of a seed paper.  It states the
setup, the assumptions it had to make, at most two unknowns calibrated on
the paper's baseline row, and then compares predicted and reported values
row by row.  Every row carries its *role*:

* ``calibration``: the row the unknowns were fitted on; its error is ~0 by
  construction and is shown only to make the fit visible;
* ``input``: a reported value used as an input (e.g. a measured compute
  time the paper gives); not a prediction either;
* ``not-a-test``: true by construction or chosen to match (a row no model
  could get wrong, or one whose setup was picked to reproduce it): shown
  for completeness, never counted;
* ``prediction``: computed from the setup and the calibrated unknowns only;
  only these rows are tallied.

:func:`check_no_leak` enforces the science rule mechanically: a calibration
function only ever sees the rows marked ``calibration``.  Every fitted value
is a :class:`Fit` with the physical range it must lie in (a goodput never
above line rate, a time never negative); :meth:`Fit.check` refuses one that
leaves it, and a test runs every case's fits through it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from simcomm.errors import PlanError
from simcomm.registry import Registry

__all__ = ["Row", "Reported", "CaseResult", "CASES", "case", "error_pct", "verdict", "check_no_leak",
           "ROLES", "TOLERANCE", "Fit"]

ROLES = ("calibration", "input", "not-a-test", "prediction")
#: |error| up to this fraction is a "match"; up to twice it a "near miss"; beyond, a "miss"
TOLERANCE = 0.15

CASES: Registry = Registry("validation case")


@dataclass(frozen=True)
class Reported:
    """One number a paper reports (``where``: table/figure/section it comes from)."""

    label: str
    value: float
    unit: str
    where: str


@dataclass(frozen=True)
class Row:
    """Predicted against reported for one reported number."""

    label: str
    reported: float
    predicted: float
    unit: str
    role: str
    where: str = ""
    note: str = ""

    def __post_init__(self):
        if self.role not in ROLES:
            raise PlanError(f"role: {self.role!r} is not valid; valid choices: {', '.join(ROLES)}")

    @property
    def error_pct(self) -> float:
        return error_pct(self.predicted, self.reported)

    @property
    def verdict(self) -> str:
        return verdict(self)


@dataclass(frozen=True)
class Fit:
    """One calibrated unknown and the physical range it must stay in (``low <= value <= high``)."""

    name: str
    value: float
    unit: str
    low: float
    high: float
    why: str  # where the bounds come from ("goodput cannot exceed line rate")
    fitted_on: str = ""  # the calibration row

    def check(self) -> Fit:
        if not (math.isfinite(self.value) and self.low <= self.value <= self.high):
            raise PlanError(f"calibration: {self.name} = {self.value:.4g} {self.unit} is outside its physical range "
                            f"[{self.low:g}, {self.high:g}] ({self.why})")
        return self

    def describe(self) -> str:
        return (f"{self.name} = {self.value:.4g} {self.unit}" + (f", from {self.fitted_on}" if self.fitted_on else "")
                + f" (must lie in [{self.low:g}, {self.high:g}]: {self.why})")


@dataclass(frozen=True)
class CaseResult:
    """A finished case: what was assumed, what was fitted, and every row."""

    name: str
    title: str
    paper: str
    setup: tuple[str, ...]
    assumptions: tuple[str, ...]
    calibrated: tuple[str, ...]
    rows: tuple[Row, ...]
    findings: tuple[str, ...] = ()
    fidelity: str = "flow"
    #: the model behind the predictions: equations and how reported numbers are derived
    method: tuple[str, ...] = ()
    extra: dict = field(default_factory=dict, compare=False)
    #: the calibrated unknowns with their physical ranges (each is also described in ``calibrated``)
    fits: tuple[Fit, ...] = ()

    def predictions(self) -> tuple[Row, ...]:
        return tuple(r for r in self.rows if r.role == "prediction")

    def to_dict(self) -> dict:
        return {"name": self.name, "title": self.title, "paper": self.paper, "setup": list(self.setup),
                "assumptions": list(self.assumptions), "calibrated": list(self.calibrated),
                "fidelity": self.fidelity, "findings": list(self.findings), "method": list(self.method),
                "fits": [{"name": f.name, "value": f.value, "unit": f.unit, "low": f.low, "high": f.high,
                          "why": f.why, "fitted_on": f.fitted_on} for f in self.fits],
                "rows": [{"label": r.label, "reported": r.reported, "predicted": r.predicted, "unit": r.unit,
                          "role": r.role, "where": r.where, "error_pct": r.error_pct, "verdict": r.verdict,
                          "note": r.note} for r in self.rows]}


def explain_misses(rows, closes: tuple[tuple[str, str], ...]) -> tuple[Row, ...]:
    """``rows`` with every missed or nearly missed prediction's note saying what would close it.

    ``closes`` pairs a part of a label with the quantity the paper does not publish (or the effect simcomm
    does not model) that would close the row; the first pair whose part the label contains is used.
    """
    out = []
    for row in rows:
        why = next((text for part, text in closes if part in row.label), None)
        if row.role == "prediction" and row.verdict in ("miss", "near miss") and why:
            row = replace(row, note=f"{row.note}; closes with: {why}" if row.note else f"closes with: {why}")
        out.append(row)
    return tuple(out)


def error_pct(predicted: float, reported: float) -> float:
    """Signed error of the prediction in percent of the reported value."""
    if reported == 0:
        return 0.0 if predicted == 0 else math.inf
    return 100.0 * (predicted - reported) / abs(reported)


def verdict(row: Row) -> str:
    """``calibrated``/``input``/``not a test`` for non-predictions, else match / near miss / miss by |error|."""
    if row.role != "prediction":
        return {"calibration": "calibrated", "input": "input", "not-a-test": "not a test"}[row.role]
    e = abs(row.error_pct) / 100.0
    return "match" if e <= TOLERANCE else "near miss" if e <= 2 * TOLERANCE else "miss"


def check_no_leak(reported: dict[str, Reported], used: set[str], allowed: set[str]) -> None:
    """Raise if a calibration read a reported value outside the baseline rows it may use."""
    leaked = sorted(set(used) - set(allowed))
    if leaked:
        raise PlanError(f"calibration: read reported rows {', '.join(leaked)}; allowed only "
                        f"{', '.join(sorted(allowed))}")
    missing = sorted(set(used) - set(reported))
    if missing:
        raise PlanError(f"calibration: unknown reported rows {', '.join(missing)}")


class Baseline:
    """A read-only view of the reported values that records which ones were read.

    Cases hand calibration code a ``Baseline`` restricted to the calibration
    rows, so reading a predicted row raises instead of silently fitting it.
    """

    def __init__(self, reported: dict[str, Reported], allowed: set[str]):
        self._reported = reported
        self._allowed = frozenset(allowed)
        self.used: set[str] = set()

    def __getitem__(self, key: str) -> float:
        check_no_leak(self._reported, {key}, set(self._allowed))
        self.used.add(key)
        return self._reported[key].value


def case(name: str, *, summary: str, reference: str):
    """Register a case function ``() -> CaseResult`` under ``name``."""
    def deco(fn):
        CASES.add(name, fn, summary=summary, reference=reference)
        return fn
    return deco
