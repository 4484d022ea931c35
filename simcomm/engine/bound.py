"""A lower bound on a plan's flow-fidelity makespan, without running the flow model.

:func:`makespan_bound` walks the plan once in op order with the executor's rules ("Execution of a plan",
docs/engine.md: a (rank, stream) runs its ops in id order, an op starts once its deps are done, a collective
once its last member's stream reaches it) and gives each op a duration that no run of the flow model can beat:

* a ``Compute`` its seconds (the engine's timeout, exactly);
* a ``Transfer`` its route's latency plus ``(1 - resolution)`` times its bytes over the route's smallest link
  capacity: a flow's rate never exceeds the capacity of a link it crosses (max-min shares a link's capacity
  among its flows), and an event-resolution merge retires a flow at most ``resolution`` of its bandwidth phase
  early (docs/engine.md, "Event resolution": a merged flow ends at ``t_e >= t_f - resolution·(t_f - t_bw)``,
  and ``t_e - t_bw >= (1 - resolution)·bytes / capacity`` follows from it);
* a ``Collective`` the sum over its runtime's steps (run one after another, each repeat after the last:
  ``FlowPricer.collective``) of the slowest transfer's bound of the step, with the step's latency (NCCL's
  tuning-model latency where the preparation gives one); reductions and contention only add to it.  Coalesced
  repeats, closed steps and kept isolated runs price a step as it runs alone, which is no faster.

The longest such path is therefore at most the simulated makespan (``tests/engine/test_engine_bound.py`` checks
it on megatron layouts and drawn plans).  ``simcomm plan`` uses it to pass over a layout whose bound already
exceeds the best simulated step (docs/plan.md, section 4).  A plan that declares an iteration period (its step
is not the makespan) gets 0.
"""

from __future__ import annotations

import numpy as np

from simcomm.engine.schedule import route_step
from simcomm.ops import Collective, Compute, Transfer

__all__ = ["makespan_bound"]


def makespan_bound(plan, topology, runtime, *, resolution: float = 0.0, ppn: int | None = None) -> float:
    """A lower bound (seconds) on ``plan``'s makespan at flow fidelity on ``topology`` with ``runtime``'s
    collectives and event resolution ``resolution`` (see the module docstring); 0 for a plan with a period."""
    if plan.info.period or plan.info.period_ranks:
        return 0.0
    keep = 1.0 - float(resolution)
    pairs = _pair_bounds(plan.ops, topology, keep)
    coll: dict = {}  # (op key, ranks) -> seconds
    preps: dict = {}
    end = [0.0] * len(plan.ops)
    free: dict[tuple[int, str], float] = {}
    for op in plan.ops:
        if isinstance(op, Transfer):
            t = free.get((op.src, op.stream), 0.0)
        elif isinstance(op, Collective):
            t = max(free.get((r, op.stream), 0.0) for r in op.ranks)
        else:
            t = free.get((op.rank, op.stream), 0.0)
        for d in op.deps:
            if end[d] > t:
                t = end[d]
        if isinstance(op, Compute):
            e = t + op.seconds if op.seconds > 0 else t
            free[(op.rank, op.stream)] = e
        elif isinstance(op, Transfer):
            latency, cap = pairs[(op.src, op.dst)]
            e = t + latency + keep * op.nbytes / cap
            free[(op.src, op.stream)] = e
        else:
            e = t + _collective_bound(op, topology, runtime, ppn, keep, coll, preps)
            for r in op.ranks:
                free[(r, op.stream)] = e
        end[op.id] = e
    return max(end, default=0.0)


def _pair_bounds(ops, topology, keep: float) -> dict:
    """(latency, smallest capacity) of every Transfer's route, routed in one call."""
    todo = sorted({(op.src, op.dst) for op in ops if isinstance(op, Transfer)})
    if not todo:
        return {}
    arr = np.array(todo, dtype=np.int64)
    route_len, links = topology.routes(arr[:, 0], arr[:, 1])
    out = {}
    at = 0
    for pair, n in zip(todo, route_len.tolist(), strict=True):
        hop = links[at:at + n]
        at += n
        # a route of no links (a rank to itself) is never slower than instant
        out[pair] = ((float(topology.latency[hop].sum()), float(topology.capacity[hop].min())) if n else (0.0, np.inf))
    return out


def _collective_bound(op, topology, runtime, ppn, keep: float, cache: dict, preps: dict) -> float:
    """Σ over the runtime's steps of repeat × the slowest transfer's (latency + keep × bytes / bottleneck)."""
    mine = (op.kind, op.algorithm, op.nbytes, op.root, op.ranks)  # all the preparation and the routes depend on
    hit = cache.get(mine)
    if hit is not None:
        return hit
    where = runtime.placement(op, topology, ppn)
    key = (op.kind, op.algorithm, len(op.ranks), op.nbytes, op.root, where)
    prep = preps.get(key)
    if prep is None:
        prep = preps[key] = runtime.prepare(op, topology, ppn)
    group = np.asarray(op.ranks, dtype=np.int64)
    gamma = np.zeros(topology.n_ranks)
    total = 0.0
    for i, step in enumerate(prep.steps):
        if len(step) == 0:
            continue
        routed = route_step(topology, group, step, gamma)
        latency = routed.latency
        if prep.latency is not None and prep.latency[i] is not None:
            latency = np.full(len(routed), float(prep.latency[i]))
        starts = np.concatenate(([0], np.cumsum(routed.route_len)[:-1]))
        cap = np.full(len(routed), np.inf)
        has = routed.route_len > 0
        if has.any():
            cap[has] = np.minimum.reduceat(topology.capacity[routed.links], starts[has])
        total += step.repeat * float((latency + keep * routed.nbytes / cap).max())
    cache[mine] = total
    return total
