"""One chooser of the engine's paths (simcomm.engine.paths): what it picks, that every run records it,
that every reference path (``EngineOptions.reference``) gives the default's floats (bit for bit where
exact by design, to 1e-9 otherwise) on small plans, and that no switch is left outside the options."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from timelines import check

from simcomm.engine import EngineOptions, simulate
from simcomm.engine.options import CLOSED_STEPS
from simcomm.engine.paths import EXACT, REFERENCES, choose
from simcomm.links.base import LinkClass
from simcomm.ops import PlanBuilder
from simcomm.runtimes.mpi import MPICH
from simcomm.topologies.fat_tree import fat_tree

LINK = LinkClass("paths-link", 1e9, 1e-6, "custom")
TOPO = fat_tree(4, link=LINK, levels=2, oversubscription=2)
ENGINE = Path(__file__).resolve().parents[2] / "simcomm" / "engine"


def _messages():
    """A parameter server on rank 0: pushes in, one update, pulls out (computes and messages only)."""
    b = PlanBuilder(TOPO.n_ranks)
    pushes = [b.transfer(r, 0, 4e4 * r, stream="push", after=[b.compute(r, 1e-5 * r)]) for r in range(1, 6)]
    u = b.compute(0, 2e-6, after=pushes, stream="server")
    for r in range(1, 6):
        b.transfer(0, r, 4e4 * r, after=[u], stream="pull")
    return b.build()


def _collectives():
    """Repeated steps (a ring), scalable steps (a pairwise all-to-all at two sizes), overlapping messages."""
    b = PlanBuilder(TOPO.n_ranks)
    c = b.compute(0, 3e-6)
    b.collective("allreduce", range(4), 8e5, algorithm="ring", after=[c])
    b.collective("alltoall", range(2, 8), 2e5, algorithm="pairwise", stream="ep")
    b.collective("alltoall", range(2, 8), 5e5, algorithm="pairwise", stream="ep")
    b.transfer(7, 2, 3e5, stream="pp")
    b.collective("allreduce", range(8), 1e6, algorithm="recursive-doubling", stream="dp")
    return b.build()


PLANS = {"messages": _messages, "collectives": _collectives}


def test_the_chooser_picks_each_path_from_the_plan_and_the_options():
    msgs, colls = _messages(), _collectives()
    o = EngineOptions
    assert choose(msgs, "flow", o()).to_dict() == {"driver": "direct", "pricing": "per-link", "scaled": True,
                                                   "core": "lean", "keep": True, "max_live": 16, "shapes": True,
                                                   "closed_from": CLOSED_STEPS, "resolution": 0.0, "stop_after": 0,
                                                   "alike_steps": True}
    assert choose(colls, "flow", o()).driver == "callbacks"  # collectives: SimPy's queue, driven by callbacks
    assert choose(msgs, "flow", o(comm_cpu=1e-10)).driver == "callbacks"  # a CPU cost follows each rank's bytes
    # a reserved repeat has no live flows to count bytes on: with a CPU cost every repeat runs as flows
    with_cpu = choose(colls, "flow", o(comm_cpu=1e-10))
    assert (with_cpu.pricing, with_cpu.scaled, with_cpu.closed_from) == ("plain", False, 0)
    assert choose(colls, "flow", o(record_link_usage=True)).pricing == "whole-network"
    assert choose(colls, "flow", o(reference={"callbacks"})).driver == "processes"
    assert choose(msgs, "flow", o(reference={"callbacks"})).driver == "direct"  # (the direct loop is its own)
    assert choose(msgs, "flow", o(reference={"direct"})).driver == "callbacks"
    assert choose(colls, "flow", o(reference={"per_link"})).pricing == "whole-network"
    plain = choose(colls, "flow", o(reference={"coalesce"}))
    assert (plain.pricing, plain.scaled) == ("plain", False)
    assert choose(colls, "flow", o(reference={"scaling"})).scaled is False
    assert [choose(colls, "flow", o(reference=r)).core for r in ({"lean"}, {"scalar"}, {"incremental"})] == \
        ["scalar", "numpy", "plain"]
    assert choose(colls, "analytic", o(link_bytes=False)).to_dict() == {
        "driver": "one-pass", "pricing": "closed-forms", "scaled": False, "core": "none", "keep": True, "max_live": 16,
        "shapes": True, "closed_from": 0, "resolution": 0.0, "stop_after": 0, "alike_steps": False}
    # the closed-step threshold, the event resolution and stop_after, as the run takes them
    assert choose(colls, "flow", o(closed_steps=8, resolution=0.01)).to_dict()["closed_from"] == 8
    assert choose(colls, "flow", o(closed_steps=8, reference={"closed_steps"})).closed_from == 0
    assert choose(colls, "flow", o(resolution=0.01)).resolution == 0.01
    assert choose(colls, "analytic", o(resolution=0.01)).resolution == 0.0  # closed forms merge no completions
    assert choose(colls, "flow", o(stop_after={1, 2})).stop_after == 2
    assert choose(msgs, "flow", o(stop_after={1, 2})).stop_after == 0  # the direct loop runs every op
    assert choose(colls, "analytic", o(link_bytes=False, reference={"one_pass"})).driver == "callbacks"
    assert choose(colls, "analytic", o()).driver == "callbacks"  # link bytes depend on the event order
    assert choose(msgs, "flow", o(reference={"keep"})).keep is False
    assert choose(colls, "flow", o(reference={"alike_steps"})).alike_steps is False  # each group's steps its own


@pytest.mark.parametrize("fidelity", ["flow", "analytic"])
def test_every_run_records_the_paths_it_took(fidelity):
    tl = simulate(_collectives(), TOPO, fidelity=fidelity, runtime=MPICH)
    # (here every repeat overlaps other traffic: none is coalesced, none scaled)
    assert tl.paths == {**choose(_collectives(), fidelity, EngineOptions()).to_dict(), "taken": {}}
    b = PlanBuilder(TOPO.n_ranks)
    b.collective("allreduce", range(8), 8e5, algorithm="ring")  # alone: its 2 x 7 repeated steps are coalesced
    alone = simulate(b.build(), TOPO, fidelity=fidelity, runtime=MPICH)
    assert alone.paths["taken"] == ({"coalesced_steps": 14} if fidelity == "flow" else {})
    assert alone.paths["taken"].get("coalesced_steps", 0) == alone.meta.get("steps_coalesced", 0)
    assert "paths" not in tl.meta  # the statistics stay as they were (their digests are committed)
    fast = simulate(_collectives(), TOPO, fidelity=fidelity, link_bytes=False, runtime=MPICH)
    assert fast.paths["driver"] == ("one-pass" if fidelity == "analytic" else "callbacks")


def _close(a, b) -> None:
    for x, y in ((a.start, b.start), (a.end, b.end)):
        np.testing.assert_allclose(x, y, rtol=1e-9, atol=0.0)
    assert a.makespan == pytest.approx(b.makespan, rel=1e-9)
    assert a.link_class_bytes.keys() == b.link_class_bytes.keys()
    for k in a.link_class_bytes:
        assert a.link_class_bytes[k] == pytest.approx(b.link_class_bytes[k], rel=1e-12)


@pytest.mark.parametrize("plan", sorted(PLANS))
@pytest.mark.parametrize("fidelity, link_bytes", [("flow", True), ("analytic", True), ("analytic", False)])
def test_every_reference_switch_gives_the_default_floats(plan, fidelity, link_bytes):
    p = PLANS[plan]()
    base = simulate(p, TOPO, fidelity=fidelity, resolution=0.0, link_bytes=link_bytes, runtime=MPICH)
    taken = set()
    for name in REFERENCES:
        ref = simulate(p, TOPO, fidelity=fidelity, resolution=0.0, link_bytes=link_bytes, reference={name}, runtime=MPICH)
        if ref.paths != base.paths:
            taken.add(name)
        if name in EXACT:
            check(base, ref)  # every start, end, statistic and link byte, bit for bit
        else:
            _close(base, ref)  # the same in the model; statistics differ by design (solves, coalesced steps)
    for live in (1, 2, 64):  # where the core leaves its scalar forms changes no float
        check(base, simulate(p, TOPO, fidelity=fidelity, resolution=0.0, link_bytes=link_bytes, max_live=live, runtime=MPICH))
    everything = simulate(p, TOPO, fidelity=fidelity, resolution=0.0, link_bytes=link_bytes,
                          reference=set(REFERENCES), runtime=MPICH)
    _close(base, everything)
    # the switches that can matter here did change the recorded paths (not a switch that does nothing)
    if fidelity == "flow":
        want = {"direct"} if plan == "messages" else {"callbacks", "per_link", "coalesce", "scaling"}
        assert want | {"lean", "scalar", "incremental"} <= taken
    elif not link_bytes:
        # (the two caches' switches are recorded wherever they are; the messages' seconds priced at once, rounds)
        assert taken == {"one_pass", "keep", "shapes"} | ({"rounds"} if plan == "messages" else set())


def test_the_reference_paths_really_run_something_else():
    # witnesses: the textbook solver and the per-flow SimPy processes are only called on their references
    import simcomm.engine.fluid.core as fluid

    calls = []
    real = fluid.FluidCore._solve_plain
    fluid.FluidCore._solve_plain = lambda self, *a: calls.append(1) or real(self, *a)
    try:
        simulate(_collectives(), TOPO, runtime=MPICH)
        assert not calls
        simulate(_collectives(), TOPO, reference={"incremental"}, runtime=MPICH)
        assert calls
    finally:
        fluid.FluidCore._solve_plain = real


def test_no_switch_lives_outside_the_options():
    import simcomm.engine.drive.executor as executor
    import simcomm.engine.flow.pricer as flow
    import simcomm.engine.fluid.core as fluid

    for module, names in ((executor, ("DIRECT", "CALLBACKS")), (flow, ("PER_LINK",))):
        assert not [n for n in names if hasattr(module, n)]
    assert not hasattr(fluid.FluidCore, "lean")
    # nothing in the engine reads the scalar forms' default threshold but the options' default
    uses = [f.relative_to(ENGINE).as_posix() for f in ENGINE.rglob("*.py")
            if re.search(r"\bMAX_LIVE\b(?! =)", f.read_text())]
    assert sorted(uses) == ["flow/network.py", "fluid/core.py", "fluid/small.py", "options.py"]  # defaults only


def _switches(root: Path) -> list[str]:
    """What could make a module global or a class attribute a switch, anywhere under ``root``: a ``global``
    statement, a module-level name bound to True or False, or an assignment to an attribute of an imported
    module or class (``executor.DIRECT = True``, ``FluidCore.lean = False``)."""
    import ast

    out = []
    for f in sorted(root.rglob("*.py")):
        tree = ast.parse(f.read_text())
        imported = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                imported |= {(a.asname or a.name).split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                imported |= {a.asname or a.name for a in node.names}
        rel = f.relative_to(root).as_posix()
        for node in ast.walk(tree):
            if isinstance(node, ast.Global):
                out.append(f"{rel}:{node.lineno} global {', '.join(node.names)}")
            elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                for t in node.targets if isinstance(node, ast.Assign) else [node.target]:
                    if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id in imported:
                        out.append(f"{rel}:{node.lineno} {t.value.id}.{t.attr} = ...")
        out += [f"{rel}:{node.lineno} {ast.unparse(node.targets[0])} = {node.value.value}" for node in tree.body
                if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, bool)]
    return out


def test_no_module_global_or_class_attribute_is_a_switch_anywhere(tmp_path):
    assert _switches(ENGINE.parent) == []
    (tmp_path / "m.py").write_text("from simcomm.engine.drive import executor\nfrom x import FluidCore\n"
                                   "LEAN = False\ndef f():\n    global LEAN\n    executor.DIRECT = True\n"
                                   "    FluidCore.lean = False\n")
    assert _switches(tmp_path) == ["m.py:5 global LEAN", "m.py:6 executor.DIRECT = ...", "m.py:7 FluidCore.lean = ...",
                                   "m.py:3 LEAN = False"]


def test_simpy_private_state_is_touched_in_events_only_and_no_cache_is_stashed_in_other_objects():
    # every private attribute of SimPy's Environment, Event and Process the engine could reach for
    private = re.compile(r"\._(queue|ok|value|defused|now|eid|active_proc|target|generator|resume|desc)\b")
    touching = sorted(f.relative_to(ENGINE).as_posix() for f in ENGINE.rglob("*.py") if private.search(f.read_text()))
    assert touching == ["events.py"]
    assert not [f.name for f in ENGINE.rglob("*.py") if "__dict__" in f.read_text()]


def test_the_engine_layers_import_downward_only():
    # drive/ -> flow/ -> fluid/: no module imports a layer above its own, and the fluid core knows no SimPy
    import ast

    order = {"drive": 0, "flow": 1, "fluid": 2}
    seen, upward = set(), []
    for f in ENGINE.rglob("*.py"):
        parts = f.relative_to(ENGINE).parts
        if len(parts) < 2:
            continue
        seen.add(parts[0])
        for node in ast.walk(ast.parse(f.read_text())):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else \
                [a.name for a in node.names] if isinstance(node, ast.Import) else []
            for name in names:
                other = name.split(".")[2] if name.startswith("simcomm.engine.") else None
                if (other in order and order[other] < order[parts[0]]) or (parts[0] == "fluid" and name == "simpy"):
                    upward.append((f.relative_to(ENGINE).as_posix(), name))
    assert seen == set(order) and upward == []


FLOW = {"keep": True, "max_live": 16, "shapes": True, "closed_from": CLOSED_STEPS, "resolution": 0.01, "stop_after": 0}


@pytest.mark.parametrize("extra, want", [
    ((), {"driver": "callbacks", "pricing": "per-link", "scaled": True, "core": "lean", **FLOW}),
    (("--fidelity", "analytic"), {"driver": "callbacks", "pricing": "closed-forms", "scaled": False, "core": "none",
                                  **FLOW, "closed_from": 0, "resolution": 0.0}),
    (("--strategy", "ps", "--stack-cpu", "25ns"), {"driver": "callbacks", "pricing": "plain", "scaled": False,
                                                   "core": "lean", **FLOW, "closed_from": 0}),
    (("--strategy", "dpsgd"), {"driver": "direct", "pricing": "per-link", "scaled": True, "core": "lean", **FLOW}),
])
def test_run_json_names_the_engine_paths_of_each_kind(cli, extra, want):
    import json

    rc, out, _ = cli("run", "--cluster", "kisti-neuron", "--nodes", "2", "--stack", "mpi-tcp", "--json",
                     *(("--strategy", "allreduce") if "--strategy" not in extra else ()), *extra)
    assert rc == 0
    kinds = json.loads(out)["kinds"]
    # and the planning path: 4 training ranks are under FOLD_RANKS, so fold_ranks auto plans every rank
    unfolded = {"setting": "auto", "used": False, "folded_ranks": 0, "folded_computes": 0}
    # (and what each run took op by op, and the strategy's own planning paths: tests/engine/test_json_paths.py)
    assert kinds and all({key: k["engine"][key] for key in (*want, "rank_fold")} == {**want, "rank_fold": unfolded}
                         for k in kinds)
