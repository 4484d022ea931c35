"""Runtimes behind one interface: the registry, each runtime's answers, and an engine that needs only the protocol."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

import simcomm
from simcomm import engine
from simcomm.collectives.base import ALGORITHMS, Step
from simcomm.collectives.runtime import CollectiveRuntime, Prepared
from simcomm.engine import EngineOptions
from simcomm.errors import ConfigError, UnknownNameError
from simcomm.links.base import LinkClass
from simcomm.ops import Collective, PlanBuilder
from simcomm.runtimes import RUNTIMES, MpiRuntime, NcclRuntime, get_runtime
from simcomm.stacks.base import COLLECTIVE_RULES
from simcomm.topologies.full_mesh import full_mesh
from simcomm.topologies.two_level import two_level

#: 1 GB/s, 1 us: a 1 MB message on its own link takes 1 us + 1 ms
LINK = LinkClass("test-1g", 1e9, 1e-6, "ethernet", "1 GB/s test link", "tests")


def test_every_stack_rule_names_a_registered_runtime():
    assert set(RUNTIMES.names()) == set(COLLECTIVE_RULES)
    for name in RUNTIMES.names():
        rt = get_runtime(name)
        assert rt.name == name and isinstance(rt, CollectiveRuntime)
        assert hash(rt) == hash(get_runtime(name))  # the engine keys its cache on the runtime
    with pytest.raises(UnknownNameError, match=r"^unknown runtime 'mvapich' \(did you mean 'mpich'\?\); "
                                               r"valid choices: gloo, mpich, nccl, openmpi, openmpi-3.1$"):
        get_runtime("mvapich")


@pytest.mark.parametrize("rules, nbytes, want", [
    ("mpich", 1000.0, "recursive-doubling"),   # n < ALLREDUCE_SHORT_MSG_SIZE (2048)
    ("mpich", 1e6, "rabenseifner"),            # n >= 2048 and count 250 000 >= pof2 4
    ("gloo", 1000.0, "ring"),                  # gloo runs ring all-reduce at every size
])
def test_catalogue_runtimes_choose_by_their_rules(rules, nbytes, want):
    topo = full_mesh(4, LINK)
    prep = get_runtime(rules).prepare(Collective(0, "allreduce", (0, 1, 2, 3), nbytes), topo, None)
    assert prep.label == want and prep.algorithm is ALGORITHMS.get(f"allreduce/{want}")
    assert prep.closed_form is None and prep.latency is None  # the engine prices the textbook steps itself


def test_placement_is_what_the_schedule_depends_on():
    topo = two_level(2, 4, intra="nvswitch", nic_link="ib-hdr")
    op = Collective(0, "allreduce", tuple(range(8)), 1e6)
    assert get_runtime("mpich").placement(op, topo, None) == 4   # ranks per machine, node-major group
    assert get_runtime("mpich").placement(op, topo, 2) == 2      # the engine's ppn override wins
    strided = Collective(0, "allreduce", (0, 4, 1, 5), 1e6)       # machines interleaved: not node-major
    assert get_runtime("openmpi").placement(strided, topo, None) == 1
    assert get_runtime("nccl").placement(strided, topo, None) == (0, 4, 1, 5)  # where each member sits


def test_nccl_runs_a_named_textbook_algorithm_from_the_catalogue():
    topo = two_level(2, 4, intra="nvswitch", nic_link="ib-hdr", device="a100")
    op = Collective(0, "allreduce", tuple(range(8)), 1e6, "rabenseifner")
    nccl, plain = get_runtime("nccl").prepare(op, topo, None), get_runtime("mpich").prepare(op, topo, None)
    assert (nccl.algorithm, nccl.ppn, nccl.label, len(nccl.steps)) == (plain.algorithm, 1, "rabenseifner", 6)
    assert all((a.src == b.src).all() and (a.nbytes == b.nbytes).all() for a, b in zip(nccl.steps, plain.steps, strict=False))
    auto = get_runtime("nccl").prepare(Collective(0, "allreduce", tuple(range(8)), 1e6), topo, None)
    assert auto.label.startswith("NCCL ") and auto.closed_form is not None


def test_settings_belong_to_the_runtime_that_takes_them():
    nccl = get_runtime("nccl").configured(nccl_algo="ring", nccl_proto=None)
    assert nccl == NcclRuntime(nccl_algo="ring")
    assert nccl.how == "NCCL's tuning model within NCCL_ALGO=ring"
    assert get_runtime("nccl").how == "NCCL's tuning model"
    assert nccl.with_gpus_per_thread(8).gpus_per_thread == 8 and nccl.grouped_p2p
    with pytest.raises(ConfigError, match="^nccl_algo: mpich's collectives take no settings"):
        get_runtime("mpich").configured(nccl_algo="ring")
    with pytest.raises(ConfigError, match="^channels: not a setting of NCCL's collectives"):
        get_runtime("nccl").configured(channels="4")
    mpi = get_runtime("openmpi")
    assert mpi.configured(nccl_algo=None) is mpi and mpi.with_gpus_per_thread(8) is mpi and not mpi.grouped_p2p
    assert mpi.how == "Open MPI's coll/tuned rules" and mpi.assumed("allreduce") == ()
    assert len(get_runtime("nccl").assumed("allreduce")) == 2 and len(get_runtime("nccl").assumed("sendrecv")) == 3


@dataclass(frozen=True)
class OneMessage:
    """A third-party runtime: every collective is one message from its first member to its second."""

    closed: float = 0.5
    calls: list = None  # type: ignore[assignment]

    @property
    def name(self) -> str:
        return "one-message"

    def placement(self, op, topology, ppn):
        return op.ranks[:2]

    def prepare(self, op, topology, ppn):
        self.calls.append(op.id)
        step = Step.make(np.array([0]), np.array([1]), np.array([op.nbytes]))
        return Prepared(ALGORITHMS.get("p2p/direct"), 1, (step,), closed_form=self.closed, label="one message")

    def __hash__(self):
        return hash(self.closed)


@pytest.mark.parametrize("fidelity, want", [("flow", 1e-6 + 1e6 / 1e9), ("analytic", 0.5)])
def test_the_engine_needs_only_the_protocol(fidelity, want):
    """A runtime the engine has never heard of: the flow fidelity runs its steps, the analytic one its closed form."""
    rt = OneMessage(calls=[])
    b = PlanBuilder(2)
    b.collective("allreduce", (0, 1), 1e6)
    b.collective("allreduce", (0, 1), 1e6)  # the same stream: after the first
    tl = engine.simulate(b.build(), full_mesh(2, LINK), fidelity=fidelity, options=EngineOptions(runtime=rt))
    assert tl.makespan == pytest.approx(2 * want, rel=1e-12)
    assert rt.calls == [0]  # prepared once: the second op has the same key and placement
    assert tl.meta["algorithms"] == [("allreduce", "auto", "one message", 2)]


@dataclass(frozen=True)
class CountedPlacement(OneMessage):
    """OneMessage, counting its placement calls by group."""

    asked: list = None  # type: ignore[assignment]

    def placement(self, op, topology, ppn):
        self.asked.append(op.ranks)
        return op.ranks[:2]

    def __hash__(self):
        return hash(self.closed)


@pytest.mark.parametrize("fidelity", ["flow", "analytic"])
def test_placement_is_asked_once_per_group(fidelity):
    """The engine asks a runtime's placement once per group in a run (a function of the group's ranks, the topology
    and ppn): three collectives of one group and two of another, two sizes, are two placements and three
    preparations, each op priced as when asked op by op."""
    rt = CountedPlacement(calls=[], asked=[])
    b = PlanBuilder(4)
    for nbytes in (1e6, 1e6, 2e6):
        b.collective("allreduce", (0, 1), nbytes)
    for nbytes in (1e6, 1e6):
        b.collective("allreduce", (2, 3), nbytes)
    tl = engine.simulate(b.build(), full_mesh(4, LINK), fidelity=fidelity, options=EngineOptions(runtime=rt))
    assert rt.asked == [(0, 1), (2, 3)]
    assert rt.calls == [0, 2, 3]  # (0, 1) at 1e6 and 2e6, (2, 3) at 1e6
    if fidelity == "analytic":  # closed forms: 0.5 s per op, one stream per group
        assert tl.end.tolist() == [0.5, 1.0, 1.5, 0.5, 1.0]


def test_a_runtime_without_the_protocol_is_one_error_line():
    with pytest.raises(ConfigError, match="^runtime: .* must be a runtime"):
        EngineOptions(runtime="nccl")


def test_the_engine_has_no_default_runtime():
    """The caller chooses how collectives run: a plan with one and no runtime is one error line before the run."""
    b = PlanBuilder(4)
    b.compute(0, 1.0)
    b.collective("allreduce", range(4), 1e6)
    topo = full_mesh(4, LINK)
    for fidelity in ("flow", "analytic"):
        with pytest.raises(ConfigError, match=r"^runtime: the plan has collective ops \(allreduce over 4 ranks\) and no "
                           r"runtime to run them; hand the engine the stack's: EngineOptions\(runtime=simcomm"):
            engine.simulate(b.build(), topo, fidelity=fidelity)
    named = engine.simulate(b.build(), topo, runtime=get_runtime("mpich"))
    assert isinstance(get_runtime("mpich"), MpiRuntime) and named.meta["algorithms"] == [("allreduce", "auto", "rabenseifner", 1)]
    messages = PlanBuilder(2)
    messages.transfer(0, 1, 1e6)
    assert engine.simulate(messages.build(), full_mesh(2, LINK)).makespan == pytest.approx(1e-6 + 1e-3, rel=1e-12)


def test_a_prepared_schedule_names_how_it_is_priced():
    ring = ALGORITHMS.get("allreduce/ring")
    assert (Prepared(ring, 1, ()).label, Prepared(ring, 1, ()).key) == ("ring", "allreduce/ring")
    own = Prepared(None, 1, (), closed_form=0.0, label="NCCL Ring/LL", key="allreduce/nccl-ring")
    assert own.algorithm is None and own.closed_form == 0.0
    with pytest.raises(ValueError, match="without a catalogue algorithm, give a closed form"):
        Prepared(None, 1, (), label="NCCL Ring/LL", key="allreduce/nccl-ring")
    topo = two_level(2, 4, intra="nvswitch", nic_link="ib-hdr", device="a100")
    nccl = get_runtime("nccl").prepare(Collective(0, "allgather", tuple(range(8)), 1e6), topo, None)
    assert nccl.algorithm is None and nccl.key == "allgather/nccl-ring" and nccl.label.startswith("NCCL Ring/")


#: where a runtime's name may decide something outside simcomm/runtimes and simcomm/nccl, and why: files, then
#: expressions (the start of their source) wherever they move
NAME_CHECKS_FILES: set[str] = set()  # (the MPICH/Open MPI/gloo rule tables live in simcomm/runtimes/mpi.py)
NAME_CHECKS_ALLOWED = {
    "rec.get('backend') == 'gloo'": "torch.distributed's backend gloo (calibrate), not a simcomm runtime",
    "{'mpich': 'MPICH default selection'": "simcomm cost --rules: the words for whose closed-form choice is shown",
    "spec.name == 'nccl'": "the note of the stack named nccl (its line rate), not a runtime's behaviour",
}


def _name_checks(root: Path) -> list[str]:
    """``x == "nccl"``, ``x in ("nccl", ...)`` and dicts keyed by several runtime names, outside the runtimes."""
    import ast

    names = set(COLLECTIVE_RULES)
    out = []
    for f in sorted(root.rglob("*.py")):
        rel = f.relative_to(root).as_posix()
        if rel.split("/")[0] in ("runtimes", "nccl") or rel in NAME_CHECKS_FILES:
            continue
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.Compare, ast.Dict)) and ast.unparse(node).startswith(tuple(NAME_CHECKS_ALLOWED)):
                continue
            if isinstance(node, ast.Compare):
                sides = [node.left, *node.comparators]
                sides += [e for c in node.comparators if isinstance(c, (ast.Tuple, ast.List, ast.Set)) for e in c.elts]
                if any(isinstance(c, ast.Constant) and c.value in names for c in sides):
                    out.append(f"{rel}:{node.lineno}")
            elif isinstance(node, ast.Dict) and sum(isinstance(k, ast.Constant) and k.value in names for k in node.keys) >= 2:
                out.append(f"{rel}:{node.lineno}")
    return out


def test_no_behaviour_is_keyed_on_a_runtime_name_outside_the_runtimes():
    root = Path(simcomm.__file__).parent
    assert _name_checks(root) == []


def test_the_name_check_can_fail(tmp_path):
    (tmp_path / "engine").mkdir()
    (tmp_path / "engine" / "executor.py").write_text('def key(rt, op):\n    return op.ranks if rt.rules == "nccl" else 1\n')
    (tmp_path / "bench.py").write_text('HOW = {"nccl": "tuning model", "mpich": "rules"}\n')
    assert _name_checks(tmp_path) == ["bench.py:1", "engine/executor.py:2"]
