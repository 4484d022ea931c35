"""Strategies: one module each, registered in STRATEGIES."""

from simcomm.strategies.base import STRATEGIES, NotApplicable, Strategy

__all__ = ["STRATEGIES", "NotApplicable", "Strategy"]
