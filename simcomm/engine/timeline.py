"""What the engine returns: per-op start/end times and per-link-class traffic (pure data)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["Timeline"]


@dataclass(frozen=True, eq=False)
class Timeline:
    """Outcome of running one :class:`~simcomm.ops.CommPlan`.

    Attributes
    ----------
    start, end: seconds, indexed by op id.
    makespan: time the last op finished.
    link_class_bytes: bytes carried per link-class *family* name, summed over
        every directed link traversal (a 2-hop route counts its bytes twice).
    fidelity: ``flow`` or ``analytic``.
    meta: engine statistics (events processed, max-min solves, ...).
    paths: the engine paths the run took (:meth:`simcomm.engine.paths.Paths.to_dict`: driver,
        pricing, scaled steps, fluid-core form, closed-step threshold, resolution, ``stop_after``; and
        ``taken``, the counts of :data:`simcomm.engine.paths.TAKEN`); kept apart from ``meta``, the statistics.
    """

    start: np.ndarray
    end: np.ndarray
    makespan: float
    link_class_bytes: dict = field(default_factory=dict)
    fidelity: str = "flow"
    meta: dict = field(default_factory=dict)
    paths: dict = field(default_factory=dict)

    def duration(self, op_id: int) -> float:
        return float(self.end[op_id] - self.start[op_id])
