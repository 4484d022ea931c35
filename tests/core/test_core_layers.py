"""The import-layer contract (docs/architecture.md, "Layers"): no import runs up a layer, heavy deps stay home.

Every ``import simcomm.X`` in ``simcomm/`` (module level or inside a function) is
checked against the layer table below; a package may import its own layer or
lower ones only.  SimPy lives only in the engine, torch only in trace capture and
the calibration workers, typer and rich only in the CLI, matplotlib only in reports.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "simcomm"

#: package (first component under simcomm/) -> layer; data flows upward through them
LAYERS = {
    # foundations
    "errors": 0, "units": 0, "registry": 0, "precision": 0, "fileio": 0, "gcpause": 0,
    "outpath": 0,
    # vocabularies and catalogues
    "__init__": 1, "ops": 1, "links": 1, "collectives": 1, "cost_models": 1, "result": 1, "jitter": 1,
    "frameworks": 1,  # the training frameworks' data-parallel schedules (a catalogue, read by megatron)
    # what runs: topologies, traces and workloads, the engine and the stacks it prices
    "topologies": 2, "traces": 2, "workload": 2, "memory": 2, "nccl": 2, "stacks": 2, "engine": 2,
    # model shapes (llm.models, llm.zoo) are read by traces and strategies alike
    "llm": 2,
    "strategies": 3,
    "scenario": 4, "bench": 4,
    "pipeline": 5,
    "compare": 6, "validation": 6, "calibrate": 6, "sweep": 6, "whatif": 6,
    "report": 7,
    "cli": 8, "__main__": 8,
}
#: modules placed apart from their package's layer: llm/ holds model shapes, the layout, placement and compute
#: that traces and strategies read (layer 2), plan's estimate, which reads the strategy's fold rule (layer 3), and
#: its search, which runs the pipeline (layer 6)
MODULE_LAYERS = {"llm.estimate": 3, "llm.search": 6}
HEAVY = {"simpy": {"engine"}, "torch": {"traces", "calibrate"}, "typer": {"cli"}, "rich": {"cli"},
         "matplotlib": {"report"}}


def _imports(root: Path = ROOT):
    for f in sorted(root.rglob("*.py")):
        rel = f.relative_to(root)
        pkg = rel.parts[0] if len(rel.parts) > 1 else rel.stem
        module = ".".join(rel.with_suffix("").parts)
        pkg = module if module in MODULE_LAYERS else pkg
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            else:
                continue
            for name in names:
                yield str(rel), pkg, name, node.lineno


def test_every_package_has_a_layer():
    pkgs = {p.name if p.is_dir() else p.stem for p in ROOT.iterdir()
            if (p.is_dir() and (p / "__init__.py").exists()) or p.suffix == ".py"}
    assert pkgs <= set(LAYERS), sorted(pkgs - set(LAYERS))


def test_no_import_runs_up_a_layer():
    bad = []
    for rel, pkg, name, line in _imports():
        parts = name.split(".")
        if parts[0] != "simcomm":
            continue
        target = parts[1] if len(parts) > 1 else "__init__"
        target = ".".join(parts[1:3]) if ".".join(parts[1:3]) in MODULE_LAYERS else target
        layers = {**LAYERS, **MODULE_LAYERS}
        if target in layers and layers[target] > layers[pkg]:
            bad.append(f"{rel}:{line} ({pkg}, layer {layers[pkg]}) imports {name} (layer {layers[target]})")
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("dep", sorted(HEAVY))
def test_heavy_dependencies_stay_in_their_layer(dep):
    bad = [f"{rel}:{line} imports {name}" for rel, pkg, name, line in _imports()
           if name.split(".")[0] == dep and pkg not in HEAVY[dep]]
    assert not bad, "\n".join(bad)


def test_the_contract_can_fail(tmp_path):
    """The checker sees an upward import inside a function body (a reach-in a reviewer would miss)."""
    pkg = tmp_path / "simcomm"
    (pkg / "ops").mkdir(parents=True)
    (pkg / "ops" / "__init__.py").write_text("def f():\n    from simcomm.cli.app import app\n    import typer\n")
    found = list(_imports(pkg))
    assert ("ops/__init__.py", "ops", "simcomm.cli.app", 2) in found and ("ops/__init__.py", "ops", "typer", 3) in found


def test_cli_commands_do_not_import_the_app():
    """The app imports the commands (simcomm.cli.app.COMMANDS); a command importing the app would be a cycle."""
    bad = [f"{rel}:{line}" for rel, pkg, name, line in _imports()
           if pkg == "cli" and name == "simcomm.cli.app" and not rel.endswith("app.py")]
    assert not bad, bad
