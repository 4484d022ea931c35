"""The baseline a run is compared with: which strategy (the user's ``--baseline`` or the paper's), its run,
and the speedup per sample."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, replace

from simcomm.errors import ConfigError, DoesNotFitError
from simcomm.pipeline.notes import memory_check, ran_lines
from simcomm.pipeline.plans import RunOptions, mean_of, run_plans
from simcomm.scenario import Scenario
from simcomm.scenario.setup import Setup
from simcomm.scenario.spec import WorkloadSpec
from simcomm.strategies.base import STRATEGIES, NotApplicable, make_params

__all__ = ["BASELINE", "Baseline", "make_strategy", "scenario_options", "baseline_choice", "run_baseline",
           "per_sample_speedup", "samples_of"]

BASELINE = "allreduce"


@dataclass(frozen=True)
class Baseline:
    """The baseline's run: its time, what it was, the speedup over it, and the lines it adds."""

    seconds: float
    describe: str
    speedup: float
    lines: tuple[str, ...]  # assumed: lines
    merged_flows: int  # flows its simulation merged (event resolution)


def make_strategy(name: str, options: dict):
    cls = STRATEGIES.get(name)
    return cls(make_params(cls, options))


def scenario_options(scn: Scenario) -> dict:
    """The strategy's options with the scenario's ``framework`` (simcomm.frameworks) for a strategy that takes
    one; with a framework, a ``--bucket-mb`` other than the default is its gradient bucket (``grad_bucket_mb``)."""
    options = dict(scn.options)
    framework = scn.workload.framework
    if framework is None:
        return options
    cls = STRATEGIES.get(scn.strategy)
    if "framework" not in {f.name for f in dataclasses.fields(cls.Params)}:
        takes = sorted(n for n in STRATEGIES.names() if "framework" in
                       {f.name for f in dataclasses.fields(STRATEGIES.get(n).Params)})
        raise ConfigError(f"framework: strategy {scn.strategy!r} does not take a framework (it sets how ZeRO and "
                          f"data parallelism are scheduled; strategies that take one: {', '.join(takes)})")
    options["framework"] = framework
    if scn.workload.bucket_mb != WorkloadSpec().bucket_mb:
        options.setdefault("grad_bucket_mb", scn.workload.bucket_mb)
    return options


def baseline_choice(scn: Scenario, strategy) -> tuple[object | None, str]:
    """(baseline strategy or None, why): the user's ``--baseline``, else the strategy's paper baseline."""
    spec = scn.baseline
    if spec is not None and spec.none:
        return None, "no baseline (--baseline none)"
    if spec is not None:
        try:
            return make_strategy(spec.strategy, spec.option_dict()), "chosen with --baseline"
        except ConfigError as exc:
            raise ConfigError(f"baseline: {exc}") from None
    name, options, why = strategy.paper_baseline
    return make_strategy(name, dict(options)), why


def baseline_misfit(ref, strategy, w, setup: Setup) -> str | None:
    """Why the baseline's state would not fit in GPU memory (its own check's words), or None.

    The strategy was checked before it ran; a baseline is simulated whatever its memory (plain data
    parallelism of a 175B model needs terabytes per GPU), so the run says when it is hypothetical.
    """
    if ref is strategy or (ref.name == strategy.name and ref.params == strategy.params):
        return None
    try:
        memory_check(ref, w, setup.trace, setup.device, replace(setup.scenario.memory, policy="refuse"), [])
    except DoesNotFitError as exc:
        return exc.why
    return None


def samples_of(plans, w) -> int:
    """Samples one iteration trains: the plans' own (a layout's global batch), else the workload's."""
    return next((plan.info.samples for _, plan in plans if plan.info.samples), None) or w.global_batch


def run_baseline(setup: Setup, strategy, w, samples: int, mean: float, how: RunOptions,
                 progress=None) -> Baseline | None:
    """Run the baseline of ``strategy`` (its own ``mean`` when the baseline is the strategy itself); None
    with ``--baseline none``.  ``samples``: what one iteration of ``strategy`` trains.  ``progress(stage)``:
    told each stage as it begins (a progress bar)."""
    ref, why = baseline_choice(setup.scenario, strategy)
    if ref is None:
        return None
    desc = f"{ref.describe()} on stack {setup.stack_name}"
    base_s, base_samples, merged = mean, samples, 0
    lines: list[str] = []
    if not (ref.name == strategy.name and ref.params == strategy.params):
        if progress is not None:
            progress(f"{ref.describe()}: planning")
        try:
            plans = [(weight, setup.runtime.exchanges(plan, setup.topology)) for weight, plan in ref.iterations(w, setup.topology)]
        except NotApplicable as exc:
            raise ConfigError(f"baseline: {ref.name!r} does not apply here ({exc}); choose another with "
                              f"--baseline, or --baseline none") from None
        rec = run_plans(plans, setup.topology, setup.n_train, how, progress=progress)
        base_s = mean_of(rec.kinds)[0] + epoch_evaluation(strategy, ref, w, lines)
        base_samples, merged = samples_of(plans, w), rec.merged_flows
        desc += "".join(f"; {x}" for x in ran_lines(rec.algorithms, setup.runtime))
    if base_samples != samples:
        lines.append(f"speedup per sample: this iteration trains {samples:,} samples, the baseline's "
                     f"{base_samples:,}, so the speedup compares time per sample")
    lines.append(f"baseline: {desc}: {why} (--baseline to change, --baseline none to drop)")
    misfit = baseline_misfit(ref, strategy, w, setup)
    if misfit:
        lines.append(f"baseline does not fit in memory ({misfit}): its time is what the iteration would take "
                     "if it did")
    return Baseline(base_s, desc, per_sample_speedup(base_s, base_samples, mean, samples), tuple(lines), merged)


def epoch_evaluation(strategy, ref, w, assumed: list) -> float:
    """The per-epoch evaluation a strategy prices (node-based's eval-s/eval-samples), spread over the epoch's
    iterations, for a baseline that does not price one: both methods evaluate every epoch (seed 000's code)."""
    evaluate = getattr(strategy, "eval_seconds", None)
    k = w.iterations_per_epoch
    if evaluate is None or not k or not strategy.params.evaluates or hasattr(ref, "eval_seconds"):
        return 0.0
    per_epoch = evaluate(w)
    assumed.append(f"the baseline evaluates every epoch too (the same {per_epoch * 1e3:.4g} ms): "
                   f"{per_epoch / k * 1e3:.4g} ms added to its mean iteration")
    return per_epoch / k


def per_sample_speedup(base_s: float, base_samples: int, mean: float, samples: int) -> float:
    """Baseline time per sample over this time per sample (plain time ratio when both train as many)."""
    if mean <= 0:
        return math.inf
    if base_samples == samples:
        return base_s / mean
    return (base_s / base_samples) / (mean / samples)
