"""Shared test fixtures."""

import pytest


@pytest.fixture
def cli(capsys):
    """Run the ``simcomm`` entry point in-process: ``cli("run", "--strategy", ...)`` or ``cli([...])``.

    Returns ``(exit status, stdout, stderr)``, as a user would see them.
    """
    from simcomm.cli.app import main

    def run(*argv):
        args = list(argv[0]) if len(argv) == 1 and isinstance(argv[0], (list, tuple)) else list(argv)
        rc = main(args)
        out = capsys.readouterr()
        return rc, out.out, out.err

    return run
