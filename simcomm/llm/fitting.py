"""A layout's memory and whether it fits: what the search and its worker parts both read.

Kept apart from :mod:`simcomm.llm.search` so that the worker parts (:mod:`simcomm.llm.search_parts`), which the
search starts, need not import the search back.
"""

from __future__ import annotations

from simcomm.llm.layout import Layout
from simcomm.memory import layout as memory_layout
from simcomm.memory.fit import Budget, refuses

__all__ = ["layout_memory", "fits_budget"]


def layout_memory(cfg, lay: Layout, global_batch: int, dtype: str = "bf16"):
    """The memory model's fullest stage for ``lay`` (:func:`simcomm.memory.layout.estimate`)."""
    return memory_layout.estimate(cfg, tp=lay.tp, pp=lay.pp, dp=lay.dp, cp=lay.cp, ep=lay.ep, etp=lay.etp,
                                  shard_group=lay.shard_group, zero=lay.zero, micro_batch=lay.microbatch,
                                  microbatches=lay.microbatches(global_batch),
                                  sequence_parallel=lay.sequence_parallel, recompute=lay.recompute,
                                  schedule=lay.schedule, virtual_stages=lay.virtual, dtype=dtype)


def fits_budget(mem, budget: Budget) -> bool:
    """Whether ``mem``'s peak fits ``budget`` (:func:`simcomm.memory.fit.check` accepts it; its rule,
    :func:`~simcomm.memory.fit.refuses`, without making the line for each of tens of thousands of layouts)."""
    return not refuses(mem.peak(), budget)
