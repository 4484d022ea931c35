"""``python -m simcomm`` runs the CLI."""

from simcomm.cli.app import run

run()
