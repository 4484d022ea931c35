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


def test_an_unknown_name_names_what_the_user_probably_meant(capsys):
    """Compared without case and punctuation: the name it spells, else the names it begins, else the nearest."""
    assert main(["run", "--strategy", "allreduce", "--model", "Llama-3-8B"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("error: unknown model 'Llama-3-8B' (did you mean 'llama3-8b'?); valid choices: bert-base,")
    assert main(["run", "--strategy", "allreduce", "--cluster", "gb200"]) == 2
    assert capsys.readouterr().err.startswith(
        "error: unknown topology preset 'gb200' (did you mean 'gb200-nvl36' or 'gb200-nvl72'?); valid choices:")
    assert main(["run", "--strategy", "allreduce", "--inter", "ib-ndr400"]) == 2
    assert "unknown link class 'ib-ndr400' (did you mean 'ib-ndr'?); valid choices:" in capsys.readouterr().err
    assert main(["list", "zzzz"]) == 2
    assert capsys.readouterr().err.startswith("error: unknown catalogue 'zzzz'; valid choices:")  # nothing close


def test_close_names_compare_without_case_and_punctuation():
    from simcomm.errors import close_names

    names = ["dgx-h100-fat-tree", "dgx-h100-ndr", "dgx1-v100", "llama3-8b", "llama3.1-8b", "nccl", "nccl-socket"]
    assert close_names("LLAMA_3_8B", names) == ("llama3-8b",)
    assert close_names("dgx-h100", names) == ("dgx-h100-fat-tree", "dgx-h100-ndr")
    assert close_names("ncc", names) == ("nccl", "nccl-socket")
    assert close_names("llama3.1-8", names) == ("llama3.1-8b",)
    assert close_names("", names) == close_names("--", names) == close_names(3, names) == ()
    assert close_names("a", [f"a{i}" for i in range(9)], most=3) == ("a0", "a1", "a2")


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
