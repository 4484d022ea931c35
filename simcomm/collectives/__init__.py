"""Collective algorithms: one module per algorithm, each with steps and a closed form."""

from simcomm.collectives.base import ALGORITHMS, COLLECTIVES, Algorithm, CostTerms, Step, ideal_time

__all__ = ["ALGORITHMS", "COLLECTIVES", "Algorithm", "CostTerms", "Step", "ideal_time"]
