"""Calibrating the roofline against published single-GPU throughput.

``data/published_throughput.json`` holds measured throughput rows (device,
zoo model, per-GPU batch, precision, value, source, the table row quoted).
Rows with ``role == "fit"`` set the compute efficiency of their (device,
dtype): the roofline's compute factor e_c is solved so that the synthesized
iteration reproduces the row exactly, with the memory factor held at
:data:`~simcomm.traces.devices.DEFAULT_MEMORY_EFF` (one number fits one
factor).  Every other row is a *prediction* made with the factors stored in
the device registry; :func:`evaluate` reports its error.  Rows with ``role ==
"transfer"`` are forward-only V100 rows used to measure how well a factor
fitted on inference (the only published T4 numbers) carries over to training.

Throughput is ``batch / iteration`` for training rows (forward + backward +
optimizer step; the optimizer named in the row) and ``batch / sum(forward)``
for inference rows.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

from simcomm.errors import ConfigError
from simcomm.traces.devices import DEFAULT_MEMORY_EFF, get_device

__all__ = ["Published", "MemoryStatement", "Fit", "Prediction", "load_published", "load_memory_statements",
           "predict_throughput", "fit_row", "fit_all", "evaluate", "transfer_check", "markdown_tables"]

ROLES = ("fit", "predict", "transfer")
KINDS = ("training", "inference")


@dataclass(frozen=True)
class Published:
    """One published measurement (a row of ``published_throughput.json``)."""

    id: str
    device: str
    model: str
    batch: int
    dtype: str
    optimizer: str
    kind: str
    value: float  # samples per second on one GPU
    unit: str
    gpus: int
    role: str
    framework: str
    source: tuple[str, ...]
    row: str
    note: str = ""


@dataclass(frozen=True)
class MemoryStatement:
    """A published memory fact: a run at ``batch`` (``fits``), a maximum batch (``max``) or an ``oom``."""

    id: str
    device: str  # as the source names it
    memory_gib: float  # nominal capacity, GiB
    model: str
    batch: int
    dtype: str
    optimizer: str
    kind: str  # "fits", "max" or "oom"
    statement: str  # quoted from the source
    source: str
    framework: str
    note: str = ""


@dataclass(frozen=True)
class Fit:
    """The compute efficiency that reproduces one published row."""

    device: str
    dtype: str
    compute_eff: float
    memory_eff: float
    row: str


@dataclass(frozen=True)
class Prediction:
    """A published row against the calibrated roofline."""

    row: Published
    predicted: float  # samples per second
    compute_eff: float
    source: str  # where the factor came from

    @property
    def error(self) -> float:
        """Relative error of the prediction, (predicted - measured) / measured."""
        return self.predicted / self.row.value - 1.0


def _path() -> Path:
    return Path(str(resources.files("simcomm.traces") / "data" / "published_throughput.json"))


@lru_cache(maxsize=1)
def _document() -> dict:
    return json.loads(_path().read_text(encoding="utf-8"))


def load_published() -> tuple[Published, ...]:
    """Every throughput row, in file order."""
    rows = []
    for r in _document()["throughput"]:
        row = Published(**{**r, "source": tuple(r["source"])})
        if row.role not in ROLES or row.kind not in KINDS:
            raise ConfigError(f"published row {row.id!r}: role/kind must be one of {ROLES}/{KINDS}")
        rows.append(row)
    return tuple(rows)


def load_memory_statements() -> tuple[MemoryStatement, ...]:
    """Published statements about which configurations fit in GPU memory."""
    return tuple(MemoryStatement(**r) for r in _document()["memory"])


def _rate(row: Published, compute_eff: float, memory_eff: float) -> float:
    from simcomm.traces.synth import synth_trace

    optimizer = row.optimizer if row.kind == "training" else "none"
    trace = synth_trace(row.model, row.device, row.batch, row.dtype, optimizer, compute_eff, memory_eff)
    seconds = trace.iteration_s if row.kind == "training" else sum(x.forward_s for x in trace.layers)
    return row.batch / seconds


def predict_throughput(row: Published, compute_eff: float | None = None, memory_eff: float | None = None) -> float:
    """Samples/s the roofline predicts for ``row`` (the registry's factors unless given)."""
    eff = get_device(row.device).efficiency(row.dtype)
    return _rate(row, compute_eff or eff.compute, memory_eff or eff.memory)


def fit_row(row: Published, memory_eff: float = DEFAULT_MEMORY_EFF) -> Fit:
    """Solve e_c in (0, 1] so the roofline reproduces ``row``; unreachable rows are an error naming the row."""
    lo, hi = 1e-4, 1.0
    if _rate(row, hi, memory_eff) < row.value:
        raise ConfigError(f"published row {row.id!r}: {row.value} {row.unit} is faster than the roofline at "
                          f"compute_eff 1 with memory_eff {memory_eff}; no physical fit")
    for _ in range(60):  # bisection on a monotone function: 60 halvings reach ~1e-18 relative
        mid = (lo * hi) ** 0.5 if hi / lo > 4 else (lo + hi) / 2
        if _rate(row, mid, memory_eff) < row.value:
            lo = mid
        else:
            hi = mid
    return Fit(row.device, row.dtype, hi, memory_eff, row.id)


def fit_all() -> dict[tuple[str, str], Fit]:
    """The fit of every ``role == "fit"`` row, keyed by (device, dtype)."""
    fits = {}
    for row in load_published():
        if row.role == "fit":
            key = (row.device, row.dtype)
            if key in fits:
                raise ConfigError(f"published rows {fits[key].row!r} and {row.id!r} both fit {key}")
            fits[key] = fit_row(row)
    return fits


def evaluate(roles: tuple[str, ...] = ("predict",)) -> list[Prediction]:
    """Every row of ``roles`` predicted with the registry's (calibrated) factors."""
    out = []
    for row in load_published():
        if row.role in roles:
            eff = get_device(row.device).efficiency(row.dtype)
            out.append(Prediction(row, _rate(row, eff.compute, eff.memory), eff.compute, eff.source))
    return out


def transfer_check() -> list[Prediction]:
    """Fit V100 on its forward-only rows, then predict its training rows: the error of the T4 procedure."""
    fits = {row.dtype: fit_row(row) for row in load_published() if row.role == "transfer"}
    out = []
    for row in load_published():
        if row.device == "v100" and row.kind == "training" and row.dtype in fits:
            f = fits[row.dtype]
            out.append(Prediction(row, _rate(row, f.compute_eff, f.memory_eff), f.compute_eff,
                                  f"fitted on {f.row} (forward-only)"))
    return out


def _unit(row: Published) -> str:
    return "img/s" if row.unit == "img/s" else "seq/s"


def _pct(x: float) -> str:
    text = f"{x:+.0%}"
    return "0%" if text in ("+0%", "-0%") else text


def markdown_tables() -> str:
    """The fitted factors, every prediction and the transfer check as Markdown (docs/traces.md prints it)."""
    rows = {r.id: r for r in load_published()}
    out = ["| device | precision | compute_eff | memory_eff | fitted on | measured |", "|---|---|---:|---:|---|---:|"]
    for (device, dtype), fit in sorted(fit_all().items()):
        eff = get_device(device).efficiency(dtype)
        r = rows[fit.row]
        out.append(f"| {device} | {dtype} | {eff.compute:g} | {eff.memory:g} | `{fit.row}` (b{r.batch}) | "
                   f"{r.value:g} {_unit(r)} |")
    out += ["", "| published row | model, batch | precision | stack | measured | predicted | error |",
            "|---|---|---|---|---:|---:|---:|"]
    for p in evaluate():
        r = p.row
        kind = " (fwd)" if r.kind == "inference" else ""
        out.append(f"| `{r.id}` | {r.model}{kind}, b{r.batch} | {r.dtype} | {r.framework.split(',')[0]} | "
                   f"{r.value:g} | {p.predicted:.4g} | {_pct(p.error)} |")
    out += ["", "| V100 training row | measured | predicted from the forward-only fit | error |", "|---|---:|---:|---:|"]
    for p in transfer_check():
        out.append(f"| `{p.row.id}` | {p.row.value:g} | {p.predicted:.4g} | {_pct(p.error)} |")
    return "\n".join(out) + "\n"
