"""The what-if report as one document model, rendered to HTML and to Markdown alike.

:func:`whatif_document` decides *what* the report says (sections, sentences, tables,
figures) once, from the saved rows; :mod:`simcomm.report.html` and
:mod:`simcomm.report.markdown` only decide how it looks.  So the two files cannot drift
apart: a section added here appears in both.
"""

from __future__ import annotations

from dataclasses import dataclass

from simcomm.whatif.results import exposed_columns, input_columns
from simcomm.whatif.summary import assumptions, findings, inputs_table, ranked_table

__all__ = ["Heading", "Paragraph", "Quote", "Bullets", "Table", "Figure", "Block", "whatif_document", "CAPTIONS",
           "FIGURE_TITLES"]


@dataclass(frozen=True)
class Heading:
    text: str
    level: int = 2


@dataclass(frozen=True)
class Paragraph:
    text: str


@dataclass(frozen=True)
class Quote:
    """User text shown as typed (the question): renderers escape it."""

    text: str


@dataclass(frozen=True)
class Bullets:
    items: tuple[str, ...]
    css: str = ""


@dataclass(frozen=True)
class Table:
    head: tuple[str, ...]
    body: tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class Figure:
    name: str
    title: str
    caption: str


Block = Heading | Paragraph | Quote | Bullets | Table | Figure

CAPTIONS = {
    "time": "Iteration time against the varied parameter, one line per strategy (below: scaling efficiency, "
            "per-rank throughput relative to the smallest node count; the dotted line is 90 %).",
    "breakdown": "Where the time goes: compute, data loading, compression and exposed communication stack to "
                 "the iteration time; the hatched bar is communication hidden behind computation.",
    "utilisation": "Mean utilisation of each link family over one iteration (bytes carried / (capacity x "
                   "iteration time), averaged over that family's links).",
    "topology": "The simulated cluster (smallest node count of the sweep).",
}
FIGURE_TITLES = {"time": "Iteration time", "breakdown": "Breakdown", "utilisation": "Link utilisation",
                 "topology": "Topology"}


def whatif_document(sweep: dict, rows: list[dict], figures: tuple[str, ...]) -> list[Block]:
    """Every block of the what-if report, in order; ``figures`` names the plots that exist."""
    q = sweep.get("question") or "What if the cluster, network or strategy changed?"
    doc: list[Block] = [Heading("simcomm what-if report", 1), Quote(q),
                        Paragraph(f"{len(rows)} point(s); {sum(r.get('status') == 'ok' for r in rows)} simulated."),
                        Heading("Inputs"),
                        Table(("parameter", "value"), tuple(tuple(r) for r in inputs_table(sweep))),
                        Heading("Summary"), Bullets(tuple(findings(sweep, rows)), css="findings"),
                        Heading("Ranked configurations"),
                        Paragraph("Best first, by time per sample (iteration time / global batch).")]
    head, body = ranked_table(sweep, rows)
    doc.append(Table(tuple(head), tuple(tuple(r) for r in body)))
    if exposed_columns(rows):
        doc.append(Paragraph("The tensor, context, expert, pipeline and data columns split the exposed "
                             "communication by parallelism (the critical rank's communication not hidden behind its "
                             "compute); waiting is the rest of its exposed time: the pipeline bubble and waits for "
                             "other ranks (docs/strategies-llm.md)."))
    shared = assumptions(rows)
    if shared:
        doc += [Heading("Assumptions"), Paragraph("Shared by every simulated point (each point's own: results.json)."),
                Bullets(tuple(shared))]
    for name in figures:
        doc += [Heading(FIGURE_TITLES.get(name, name.capitalize())),
                Figure(name, FIGURE_TITLES.get(name, name), CAPTIONS.get(name, ""))]
    bad = [r for r in rows if r.get("status") in ("failed", "not-applicable")]
    if bad:
        axes = [k for k, _ in sweep.get("axes", [])]  # the varied inputs first: they tell the points apart
        keys = [k for k in dict.fromkeys([*axes, *input_columns(sweep)])
                if any(r.get(k) is not None for r in bad)][:6]
        doc += [Heading("Failed and not-applicable points"),
                Table((*keys, "status", "why"), tuple((*(str(r.get(k)) for k in keys), str(r["status"]),
                                                        str(r.get("error") or r.get("reason"))) for r in bad))]
    return doc
