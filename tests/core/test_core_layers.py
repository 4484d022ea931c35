"""The import-layer contract (docs/architecture.md, "Layers"): no import runs up a layer, heavy deps stay home.

Every ``import simcomm.X`` in ``simcomm/`` (module level or inside a function) is
checked against the layer table below; a package may import its own layer or
lower ones only, never what its FORBIDDEN entry names (the engine: runtimes, among them
MPICH's, Open MPI's and gloo's rule tables, NCCL, stacks, strategies), and no two packages import
each other, directly or round a circle.  SimPy lives only in the engine, torch only
in trace capture and the calibration workers, typer and rich only in the CLI,
matplotlib only in reports.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "simcomm"

#: package (first component under simcomm/) -> layer; data flows upward through them
LAYERS = {
    # foundations
    "errors": 0, "units": 0, "registry": 0, "precision": 0, "fileio": 0, "gcpause": 0,
    "outpath": 0,
    # vocabularies and catalogues
    "__init__": 1, "ops": 1, "links": 1, "collectives": 1, "cost_models": 1, "result": 1, "jitter": 1,
    "frameworks": 1,  # the training frameworks' data-parallel schedules (a catalogue, read by megatron)
    # what runs: topologies, traces and workloads, and the engine that runs plans on them
    "topologies": 2, "traces": 2, "workload": 2, "memory": 2, "engine": 2,
    # model shapes (llm.models, llm.zoo) are read by traces and strategies alike
    "llm": 2,
    # what plans and how a stack runs them: handed to the engine by the caller, never imported by it
    "strategies": 3, "runtimes": 3, "nccl": 3, "stacks": 3,
    "scenario": 4, "bench": 4,
    "pipeline": 5,
    "compare": 6, "validation": 6, "calibrate": 6, "sweep": 6, "whatif": 6,
    "report": 7,
    "cli": 8, "__main__": 8,
}
#: modules placed apart from their package's layer: llm/ holds model shapes, the layout and placement that traces
#: and strategies read (layer 2); the per-stage compute, which prices traces' layers, plan's estimate, its
#: data-parallel timing and its every-forward-first schedule, which read the strategy's fold rule and the compute,
#: and a layout's memory fit, which reads the memory model (layer 3); the search, its worker parts and the
#: simulation of its best rows, which run the pipeline (layer 6)
MODULE_LAYERS = {"llm.compute": 3, "llm.estimate": 3, "llm.estimate_dp": 3, "llm.estimate_warmup": 3, "llm.fitting": 3,
                 "llm.search": 6, "llm.search_parts": 6, "llm.simulate": 6}
#: per package, what it must never import even where the layers allow it (a module, or a package and all below it):
#: the engine is handed its runtime (simcomm.collectives.runtime.CollectiveRuntime) by the caller, has no default
#: one and names no stack, runtime, NCCL or rule table (MPICH's, Open MPI's and gloo's live in simcomm.runtimes.mpi);
#: strategies speak only in ops; a runtime prepares ops for the engine and never reaches back into it
#: (engine.schedule <-> nccl.prepare was a cycle)
FORBIDDEN = {
    "engine": ("runtimes", "nccl", "stacks", "strategies", "pipeline", "scenario"),
    "strategies": ("engine", "runtimes", "nccl", "stacks", "pipeline"),
    "runtimes": ("engine", "strategies", "stacks", "pipeline"),
    "nccl": ("engine", "strategies", "pipeline"),
    "collectives": ("engine", "strategies", "runtimes", "nccl", "stacks"),
    "topologies": ("engine", "strategies", "runtimes", "nccl"),
    "cost_models": ("engine", "strategies"),
}
#: import cycles between packages that exist today, each with why it is left: the test fails when one is gone
#: (remove it here) and on any other.  None: llm.models holds shapes only (the analytic architecture of a config is
#: traces.zoo.transformer's), and llm.compute, which prices traces' layers, sits above traces (layer 3)
KNOWN_CYCLES: set[tuple[str, ...]] = set()
#: heavy dependency -> the packages or modules that may import it: torch only where a trace is captured (the
#: capture and the torch models it runs) and where calibration measures the real collectives (its workers)
HEAVY = {"simpy": {"engine"}, "typer": {"cli"}, "rich": {"cli"}, "matplotlib": {"report"},
         "torch": {"traces.capture", "traces.zoo.torchnet", "calibrate.worker", "calibrate.launch", "calibrate.bench"}}


@functools.cache
def _imports(root: Path = ROOT) -> tuple[tuple[str, str, str, int], ...]:
    """(file, package, imported name, line) of every simcomm import under ``root`` (parsed once per root)."""
    return tuple(_walk(root))


def _walk(root: Path):
    for f in sorted(root.rglob("*.py")):
        rel = f.relative_to(root)
        pkg = rel.parts[0] if len(rel.parts) > 1 else rel.stem
        module = ".".join(rel.with_suffix("").parts)
        pkg = module if module in MODULE_LAYERS else pkg
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and (node.module or node.level):
                # ``from simcomm.collectives import auto`` imports the module simcomm.collectives.auto too;
                # a relative import (``from ..strategies import x``) is read as the absolute name it stands for
                base = node.module or ""
                if node.level:
                    here = ["simcomm", *rel.parts[:-1]]  # the package of the file (an __init__'s own package)
                    up = here[:len(here) - (node.level - 1)]
                    base = ".".join(up + ([node.module] if node.module else []))
                names = [base] + [f"{base}.{a.name}" for a in node.names if a.name != "*"]
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


def _forbidden(pkg: str, name: str) -> str | None:
    """The FORBIDDEN entry of ``pkg`` that ``name`` (``simcomm.x.y``) falls under, or None."""
    target = name.split(".", 1)[1] if name.startswith("simcomm.") else None
    for banned in FORBIDDEN.get(pkg.split(".")[0], ()):
        if target is not None and (target == banned or target.startswith(banned + ".")):
            return banned
    return None


def test_no_package_imports_what_it_must_not():
    bad = [f"{rel}:{line} ({pkg}) imports {name}: {pkg} must not import {banned}"
           for rel, pkg, name, line in _imports() if (banned := _forbidden(pkg, name))]
    assert not bad, "\n".join(bad)


def _cycles(root: Path = ROOT) -> set[tuple[str, ...]]:
    """Every import cycle between packages (modules placed apart count as their own), as sorted names.

    Imports inside functions count: a lazy import is how a cycle hides (engine.schedule imported simcomm.nccl
    inside prepare(), and nccl.prepare imported engine.schedule at the top).  Tarjan's strongly connected
    components of the graph package -> packages it imports.
    """
    graph: dict[str, set[str]] = {}
    layers = {**LAYERS, **MODULE_LAYERS}
    for _, pkg, name, _ in _imports(root):
        parts = name.split(".")
        if parts[0] != "simcomm":
            continue
        target = ".".join(parts[1:3]) if ".".join(parts[1:3]) in MODULE_LAYERS else (parts[1] if len(parts) > 1
                                                                                     else "__init__")
        if target != pkg and (target in layers or (root / target).exists() or (root / f"{target}.py").exists()):
            graph.setdefault(pkg, set()).add(target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: set[tuple[str, ...]] = set()

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.add(tuple(sorted(comp)))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycles():
    found = _cycles()
    assert found - KNOWN_CYCLES == set(), f"import cycles between packages: {sorted(found - KNOWN_CYCLES)}"
    assert KNOWN_CYCLES - found == set(), f"gone (remove from KNOWN_CYCLES): {sorted(KNOWN_CYCLES - found)}"


def test_the_cycle_check_can_fail(tmp_path):
    """A lazy import in one package and a top-level one back (today's engine <-> nccl, as it was) is a cycle."""
    pkg = tmp_path / "simcomm"
    for name, body in (("engine", "def prepare(op):\n    from simcomm.nccl import prepare_nccl\n"),
                       ("nccl", "from simcomm.engine.schedule import Prepared\n"), ("ops", "import simcomm.errors\n")):
        (pkg / name).mkdir(parents=True)
        (pkg / name / "__init__.py").write_text(body)
    assert _cycles(pkg) == {("engine", "nccl")}


def test_the_forbidden_check_can_fail(tmp_path):
    """The engine reaching for a default runtime's rules (``from ... import`` of the module, lazily) is caught."""
    pkg = tmp_path / "simcomm"
    (pkg / "engine").mkdir(parents=True)
    (pkg / "engine" / "executor.py").write_text("def run():\n    from simcomm.runtimes import mpi\n"
                                                "    from simcomm.nccl import prepare_nccl\n")
    found = {(name, _forbidden(pkg_, name)) for _, pkg_, name, _ in _imports(pkg)}
    assert {("simcomm.runtimes.mpi", "runtimes"), ("simcomm.nccl.prepare_nccl", "nccl")} <= found


def _runtimes_below(root: Path) -> list[str]:
    """Classes that prepare collective ops (``placement`` and ``prepare``, not the protocol) below the runtimes' layer."""
    out = []
    for f in sorted(root.rglob("*.py")):
        rel = f.relative_to(root)
        pkg = rel.parts[0] if len(rel.parts) > 1 else rel.stem
        if LAYERS.get(pkg, 0) >= LAYERS["runtimes"]:
            continue
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and not any(ast.unparse(b) == "Protocol" for b in node.bases):
                methods = {n.name for n in node.body if isinstance(n, ast.FunctionDef)}
                if {"placement", "prepare"} <= methods:
                    out.append(f"{rel.as_posix()}:{node.lineno} {node.name}")
    return out


def test_no_runtime_lives_below_the_runtimes():
    """The engine has no default runtime: none is defined where it could import one (the catalogue holds the
    algorithms, the runtimes choose among them), so the caller (setup, from the stack) must hand it one."""
    assert _runtimes_below(ROOT) == []


def test_the_runtime_check_can_fail(tmp_path):
    """A default runtime with rules kept beside the catalogue (CatalogueRuntime in collectives/, as it was) is caught."""
    pkg = tmp_path / "simcomm"
    (pkg / "collectives").mkdir(parents=True)
    (pkg / "collectives" / "runtime.py").write_text(
        "from typing import Protocol\n"
        "class CollectiveRuntime(Protocol):\n    def placement(self): ...\n    def prepare(self): ...\n"
        "class CatalogueRuntime:\n    def placement(self): ...\n    def prepare(self): ...\n")
    assert _runtimes_below(pkg) == ["collectives/runtime.py:5 CatalogueRuntime"]


def _heavy(root: Path = ROOT) -> list[str]:
    """Imports of a heavy dependency outside the packages or modules :data:`HEAVY` allows it in."""
    bad = []
    for rel, pkg, name, line in _imports(root):
        dep = name.split(".")[0]
        module = ".".join(Path(rel).with_suffix("").parts)
        if dep in HEAVY and pkg.split(".")[0] not in HEAVY[dep] and module not in HEAVY[dep]:
            bad.append(f"{rel}:{line} imports {name}")
    return bad


def test_heavy_dependencies_stay_in_their_layer():
    assert not _heavy(), "\n".join(_heavy())


def test_the_heavy_check_can_fail(tmp_path):
    """SimPy outside the engine, matplotlib in the engine, torch in a trace module that does not capture, rich in
    the pipeline: each is named."""
    pkg = tmp_path / "simcomm"
    for where, body in (("pipeline/run.py", "import simpy\nimport rich.console\n"),
                        ("engine/executor.py", "def plot():\n    import matplotlib.pyplot\n"),
                        ("traces/io.py", "from torch import nn\n"), ("traces/capture.py", "import torch\n")):
        (pkg / where).parent.mkdir(parents=True, exist_ok=True)
        (pkg / where).write_text(body)
    assert sorted(_heavy(pkg)) == ["engine/executor.py:2 imports matplotlib.pyplot", "pipeline/run.py:1 imports simpy",
                                   "pipeline/run.py:2 imports rich.console", "traces/io.py:1 imports torch",
                                   "traces/io.py:1 imports torch.nn"]


def test_relative_imports_are_checked_as_what_they_name(tmp_path):
    """``from ..strategies import allreduce`` in the engine is the engine importing the strategies."""
    pkg = tmp_path / "simcomm"
    (pkg / "engine" / "drive").mkdir(parents=True)
    (pkg / "engine" / "drive" / "executor.py").write_text("from ...strategies import allreduce\nfrom .. import paths\n")
    found = {(name, _forbidden(p, name)) for _, p, name, _ in _imports(pkg)}
    assert ("simcomm.strategies.allreduce", "strategies") in found and ("simcomm.engine.paths", None) in found


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
