"""Run simcomm's own pipeline on a validation setup, with topologies/traces built here.

``simulate`` takes a :class:`~simcomm.scenario.Scenario` plus optionally a
ready Topology and Trace.  The pipeline's public knobs cover presets only,
so for setups without a preset (seed 004's 56 Gb/s cluster) we hand our own
objects to :func:`simcomm.pipeline.simulate` (its ``topology``/``trace`` arguments);
everything else (workload, strategy, stack, engine, breakdown) is the
unmodified ``simcomm run`` path.
"""

from __future__ import annotations

from simcomm.pipeline import simulate as _simulate
from simcomm.scenario import Scenario

__all__ = ["simulate", "bundled"]


def bundled(name: str):
    """A bundled trace by name."""
    from simcomm import traces

    return traces.load_bundled(name)


def simulate(scn: Scenario, *, topology=None, trace=None, baseline: bool = False):
    """``simcomm run`` on ``scn`` with an optional ready-made topology and trace."""
    return _simulate(scn, topology=topology, trace=trace, baseline=baseline, analytic=False)
