"""Rich console helpers shared by every command (the only rich importer besides commands)."""

from __future__ import annotations

import json
import sys

from rich.console import Console
from rich.table import Table

__all__ = ["stdout", "stderr", "table", "print_json", "StageBar"]


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


class StageBar:
    """A transient progress bar on stderr naming the stage a long run is in, with the time elapsed.

    Only on a terminal and only when ``enabled`` (never with ``--json``, ``--csv`` or on a pipe: nothing
    a program reads gets a bar).  Used as a context manager; the instance is the library's
    ``progress(stage)`` callback.  The bar pulses (a stage's length is not known in advance) and
    appears only once the run has taken :data:`AFTER_S` seconds, so quick runs print nothing extra.
    """

    #: seconds before the bar appears
    AFTER_S = 2.0

    def __init__(self, enabled: bool = True):
        self.console = stderr()
        self.on = enabled and self.console.is_terminal
        self.progress = None
        self.task = None
        self.stage = "starting"

    def __enter__(self):
        if self.on:
            import threading

            self._timer = threading.Timer(self.AFTER_S, self._show)
            self._timer.daemon = True
            self._timer.start()
        return self

    def _show(self) -> None:
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        self.progress = Progress(TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(),
                                 console=self.console, transient=True)
        self.progress.start()
        self.task = self.progress.add_task(self.stage, total=None)

    def __call__(self, stage: str) -> None:
        self.stage = stage
        if self.progress is not None and self.task is not None:
            self.progress.update(self.task, description=stage)

    def __exit__(self, *exc) -> None:
        if self.on:
            self._timer.cancel()
            self._timer.join()
        if self.progress is not None:
            self.progress.stop()
