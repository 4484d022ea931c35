"""Calibrating the roofline's compute factor on single-GPU times from allowed sources.

DEVELOPERS.md allows calibration on the seed papers (and the other listed papers and tables)
and on this project's own measurements; published training benchmarks of vendors and
frameworks (NVIDIA DeepLearningExamples READMEs, Lambda's runs, MLPerf ...) are an independent
check that is neither collected nor fitted here.  ``data/compute_anchors.json`` holds the
allowed rows: device, zoo model, per-GPU batch, precision, what was timed, seconds, source, the
row quoted.

* A ``fit`` row sets the one CNN compute factor of its device (at most one unknown per
  device): e_c is solved so the synthesized time reproduces the row exactly, with the memory
  factor held at :data:`~simcomm.traces.devices.DEFAULT_MEMORY_EFF`.  The row is then reported
  only as a calibration (``reported_as`` names where).
* A ``predict`` row is predicted with the registry's factors; :func:`evaluate` reports its error.

``measures`` says what the row timed: ``iteration`` (forward + backward + optimizer step) or
``forward+backward`` (a parameter-server worker's compute; the update runs on the server).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

from simcomm.errors import ConfigError
from simcomm.traces.devices import DEFAULT_MEMORY_EFF, DEVICES, get_device

__all__ = ["Anchor", "Fit", "Prediction", "load_anchors", "predict_seconds", "fit_row", "fit_all", "evaluate",
           "markdown_tables"]

ROLES = ("fit", "predict")
MEASURES = ("iteration", "forward+backward")


@dataclass(frozen=True)
class Anchor:
    """One measured single-GPU compute time from an allowed source (a row of ``compute_anchors.json``)."""

    id: str
    device: str
    model: str
    batch: int
    dtype: str
    optimizer: str
    measures: str  # "iteration" or "forward+backward"
    seconds: float
    role: str
    source: str
    row: str  # the source's row, quoted
    stack: str
    note: str = ""
    reported_as: str = ""  # the validation row a fit row is reported as (a calibration)


@dataclass(frozen=True)
class Fit:
    """The compute efficiency that reproduces one anchor."""

    device: str
    dtype: str
    compute_eff: float
    memory_eff: float
    row: str


@dataclass(frozen=True)
class Prediction:
    """A measured row against the calibrated roofline."""

    row: Anchor
    predicted: float  # seconds
    compute_eff: float
    source: str  # where the factor came from

    @property
    def error(self) -> float:
        """Relative error of the prediction, (predicted - measured) / measured (+: slower than measured)."""
        return self.predicted / self.row.seconds - 1.0


def _read(name: str) -> dict:
    return json.loads(Path(str(resources.files("simcomm.traces") / "data" / name)).read_text(encoding="utf-8"))


@lru_cache(maxsize=1)
def load_anchors() -> tuple[Anchor, ...]:
    """Every anchor row, in file order."""
    rows = []
    for r in _read("compute_anchors.json")["anchors"]:
        row = Anchor(**r)
        if row.role not in ROLES or row.measures not in MEASURES:
            raise ConfigError(f"compute anchor {row.id!r}: role/measures must be one of {ROLES}/{MEASURES}")
        rows.append(row)
    return tuple(rows)


def _seconds(row: Anchor, compute_eff: float, memory_eff: float) -> float:
    from simcomm.traces.synth import synth_trace

    optimizer = row.optimizer if row.measures == "iteration" else "none"
    trace = synth_trace(row.model, row.device, row.batch, row.dtype, optimizer, compute_eff, memory_eff)
    if row.measures == "iteration":
        return trace.iteration_s
    return sum(x.forward_s + x.backward_s for x in trace.layers)


def predict_seconds(row: Anchor, compute_eff: float | None = None, memory_eff: float | None = None) -> float:
    """Seconds the roofline predicts for ``row`` (the registry's factors unless given)."""
    eff = get_device(row.device).efficiency(row.dtype)
    return _seconds(row, compute_eff or eff.compute, memory_eff or eff.memory)


def fit_row(row: Anchor, memory_eff: float = DEFAULT_MEMORY_EFF) -> Fit:
    """Solve e_c in (0, 1] so the roofline reproduces ``row``; unreachable rows are an error naming the row."""
    lo, hi = 1e-4, 1.0
    if _seconds(row, hi, memory_eff) > row.seconds:
        raise ConfigError(f"compute anchor {row.id!r}: {row.seconds} s is faster than the roofline at "
                          f"compute_eff 1 with memory_eff {memory_eff}; no physical fit")
    for _ in range(60):  # bisection on a monotone function: 60 halvings reach ~1e-18 relative
        mid = (lo * hi) ** 0.5 if hi / lo > 4 else (lo + hi) / 2
        if _seconds(row, mid, memory_eff) > row.seconds:
            lo = mid
        else:
            hi = mid
    return Fit(row.device, row.dtype, hi, memory_eff, row.id)


def fit_all() -> dict[str, Fit]:
    """The fit of every ``role == "fit"`` row, keyed by device: at most one unknown per device."""
    fits: dict[str, Fit] = {}
    for row in load_anchors():
        if row.role == "fit":
            if row.device in fits:
                raise ConfigError(f"compute anchors {fits[row.device].row!r} and {row.id!r} both fit {row.device}")
            fits[row.device] = fit_row(row)
    return fits


def evaluate() -> list[Prediction]:
    """Every ``predict`` row with the registry's (calibrated or borrowed) factors."""
    out = []
    for row in load_anchors():
        if row.role == "predict":
            eff = get_device(row.device).efficiency(row.dtype)
            out.append(Prediction(row, _seconds(row, eff.compute, eff.memory), eff.compute, eff.source))
    return out


def _pct(x: float) -> str:
    text = f"{x:+.0%}"
    return "0%" if text in ("+0%", "-0%") else text


def _ms(s: float) -> str:
    return f"{s * 1e3:.4g} ms"


def markdown_tables() -> str:
    """The fits, every prediction and each GPU's CNN factors as Markdown (docs/traces.md prints them)."""
    rows = {r.id: r for r in load_anchors()}
    out = ["| device | fitted precision | compute_eff | memory_eff | fitted on | measured | reported as |",
           "|---|---|---:|---:|---|---:|---|"]
    for device, fit in sorted(fit_all().items()):
        eff = get_device(device).efficiency(fit.dtype)
        r = rows[fit.row]
        out.append(f"| {device} | {fit.dtype} | {eff.compute:g} | {eff.memory:g} | `{fit.row}` ({r.model} b{r.batch}, "
                   f"{r.measures}) | {_ms(r.seconds)} | {r.reported_as or 'not reported'} |")
    out += ["", "| measured row | model, batch | precision | measured | predicted | error |",
            "|---|---|---|---:|---:|---:|"]
    for p in evaluate():
        r = p.row
        out.append(f"| `{r.id}` | {r.model}, b{r.batch} | {r.dtype} | {_ms(r.seconds)} | {_ms(p.predicted)} | "
                   f"{_pct(p.error)} |")
    out += ["", "| GPU | precision | compute_eff | source |", "|---|---|---:|---|"]
    for name in DEVICES:
        dev = get_device(name)
        if dev.kind != "gpu":
            continue
        for dtype in ("fp32", "fp16", "bf16"):
            if dtype in dev.peak_flops or (dtype == "fp32" and dev.fp32_math in dev.peak_flops):
                eff = dev.efficiency(dtype)
                out.append(f"| {name} | {dtype} | {eff.compute:g} | {eff.source} |")
    return "\n".join(out) + "\n"
