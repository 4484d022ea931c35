"""``simcomm report RESULTS_DIR``: rebuild the what-if report from saved results, without simulating."""

from __future__ import annotations

from pathlib import Path

import typer

from simcomm.cli.app import app
from simcomm.cli.console import stderr, stdout

__all__ = ["report_command"]


@app.command("report")
def report_command(
    results: Path = typer.Argument(..., help="The --out directory of a simcomm whatif run."),
    html: bool = typer.Option(True, "--html/--no-html", help="Also write the self-contained report.html."),
    question: str | None = typer.Option(None, "--question", help="Replace the question shown."),
) -> None:
    """Rebuild report.md (and report.html) from RESULTS_DIR/results.json or points.jsonl."""
    from simcomm.cli.whatif_cmd import print_summary
    from simcomm.report.html import write_reports
    from simcomm.whatif.results import load_sweep

    sweep, rows = load_sweep(results)
    if question is not None:
        sweep = {**sweep, "question": question}
    for p in write_reports(results, sweep, rows, html_report=html):
        stderr().print(f"report: {p}")
    print_summary(sweep, rows, results, stdout())
