"""Wiring of one run: trace -> workload -> strategy.plan -> engine -> Result.

``simulate(scenario)`` is the whole of ``simcomm run``; ``Context`` caches the
trace and clusters so that ``simcomm compare`` builds each only once.  Every
default the user did not choose is returned in ``Result.assumed``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from simcomm.errors import ConfigError, SimcommError
from simcomm.result import Breakdown, IterationKind, Result, breakdown, iteration_time
from simcomm.scenario import Scenario
from simcomm.stacks import apply_stack, get_stack
from simcomm.strategies.base import STRATEGIES, NotApplicable, make_params
from simcomm.workload import build_workload

__all__ = ["simulate", "Context", "DATASETS", "run_plans", "BASELINE"]

#: dataset name -> samples per epoch (seed 000 Sec. V)
DATASETS = {"cifar10": 50_000, "cifar100": 50_000, "imagenet": 1_281_167, "mnist": 60_000}
BASELINE = "allreduce"


@dataclass
class Context:
    """Caches shared by the runs of one command (trace, clusters).

    ``given_trace`` and ``given_topology`` let library callers (validation
    cases, notebooks) run the pipeline on a ready-made Trace or Topology
    instead of the scenario's names; the transport stack is still applied.
    """

    scenario: Scenario
    given_trace: object = None
    given_topology: object = None
    _trace: object = field(default=None, init=False, repr=False)
    _clusters: dict = field(default_factory=dict, init=False, repr=False)
    notes: list = field(default_factory=list)

    def trace(self):
        if self._trace is None:
            self._trace = self.given_trace or load_trace_for(self.scenario, self.notes)
        return self._trace

    def stack(self):
        """The scenario's transport stack with its overrides."""
        spec = self.scenario.stack
        return get_stack(spec.name).with_overrides(spec.efficiency, spec.overhead, spec.cpu_per_byte)

    def cluster(self, nodes: int, extra: int):
        key = (nodes, extra)
        if key not in self._clusters:
            topo = self.given_topology or build_cluster(self.scenario, nodes + extra)
            self._clusters[key] = (topo, apply_stack(topo, self.stack()))
        return self._clusters[key]


def load_trace_for(scn: Scenario, notes: list):
    """The trace named by ``--trace FILE``, ``--model NAME`` or the bundled default."""
    from simcomm import traces

    if scn.trace:
        if not Path(scn.trace).exists():
            raise ConfigError(f"trace: file {scn.trace!r} does not exist")
        return traces.load_trace(scn.trace)
    if scn.model:
        if scn.model in traces.BUNDLED:
            return traces.load_bundled(scn.model)
        if scn.model in traces.MODELS:
            from simcomm.traces.synth import synth_trace

            base = traces.default_trace()
            notes.append(f"trace: roofline synthesis of {scn.model} on {base.device} (no bundled trace)")
            return synth_trace(scn.model, base.device, scn.batch or base.batch)
        from simcomm.errors import UnknownNameError

        raise UnknownNameError("model", scn.model, set(traces.BUNDLED.names()) | set(traces.MODELS.names()))
    trace = traces.default_trace()
    notes.append(f"trace: bundled default {trace.model} ({trace.device}, batch {trace.batch})")
    return trace


def build_cluster(scn: Scenario, nodes: int):
    """A topology from a preset name or a cluster TOML file."""
    from simcomm.topologies import presets

    if scn.cluster.endswith((".toml", ".graphml")) or Path(scn.cluster).is_file():
        from simcomm.topologies.custom import load_topology_file

        return load_topology_file(scn.cluster)  # the file fixes nodes and ranks itself
    return presets.preset(scn.cluster, nodes=nodes, gpus_per_node=scn.gpus_per_node)


def dataset_size_for(scn: Scenario, trace, notes: list) -> int:
    if scn.dataset_size is not None:
        return scn.dataset_size
    name = str(trace.meta.get("dataset", "")).lower().replace("-", "")
    if name not in DATASETS:
        shape = trace.layers[0].input_shape if trace.layers else ()
        name = "cifar10" if shape and max(shape[-2:] or (0,)) <= 32 else "imagenet"
    notes.append(f"dataset size {DATASETS[name]} ({name}, seed 000)")
    return DATASETS[name]


def _train_ranks(topo, nodes: int, extra: int) -> int:
    if not extra or topo.meta.get("builder") == "custom":
        return topo.n_ranks
    return sum(1 for r in range(topo.n_ranks) if (topo.machine_of(r) or 0) < nodes)


def run_plans(kinds, topo, n_train: int, fidelity: str, seed: int, analytic: bool = True,
              on_timeline=None, record_link_usage: bool = False, comm_cpu: float = 0.0,
              resolution: float = 0.0, merged: list | None = None, jitter: float = 0.0):
    """Simulate each (weight, plan); returns IterationKinds.

    ``on_timeline(label, weight, plan, timeline, topology)`` is called for each
    kind as it is simulated (``simcomm run --timeline`` writes them out).
    ``record_link_usage`` asks the engine for bytes/s per link family over time
    (``timeline.meta["link_usage"]``).  ``comm_cpu`` is the stack's host CPU cost
    per byte (engine option ``comm_cpu``, flow fidelity).  ``resolution`` is the
    engine's event resolution (flow fidelity); when given, ``merged`` receives
    the number of flows each simulation moved to a merged event.  ``jitter`` > 0
    (coefficient of variation of every rank's compute, drawn afresh each
    iteration) simulates each kind as :data:`simcomm.jitter.ITERATIONS` chained
    copies and reports their mean spacing (:mod:`simcomm.jitter`).
    """
    from simcomm import engine
    from simcomm import jitter as jit

    out = []
    for n_kind, (weight, plan) in enumerate(kinds):
        extra = {}
        if fidelity == "flow":
            extra = {k: v for k, v in (("comm_cpu", comm_cpu), ("resolution", resolution)) if v}
        run_plan, copies = plan, None
        if jitter:
            run_plan, copies = jit.chain(plan, jit.draw(jitter, jit.ITERATIONS, plan.n_ranks, (seed, n_kind)))
        tl = engine.simulate(run_plan, topo, fidelity=fidelity, seed=seed, record_link_usage=record_link_usage,
                             **extra)
        if merged is not None:
            merged.append(int(tl.meta.get("merged_flows", 0)))
        if on_timeline is not None:
            on_timeline(str(plan.meta.get("kind", "every iteration")), float(weight), run_plan, tl, topo)
        if copies is None:
            t, window = iteration_time(plan, tl)
            per = max(1, int(plan.meta.get("iterations_in_plan", 1)))
        else:
            t, window = jit.per_iteration(tl.end, copies)
            per = len(copies)
        lb = {k: float(v) / per for k, v in sorted(tl.link_class_bytes.items())}
        est = t if fidelity == "analytic" else None
        if analytic and fidelity != "analytic":
            try:
                est = iteration_time(plan, engine.simulate(plan, topo, fidelity="analytic", seed=seed))[0]
            except (NotImplementedError, SimcommError):
                est = None
        bd = breakdown(run_plan, tl, n_train, window)
        if copies is not None:  # the window spans len(copies) - 1 iterations
            bd = bd.scaled(1.0 / max(1, len(copies) - 1))
        out.append(IterationKind(str(plan.meta.get("kind", "every iteration")), float(weight), t, bd, lb, est))
    return out


def _mean(kinds) -> tuple[float, Breakdown, dict, float | None]:
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


def simulate(scn: Scenario, *, ctx: Context | None = None, baseline: bool = True,
             analytic: bool = True, on_timeline=None) -> Result:
    """Simulate ``scn`` and return its Result (NotApplicable is reported in the Result).

    ``on_timeline`` receives each simulated kind of iteration of the chosen
    strategy (not of the baseline), see :func:`run_plans`.
    """
    ctx = ctx or Context(scn)
    cls = STRATEGIES.get(scn.strategy)
    strategy = cls(make_params(cls, scn.options))
    trace = ctx.trace()
    extra = strategy.extra_nodes()
    raw, topo = ctx.cluster(scn.nodes, extra)
    n_train = _train_ranks(raw, scn.nodes, extra)
    gpn = max(1, n_train // scn.nodes)
    notes = list(ctx.notes)
    if scn.gpus_per_node is None:
        notes.append(f"{gpn} GPU(s) per node ({scn.cluster} preset)")
    spec = scn.stack
    if spec.name == "nccl" and spec.efficiency is None and spec.overhead is None:
        notes.append("transport stack nccl (96 % of network line rate, 3 us per message)")
    wl = scn.workload
    scale = wl.compute_scale
    if scale and len(scale) == scn.nodes and gpn > 1:
        scale = tuple(s for s in scale for _ in range(gpn))
    dataset = dataset_size_for(scn, trace, notes)
    strong = wl.scaling == "strong"
    w = build_workload(trace, n_train, batch=None if strong else scn.batch,
                       global_batch=scn.batch if strong else None, scaling=wl.scaling,
                       bucket_mb=wl.bucket_mb, dataload_s=wl.dataload_s, dataload_overlap=wl.dataload_overlap,
                       compute_scale=scale or None, dataset_size=dataset)
    if scn.batch is None:
        notes.append(f"per-rank batch {w.batch} (the trace's)")
    common = dict(strategy=scn.strategy, options=dict(scn.options), nodes=scn.nodes, gpus_per_node=gpn,
                  n_ranks=n_train, cluster=scn.cluster, model=trace.model, batch=w.batch,
                  fidelity=scn.fidelity, stack=spec.name)
    try:
        plans = strategy.iterations(w, topo)
    except NotApplicable as exc:
        return Result(**common, assumed=tuple(notes), not_applicable=str(exc))
    assumed = notes + list(strategy.assumed())
    for _, plan in plans:
        for line in plan.meta.get("assumed", ()):
            if line not in assumed:
                assumed.append(line)
    cpu = ctx.stack().cpu_per_byte
    if cpu:
        where = " (the closed form omits it)" if scn.fidelity == "flow" else " (flow fidelity only: not applied)"
        assumed.append(f"host CPU cost of communication {cpu * 1e9:.3g} ns per byte sent or received, "
                       f"charged to the compute it overlaps{where}")
    if wl.compute_jitter:
        from simcomm.jitter import ITERATIONS

        assumed.append(f"compute jitter: every rank's compute drawn afresh each iteration (normal, cv "
                       f"{wl.compute_jitter:.3g}); each kind is the mean of {ITERATIONS} chained iterations "
                       f"(the closed form omits it)")
    merged: list[int] = []
    kinds = tuple(run_plans(plans, topo, n_train, scn.fidelity, scn.seed, analytic, on_timeline,
                            record_link_usage=on_timeline is not None, comm_cpu=cpu,
                            resolution=scn.resolution, merged=merged, jitter=wl.compute_jitter))
    mean, bd, lb, est = _mean(kinds)
    k = w.iterations_per_epoch
    base_s = speedup = None
    if baseline:
        if scn.strategy == BASELINE and not scn.options:
            base_s = mean
        else:
            bcls = STRATEGIES.get(BASELINE)
            bk = run_plans(bcls().iterations(w, topo), topo, n_train, scn.fidelity, scn.seed, analytic=False,
                           comm_cpu=cpu, resolution=scn.resolution, merged=merged, jitter=wl.compute_jitter)
            base_s = _mean(bk)[0]
        speedup = base_s / mean if mean > 0 else math.inf
    if sum(merged):
        assumed.append(f"flow completions within {scn.resolution * 100:.3g} % of their transfer time merged into one "
                       f"event ({sum(merged):,} flows; resolution 0 is exact)")
    return Result(**common, kinds=kinds, mean_s=mean, breakdown=bd, link_bytes=lb, analytic_mean_s=est,
                  iterations_per_epoch=k, epoch_s=k * mean if k else None,
                  samples_per_s=w.global_batch / mean if mean > 0 else math.inf,
                  baseline_s=base_s, speedup=speedup, assumed=tuple(assumed))
