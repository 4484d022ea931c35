"""One run: Scenario -> Setup -> the strategy's plans -> the engine -> Result.

``simulate(scenario)`` is the whole of ``simcomm run``; a :class:`~simcomm.scenario.setup.Resolver` (also
known as ``Context``) caches the trace and clusters so that ``simcomm compare`` builds each only once.
Every default the user did not choose is returned in ``Result.assumed``.
"""

from __future__ import annotations

import math
from dataclasses import replace

from simcomm.errors import ConfigError
from simcomm.gcpause import gc_paused
from simcomm.pipeline.baseline import make_strategy, run_baseline, samples_of, scenario_options
from simcomm.pipeline.notes import memory_check, ran_lines
from simcomm.pipeline.plans import RunOptions, mean_of, run_plans
from simcomm.result import Result
from simcomm.scenario import Scenario
from simcomm.scenario.setup import Resolver, resolve_setup
from simcomm.strategies._fold import FOLD_RANKS
from simcomm.strategies.base import NotApplicable
from simcomm.workload import build_workload

__all__ = ["simulate", "check_wire", "fold_record", "paths_record"]


def simulate(scn: Scenario, *, ctx: Resolver | None = None, baseline: bool = True,
             analytic: bool = True, on_timeline=None, busiest_links: int = 0, topology=None,
             trace=None, progress=None, screen=None) -> Result:
    """Simulate ``scn`` and return its Result (NotApplicable is reported in the Result).

    ``baseline=False`` skips the "speedup vs" run.  ``topology``/``trace``: a ready-made
    Topology or Trace for library callers (a validation case's paper cluster) instead of the
    scenario's names; everything else is the unchanged ``simcomm run`` path.  ``busiest_links``:
    how many of the busiest directed links to report.  ``on_timeline`` receives each simulated
    kind of iteration of the chosen strategy (not of the baseline), see :func:`run_plans`.  ``screen(plans, topology,
    runtime, resolution)``, when given, sees the strategy's (weight, plan) list before the engine runs it and may
    raise to stop there (``simcomm plan``'s lower bound, :mod:`simcomm.llm.simulate`).  ``progress(stage)``
    is told each stage (setup, plan, each engine run) as it begins, for a progress bar.  Runs with the cyclic
    garbage collector paused
    (:mod:`simcomm.gcpause`: plans of 10^5 ops and their runs leave no cycles).
    """
    if topology is not None or trace is not None:
        if ctx is not None:
            raise ValueError("simulate: give a ready-made topology/trace or a ctx, not both")
        ctx = Resolver(scn, given_trace=trace, given_topology=topology)
    with gc_paused():
        return _simulate(scn, ctx, baseline, analytic, on_timeline, busiest_links, progress, screen)


def _simulate(scn: Scenario, ctx: Resolver | None, baseline: bool, analytic: bool, on_timeline,
              busiest_links: int = 0, progress=None, screen=None) -> Result:
    def stage(what: str) -> None:
        if progress is not None:
            progress(what)

    stage("trace and cluster")
    strategy = make_strategy(scn.strategy, scenario_options(scn))
    setup = resolve_setup(scn, ctx or Resolver(scn), strategy.extra_nodes())
    trace, topo, n_train, wl = setup.trace, setup.topology, setup.n_train, scn.workload
    check_wire(strategy, setup.wire_dtype, trace)
    strong = wl.scaling == "strong"
    w = build_workload(trace, n_train, batch=None if strong else scn.batch,
                       global_batch=scn.batch if strong else None, scaling=wl.scaling,
                       bucket_mb=wl.bucket_mb, dataload_s=wl.dataload_s, dataload_overlap=wl.dataload_overlap,
                       compute_scale=setup.compute_scale or None, dataset_size=setup.dataset_size,
                       wire_dtype=setup.wire_dtype, compute_jitter=wl.compute_jitter)
    if _folds_ranks(scn, n_train, setup.stack.cpu_per_byte):
        # identical ranks' computes emitted once (exact: simcomm.strategies._fold checks every folded op);
        # sgp's approximate message fold (measured with NCCL) from FOLD_RANKS on, and only where the stack
        # carries messages as planned
        w = replace(w, fold_ranks=True,
                    fold_messages=n_train >= FOLD_RANKS and _messages_as_planned(setup.runtime, topo))
    notes = list(setup.notes)
    batch_note = len(notes) if scn.batch is None else None  # placed once the plans say whether they use it
    memory = memory_check(strategy, w, trace, setup.device, scn.memory, notes)
    common = dict(strategy=scn.strategy, options=dict(scn.options), nodes=scn.nodes,
                  gpus_per_node=setup.gpus_per_node, n_ranks=n_train, cluster=scn.cluster, model=trace.model,
                  batch=w.batch, fidelity=scn.fidelity, stack=setup.stack_name,
                  network=setup.cluster.network.given())
    stage(f"planning {scn.strategy} on {topo.n_ranks:,} ranks")
    try:
        # as the stack's transport carries point-to-point messages (gloo: a pair exchange in turn)
        plans = [(weight, setup.runtime.exchanges(plan, topo)) for weight, plan in strategy.iterations(w, topo)]
    except NotApplicable as exc:
        if batch_note is not None:
            notes.insert(batch_note, f"per-rank batch {w.batch} (the trace's)")
        return Result(**common, assumed=tuple(notes), not_applicable=str(exc), memory=memory)
    # A layout that trains a global batch of its own (megatron's global_batch) does not use the trace's
    # per-rank batch: saying it would contradict the layout's own line.
    if batch_note is not None and all(plan.info.samples in (None, w.global_batch) for _, plan in plans):
        notes.insert(batch_note, f"per-rank batch {w.batch} (the trace's)")
    assumed = notes + list(strategy.assumed())
    for _, plan in plans:
        for line in plan.info.assumed:
            if line not in assumed:
                assumed.append(line)
    cpu = setup.stack.cpu_per_byte
    if cpu:
        where = " (the closed form omits it)" if scn.fidelity == "flow" else " (flow fidelity only: not applied)"
        assumed.append(f"host CPU cost of communication {cpu * 1e9:.3g} ns per byte sent or received, "
                       f"charged to the compute it overlaps{where}")
    red = setup.stack.reduce_per_byte
    if red is not None:
        assumed.append(f"collectives reduce on the host CPU at {red * 1e9:.3g} ns per byte per rank (--stack-reduce, "
                       "else the host probe of the calibration record beside --links; gloo/allreduce.cc: opts.reduce "
                       "per reduce-scatter segment)")
    if wl.compute_jitter:
        from simcomm.jitter import ITERATIONS

        assumed.append(f"compute jitter: every rank's compute drawn afresh each iteration (normal, cv "
                       f"{wl.compute_jitter:.3g}); each kind is the mean of {ITERATIONS} chained iterations "
                       f"(the closed form omits it)")
    if screen is not None:
        screen(plans, topo, setup.runtime, scn.resolution)
    how = RunOptions(scn.fidelity, scn.seed, setup.runtime, analytic=analytic, record_link_usage=on_timeline is not None,
                     comm_cpu=cpu, resolution=scn.resolution, jitter=wl.compute_jitter,
                     rank_means=bool(setup.compute_scale), busiest=busiest_links,
                     comm_streams=type(strategy).comm_streams)
    record = run_plans(plans, topo, n_train, how, on_timeline, progress)
    # each kind's engine paths name the planning paths too: whether identical ranks were folded, and how many, and
    # the strategy's own folds (IterationInfo.paths: workers, replicas, lanes, messages)
    kinds = tuple(replace(k, engine=paths_record(k.engine, scn.fold_ranks, plan))
                  for k, (_, plan) in zip(record.kinds, plans, strict=True))
    assumed += ran_lines(record.algorithms, setup.runtime)
    mean, bd, lb, est = mean_of(kinds)
    _check_finite(scn, mean * (w.iterations_per_epoch or 1), est, lb)  # the epoch too: iterations x mean
    split: dict[str, float] = {}
    if kinds and all(k.exposed_by for k in kinds):
        total_w = sum(k.weight for k in kinds)
        for k in kinds:
            for name, v in k.exposed_by.items():
                split[name] = split.get(name, 0.0) + k.weight * v / total_w
    rmean = None
    if setup.compute_scale and all(k.rank_mean_s is not None for k in kinds):
        total = sum(k.weight for k in kinds)
        rmean = sum(k.weight * k.rank_mean_s for k in kinds) / total
    k = w.iterations_per_epoch
    samples = samples_of(plans, w)
    base = None
    merged = record.merged_flows
    if baseline:
        base_how = RunOptions(scn.fidelity, scn.seed, setup.runtime, analytic=False, comm_cpu=cpu,
                              resolution=scn.resolution, jitter=wl.compute_jitter)
        base = run_baseline(setup, strategy, w, samples, mean, base_how,
                            None if progress is None else (lambda what: progress(f"baseline: {what}")))
        if base is not None:
            assumed += base.lines
            merged += base.merged_flows
    if merged:
        assumed.append(f"flow completions within {scn.resolution * 100:.3g} % of their transfer time merged into one "
                       f"event ({merged:,} flows; resolution 0 is exact)")
    return Result(**common, kinds=kinds, mean_s=mean, breakdown=bd, link_bytes=lb, analytic_mean_s=est,
                  iterations_per_epoch=k, epoch_s=k * mean if k else None,
                  samples_per_s=samples / mean if mean > 0 else math.inf,
                  samples_per_iteration=samples if samples != w.global_batch else None,
                  baseline_s=base.seconds if base else None, speedup=base.speedup if base else None,
                  baseline=base.describe if base else None, assumed=tuple(assumed), rank_mean_s=rmean,
                  busiest_links=max(kinds, key=lambda k: k.weight).busiest_links if kinds else (),
                  exposed_by=split, memory=memory)


def _folds_ranks(scn: Scenario, n_train: int, cpu_per_byte: float) -> bool:
    """Whether the plans fold identical ranks (``fold_ranks``: ``auto`` from :data:`FOLD_RANKS` training ranks,
    ``on`` at any size, ``off`` never).  Never with compute jitter (drawn per rank after planning) nor a host
    CPU cost of communication (charged per rank by the bytes its flows move): the fold would not be exact, so
    ``auto`` keeps every rank and ``on`` is refused."""
    setting, jitter = scn.fold_ranks, scn.workload.compute_jitter
    if setting == "on" and (jitter or cpu_per_byte):
        what = "compute_jitter (drawn per rank after planning)" if jitter else \
            "stack_cpu (a host CPU cost charged per rank by the bytes its flows move)"
        raise ConfigError(f"fold_ranks: on folds ranks that compute alike, which {what} makes unequal; "
                          "use fold_ranks auto or off")
    return setting == "on" or (setting == "auto" and n_train >= FOLD_RANKS and not jitter and not cpu_per_byte)


def paths_record(engine: dict, setting: str, plan) -> dict:
    """A kind's ``engine`` record: the engine run's paths (``Timeline.paths``), the rank fold and the plan's own
    planning paths (``plan.info.paths``), none of which may rename another."""
    planned = dict(plan.info.paths)
    clash = sorted((set(engine) | {"rank_fold"}) & set(planned))
    if clash:
        raise AssertionError(f"planning path {clash[0]!r} has the name of an engine path")
    return {**engine, "rank_fold": fold_record(setting, plan), **planned}


def fold_record(setting: str, plan) -> dict:
    """What ``--json`` says of a kind's rank fold: the setting, whether the plan folded, what it folded."""
    computes = int(plan.meta.get("folded_computes", 0))
    return {"setting": setting, "used": computes > 0, "folded_ranks": int(plan.meta.get("folded_ranks", 0)),
            "folded_computes": computes}


def _messages_as_planned(runtime, topo) -> bool:
    """Whether ``runtime`` carries a plan's point-to-point messages as the plan gives them (NCCL, plain MPI), not
    reshaped (gloo's send-first pairs, MPI over TCP's rendezvous): a 1 GB exchange across machines, probed."""
    from simcomm.ops import PlanBuilder

    other = next((r for r in range(1, topo.n_ranks) if topo.machine_of(r) != topo.machine_of(0)), 1)
    b = PlanBuilder(topo.n_ranks)
    b.transfer(0, other, 1e9)
    b.transfer(other, 0, 1e9)
    probe = b.build()
    return runtime.exchanges(probe, topo) is probe


def _check_finite(scn: Scenario, epoch: float, closed_form: float | None, link_bytes: dict) -> None:
    """One error line when an input so large that the iteration time overflows (``--opt elem_s=1e308``).

    Every value was finite and in range on its own; only their product is not, so the line names what the
    user gave that scales a time: the strategy's options and the trace.
    """
    if (math.isfinite(epoch) and (closed_form is None or math.isfinite(closed_form))
            and all(math.isfinite(float(v)) for v in link_bytes.values())):
        return
    what = "iteration (or epoch) time overflows" if not math.isfinite(epoch) else "bytes on the links overflow"
    given = ", ".join(f"{k}={v}" for k, v in sorted(scn.options.items())) or "none"
    source = f"trace {scn.trace!r}" if scn.trace else f"model {scn.model or 'the default'}"
    raise ConfigError(f"the {what}: an input is too large to be a real system's "
                      f"(strategy options: {given}; {source}); give values of a real cluster")


def check_wire(strategy, wire: str | None, trace) -> None:
    allowed = type(strategy).wire_dtypes
    dtype = wire or trace.dtype
    if allowed is not None and dtype not in allowed:
        raise ConfigError(f"wire_dtype: {dtype} is narrower than strategy {strategy.name!r} allows; valid "
                          f"choices: {', '.join(allowed)}")
