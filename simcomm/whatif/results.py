"""Result tables of a what-if sweep: rows in grid order, written to CSV and JSON atomically.

A row is the point's inputs (every input column, also the defaults the sweep
filled in) followed by its outputs from :func:`simcomm.whatif.point.evaluate`
or, for a failed point, ``status = failed`` and the error line.  The sweep's
description (question, axes, base inputs) lives in ``sweep.json`` beside the
store, written before any point runs, so ``simcomm report DIR`` can rebuild
everything from ``points.jsonl`` even after an interrupted sweep.
"""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

from simcomm.fileio import write_text

__all__ = [
    "EXPOSED_KINDS",
    "OUTPUT_ORDER",
    "SWEEP_FILE",
    "exposed_columns",
    "input_columns",
    "rows_from_records",
    "write_results",
    "write_text_atomic",
]

SWEEP_FILE = "sweep.json"
OUTPUT_ORDER = ("status", "reason", "error", "iteration_s", "rank_mean_s", "compute_s", "dataload_s",
                "comm_exposed_s", "comm_hidden_s", "compression_s", "samples_per_s", "time_per_sample_s",
                "epoch_s", "iterations_per_epoch", "speedup", "baseline_s", "n_ranks", "gpus_per_node_used",
                "model_used", "batch_used", "global_batch", "inter_used", "topology_used", "inter_family",
                "inter_util")
_JSON_ONLY = ("assumed", "kinds", "node_scales")
#: the parallelisms a layout's exposed time is split by (Result.exposed_by), in column order
EXPOSED_KINDS = ("tensor", "context", "expert", "pipeline", "data", "waiting")


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temp file and a rename (never a partial file)."""
    write_text(path, text)


def _clean(v):
    """JSON-safe value: NaN/inf become None."""
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def rows_from_records(records) -> list[dict]:
    """One flat row per record (PointRecord or its dict), in grid order."""
    rows = []
    for rec in sorted(records, key=lambda r: r["index"] if isinstance(r, dict) else r.index):
        d = rec if isinstance(rec, dict) else {"inputs": rec.inputs, "result": rec.result, "error": rec.error}
        row = dict(d["inputs"])
        if d.get("error"):
            row.update({"status": "failed", "error": d["error"]})
        else:
            row.update(d.get("result") or {})
        rows.append({k: _clean(v) for k, v in row.items()})
    return rows


def input_columns(sweep: dict) -> list[str]:
    return list(dict.fromkeys([*sweep.get("base", {}), *(k for k, _ in sweep.get("axes", []))]))


def exposed_columns(rows: list[dict]) -> list[str]:
    """The ``exposed_<kind>_s`` columns some row has, in :data:`EXPOSED_KINDS` order (unknown kinds last)."""
    have = {k for r in rows for k in r if k.startswith("exposed_") and k.endswith("_s")}
    known = [f"exposed_{k}_s" for k in EXPOSED_KINDS]
    return [c for c in known if c in have] + sorted(have - set(known))


def _columns(rows: list[dict], inputs: list[str]) -> list[str]:
    seen = list(inputs)
    outs = list(OUTPUT_ORDER)
    at = outs.index("comm_hidden_s") + 1
    outs[at:at] = exposed_columns(rows)  # only sweeps of layouts that report the split get these columns
    extra = sorted({k for r in rows for k in r} - set(seen) - set(outs) - set(_JSON_ONLY))
    return seen + outs + extra


def _cell(value) -> str:
    """A CSV cell: floats exactly (repr), lists and dicts as sorted JSON, so that a point read back from
    points.jsonl (a resumed sweep) writes the same bytes as one just computed."""
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (list, dict)):
        return json.dumps(value, sort_keys=True)
    return value


def write_results(directory: Path, sweep: dict, rows: list[dict]) -> tuple[Path, Path]:
    """Write results.csv and results.json under ``directory``; returns their paths."""
    directory = Path(directory)
    cols = _columns(rows, input_columns(sweep))
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=cols, lineterminator="\n", extrasaction="ignore")
    w.writeheader()
    for r in rows:
        w.writerow({c: _cell(r.get(c)) for c in cols})
    csv_path, json_path = directory / "results.csv", directory / "results.json"
    write_text_atomic(csv_path, buf.getvalue())
    blob = {"sweep": sweep, "columns": cols, "rows": rows}
    write_text_atomic(json_path, json.dumps(blob, indent=1, sort_keys=True) + "\n")
    return csv_path, json_path
