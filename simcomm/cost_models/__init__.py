"""Closed-form cost models (Hockney α-β-γ, LogGP) that price collective algorithms.

Importing the package registers every model in :data:`COST_MODELS`.
"""

from simcomm.cost_models import hockney, loggp  # noqa: E402,F401  (imported to register)
from simcomm.cost_models.base import COST_MODELS, CostModel, LinkParams
from simcomm.cost_models.hockney import HOCKNEY, Hockney  # noqa: E402
from simcomm.cost_models.loggp import LOGGP, LogGP, LogGPParams  # noqa: E402

__all__ = ["COST_MODELS", "CostModel", "LinkParams", "Hockney", "HOCKNEY", "LogGP", "LOGGP", "LogGPParams"]
