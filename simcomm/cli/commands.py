"""Imports every command module so each registers itself on the root app."""

from simcomm.cli import list_cmd  # noqa: F401
from simcomm.cli import trace_cmd  # noqa: F401
from simcomm.cli import cost_cmd  # noqa: F401
from simcomm.cli import run_cmd  # noqa: F401
from simcomm.cli import topology_cmd  # noqa: F401
from simcomm.cli import compare_cmd  # noqa: F401
from simcomm.cli import calibrate_cmd  # noqa: F401
from simcomm.cli import whatif_cmd  # noqa: F401
from simcomm.cli import report_cmd  # noqa: F401
from simcomm.cli import validate_cmd  # noqa: F401
from simcomm.cli import bench_cmd  # noqa: F401
