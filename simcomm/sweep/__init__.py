"""Parameter sweeps: a grid grammar, a resumable result store, and runners.

``whatif`` builds a :class:`~simcomm.sweep.grammar.Grid` from ``--vary`` flags
or a ``[sweep]`` TOML table, then a runner evaluates a point function on every
grid point (sequentially, in local processes, or on a Dask cluster), storing
each finished point at once so an interrupted sweep loses nothing.
"""

from simcomm.sweep.grammar import Grid, parse_vary, parse_values
from simcomm.sweep.runner import run_sweep
from simcomm.sweep.store import PointRecord, ResultStore

__all__ = ["Grid", "parse_vary", "parse_values", "run_sweep", "PointRecord", "ResultStore"]
