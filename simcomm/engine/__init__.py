"""The engine: runs a CommPlan on a Topology (SimPy lives here and nowhere else).

Layers, top down: ``drive/`` (how ops run through time: executor, events), ``flow/`` (how they
are priced: flows on the live network, reservations, closed forms) and ``fluid/`` (the fluid
core and the one max-min algorithm); :mod:`~simcomm.engine.paths` chooses the driver, the
collective pricing and the fluid-core form of a run, :mod:`~simcomm.engine.options` holds
every option, and :mod:`~simcomm.engine.events` (the SimPy events the driver and the live
network share) is the one module that touches SimPy's private state.

Public API (implemented in :mod:`simcomm.engine.drive.executor`)::

    simulate(plan, topology, *, fidelity="flow", seed=0, options=EngineOptions(...)) -> Timeline
"""

from simcomm.engine.options import EngineOptions
from simcomm.engine.timeline import Timeline

__all__ = ["Timeline", "simulate", "EngineOptions"]


def simulate(plan, topology, *, fidelity: str = "flow", seed: int = 0, options: EngineOptions | None = None,
             **kwargs) -> Timeline:
    """Run ``plan`` on ``topology`` at ``fidelity`` (``flow`` or ``analytic``).

    ``options`` (:class:`EngineOptions`) says how; keyword arguments of the same names
    are applied on top (``simulate(plan, topo, resolution=0.01)``).  Options:
    ``reference=frozenset()`` (names of fast paths to turn off, :data:`simcomm.engine.paths.REFERENCES`:
    ``{"coalesce"}`` runs the plain flow model, ``{"incremental"}`` the textbook max-min solver ...;
    the paths a run took are ``Timeline.paths``), ``ppn=None`` (override ranks-per-machine for two-level
    algorithms), ``record_link_usage=False`` (bytes/s per link family over time in
    ``meta["link_usage"]``), ``link_bytes=True`` (False: no bytes per link family, and
    the analytic fidelity needs no event loop).  See docs/engine.md.
    """
    from simcomm.engine.drive.executor import run
    from simcomm.gcpause import gc_paused

    with gc_paused():  # a run allocates millions of short-lived objects and leaves no cycles
        return run(plan, topology, fidelity=fidelity, seed=seed, options=options, **kwargs)
