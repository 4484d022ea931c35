"""Imports every command module so each registers itself on the root app."""

from simcomm.cli import list_cmd  # noqa: F401
