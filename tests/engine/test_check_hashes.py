"""benchmarks/check_hashes.py: the committed digests cover every strategy, every reference path of the
engine gives the default's digests (bit for bit where exact by design) and is really taken, and the check
fails, naming the scenario, when a float of the engine moves by one ulp or a stored digest is altered."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def check():
    spec = importlib.util.spec_from_file_location("check_hashes", ROOT / "benchmarks" / "check_hashes.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up while the class is built
    spec.loader.exec_module(mod)
    return mod


#: a subset that takes every reference path (see test_every_reference_path_is_taken_and_exact_on_a_subset)
SUBSET = ("sgp/gloo/flow/exact", "ps/gloo/flow/exact", "megatron-pp4-1f1b/nccl/flow/exact",
          "allreduce/nccl/flow/default", "allreduce/mpi/flow/exact", "allreduce/nccl/analytic",
          "node-based/nccl/flow/exact", "crossover-sgd/nccl-fold-on/flow/exact")
#: two quick ones for the failure tests: a flow run and an analytic one
PAIR = ("dpsgd/nccl/flow/exact", "dpsgd/nccl/analytic")
ONLY = ["--only", PAIR[0], "--only", PAIR[1]]


def test_the_scenarios_cover_every_strategy_fidelity_resolution_and_stack(check):
    from simcomm.strategies.base import STRATEGIES

    cases = check.cases()
    assert set(check.STRATEGIES) | {"megatron"} == set(STRATEGIES)
    names = [c.name for c in cases]
    assert len(names) == len(set(names))
    for s in check.STRATEGIES:
        assert {f"{s}/nccl/flow/exact", f"{s}/nccl/flow/default", f"{s}/nccl/analytic", f"{s}/mpi/flow/exact"} \
            <= set(names)
    assert {c.flat.get("stack") for c in cases} >= {None, "mpi-tcp", "gloo"}  # None: the preset's (NCCL, Cray MPICH)
    assert {c.flat.get("resolution") for c in cases} == {0.0, None}  # None: the scenario default (1 %)
    layouts = {c.name.split("/")[0] for c in cases if c.flat.get("strategy") == "megatron"}
    assert len(layouts) == len(check.LAYOUTS) and {"megatron-ep4-moe", "megatron-tp2-cp2-ulysses"} <= layouts


def test_the_committed_digests_are_those_of_the_scenarios(check):
    stored = json.loads(check.DIGESTS.read_text())
    assert sorted(stored) == sorted(c.name for c in check.cases())
    assert check.DIGESTS.read_text() == json.dumps(stored, indent=1, sort_keys=True) + "\n"
    assert all(len(d) == 64 and int(d, 16) >= 0 for d in stored.values())


def test_every_reference_path_is_taken_and_exact_on_a_subset(check):
    lines: list[str] = []
    chosen = [c for c in check.cases() if c.name in SUBSET]
    failed, reached = check.compare_references(chosen, check.REFERENCES, lines.append)
    assert failed == 0, "\n".join(line for line in lines if "DIFFERS" in line)
    assert all(reached.values()), reached  # every switch changes the path somewhere in the subset
    exact = {r.name for r in check.REFERENCES if r.exact}
    assert exact == {"direct", "callbacks", "scalar", "lean", "max-live-2", "max-live-64", "no-keep", "no-shapes",
                     "no-alike-steps", "event-loop", "no-local-collectives", "no-rounds", "no-sparse-links"}
    assert all(line.endswith(("bit for bit", "bit for bit (path not taken here)")) for line in lines
               if line.split("[")[1].split("]")[0] in exact)


def _store(check, tmp_path, capsys) -> Path:
    path = tmp_path / "hashes.json"
    assert check.main(["--update", "--file", str(path), *ONLY]) == 0
    assert capsys.readouterr().out.startswith("2 of 2 digests changed")
    assert check.main(["--file", str(path), *ONLY]) == 0
    assert "2 check scenarios hash as stored" in capsys.readouterr().out
    return path


def test_capacities_one_part_in_2_to_the_50_off_fail_the_flow_scenario_only(check, tmp_path, capsys, monkeypatch):
    from simcomm.engine.fluid import core as fluid

    path = _store(check, tmp_path, capsys)
    real = fluid.FluidCore.__init__

    def nudged(self, capacity, *args, **kwargs):
        real(self, capacity, *args, **kwargs)
        self.capacity = self.capacity * (1 + 2 ** -50)  # every link of the fluid core, one part in 2^50

    monkeypatch.setattr(fluid.FluidCore, "__init__", nudged)
    assert check.main(["--file", str(path), *ONLY]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "dpsgd/nccl/flow/exact: differs"  # the analytic run has no fluid core: not named
    assert out[1].startswith("1 of 2 check scenarios differ")


def test_one_ulp_of_one_op_end_fails_the_check(check, tmp_path, capsys, monkeypatch):
    import dataclasses

    from simcomm.engine.drive import executor

    path = _store(check, tmp_path, capsys)
    real = executor.run

    def later(plan, topology, **kwargs):
        tl = real(plan, topology, **kwargs)
        if kwargs.get("fidelity") != "analytic":
            return tl
        end = tl.end.copy()
        end[-1] = np.nextafter(end[-1], np.inf)  # one ulp
        return dataclasses.replace(tl, end=end)

    monkeypatch.setattr(executor, "run", later)
    assert check.main(["--file", str(path), *ONLY]) == 1
    # the flow scenario's analytic estimate is an engine run too: both are named
    assert capsys.readouterr().out.splitlines()[:2] == ["dpsgd/nccl/flow/exact: differs", "dpsgd/nccl/analytic: differs"]


def test_an_altered_stored_digest_is_named_and_update_counts_it(check, tmp_path, capsys):
    path = _store(check, tmp_path, capsys)
    stored = json.loads(path.read_text())
    stored["dpsgd/nccl/analytic"] = "0" * 64
    stored["no/such/scenario"] = "1" * 64
    path.write_text(json.dumps(stored))
    assert check.main(["--file", str(path), *ONLY]) == 1
    assert capsys.readouterr().out.splitlines()[0] == "dpsgd/nccl/analytic: differs"
    assert check.main(["--update", "--file", str(path), *ONLY]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("1 of 3 digests changed in hashes.json (") and out[1:] == ["  dpsgd/nccl/analytic: changed"]
    assert json.loads(path.read_text())["no/such/scenario"] == "1" * 64  # --only leaves the others as they are


def test_bad_arguments_are_one_error_line(check, capsys):
    with pytest.raises(SystemExit, match=r"^error: --only nothing-like-this: no check scenario matches"):
        check.main(["--only", "nothing-like-this"])
    with pytest.raises(SystemExit, match=r"^error: --references 'nope' is unknown; valid choices: direct, callbacks"):
        check.main(["--references", "nope", "--only", "dpsgd/nccl/analytic"])
    assert check.main(["--list", "--only", "megatron-ep4"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == "3 scenarios" and out[0].startswith("megatron-ep4-moe/nccl/flow/exact: cluster=dgx-a100-hdr")


def test_the_readme_test_command_runs_the_check_in_the_venv_after_pytest():
    import re

    readme = (ROOT / "README.md").read_text()
    block = re.search(r"<!-- test-command -->\s*```bash\n(.+?)\n```", readme, re.S)
    assert block is not None
    steps = [s.strip() for s in block.group(1).split("&&")]
    assert steps[1] == ". .venv/bin/activate" and steps[-1] == "python benchmarks/check_hashes.py"
    assert steps[-2].startswith("pytest")


# ---- the rank fold against every rank planned (fold_ranks, simcomm.strategies._fold) ------------------------

#: a folded scenario at 2 048 ranks and one forced on at 16 (their twins, fold off, are run with them)
FOLDED = ("allreduce/2048-ranks/flow/exact", "dpsgd/nccl-fold-on/flow/exact")


def test_every_seed_strategy_is_folded_against_its_twin_and_auto_at_2048_ranks(check):
    from simcomm.strategies._fold import FOLD_RANKS

    by_name = {c.name: c for c in check.cases()}
    twins = {c.name: by_name[c.twin] for c in check.cases() if c.twin}  # every twin is a check scenario
    on = {c.flat["strategy"] for name, c in twins.items() if by_name[name].flat.get("fold_ranks") == "on"}
    assert on == set(check.STRATEGIES)
    large = [by_name[name] for name in twins if by_name[name].flat["nodes"] * 8 >= FOLD_RANKS]
    assert {c.flat["strategy"] for c in large} >= {"allreduce", "gtopk", "dpsgd"}
    for case in large:  # auto folds there; the twin is the same scenario with every rank planned
        assert "fold_ranks" not in case.flat and twins[case.name].flat == {**case.flat, "fold_ranks": "off"}
    assert all(twin.flat.get("fold_ranks", "auto") != "on" for twin in twins.values())


def _nudge_folded_plans(monkeypatch):
    """Rank 0's first compute one part in 2^50 longer, in folded plans only (a fold that changes a float)."""
    import dataclasses

    from simcomm.strategies import _fold

    real = _fold.FoldingBuilder.build

    def build(self, **kw):
        if self.folded:
            first = self._mirror_ops["compute"][0]
            op = self._ops[first]
            self._ops[first] = dataclasses.replace(op, seconds=op.seconds * (1 + 2 ** -50))
        return real(self, **kw)

    monkeypatch.setattr(_fold.FoldingBuilder, "build", build)


def test_a_fold_that_changes_one_float_fails_the_check_and_cannot_be_updated(check, tmp_path, capsys, monkeypatch):
    only = [a for name in FOLDED for a in ("--only", name)]
    path = tmp_path / "hashes.json"
    assert check.main(["--update", "--file", str(path), *only]) == 0
    assert check.main(["--file", str(path), *only]) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith("2 check scenarios hash as stored in hashes.json, "
                                                               "2 folded ones as their twins (")
    _nudge_folded_plans(monkeypatch)
    assert check.main(["--file", str(path), *only]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[:2] == [f"{name}: differs" for name in FOLDED]  # their stored digests ...
    assert out[2:4] == [  # ... and their twins, which no stored digest can excuse
        "allreduce/2048-ranks/flow/exact: differs from allreduce/2048-ranks-fold-off/flow/exact (fold_ranks auto "
        "against off: the rank fold changes a float)",
        "dpsgd/nccl-fold-on/flow/exact: differs from dpsgd/nccl/flow/exact (fold_ranks on against auto: the rank "
        "fold changes a float)"]
    assert out[-1].startswith("2 folded check scenarios differ from their twins")
    stored = path.read_text()
    assert check.main(["--update", "--file", str(path), *only]) == 1
    assert capsys.readouterr().out.splitlines()[-1] == "2 folded check scenarios differ from their twins: nothing updated"
    assert path.read_text() == stored


def test_a_fold_switch_that_folds_nothing_fails_the_check(check, tmp_path, capsys, monkeypatch):
    from simcomm.strategies import _fold

    only = ["--only", FOLDED[1]]
    path = tmp_path / "hashes.json"
    assert check.main(["--update", "--file", str(path), *only]) == 0
    capsys.readouterr()
    monkeypatch.setattr(_fold, "folds", lambda workload: False)  # fold_ranks on, but every rank planned
    assert check.main(["--file", str(path), *only]) == 1
    assert capsys.readouterr().out.splitlines()[:2] == [
        f"{FOLDED[1]}: differs",
        f"{FOLDED[1]}: folded nothing (the twin check would compare a plan with itself)"]
