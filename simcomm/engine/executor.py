"""``run()``: execute a CommPlan on a Topology as SimPy processes.

Every (rank, stream) pair that has ops runs as one SimPy process executing its
ops in id order (ids are a topological order, so this cannot deadlock); an op
starts once its dependencies are done.  Compute ops are timeouts.  A Transfer
occupies its source's stream.  A Collective starts when the last member
reaches it; one process then runs it and releases every member.  How a
Transfer or Collective is priced is the fidelity's business:
:class:`~simcomm.engine.flow.FlowPricer` runs flows on the fluid network,
:class:`~simcomm.engine.analytic.AnalyticPricer` uses closed forms.  Both see
the same op stream.
"""

from __future__ import annotations

from dataclasses import fields

from collections import defaultdict

import numpy as np
import simpy

from simcomm.engine.network import Environment
from simcomm.engine.schedule import Runtime, group_ppn, prepare
from simcomm.engine.timeline import Timeline
from simcomm.errors import ConfigError, PlanError, SimcommError
from simcomm.engine.options import FIDELITIES, EngineOptions, Pricer
from simcomm.ops import Collective, CommPlan, Compute, Transfer
from simcomm.topologies.base import Topology

__all__ = ["run", "FIDELITIES"]

OPTIONS = tuple(f.name for f in fields(EngineOptions))
#: Compute stretches stop once the CPU time still owed is below this (seconds).
_CPU_TOL = 1e-12
#: ... or after this many rounds (the CPU cost of communication would exceed the CPU).
_CPU_ROUNDS = 200
#: Collective preparations with at most this many transfers (over their steps) are kept
#: with the topology for later runs.
_KEEP_TRANSFERS = 4096


class Context:
    """What pricers share: the topology, per-rank gamma, per-link family, statistics."""

    def __init__(self, env: simpy.Environment, topology: Topology, *, coalesce: bool, ppn: int | None,
                 incremental: bool = True, record_usage: bool = False, resolution: float = 0.0,
                 link_bytes: bool = True, scalar: bool = True):
        self.env = env
        self.scalar = scalar  # False: the fluid core keeps numpy arrays even for few flows (reference)
        self.link_bytes = link_bytes  # False: bytes per link family are not counted
        self.resolution = resolution
        self.record_usage = record_usage
        self.topology = topology
        self.coalesce = coalesce
        self.incremental = incremental
        self.ppn = ppn
        self.gamma = np.array([topology.gamma(r) for r in range(topology.n_ranks)], dtype=float)
        # Machine of each rank; a rank without one is alone on its own (negative) id.
        self.machine = np.array([(-1 - r) if (m := topology.machine_of(r)) is None else m
                                 for r in range(topology.n_ranks)], dtype=np.int64)
        fams = [topology.links[name].family for name in topology.link_names]
        self.families = tuple(sorted(set(fams)))
        index = {f: i for i, f in enumerate(self.families)}
        self.family_of_link = np.array([index[f] for f in fams], dtype=np.int64)
        self.family_bytes = np.zeros(len(self.families))
        self.per_link: np.ndarray | None = None
        self.stats: dict[str, int] = defaultdict(int)

    def count_bytes(self, routed, repeats: int) -> None:
        if self.link_bytes and len(routed) and len(self.families):
            self.family_bytes += repeats * routed.family_bytes(self.family_of_link, len(self.families))
            if self.per_link is not None:  # only when the busiest individual links are asked for
                np.add.at(self.per_link, routed.links, repeats * np.repeat(routed.nbytes, routed.route_len))


def run(plan: CommPlan, topology: Topology, *, fidelity: str = "flow", seed: int = 0,
        options: EngineOptions | None = None, **kwargs) -> Timeline:
    """Simulate ``plan`` on ``topology``; see :func:`simcomm.engine.simulate`.

    Options: ``coalesce`` (default True) enables the exact shortcuts of the flow
    fidelity (False runs every repeat of every step as plain flows);
    ``incremental`` (default True) re-solves max-min only for flows whose rate
    can change, with the local-minimum solver (False: every flow at every
    event with the textbook solver, the reference the tests compare against);
    ``ppn`` overrides the ranks-per-machine given to hierarchical algorithms;
    ``record_link_usage`` (default False) stores bytes/s per link family over
    time in ``meta["link_usage"]`` as ``(time_s, family, bytes_per_s)`` rows,
    one whenever a family's value changes (flow fidelity; empty for analytic).
    ``comm_cpu`` (seconds per byte, default 0) is the host CPU a rank spends on
    each byte it sends or receives: a Compute op is stretched by ``comm_cpu`` times
    the bytes its rank moved while it ran (flow fidelity, transfers and steps on
    the shared network; docs/engine.md, "CPU cost of communication").
    ``resolution`` (default 0: exact) merges flow completions that lie within
    that fraction of the finishing transfers' own durations into one event
    (flow fidelity; ``meta["merged_flows"]`` counts the flows moved; docs/engine.md,
    "Event resolution").
    ``link_bytes`` (default True) counts the bytes each link family carries
    (``Timeline.link_class_bytes``); with False that dict is empty, and the
    analytic fidelity then runs without an event loop (:func:`analytic.longest_path`:
    the same start and end of every op, in one pass in op order).
    ``scalar`` (default True) lets the fluid core hold few live flows in Python floats
    (:mod:`simcomm.engine.small`: the same arithmetic, bit for bit, without numpy's
    per-call cost); False keeps its arrays throughout (the reference for tests).
    ``seed`` is recorded; the models are deterministic and draw no random numbers.
    """
    if fidelity not in FIDELITIES:
        raise ConfigError(f"fidelity: unknown {fidelity!r}; valid choices: {', '.join(FIDELITIES)}")
    opts = EngineOptions.of(options, **kwargs)  # every option typed and checked once
    if plan.n_ranks > topology.n_ranks:
        raise PlanError(f"plan uses {plan.n_ranks} ranks but topology {topology.name!r} "
                        f"has only {topology.n_ranks}")
    env = Environment()
    ctx = Context(env, topology, coalesce=opts.coalesce, ppn=opts.ppn, incremental=opts.incremental,
                  record_usage=opts.record_link_usage, resolution=float(opts.resolution),
                  link_bytes=opts.link_bytes, scalar=opts.scalar)
    if opts.busiest_links:
        ctx.per_link = np.zeros(len(topology.link_names))
    flow_pricer = analytic_pricer = None
    if fidelity == "flow":
        from simcomm.engine.flow import FlowPricer

        flow_pricer = FlowPricer(ctx)
    else:
        from simcomm.engine.analytic import AnalyticPricer

        analytic_pricer = AnalyticPricer(ctx)
    pricer: Pricer = flow_pricer or analytic_pricer  # type: ignore[assignment]  # exactly one is set

    ops = plan.ops
    n = len(ops)
    prepared: dict = {}  # by op key, and by op id (the same objects)
    runtime = opts.runtime or Runtime()
    chosen: dict[tuple, int] = {}
    # A preparation depends on the op's key, the runtime and the ppn override alone, so small
    # ones are kept with the topology for the next run (a strategy's flow run, then its analytic
    # estimate; plans with thousands of 2-rank all-reduces).  Large ones are not kept (memory).
    kept = topology.__dict__.setdefault("_engine_prepared", {})
    for op in ops:
        if isinstance(op, Collective):
            # NCCL's schedule depends on where the members sit, not only on how many there are.
            where = op.ranks if runtime.rules == "nccl" else ctx.ppn or group_ppn(topology, op.ranks)
            key = (op.kind, op.algorithm, len(op.ranks), op.nbytes, op.root, where)
            if key not in prepared:
                prep = kept.get((runtime, ctx.ppn, key))
                if prep is None:
                    prep = prepare(op, topology, ctx.ppn, runtime)
                    if sum(len(st) for st in prep.steps) <= _KEEP_TRANSFERS:
                        kept[(runtime, ctx.ppn, key)] = prep
                prepared[key] = prep
            prepared[op.id] = prepared[key]
            label = (op.kind, op.algorithm, prepared[key].label or prepared[key].algorithm.name)
            chosen[label] = chosen.get(label, 0) + 1

    if fidelity == "analytic" and not ctx.link_bytes:
        # Closed forms share nothing, so every op's times follow from its deps in op order.
        from simcomm.engine.analytic import longest_path

        assert analytic_pricer is not None
        t0, t1 = longest_path(ops, analytic_pricer, prepared)
        return Timeline(start=t0, end=t1, makespan=float(t1.max()) if n else 0.0, link_class_bytes={},
                        fidelity=fidelity, meta=_meta(ctx, seed, chosen))

    # Plain lists while running (cheaper per op than numpy items); arrays at the end.
    start: list[float] = [np.nan] * n
    end: list[float] = [np.nan] * n
    done = [env.event() for _ in range(n)]
    arrived = [0] * n

    def finish(oid: int) -> None:
        end[oid] = env.now
        done[oid].succeed()

    def collective(op):
        # Members arrive without waiting for the op's deps (one wait here instead of one
        # per member and dep); the start is the same: last arrival and every dep done.
        for d in op.deps:
            if not done[d].processed:
                yield done[d]
        start[op.id] = env.now
        yield from pricer.collective(op, prepared[op.id])
        finish(op.id)

    cpu = float(opts.comm_cpu)
    track = cpu > 0 and fidelity == "flow"  # the analytic fidelity has no shared network to count bytes on
    if track:
        assert flow_pricer is not None  # only the flow fidelity tracks ranks' bytes
        flow_pricer.track_ranks()

    def cpu_stretched(op):
        # The rank's CPU also moved bytes while computing: owe comm_cpu per byte, and
        # keep computing until the owed time (which itself overlaps more traffic) is paid.
        b0 = flow_pricer.rank_bytes(op.rank)
        yield env.timeout(op.seconds)
        paid = 0.0
        for _ in range(_CPU_ROUNDS):
            owed = cpu * (flow_pricer.rank_bytes(op.rank) - b0) - paid
            if owed <= _CPU_TOL:
                break
            paid += owed
            ctx.stats["cpu_stretch_rounds"] += 1
            yield env.timeout(owed)

    timeout, transfer = env.timeout, pricer.transfer

    def stream(oids: list[int]):
        for oid in oids:
            op = ops[oid]
            if isinstance(op, Collective):
                arrived[oid] += 1
                if arrived[oid] == len(op.ranks):
                    env.process(collective(op))
                if done[oid].callbacks is not None:  # not processed yet
                    yield done[oid]
                continue
            for d in op.deps:
                if done[d].callbacks is not None:
                    yield done[d]
            start[oid] = env.now
            if isinstance(op, Compute):
                if op.seconds > 0:
                    if track:
                        yield from cpu_stretched(op)
                    else:
                        yield timeout(op.seconds)
            else:
                yield from transfer(op)
            end[oid] = env.now
            done[oid].succeed()

    queues: dict[tuple[int, str], list[int]] = {}
    for op in ops:
        members = (op.src,) if isinstance(op, Transfer) else op.ranks
        for r in members:
            queues.setdefault((r, op.stream), []).append(op.id)
    for qkey in sorted(queues):
        env.process(stream(queues[qkey]))
    try:
        env.run()
    except Exception as exc:
        # SimPy re-raises a process's exception as a copy chained to the original.
        if isinstance(exc.__cause__, SimcommError):
            raise exc.__cause__ from None
        raise

    pricer.finish_stats()
    t_start, t_end = np.array(start, dtype=float), np.array(end, dtype=float)
    missing = np.flatnonzero(np.isnan(t_end))
    if len(missing):
        op = ops[int(missing[0])]
        raise PlanError(f"op {op.id} ({op.label or type(op).__name__}) never ran: its dependencies "
                        "or its group's stream order can never be satisfied")
    if pricer.live_merged:  # the shared network's merges (isolated runs count their own)
        ctx.stats["merged_flows"] += pricer.live_merged
    stats = _meta(ctx, seed, chosen)
    if ctx.record_usage:
        from simcomm.engine.fluid import merge_usage

        stats["link_usage"] = merge_usage(pricer.usage, ctx.families)
    link_bytes = {f: float(b) for f, b in zip(ctx.families, ctx.family_bytes)} if ctx.link_bytes else {}
    if ctx.per_link is not None:
        # busiest = longest time at full rate (bytes / capacity): a fast link carrying more can be idler
        busy = ctx.per_link / topology.capacity
        top = sorted(np.flatnonzero(ctx.per_link), key=lambda i: (-busy[i], i))[:opts.busiest_links]
        stats["busiest_links"] = [(*map(str, topology.link_endpoints(int(i))), topology.link_names[i],
                                   float(ctx.per_link[i]), float(busy[i])) for i in top]
    return Timeline(start=t_start, end=t_end, makespan=float(t_end.max()) if n else 0.0, link_class_bytes=link_bytes,
                    fidelity=fidelity, meta=stats)


def _meta(ctx: Context, seed: int, chosen: dict) -> dict:
    stats: dict = dict(sorted(ctx.stats.items()))
    stats["seed"] = seed
    # What each collective really ran: (kind, algorithm asked, what ran, how many ops).
    stats["algorithms"] = [(k, a, ran, n) for (k, a, ran), n in sorted(chosen.items())]
    return stats
