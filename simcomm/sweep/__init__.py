"""Parameter sweeps: a grid grammar, a resumable result store, and runners.

``whatif`` builds a :class:`~simcomm.sweep.grammar.Grid` from ``--vary`` flags
or a ``[sweep]`` TOML table, then a runner evaluates a point function on every
grid point (sequentially, in local processes, or on a Dask cluster), storing
each finished point at once so an interrupted sweep loses nothing.  Points are
keyed by content and every stored record carries a checksum, so a damaged
store loses only its damaged lines (:mod:`simcomm.sweep.store`);
:mod:`simcomm.sweep.saved` reads a sweep directory back for ``simcomm report``.
"""

from simcomm.sweep.grammar import Grid, parse_values, parse_vary
from simcomm.sweep.runner import SweepInterrupted, run_sweep
from simcomm.sweep.store import PointRecord, ResultStore, check_out_dir

__all__ = ["Grid", "PointRecord", "ResultStore", "SweepInterrupted", "check_out_dir", "parse_values", "parse_vary",
           "run_sweep"]
