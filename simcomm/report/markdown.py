"""Markdown rendering of the what-if report document (:mod:`simcomm.report.document`), plots as PNGs beside it."""

from __future__ import annotations

from pathlib import Path

from simcomm.fileio import write_bytes
from simcomm.report.document import Block, Bullets, Figure, Heading, Paragraph, Quote, Table, whatif_document
from simcomm.whatif.results import write_text_atomic

__all__ = ["md_text", "render_markdown", "write_markdown"]

# Characters that start Markdown or raw-HTML constructs anywhere in a line, and those that do only at its
# start (heading, list, quote); CommonMark lets any ASCII punctuation be backslash-escaped.
_ACTIVE = set("\\`*_[]<>|~&")
_LEADING = set("#-+=>")


def md_text(text: str) -> str:
    """User text (the question) as one literal Markdown line: whitespace collapsed, markup escaped.

    ``<script>``, ``[link](url)``, ``**bold**``, a leading ``# `` or ``1.``
    and embedded newlines all show as typed instead of becoming HTML, links,
    emphasis, headings, lists or new paragraphs.
    """
    line = " ".join(str(text).split())
    out = "".join("\\" + c if c in _ACTIVE else c for c in line)
    if out[:1] in _LEADING:
        out = "\\" + out
    head = len(out) - len(out.lstrip("0123456789"))  # "1. " or "1) " would start an ordered list
    if head and out[head:head + 1] in (".", ")"):
        out = out[:head] + "\\" + out[head:]
    return out


def _md_table(head, body) -> str:
    esc = [[c.replace("|", "\\|").replace("\n", " ") for c in row] for row in [head, *body]]
    lines = ["| " + " | ".join(esc[0]) + " |", "|" + "|".join("---" for _ in head) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in esc[1:]]
    return "\n".join(lines)


def _block(b: Block, images: dict[str, str]) -> list[str]:
    if isinstance(b, Heading):
        return ["#" * b.level + " " + b.text]
    if isinstance(b, Quote):
        return [f"> {md_text(b.text)}"]
    if isinstance(b, Paragraph):
        return [b.text]
    if isinstance(b, Bullets):
        return [f"- {md_text(x)}" for x in b.items]
    if isinstance(b, Table):
        return [_md_table(b.head, b.body)]
    if isinstance(b, Figure):
        return [f"![{b.name} plot]({images[b.name]})", "", f"*{b.caption}*"]
    raise TypeError(f"unknown report block {b!r}")  # pragma: no cover - the model is closed


def render_markdown(sweep: dict, rows: list[dict], images: dict[str, str]) -> str:
    """The report as Markdown (:func:`~simcomm.report.document.whatif_document`); ``images``: figure -> PNG path."""
    out: list[str] = []
    for b in whatif_document(sweep, rows, tuple(images)):
        out += _block(b, images) + [""]
    return "\n".join(out)


def write_markdown(path: Path, sweep: dict, rows: list[dict], figs: dict[str, bytes]) -> Path:
    """Write ``path`` (report.md) and its PNGs (``<stem>-<figure>.png``) beside it, each atomically."""
    path = Path(path)
    images = {}
    for name, png in figs.items():
        rel = f"{path.stem}-{name}.png"
        write_bytes(path.parent / rel, png)
        images[name] = rel
    write_text_atomic(path, render_markdown(sweep, rows, images))
    return path
