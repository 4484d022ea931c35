"""Rich console helpers shared by every command (the only rich importer besides commands)."""

from __future__ import annotations

import json
import sys

from rich.console import Console
from rich.table import Table

__all__ = ["stdout", "stderr", "table", "print_json"]


def stdout() -> Console:
    """Standard output: wrapped at the terminal's width on a terminal, never wrapped otherwise.

    Output that is not a terminal is read by programs (tests, pipes, ``grep``): a line there is never
    folded, whatever ``COLUMNS`` or the length of a path in it, and tables are laid out at a fixed width
    so golden files stay stable whatever runs the tests.
    """
    if sys.stdout.isatty():
        return Console(highlight=False, soft_wrap=False)
    return Console(width=120, highlight=False, soft_wrap=True)


def stderr() -> Console:
    return Console(stderr=True, highlight=False, soft_wrap=True)


def table(title: str, columns: list[tuple[str, str]]) -> Table:
    """A table with (header, justify) columns in the house style."""
    t = Table(title=title, title_justify="left", header_style="bold")
    for header, justify in columns:
        t.add_column(header, justify=justify)
    return t


def print_json(obj) -> None:
    """Machine output: sorted keys, stable float repr, newline-terminated."""
    sys.stdout.write(json.dumps(obj, indent=2, sort_keys=True) + "\n")
