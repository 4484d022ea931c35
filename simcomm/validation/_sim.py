"""Run simcomm's own pipeline on a validation setup, with topologies/traces built here.

``simulate`` takes a :class:`~simcomm.scenario.Scenario` plus optionally a
ready Topology and Trace.  The pipeline's public knobs cover presets only,
so for setups without a preset (seed 004's 56 Gb/s cluster) we seed the
pipeline's :class:`~simcomm.pipeline.Context` caches with our own objects;
everything else (workload, strategy, stack, engine, breakdown) is the
unmodified ``simcomm run`` path.
"""

from __future__ import annotations

from simcomm.pipeline import Context
from simcomm.pipeline import simulate as _simulate
from simcomm.scenario import Scenario
from simcomm.stacks import apply_stack, get_stack
from simcomm.strategies.base import STRATEGIES, make_params

__all__ = ["simulate", "bundled"]


def bundled(name: str):
    """A bundled trace by name."""
    from simcomm import traces

    return traces.load_bundled(name)


def simulate(scn: Scenario, *, topology=None, trace=None, baseline: bool = False):
    """``simcomm run`` on ``scn`` with an optional ready-made topology and trace."""
    ctx = Context(scn)
    if trace is not None:
        ctx._trace = trace
    if topology is not None:
        extra = STRATEGIES.get(scn.strategy)(make_params(STRATEGIES.get(scn.strategy), scn.options)).extra_nodes()
        stack = get_stack(scn.stack.name).with_overrides(scn.stack.efficiency, scn.stack.overhead)
        ctx._clusters[(scn.nodes, extra)] = (topology, apply_stack(topology, stack))
    return _simulate(scn, ctx=ctx, baseline=baseline, analytic=False)
