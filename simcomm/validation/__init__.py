"""Validation against the seed papers' own numbers (``simcomm validate``, docs/validation.md).

One module per paper case registers itself in :data:`CASES`; :func:`run_cases`
runs them in a fixed order and :func:`render_markdown` turns the results into
the committed docs/validation.md (byte-identical for the same code).
"""

from __future__ import annotations

from simcomm.validation import seed000, seed001, seed002, seed003, seed004  # noqa: F401, E402  (registration)
from simcomm.validation.base import CASES, CaseResult, Row
from simcomm.validation.render import render_markdown, with_other_sections

__all__ = ["CASES", "CaseResult", "Row", "run_cases", "render_markdown", "case_names", "with_other_sections"]


def case_names() -> list[str]:
    """Registered cases in registration (= document) order."""
    return list(CASES.names())


def run_cases(names: list[str] | None = None, progress=None) -> list[CaseResult]:
    """Run the named cases (all by default), calling ``progress(name)`` after each."""
    out = []
    for name in names or case_names():
        out.append(CASES.get(name)())
        if progress is not None:
            progress(name)
    return out
