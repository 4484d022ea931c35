"""``simcomm compare``: every chosen strategy at every node count, one table and one plot.

Strategies that do not apply to a setting (hierarchical all-reduce with one
GPU per node, ...) appear as ``n/a`` with the reason, never silently dropped.
Speedups are against one common baseline at the same node count and inputs:
``allreduce`` with its defaults unless ``--baseline`` (or the scenario's
``[baseline]``) names another; the table, ``--json`` and ``--csv`` say which.
"""

from __future__ import annotations

import csv
import io
import sys
from dataclasses import replace
from pathlib import Path
from typing import Optional

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from simcomm.cli.app import app
from simcomm.cli.console import print_json, stderr, stdout, table
from simcomm.cli.run_cmd import build_scenario
from simcomm.cli.scenario_flags import scenario_flags
from simcomm.errors import ConfigError, PlanError
from simcomm.units import format_time

__all__ = ["compare_command", "parse_nodes", "parse_strategies", "run_compare"]


def parse_nodes(text: str) -> list[int]:
    try:
        out = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ConfigError(f"--nodes: {text!r} must be comma-separated positive integers, e.g. 4,8,16") from None
    if not out or any(n < 1 for n in out):
        raise ConfigError(f"--nodes: {text!r} must be comma-separated positive integers, e.g. 4,8,16")
    return sorted(set(out))


def parse_strategies(text: str) -> list[str]:
    from simcomm.strategies import STRATEGIES

    if text.strip() == "all":
        return list(STRATEGIES.names())
    names = [x.strip() for x in text.split(",") if x.strip()]
    for n in names:
        STRATEGIES.entry(n)  # unknown name: one line listing the choices
    return names


def baseline_of(base):
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


def run_compare(base, strategies: list[str], nodes: list[int], progress=None) -> list:
    """Results for every (nodes, strategy); speedup against the common baseline at the same nodes."""
    from simcomm.pipeline import Context, simulate

    ctx = Context(base)
    ctx.trace()  # a bad trace or cluster is the user's error for every strategy: fail once, here
    ref_spec = baseline_of(base)
    desc = None if ref_spec is None else f"{ref_spec[2]} on stack {ctx.stack_choice()[0]}"
    out = []
    for n in nodes:
        ctx.cluster(n, 0)
        ref = None
        if ref_spec is not None:
            name, opts, _ = ref_spec
            res = simulate(replace(base, strategy=name, nodes=n, options=opts), ctx=ctx, baseline=False,
                           analytic=False)
            if res.not_applicable:
                raise ConfigError(f"baseline: {name!r} does not apply at {n} nodes ({res.not_applicable}); choose "
                                  "another with --baseline, or --baseline none")
            ref = res.mean_s
        for name in strategies:
            opts = base.options if name == base.strategy else {}
            scn = replace(base, strategy=name, nodes=n, options=opts)
            try:
                res = simulate(scn, ctx=ctx, baseline=False, analytic=False)
            except (ConfigError, PlanError) as exc:
                if name == base.strategy and base.options:
                    raise  # the user's own options for this strategy are wrong
                res = _unusable(scn, str(exc))
            if not res.not_applicable and ref:
                res = replace(res, baseline_s=ref, speedup=ref / res.mean_s, baseline=desc)
            out.append(res)
            if progress is not None:
                progress()
    return out


def _unusable(scn, reason: str):
    """A Result marking a strategy that cannot run on these inputs (e.g. a trace without shapes)."""
    from simcomm.result import Result

    return Result(strategy=scn.strategy, options=dict(scn.options), nodes=scn.nodes,
                  gpus_per_node=scn.gpus_per_node or 0, n_ranks=0, cluster=scn.cluster, model="", batch=0,
                  fidelity=scn.fidelity, stack=scn.stack.name, not_applicable=reason)


@app.command("compare")
@scenario_flags(skip=("strategy", "nodes"))
def compare_command(
    scenario: Optional[Path] = typer.Argument(None, help="Scenario TOML file (flags override it)."),
    strategies: str = typer.Option("all", "--strategies", help="all, or a comma-separated list."),
    nodes: str = typer.Option("4,8,16", "--nodes", help="Comma-separated node counts."),
    png: Optional[Path] = typer.Option(None, "--png", help="Write the comparison plot here."),
    as_json: bool = typer.Option(False, "--json"),
    as_csv: bool = typer.Option(False, "--csv"),
    quiet: bool = typer.Option(False, "--quiet", help="No progress bar."),
    opt: Optional[list[str]] = typer.Option(None, "--opt", help="Strategy option key=value (repeatable), for the "
                                            "strategies that have it."),
    flags: dict | None = None,
) -> None:
    """Compare strategies across node counts: iteration time, speedup vs allreduce, breakdown."""
    names = parse_strategies(strategies)
    counts = parse_nodes(nodes)
    base = build_scenario(scenario, flags, opts=opt)
    if quiet or as_json or as_csv:
        results = run_compare(base, names, counts)
    else:
        with Progress(TextColumn("simulating"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=stderr(), transient=True) as bar:
            task = bar.add_task("compare", total=len(names) * len(counts))
            results = run_compare(base, names, counts, progress=lambda: bar.advance(task))
    if png is not None:
        from simcomm.report.compare_plot import plot_compare

        plot_compare(results, png)
    ref = baseline_of(base)
    rows = [{"strategy": r.strategy, "nodes": r.nodes, "ranks": r.n_ranks,
             "mean_s": None if r.not_applicable else r.mean_s,
             "speedup": None if r.not_applicable else r.speedup,
             "baseline": r.baseline or "", "not_applicable": r.not_applicable or ""} for r in results]
    if as_json:
        print_json(rows)
        return
    if as_csv:
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
        sys.stdout.write(buf.getvalue())
        return
    first = next((r for r in results if not r.not_applicable), None)
    title = "compare" if first is None else (f"compare on {first.cluster}, {first.model}, batch {first.batch}/rank, "
                                              f"{first.fidelity} fidelity, stack {first.stack}")
    t = table(title, [("strategy", "left")] + [(f"{n} nodes", "right") for n in counts])
    for name in names:
        cells = []
        for n in counts:
            r = next(x for x in results if x.strategy == name and x.nodes == n)
            cells.append("n/a" if r.not_applicable else format_time(r.mean_s) if r.speedup is None
                         else f"{format_time(r.mean_s)} ({r.speedup:.2f}x)")
        t.add_row(name, *cells)
    con = stdout()
    con.print(t)
    base_line = next((r.baseline for r in results if r.baseline), None)
    con.print("cells: mean iteration time" + ("" if ref is None else
                                             f" (speedup vs the baseline at the same nodes: {base_line})"))
    for r in results:
        if r.not_applicable:
            con.print(f"n/a: {r.strategy} at {r.nodes} nodes: {r.not_applicable}")
    if png is not None:
        con.print(f"plot: {png}")
