"""Markdown twin of the HTML what-if report: same sections, plots as PNG files beside it."""

from __future__ import annotations

from pathlib import Path

from simcomm.fileio import write_bytes
from simcomm.report.html import CAPTIONS
from simcomm.whatif.results import input_columns, write_text_atomic
from simcomm.whatif.summary import assumptions, findings, inputs_table, ranked_table

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


def render_markdown(sweep: dict, rows: list[dict], images: dict[str, str]) -> str:
    """The report as Markdown; ``images`` maps figure name -> relative PNG path."""
    q = sweep.get("question") or "What if the cluster, network or strategy changed?"
    out = ["# simcomm what-if report", "", f"> {md_text(q)}", "",
           f"{len(rows)} point(s); {sum(r.get('status') == 'ok' for r in rows)} simulated.", "",
           "## Inputs", "", _md_table(["parameter", "value"], inputs_table(sweep)), "", "## Summary", ""]
    out += [f"- {s}" for s in findings(sweep, rows)]
    out += ["", "## Ranked configurations", "", "Best first, by time per sample (iteration time / global batch).",
            "", _md_table(*ranked_table(sweep, rows)), ""]
    shared = assumptions(rows)
    if shared:
        out += ["## Assumptions", "", "Shared by every simulated point (each point's own: results.json).", ""]
        out += [f"- {md_text(a)}" for a in shared] + [""]
    for name, rel in images.items():
        out += [f"## {name.capitalize()}", "", f"![{name} plot]({rel})", "", f"*{CAPTIONS.get(name, '')}*", ""]
    bad = [r for r in rows if r.get("status") in ("failed", "not-applicable")]
    if bad:
        keys = [k for k in input_columns(sweep) if any(r.get(k) is not None for r in bad)][:6]
        out += ["## Failed and not-applicable points", "",
                _md_table([*keys, "status", "why"], [[*(str(r.get(k)) for k in keys), r["status"],
                                                      str(r.get("error") or r.get("reason"))] for r in bad]), ""]
    return "\n".join(out) + "\n"


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
