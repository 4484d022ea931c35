"""The parts of :func:`simcomm.llm.search.search` that run in worker processes (:mod:`simcomm.llm.workers`):
the memory model and the estimate of a list of layouts, and how the layouts are split over the workers.

Every part's result goes back to its layout, so :func:`~simcomm.llm.search.search` gives the rows one
process gives: the memory model is a function of the layout, and a Pricer's estimate of a layout does not
depend on what it priced before (its caches are keyed on everything a price reads).
"""

from __future__ import annotations

from dataclasses import dataclass

from simcomm.llm.fitting import fits_budget, layout_memory
from simcomm.llm.layout import Layout
from simcomm.llm.workers import run_parts
from simcomm.memory.fit import Budget

__all__ = ["estimate_part", "estimate_in_processes", "fit_part", "fit_in_processes"]


def estimate_part(base: dict, nodes: int, global_batch: int, layouts: list[Layout], tick=None, ready=None) -> list:
    """:meth:`~simcomm.llm.estimate.Pricer.estimate` of each of ``layouts`` (one Pricer, its caches shared by
    them); ``ready``: the caller's (scenario, Context, topology), else built here once per worker process and
    kept for its next parts (:data:`_WORKER_PRICERS`: a Pricer's prices never depend on what it priced before)."""
    from simcomm.llm.estimate import Pricer
    from simcomm.pipeline import Context, resolve_precision
    from simcomm.scenario import from_flat
    from simcomm.workload import build_workload

    key = (repr(sorted(base.items())), nodes, global_batch)
    pricer = _WORKER_PRICERS.get(key) if ready is None else None
    if pricer is None:
        if ready is None:
            scn = from_flat({**base, "strategy": "megatron", "nodes": nodes})
            ctx = Context(scn)
            topo = ctx.cluster(nodes, 0)[1]
        else:
            scn, ctx, topo = ready
        n = topo.n_ranks
        trace = ctx.trace()
        # the pipeline's own workload (gradient bytes in its wire dtype): layer_costs reads it as the emitter does
        work = build_workload(trace, n, wire_dtype=resolve_precision(scn, trace, []))
        pricer = Pricer(work, topo, ctx.runtime(), global_batch, gpus_per_node=max(1, n // nodes))
        if ready is None:
            _WORKER_PRICERS.clear()  # one search per pool: the previous one's Pricer is not needed
            _WORKER_PRICERS[key] = pricer
    out = []
    for lay in layouts:
        out.append(pricer.estimate(lay))
        if tick:
            tick()
    return out


#: a worker process's Pricer, kept between the parts of one search (estimate_part)
_WORKER_PRICERS: dict = {}


def estimate_in_processes(base: dict, nodes: int, global_batch: int, layouts: list[Layout], workers: int,
                           tick) -> list:
    """:func:`estimate_part` over ``workers`` processes, one part per (tp, cp, dp) split (the groups a Pricer's
    collective prices are keyed on), largest first, each to the next free worker; every estimate back in
    ``layouts``' order.  A Pricer's estimate of a layout does not depend on what it priced before (its caches
    are keyed on everything a price reads), so the estimates are the ones one process gives."""
    by_split: dict[tuple, list[int]] = {}
    for i, lay in enumerate(layouts):
        by_split.setdefault((lay.tp, lay.cp, lay.dp), []).append(i)
    parts = sorted(by_split.values(), key=len, reverse=True)
    results = run_parts(estimate_part, [(base, nodes, global_batch, [layouts[i] for i in p]) for p in parts],
                        workers, None if tick is None else lambda k: [tick() for _ in parts[k]])
    out: list = [None] * len(layouts)
    for p, got in zip(parts, results, strict=True):
        for i, e in zip(p, got, strict=True):
            out[i] = e
    return out


def fit_part(cfg, layouts: list[Layout], global_batch: int, budget: Budget, dtype: str) -> list[tuple[int, bool]]:
    """(memory total, fits) of each of ``layouts``, as :func:`fit_layouts` decides it (a worker's part)."""
    out = []
    for lay in layouts:
        mem = layout_memory(cfg, lay, global_batch, dtype)
        out.append((mem.total, fits_budget(mem, budget)))
    return out


def fit_in_processes(cfg, layouts: list[Layout], global_batch: int, budget, dtype: str, workers: int, tick):
    """:func:`fit_layouts` over ``workers`` processes (contiguous parts), with the same fits in the same order
    and the same smallest layout (its memory estimate made again here, for the error line)."""
    size = -(-len(layouts) // workers)
    parts = [layouts[i:i + size] for i in range(0, len(layouts), size)]
    results = run_parts(fit_part, [(cfg, p, global_batch, budget, dtype) for p in parts], workers,
                        None if tick is None else lambda k: [tick() for _ in parts[k]])
    fits, smallest = [], None
    for part, got in zip(parts, results, strict=True):
        for lay, (total, ok) in zip(part, got, strict=True):
            if smallest is None or total < smallest[1]:
                smallest = (lay, total)
            if ok:
                fits.append((lay, _Total(total)))
    assert smallest is not None
    return fits, (smallest[0], layout_memory(cfg, smallest[0], global_batch, dtype))


@dataclass(frozen=True)
class _Total:
    """A fitting layout's memory as :func:`search` reads it from a worker: its total alone."""

    total: int
