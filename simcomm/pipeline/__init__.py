"""Wiring of one run: Scenario -> Setup -> strategy plans -> engine -> Result.

* :mod:`.run`: :func:`simulate`, the whole of ``simcomm run``;
* :mod:`.plans`: :func:`run_plans`, a strategy's kinds of iteration through the engine (one RunRecord);
* :mod:`.baseline`: the baseline's choice and run, the speedup per sample;
* :mod:`.notes`: the ``assumed:`` lines a run adds (memory, the algorithms that ran).

The Setup itself (trace, cluster, stack, runtime, precision) comes from :mod:`simcomm.scenario.setup`;
``Context`` is its :class:`~simcomm.scenario.setup.Resolver`, kept under the name callers use.
"""

from simcomm.pipeline.baseline import BASELINE, baseline_choice, make_strategy, per_sample_speedup, scenario_options
from simcomm.pipeline.notes import memory_budget, memory_check
from simcomm.pipeline.plans import RunOptions, RunRecord, rank_mean, run_plans
from simcomm.pipeline.run import simulate
from simcomm.scenario.setup import DATASETS, Resolver, build_cluster, load_trace_for, resolve_precision

Context = Resolver

__all__ = ["simulate", "Context", "Resolver", "DATASETS", "run_plans", "RunOptions", "RunRecord", "BASELINE",
           "make_strategy", "baseline_choice", "resolve_precision", "build_cluster", "memory_budget",
           "memory_check", "per_sample_speedup", "rank_mean", "scenario_options", "load_trace_for"]
