"""``simcomm validate``: rerun the seed-paper validation cases and print or write the tables.

``--write FILE`` regenerates docs/validation.md atomically (temp file + rename);
``--json`` prints machine output; the default prints one rich table per case.
"""

from __future__ import annotations

from pathlib import Path

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from simcomm.cli.console import print_json, stderr, stdout, table
from simcomm.fileio import write_text

__all__ = ["validate_command", "write_atomic"]


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` via a temp file in the same folder, so no partial file is left."""
    write_text(path, text)


def _print(results, console) -> None:
    for res in results:
        t = table(f"{res.name}: {res.title} ({res.paper})",
                  [("row", "left"), ("reported", "right"), ("predicted", "right"), ("error", "right"),
                   ("role", "left"), ("verdict", "left")])
        for r in res.rows:
            t.add_row(r.label, f"{r.reported:.4g}", f"{r.predicted:.4g}", f"{r.error_pct:+.1f} %", r.role, r.verdict)
        console.print(t)
        for line in res.calibrated:
            console.print(f"calibrated: {line}")
        for line in res.assumptions:
            console.print(f"assumed: {line}")


def validate_command(
    case: list[str] | None = typer.Option(None, "--case", help="Case name (repeatable; default: all)."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable JSON."),
    write: Path | None = typer.Option(None, "--write", help="Regenerate a markdown file (docs/validation.md)."),
    quiet: bool = typer.Option(False, "--quiet", help="No progress bar."),
) -> None:
    """Reproduce the seed papers' numbers: predicted vs reported, error and verdict per row."""
    from simcomm.validation import CASES, render_markdown, run_cases, with_other_sections

    names = [CASES.entry(n).name for n in case] if case else list(CASES.names())
    if write is not None:
        from simcomm.outpath import check_output_path

        write = check_output_path(write, "--write")  # a missing folder or a full disk, before the cases run
    if quiet or as_json:
        results = run_cases(names)
    else:
        cols = (TextColumn("validating"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
        with Progress(*cols, console=stderr(), transient=True) as bar:
            task = bar.add_task("cases", total=len(names))
            results = run_cases(names, progress=lambda _name: bar.advance(task))
    if write is not None:
        # the sections other scripts generate (the Megatron-LM tables) are kept as they are
        old = write.read_text(encoding="utf-8") if write.is_file() else None
        write_atomic(write, with_other_sections(render_markdown(results), old))
    if as_json:
        print_json([r.to_dict() for r in results])
    elif write is None:
        _print(results, stdout())
    else:
        stdout().print(f"wrote {write} ({len(results)} cases)")
