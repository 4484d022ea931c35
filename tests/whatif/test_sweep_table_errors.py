"""A what-if ``[sweep]`` file or flags of the wrong shape: one ``error:`` line, exit 2, before any point runs."""

import io

import pytest

GOOD_SWEEP = '[sweep]\nstrategies = ["allreduce"]\nvary = ["nodes=2,4"]\n'


@pytest.mark.parametrize(("top", "sweep", "message"), [
    ("", '[sweep]\nstrategies = ["allreduce"]\nvary = [1]\n',
     "[sweep] vary: [1] must be a string or a list of non-empty strings"),
    ("", '[sweep]\nstrategies = ["allreduce"]\nvary = 0\n',
     "[sweep] vary: 0 must be a string or a list of non-empty strings"),
    ("", '[sweep]\nstrategies = ["allreduce"]\naxes = [1, 2]\n',
     "[sweep] axes: [1, 2] must be a table of parameter = [values]"),
    ("", "[sweep]\nstrategies = ['allreduce']\naxes = 'nodes'\n",
     "[sweep] axes: 'nodes' must be a table of parameter = [values]"),
    ("", '[sweep]\nstrategies = ["allreduce"]\n[sweep.axes]\nnodes = [[2, 4]]\n',
     "[sweep.axes] nodes: [[2, 4]] must be a non-empty list of values (numbers, strings or true/false, not lists"),
    ("", '[sweep]\nstrategies = ["allreduce"]\n[sweep.axes]\nnodes = []\n',
     "[sweep.axes] nodes: [] must be a non-empty list of values"),
    ("", '[sweep]\nstrategies = [["allreduce"]]\nvary = ["nodes=2,4"]\n',
     "[sweep] strategies: [['allreduce']] must be a string or a list of non-empty strings"),
    ("", '[sweep]\nstrategies = ["allreduce"]\n[sweep.axes]\nnodes = [2, "x"]\n',
     "[sweep.axes] nodes: one axis takes one kind of value, but 2 is a number and 'x' is text"),
    ("", '[sweep]\nstrategies = ["allreduce"]\n[sweep.axes]\ndataload = [0, "20ms"]\n',
     ("[sweep.axes] dataload: one axis takes one kind of value, but 0 is a number and '20ms' is text; give "
      "every value the same way (with its unit: 0ms,20ms)")),
    ("", '[sweep]\nstrategies = ["allreduce"]\n[sweep.axes]\nnodes = [2, 0]\n', "nodes: 0 is out of range"),
    ("cluster = ['a']\n", GOOD_SWEEP,
     ("cluster: ['a'] is a list; a fixed parameter takes one value (a string, number or true/false); to sweep "
      "it, list its values under [sweep.axes] or use --vary")),
    ("workload = 5\n", GOOD_SWEEP, "scenario: [workload] must be a table"),
    ("stack = 'x'\n", GOOD_SWEEP, "unknown stack 'x'; valid choices: "),
    ("options = [1]\n", GOOD_SWEEP, "scenario: [options] must be a table"),
    ("", '[sweep]\nquestion = 5\nstrategies = ["allreduce"]\nvary = ["nodes=2,4"]\n',
     "[sweep] question: 5 must be a string"),
    ("", "sweep = 3\n", "scenario: [sweep] must be a table with keys: axes, question, strategies, vary"),
])
def test_sweep_table_of_wrong_shape_is_one_line_before_any_point(tmp_path, cli, top, sweep, message):
    toml = tmp_path / "s.toml"
    toml.write_text('fidelity = "analytic"\n' + top + sweep)
    rc, out, err = cli(["whatif", str(toml), "--sequential", "--out", str(tmp_path / "o")])
    assert rc == 2 and out == ""
    assert len(err.splitlines()) == 1 and err.startswith("error: ") and message in err, err
    assert not (tmp_path / "o").exists()  # refused before the first point (and before report.html)


def test_mixed_numbers_and_times_in_one_vary_axis_are_refused(tmp_path, cli):
    rc, _, err = cli(["whatif", "--vary", "dataload=0,20ms", "--strategies", "allreduce", "--fidelity", "analytic",
                      "--sequential", "--out", str(tmp_path / "o")])
    assert rc == 2 and err == ("error: --vary dataload: one axis takes one kind of value, but 0 is a number and "
                               "'20ms' is text; give every value the same way (with its unit: 0ms,20ms)\n")
    assert not (tmp_path / "o").exists()


def test_out_dir_with_the_users_own_files_is_refused_unless_forced(tmp_path, cli):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "report.md").write_text("my own notes\n")
    (out / "results.csv").write_text("a,b\n")
    args = ["whatif", "--vary", "nodes=2", "--strategies", "allreduce", "--fidelity", "analytic", "--sequential",
            "--no-report", "--out", str(out)]
    rc, _, err = cli(args)
    assert rc == 2 and len(err.splitlines()) == 1
    assert err.startswith(f"error: --out: '{out}' is not empty (report.md, results.csv) and holds no simcomm sweep")
    assert (out / "results.csv").read_text() == "a,b\n" and sorted(p.name for p in out.iterdir()) == [
        "report.md", "results.csv"]
    assert cli([*args, "--force"])[0] == 0
    assert (out / "report.md").read_text() == "my own notes\n" and (out / "results.csv").read_text() != "a,b\n"
    assert cli(args)[0] == 0  # now a sweep directory: rerunning into it resumes


def test_valid_time_axis_with_units_runs(tmp_path, cli):
    toml = tmp_path / "s.toml"
    toml.write_text('fidelity = "analytic"\n[workload]\ndataload_s = 0.01\n[sweep]\nstrategies = ["allreduce"]\n'
                    '[sweep.axes]\nnodes = [2]\nstack = ["nccl", "mpi-tcp"]\n')
    rc, _, err = cli(["whatif", str(toml), "--sequential", "--no-report", "--out", str(tmp_path / "o")])
    assert rc == 0, err
    text = (tmp_path / "o" / "results.csv").read_text()
    assert text.count("\n") == 3 and ",0.01s," in text


def test_a_list_valued_fixed_key_runs(tmp_path, cli):
    # compute_scale = [1.0, 2.0] in the scenario file is one fixed value (once a TypeError: unhashable list)
    toml = tmp_path / "s.toml"
    toml.write_text('fidelity = "analytic"\ncompute_scale = [1.0, 2.0]\ngpus_per_node = 1\n[sweep]\n'
                    'strategies = ["allreduce"]\n[sweep.axes]\nnodes = [2]\n')
    rc, _, err = cli(["whatif", str(toml), "--sequential", "--no-report", "--out", str(tmp_path / "o")])
    assert rc == 0, err
    text = (tmp_path / "o" / "results.csv").read_text()
    assert text.count("\n") == 2 and ',"[1.0, 2.0]",' in text and ",ok," in text


def test_interrupted_sweep_says_what_was_saved_and_how_to_resume(tmp_path, cli):
    from rich.console import Console

    from simcomm.cli.whatif_cmd import _say_saved

    out = tmp_path / "o"
    rc, _, err = cli(["whatif", "--vary", "nodes=2,4", "--strategies", "allreduce", "--fidelity", "analytic",
                      "--sequential", "--no-report", "--out", str(out)])
    assert rc == 0, err
    con = Console(file=io.StringIO(), width=40)
    _say_saved(con, out, 5)
    assert con.file.getvalue() == (f"interrupted: 2 of 5 point(s) saved in {out / 'points.jsonl'}; run the same "
                                   "command again to resume from there\n")
