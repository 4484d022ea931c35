"""The CLI turns every user error into one line on stderr and exit status 2."""

import pathlib
import re
import subprocess
import sys

from simcomm.cli.app import main

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_unknown_catalogue_is_one_line_exit_2(capsys):
    assert main(["list", "nonsense"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: unknown catalogue 'nonsense'; valid choices:")


def test_unknown_option_is_one_line_exit_2(capsys):
    assert main(["list", "links", "--frobnicate"]) == 2
    err = capsys.readouterr().err
    assert err == "error: No such option: --frobnicate\n"


def test_no_traceback_from_the_console_script():
    out = subprocess.run([sys.executable, "-m", "simcomm", "list", "nope"], capture_output=True, text=True)
    assert out.returncode == 2
    assert "Traceback" not in out.stderr and out.stderr.count("\n") == 1


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"<!-- test-command -->\s*```bash\n(.+?)\n```", readme, re.S)
    assert block, "README lacks the test command block"
    ci = (ROOT / ".ci" / "run").read_text()
    assert "<!-- test-command -->" in ci  # .ci/run extracts and runs that very block
    assert "pip install torch==2.13.0" in block.group(1).split("&&")[2]


def test_version(capsys):
    from simcomm import __version__

    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"simcomm {__version__}\n"
