"""``simcomm report RESULTS_DIR``: rebuild the what-if report from saved results, without simulating.

The rows come from the store (``sweep.json`` + ``points.jsonl``, read by
:func:`simcomm.sweep.saved.read_saved`), which every point was written to as
it finished, so an interrupted or partly damaged sweep still reports every
good point; one ``warning:`` line says what was skipped or is missing.  A
directory with only ``results.json`` (no store) is read from that.  A
damaged ``sweep.json`` is one ``error:`` line, exit status 2.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from simcomm.cli.console import stderr, stdout
from simcomm.errors import ConfigError

__all__ = ["report_command"]


def _results_json(d: Path, sweep: dict | None = None) -> tuple[dict, list[dict]] | None:
    """(sweep, rows) of ``results.json`` when it is well formed (and describes ``sweep``, if given), else None."""
    from simcomm.sweep.saved import sweep_problem

    try:
        blob = json.loads((d / "results.json").read_bytes().decode("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        return None
    if (not isinstance(blob, dict) or sweep_problem(blob.get("sweep")) is not None
            or not isinstance(blob.get("rows"), list) or not all(isinstance(r, dict) for r in blob["rows"])
            or not blob["rows"] or (sweep is not None and blob["sweep"] != sweep)):
        return None
    return blob["sweep"], blob["rows"]


def _load(d: Path) -> tuple[dict, list[dict], str | None]:
    """(sweep, rows, warning) of a sweep directory; a ConfigError when there is nothing to report."""
    from simcomm.sweep.saved import SWEEP_FILE, read_saved
    from simcomm.whatif.results import rows_from_records

    if not d.is_dir():
        raise ConfigError(f"RESULTS_DIR: {str(d)!r} is not a directory")
    if not (d / SWEEP_FILE).exists():
        got = _results_json(d) if (d / "results.json").exists() else None
        if got is None:
            what = "a damaged results.json and no" if (d / "results.json").exists() else "neither results.json nor"
            raise ConfigError(f"RESULTS_DIR: {str(d)!r} holds {what} {SWEEP_FILE}; give the --out directory of a "
                              "simcomm whatif run")
        return *got, None
    saved = read_saved(d)
    store = d / "points.jsonl"
    if not saved.records:
        # A store written before records carried checksums: its complete results.json still reports.
        got = _results_json(d, saved.sweep)
        detail = f"{store}: {saved.scan.problem() or 'no stored point'}"
        if got is not None:
            return *got, f"{detail}; the report is rebuilt from results.json instead"
        raise ConfigError(f"RESULTS_DIR: no point of the sweep in {str(d)!r} has a stored result ({detail})")
    return saved.sweep, rows_from_records(saved.records), saved.warning(store)


def report_command(
    results: Path = typer.Argument(..., help="The --out directory of a simcomm whatif run."),
    html: bool = typer.Option(True, "--html/--no-html", help="Also write the self-contained report.html."),
    question: str | None = typer.Option(None, "--question", help="Replace the question shown."),
) -> None:
    """Rebuild report.md (and report.html) from RESULTS_DIR/sweep.json + points.jsonl (or results.json)."""
    from simcomm.cli.whatif_cmd import print_summary
    from simcomm.report.html import write_reports

    sweep, rows, warning = _load(results)
    if warning:
        # Plain write, not rich: a warning quotes file names and reasons that must not be read as markup.
        sys.stderr.write("warning: " + " ".join(warning.split()) + "\n")
    if question is not None:
        sweep = {**sweep, "question": question}
    try:
        paths = write_reports(results, sweep, rows, html_report=html)
    except OSError as exc:
        raise ConfigError(f"RESULTS_DIR: cannot write the report into {str(results)!r} "
                          f"({exc.strerror or exc})") from None
    for p in paths:
        stderr().print(f"report: {p}", markup=False)
    print_summary(sweep, rows, results, stdout())
