"""Issue 15 reproducers on the scenario edge: each is one `error:` line and exit 2, before any long work."""

from __future__ import annotations

import pytest

LONG = "a" * 300


@pytest.mark.parametrize("argv, message", [
    (["cost", "allreduce", "--size", "10MB", "--ranks", "99999999999999999999", "--link", "ib-edr"],
     "ranks: 99999999999999999999 must be between 1 and 262,144"),
    (["cost", "allreduce", "--size", "10MB", "--ranks", "100000000", "--link", "ib-edr"],
     "ranks: 100000000 must be between 1 and 262,144"),
    (["cost", "allreduce", "--size", "1e308", "--ranks", "4", "--link", "ib-edr"], "size: 1e+308 bytes is more than"),
    (["run", "-s", "allreduce", "--cluster", LONG], "unknown topology preset"),
    (["run", "-s", "allreduce", "--nodes", "1e9"], "nodes: 1000000000 is out of range"),
    (["compare", "--nodes", "2,99999999", "--quiet"], "nodes: 99999999 is out of range"),
    (["compare", "--png", "/nonexistent/x.png", "--quiet"], "--png: directory '/nonexistent' does not exist"),
    (["run", "-s", "allreduce", "--timeline", ""], "--timeline: '.' is a directory"),
    (["run", "-s", "gtopk", "--opt", "elem_s=inf"], "option elem_s: inf must be a finite number"),
    (["run", "-s", "ps", "--opt", "server_s_per_byte=nan"], "option server_s_per_byte: nan must be a finite number"),
    (["run", "-s", "allreduce", "--dataload", "20"], "dataload: '20' needs a unit"),
    (["run", "-s", "allreduce", "--resolution", "inf"], "resolution: inf must be a finite number"),
])
def test_reproducer_is_one_line(cli, argv, message):
    rc, out, err = cli(*argv)
    assert rc == 2 and out == "" and err.startswith("error: ") and err.count("\n") == 1, (rc, err)
    assert message in err


def test_deeply_nested_scenario_is_one_line(cli, tmp_path):
    f = tmp_path / "deep.toml"
    f.write_text("nodes = " + "[" * 500 + "1" + "]" * 500 + "\n")
    rc, out, err = cli("run", str(f), "-s", "allreduce")
    assert rc == 2 and err.startswith("error: scenario:") and err.count("\n") == 1


def test_a_topology_file_fixes_its_size(cli, tmp_path):
    """compare --cluster FILE --nodes 4,8,16 used to print three identical rows labelled 4, 8 and 16 nodes."""
    f = tmp_path / "topo.toml"
    f.write_text('ranks = ["r0", "r1", "r2"]\n[nodes]\nsw = "switch"\n'
                 + "".join(f'r{i} = {{ kind = "rank", machine = {i} }}\n' for i in range(3))
                 + "".join(f'[[edges]]\na = "r{i}"\nb = "sw"\nlink = "eth-10g"\n' for i in range(3)))
    rc, out, err = cli("compare", "--cluster", str(f), "--nodes", "4,8,16", "--strategies", "allreduce", "--quiet")
    assert rc == 2 and "is a topology file with 3 node(s)" in err and err.count("\n") == 1
    rc, out, err = cli("compare", "--cluster", str(f), "--strategies", "allreduce", "--quiet", "--json")
    assert rc == 0, err
    assert '"nodes": 3' in out


def test_whatif_out_that_cannot_be_written_is_refused_before_any_point(cli):
    rc, out, err = cli("whatif", "--out", "/proc/x", "--vary", "nodes=2,4", "--strategies", "allreduce",
                       "--sequential")
    assert rc == 2 and err.count("\n") == 1 and err.startswith("error: --out: cannot write results into '/proc/x'")


def test_a_plan_that_would_exhaust_memory_is_one_line(monkeypatch, cli):
    """A setting whose plan outgrows the op budget stops with the numbers instead of swapping for hours."""
    import simcomm.ops as ops

    monkeypatch.setattr(ops, "MAX_PLAN_OPS", 1000)  # ps on 16 nodes builds ~10 000 ops
    rc, out, err = cli("run", "-s", "ps", "--nodes", "16", "--no-baseline")
    assert rc == 2 and err.count("\n") == 1 and err.startswith("error: plan: this setting needs more than 1,000 ops")
