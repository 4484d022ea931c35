"""simcomm: predict distributed-training iteration time for every communication strategy.

Data flows one way::

    trace -> workload -> strategy.plan() -> ops (CommPlan) -> engine -> result -> report / CLI

``import simcomm`` needs neither a GPU nor torch; torch is imported lazily by
trace capture only.
"""

from simcomm.errors import ConfigError, PlanError, SimcommError, TopologyError, TraceFormatError, UnknownNameError
from simcomm.ops import Collective, CommPlan, Compute, PlanBuilder, Transfer

__version__ = "0.1.0"

__all__ = [
    "__version__",
    "SimcommError",
    "ConfigError",
    "PlanError",
    "TopologyError",
    "TraceFormatError",
    "UnknownNameError",
    "Collective",
    "CommPlan",
    "Compute",
    "PlanBuilder",
    "Transfer",
]
