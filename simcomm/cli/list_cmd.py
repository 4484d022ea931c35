"""``simcomm list CATALOGUE``: print a registry with names, summaries and sources."""

from __future__ import annotations

import importlib

import typer

from simcomm.cli.console import print_json, stdout, table
from simcomm.errors import UnknownNameError

#: catalogue name -> "module:attribute" of its Registry (imported lazily)
CATALOGUES: dict[str, str] = {
    "links": "simcomm.links:LINKS",
    "topologies": "simcomm.topologies:TOPOLOGIES",
    "fabrics": "simcomm.topologies.two_level:FABRICS",
    "collectives": "simcomm.collectives:ALGORITHMS",
    "cost-models": "simcomm.cost_models:COST_MODELS",
    "strategies": "simcomm.strategies:STRATEGIES",
    "traces": "simcomm.traces:BUNDLED",
    "devices": "simcomm.traces:DEVICES",
    "models": "simcomm.traces:MODELS",
    "stacks": "simcomm.stacks:STACKS",
    "runtimes": "simcomm.runtimes:RUNTIMES",
    "nccl-algorithms": "simcomm.nccl.algorithms:NCCL_ALGORITHMS",
    "frameworks": "simcomm.frameworks:FRAMEWORK_REGISTRY",
}


def load_catalogue(name: str):
    """Return the registry called ``name``; unknown names list the choices."""
    if name not in CATALOGUES:
        raise UnknownNameError("catalogue", name, CATALOGUES)
    module, attr = CATALOGUES[name].split(":")
    try:
        mod = importlib.import_module(module)
        return getattr(mod, attr)
    except (ImportError, AttributeError):
        raise UnknownNameError("catalogue", name, _available()) from None


def _available() -> list[str]:
    out = []
    for name, spec in CATALOGUES.items():
        module, attr = spec.split(":")
        try:
            if hasattr(importlib.import_module(module), attr):
                out.append(name)
        except ImportError:
            pass
    return out


def list_command(
    catalogue: str = typer.Argument(..., help="links, topologies, collectives, cost-models, strategies, traces, ..."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """Print a catalogue: every registered name with its summary and source."""
    reg = load_catalogue(catalogue)
    entries = reg.entries()
    if as_json:
        print_json([{"name": e.name, "summary": e.summary, "reference": e.reference} for e in entries])
        return
    t = table(f"{catalogue} ({len(entries)})", [("name", "left"), ("summary", "left"), ("reference", "left")])
    for e in entries:
        t.add_row(e.name, e.summary, e.reference)
    stdout().print(t)
