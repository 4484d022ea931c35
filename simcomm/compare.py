"""Compare strategies across node counts on one scenario: results, ranking and verdict (pure library).

``run_compare`` simulates every (nodes, strategy) through
:func:`simcomm.pipeline.simulate` with one shared :class:`~simcomm.scenario.setup.Resolver`
(the trace and each cluster are built once), and sets each result's speedup
against one common baseline at the same node count.  ``verdict`` and
``common_assumptions`` turn the results into the words ``simcomm compare``
ends with.
"""

from __future__ import annotations

from dataclasses import replace

from simcomm.errors import ConfigError, DoesNotFitError, PlanError
from simcomm.result import Result
from simcomm.scenario import Scenario
from simcomm.units import format_time

__all__ = ["run_compare", "baseline_of", "ranked", "verdict", "common_assumptions", "split_variant",
           "exposed_rows"]


def split_variant(spec: str) -> tuple[str, dict]:
    """``"megatron:tp=8,pp=2"`` -> ("megatron", {"tp": "8", "pp": "2"}); a plain name has no options.

    Values stay strings: the strategy converts them by type, as for ``--opt`` and ``--baseline``.
    """
    name, _, rest = spec.partition(":")
    opts: dict = {}
    for item in filter(None, (x.strip() for x in rest.split(","))):
        if "=" not in item:
            raise ConfigError(f"--strategies: {item!r} in {spec!r} must look like key=value (e.g. megatron:tp=8)")
        k, v = item.split("=", 1)
        k = k.strip().replace("-", "_")
        if k in opts:
            raise ConfigError(f"--strategies: option {k!r} given twice in {spec!r}")
        opts[k] = v.strip()
    return name.strip(), opts


def baseline_of(base: Scenario):
    """(strategy name, options, description) of the comparison's common baseline, or None for --baseline none."""
    from simcomm.pipeline import BASELINE, make_strategy

    spec = base.baseline
    if spec is not None and spec.none:
        return None
    name, opts = (BASELINE, {}) if spec is None else (spec.strategy, spec.option_dict())
    try:
        ref = make_strategy(name, opts)
    except ConfigError as exc:
        raise ConfigError(f"baseline: {exc}") from None
    return name, opts, ref.describe()


def run_compare(base: Scenario, strategies: list[str], nodes: list[int], progress=None,
                workers: int | None = 1) -> list[Result]:
    """Results for every (nodes, strategy); speedup against the common baseline at the same nodes.

    Each distinct run is simulated once: the baseline at a node count is the same run as the compared strategy of
    the same name and options there (``allreduce`` with its defaults), and its Result serves both.  With
    ``workers`` > 1 the runs go to that many processes (:func:`_run_all`) and the results are put together in
    the order one process gives, so the results are the same, float for float, for any number of workers
    (None: :func:`auto_workers`).
    """
    from simcomm.pipeline import per_sample_speedup
    from simcomm.scenario.setup import Resolver

    # a seed preset's setting (simcomm.scenario.seed_settings) was filled in for one strategy at one node count:
    # each strategy and node count here gets its own options, and the base's "setting" line names neither.
    # node-based's per-epoch evaluation is left out: the other strategies price none, so it would not compare
    seeded = _seeded(base, base.strategy, base.nodes, evaluation=True)
    lines = tuple(x for x in base.assumed if not x.startswith(("setting:", "evaluation every epoch")))
    if any(x.startswith("evaluation every epoch") for x in base.assumed):
        lines += ("node-based's per-epoch evaluation left out: the other strategies compared price none",)
    base = replace(base, assumed=lines, options={k: v for k, v in base.options.items() if seeded.get(k, not v) != v})
    ctx = Resolver(base)
    ctx.trace()  # a bad trace or cluster is the user's error for every strategy: fail once, here
    ref_spec = baseline_of(base)
    desc = None if ref_spec is None else f"{ref_spec[2]} on stack {ctx.stack_choice()[0]}"
    points = {}  # (nodes, strategy, options) -> the specs it answers (empty: the baseline's alone), in order
    for n in nodes:
        if ref_spec is not None:
            points.setdefault(_point(n, ref_spec[0], ref_spec[1]), [])
        for spec in strategies:
            name, variant = split_variant(spec)
            # a variant's own options win over --opt, which wins over the seed setting's
            opts = {**_seeded(base, name, n, evaluation=False), **_own_options(base, name), **variant}
            points.setdefault(_point(n, name, opts), []).append(spec)
    if workers is None:
        workers = auto_workers(ctx, nodes)
    outcomes: dict = {}
    pooled: set = set()  # runs the workers made (progress was told as each finished)

    def outcome(key):  # (Result or None, the error it raised or None); run when first asked for
        if key not in outcomes:
            if workers > 1 and (key[0] != nodes[0] or len(nodes) == 1):
                # past the smallest node count (run here first: an error of the user's own options, or a baseline
                # that does not apply, stops the comparison there, as in one process), every run left goes to the
                # workers at once (with one node count, all of them: such an error is then raised once they end)
                todo = [k for k in points if k not in outcomes]
                done = None if progress is None else (lambda k: [progress() for _ in points[k]])
                outcomes.update(zip(todo, _run_all(base, todo, workers, done), strict=True))
                pooled.update(todo)
            else:
                ctx.cluster(key[0], 0)
                outcomes[key] = _simulate_point(base, key, ctx)
        return outcomes[key]

    out = []
    for n in nodes:
        ref, ref_samples, misfit = None, 0, None
        if ref_spec is not None:
            name = ref_spec[0]
            res, exc = outcome(_point(n, name, ref_spec[1]))
            if isinstance(exc, DoesNotFitError):
                # (large-model layouts beside plain data parallelism, which holds the whole model per GPU)
                misfit = (f"baseline {name} does not fit in GPU memory at {n} nodes ({exc.why}): no speedups "
                          "at this size (--baseline to choose another)")
            elif exc is not None:
                raise exc
            if res is not None and res.not_applicable:
                raise ConfigError(f"baseline: {name!r} does not apply at {n} nodes ({res.not_applicable}); choose "
                                  "another with --baseline, or --baseline none")
            if res is not None:
                ref, ref_samples = res.mean_s, res.global_batch
        for spec in strategies:
            name, variant = split_variant(spec)
            opts = {**_seeded(base, name, n, evaluation=False), **_own_options(base, name), **variant}
            res, exc = outcome(_point(n, name, opts))
            if exc is not None:
                if name == base.strategy and base.options and not variant:
                    raise exc  # the user's own options for this strategy are wrong
                res = _unusable(replace(base, strategy=name, nodes=n, options=opts), str(exc))  # n/a, with why
            if variant:
                res = replace(res, strategy=spec)  # variants of one strategy side by side, named as given
            if not res.not_applicable and ref:
                # per sample when a layout trains its own global batch (time ratio otherwise)
                res = replace(res, baseline_s=ref, speedup=per_sample_speedup(ref, ref_samples, res.mean_s,
                                                                              res.global_batch), baseline=desc)
            if misfit:
                res = replace(res, assumed=tuple(res.assumed) + (misfit,))
            out.append(res)
            if progress is not None and _point(n, name, opts) not in pooled:
                progress()
    return out


#: ranks of the largest run from which ``simcomm compare`` uses worker processes by default: below it the whole
#: comparison takes a few seconds, less than starting a process (about 1 s of imports each)
WORKERS_FROM_RANKS = 1024


def auto_workers(ctx, nodes: list[int]) -> int:
    """Worker processes a comparison uses by default: the CPUs, at most 2 (:func:`simcomm.llm.workers.default_workers`),
    when its largest run has about :data:`WORKERS_FROM_RANKS` ranks or more (the smallest cluster's ranks per node
    times the most nodes: the largest cluster is not built here for a count); else 1."""
    from simcomm.llm.workers import default_workers

    small = min(nodes)
    ranks = ctx.cluster(small, 0)[0].n_ranks * max(nodes) // small
    return default_workers() if ranks >= WORKERS_FROM_RANKS else 1


def _point(nodes: int, name: str, opts: dict) -> tuple:
    """One distinct run of a comparison: (nodes, strategy, its options as given, in order)."""
    return nodes, name, tuple(opts.items())


def _simulate_point(base: Scenario, key: tuple, ctx) -> tuple:
    """(Result, None), or (None, the error) when the run refused its inputs (the caller decides what that means)."""
    from simcomm.pipeline import simulate

    nodes, name, opts = key
    try:
        return simulate(replace(base, strategy=name, nodes=nodes, options=dict(opts)), ctx=ctx, baseline=False,
                        analytic=False), None
    except (ConfigError, PlanError) as exc:  # DoesNotFitError among them
        return None, exc


#: a worker process's resolver, kept for the next run of the same comparison: (base scenario, Resolver)
_WORKER_RESOLVER: list = []


def _worker_point(base: Scenario, key: tuple) -> tuple:
    """:func:`_simulate_point` in a worker process, through one resolver per comparison (the trace and each
    cluster built once per process; what a run keeps with a topology changes no float: the engine's ``keep``
    path is exact, docs/engine.md)."""
    import pickle

    from simcomm.scenario.setup import Resolver

    if not _WORKER_RESOLVER or _WORKER_RESOLVER[0] != base:
        _WORKER_RESOLVER[:] = [base, Resolver(base)]
    res, exc = _simulate_point(base, key, _WORKER_RESOLVER[1])
    if exc is not None:
        try:
            pickle.loads(pickle.dumps(exc))
        except Exception:  # an error whose constructor takes other arguments: its line, as its family's error
            exc = (ConfigError if isinstance(exc, ConfigError) else PlanError)(str(exc))
    return res, exc


def _run_all(base: Scenario, keys: list[tuple], workers: int, done=None) -> list[tuple]:
    """Every run's outcome, in ``keys``' order, from ``workers`` processes; the largest runs are handed out first
    (the last ones to finish are then small), and ``done(key)`` is told as each finishes."""
    from simcomm.llm.workers import run_parts

    order = sorted(range(len(keys)), key=lambda k: (-keys[k][0], k))
    got = run_parts(_worker_point, [(base, keys[k]) for k in order], workers,
                    None if done is None else (lambda j: done(keys[order[j]])))
    out: list = [None] * len(keys)
    for j, k in enumerate(order):
        out[k] = got[j]
    return out


def _seeded(base: Scenario, name: str, nodes: int, evaluation: bool) -> dict:
    """The options a seed preset's setting gives strategy ``name`` at ``nodes`` nodes (empty elsewhere)."""
    from simcomm.scenario.seed_settings import SETTINGS, strategy_defaults

    s = SETTINGS.get(base.cluster)
    if s is None:
        return {}
    return strategy_defaults(base.cluster, base.model, name, nodes * (base.gpus_per_node or s.gpus_per_node),
                             evaluation)


def _own_options(base: Scenario, name: str) -> dict:
    """The scenario's strategy options that strategy ``name`` has (an option is for the strategies that have it)."""
    if not base.options:
        return {}
    from simcomm.strategies.base import STRATEGIES, option_names

    own = set(option_names(STRATEGIES.get(name)))
    return {k: v for k, v in base.options.items() if k in own}


def _unusable(scn: Scenario, reason: str) -> Result:
    """A Result marking a strategy that cannot run on these inputs (e.g. a trace without shapes)."""
    return Result(strategy=scn.strategy, options=dict(scn.options), nodes=scn.nodes,
                  gpus_per_node=scn.gpus_per_node or 0, n_ranks=0, cluster=scn.cluster, model="", batch=0,
                  fidelity=scn.fidelity, stack=scn.stack.name or "", not_applicable=reason)


def ranked(results: list[Result], strategies: list[str], nodes: list[int]) -> list[str]:
    """Strategies fastest first at the largest node count (then the next largest...); n/a last, by name."""
    def key(name: str):
        out = []
        for n in sorted(nodes, reverse=True):
            r = next((x for x in results if x.strategy == name and x.nodes == n), None)
            out.append(float("inf") if r is None or r.not_applicable else r.mean_s)
        return (*out, strategies.index(name))

    return sorted(strategies, key=key)


def verdict(results: list[Result], nodes: list[int]) -> list[str]:
    """One line per node count: the fastest strategy, by how much it beats the runner-up and the baseline."""
    lines = []
    for n in nodes:
        ok = sorted((r for r in results if r.nodes == n and not r.not_applicable), key=lambda r: r.mean_s)
        if not ok:
            lines.append(f"at {n} nodes no strategy applies")
            continue
        best = ok[0]
        text = f"at {n} nodes {best.strategy} is fastest ({format_time(best.mean_s)} per iteration"
        if best.speedup is not None:
            text += f", {best.speedup:.2f}x the baseline"
        text += ")"
        if len(ok) > 1:
            second = ok[1]
            gap = (second.mean_s - best.mean_s) / second.mean_s if second.mean_s > 0 else 0.0
            text += (f", {gap * 100:.1f} % ahead of {second.strategy}" if gap >= 0.01 else
                     f", within 1 % of {second.strategy} (a tie at this model's accuracy)")
        lines.append(text)
    return lines


def exposed_rows(results: list[Result]) -> tuple[list[str], list[dict]]:
    """(kinds, one dict per applicable result that splits its exposed time): the exposed communication by
    parallelism (``Result.exposed_by``: tensor, context, expert, pipeline, data) and waiting, in seconds."""
    from simcomm.whatif.results import EXPOSED_KINDS

    have = [r for r in results if not r.not_applicable and r.exposed_by]
    seen = {k for r in have for k in r.exposed_by}
    kinds = [k for k in EXPOSED_KINDS if k in seen] + sorted(seen - set(EXPOSED_KINDS))
    return kinds, [{"strategy": r.strategy, "nodes": r.nodes, **{k: r.exposed_by.get(k) for k in kinds}}
                   for r in have]


def common_assumptions(results: list[Result]) -> list[str]:
    """``assumed`` lines every applicable result shares, in the first result's order."""
    ok = [r for r in results if not r.not_applicable]
    if not ok:
        return []
    shared = set(ok[0].assumed)
    for r in ok[1:]:
        shared &= set(r.assumed)
    return [line for line in ok[0].assumed if line in shared]
