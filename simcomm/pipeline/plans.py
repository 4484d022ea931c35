"""Run a strategy's plans through the engine: one :class:`RunRecord` per strategy.

:func:`run_plans` simulates each kind of iteration a strategy plans (a periodic strategy has several, each
with its weight), with the options of :class:`RunOptions`, and returns their times, breakdowns and traffic
with what the engine merged and which collective algorithms it ran.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from simcomm.errors import ConfigError, SimcommError
from simcomm.result import Breakdown, IterationKind, breakdown, exposed_by, iteration_time
from simcomm.runtimes import Runtime

__all__ = ["RunOptions", "RunRecord", "run_plans", "rank_mean", "mean_of"]


@dataclass(frozen=True)
class RunOptions:
    """How :func:`run_plans` simulates.

    ``record_link_usage`` asks the engine for bytes/s per link family over time
    (``timeline.meta["link_usage"]``).  ``comm_cpu`` is the stack's host CPU cost per byte
    (engine option ``comm_cpu``, flow fidelity).  ``resolution`` is the engine's event resolution
    (flow fidelity).  ``jitter`` > 0 (coefficient of variation of every rank's compute, drawn afresh
    each iteration) simulates each kind as :data:`simcomm.jitter.ITERATIONS` chained copies and
    reports their mean spacing (:mod:`simcomm.jitter`).  ``runtime`` is how collectives run on the
    stack.  ``analytic``: also price each kind by its closed form.  ``rank_means``: also record
    each kind's mean over training ranks of their finish times (:func:`rank_mean`; not with
    ``jitter``).  ``busiest``: record that many of the busiest directed links of each kind, with their
    utilisation over the iteration.  ``comm_streams``: the strategy's streams of each parallelism, for
    the exposed-time split.
    """

    fidelity: str
    seed: int
    runtime: Runtime | None = None
    analytic: bool = True
    record_link_usage: bool = False
    comm_cpu: float = 0.0
    resolution: float = 0.0
    jitter: float = 0.0
    rank_means: bool = False
    busiest: int = 0
    comm_streams: dict | None = None


@dataclass(frozen=True)
class RunRecord:
    """What :func:`run_plans` ran: each kind of iteration, the flows merged, the algorithms that ran."""

    kinds: tuple[IterationKind, ...]
    #: flows the engine moved to a merged event (event resolution), over every simulation
    merged_flows: int = 0
    #: (collective, algorithm asked) -> {algorithm that ran: how often}, e.g. NCCL's choices
    algorithms: dict = field(default_factory=dict)


def run_plans(kinds, topo, n_train: int, how: RunOptions, on_timeline=None, progress=None) -> RunRecord:
    """Simulate each (weight, plan) of ``kinds`` on ``topo`` as ``how`` says.

    ``on_timeline(label, weight, plan, timeline, topology)`` is called for each
    kind as it is simulated (``simcomm run --timeline`` writes them out).  ``progress(stage)``,
    when given, is told each engine run before it starts (a command line's progress bar).
    """
    from simcomm import engine
    from simcomm import jitter as jit
    from simcomm.engine.options import EngineOptions

    fidelity, seed, runtime, jitter = how.fidelity, how.seed, how.runtime, how.jitter
    out = []
    merged = 0
    ran: dict = {}
    # One options object per run: the flow fidelity's CPU cost and event resolution, the stack's runtime.
    opts = EngineOptions(runtime=runtime, record_link_usage=how.record_link_usage, busiest_links=how.busiest,
                         **({"comm_cpu": how.comm_cpu, "resolution": how.resolution} if fidelity == "flow" else {}))
    for n_kind, (weight, plan) in enumerate(kinds):
        run_plan, copies = plan, None
        if jitter and plan.info.measured_ranks is not None:
            # identical replicas folded into one would all draw replica 0's compute: no straggler among them
            raise ConfigError("workload.compute_jitter: draws every rank's compute separately, but this plan "
                              "simulates one data-parallel replica for all; use --opt replicas=all (or auto)")
        if jitter:
            run_plan, copies = jit.chain(plan, jit.draw(jitter, jit.ITERATIONS, plan.n_ranks, (seed, n_kind)))
        run_opts = replace(opts, traffic_weights=plan.info.traffic_weights) if plan.info.traffic_weights else opts
        of = f" {n_kind + 1}/{len(kinds)}" if len(kinds) > 1 else ""
        if progress is not None:
            progress(f"{fidelity} simulation{of}: {len(run_plan.ops):,} ops on {topo.n_ranks:,} ranks")
        tl = engine.simulate(run_plan, topo, fidelity=fidelity, seed=seed, options=run_opts)
        merged += int(tl.meta.get("merged_flows", 0))
        for kind, asked, what, count in tl.meta.get("algorithms", ()):
            ran.setdefault((kind, asked), {}).setdefault(what, 0)
            ran[(kind, asked)][what] += count
        if on_timeline is not None:
            on_timeline(plan.info.kind, float(weight), run_plan, tl, topo)
        if copies is None:
            t, window = iteration_time(plan, tl)
            per = max(1, plan.info.iterations_in_plan)
        else:
            t, window = jit.per_iteration(tl.end, copies)
            per = len(copies)
        lb = {k: float(v) / per for k, v in sorted(tl.link_class_bytes.items())}
        est = t if fidelity == "analytic" else None
        if how.analytic and fidelity != "analytic":
            if progress is not None:
                progress(f"closed form{of}")
            try:
                # Only its times are needed: without link bytes the closed forms need no event loop.
                est = iteration_time(plan, engine.simulate(plan, topo, fidelity="analytic", seed=seed,
                                                           options=EngineOptions(runtime=runtime, link_bytes=False)))[0]
            except (NotImplementedError, SimcommError):
                est = None
        bd = breakdown(run_plan, tl, n_train, window)
        if copies is not None:  # the window spans len(copies) - 1 iterations
            bd = bd.scaled(1.0 / max(1, len(copies) - 1))
        rmean = rank_mean(plan, tl, n_train) if how.rank_means and copies is None else None
        hot = tuple((a, b, c, busy / per / t if t > 0 else 0.0) for a, b, c, _, busy in tl.meta.get("busiest_links", ()))
        split = {}
        if how.comm_streams and copies is None:
            split = exposed_by(plan, tl, n_train, window, how.comm_streams)
        out.append(IterationKind(plan.info.kind, float(weight), t, bd, lb, est, rmean, hot, split, tl.paths))
    return RunRecord(tuple(out), merged, ran)


def rank_mean(plan, tl, n_train: int) -> float:
    """Mean over training ranks of the time each finishes the plan's iteration (its period, if it has one)."""
    import numpy as np

    from simcomm.ops import Collective, Compute, Transfer

    per = plan.info.period_ranks
    if per:
        return float(np.mean([float(tl.end[b] - tl.end[a]) for r, (a, b) in sorted(per.items()) if r < n_train]))
    measured = plan.info.measured_ranks  # ranks that stand for all (a plan of one replica of several)
    f = np.zeros(n_train)
    for op in plan.ops:
        members = (op.rank,) if isinstance(op, Compute) else (op.src,) if isinstance(op, Transfer) \
            else op.ranks if isinstance(op, Collective) else ()
        for r in members:
            if r < n_train:
                f[r] = max(f[r], tl.end[op.id])
    if measured is not None:
        return float(np.mean(f[[r for r in measured if r < n_train]]))
    return float(np.mean(f))


def mean_of(kinds) -> tuple[float, Breakdown, dict, float | None]:
    """(mean time, breakdown, link bytes, closed form or None) of weighted iteration kinds."""
    total = sum(k.weight for k in kinds)
    mean = sum(k.weight * k.time_s for k in kinds) / total
    bd = Breakdown()
    lb: dict = {}
    for k in kinds:
        bd = bd.plus(k.breakdown.scaled(k.weight / total))
        for fam, v in k.link_bytes.items():
            lb[fam] = lb.get(fam, 0.0) + v * k.weight / total
    est = None
    if all(k.analytic_s is not None for k in kinds):
        est = sum(k.weight * k.analytic_s for k in kinds) / total
    return mean, bd, lb, est
