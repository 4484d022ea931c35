"""``simcomm compare``: every chosen strategy at every node count, one table and one plot.

Strategies that do not apply to a setting (hierarchical all-reduce with one
GPU per node, ...) appear as ``n/a`` with the reason, never silently dropped.
Speedups are against ``allreduce`` at the same node count and inputs.
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


def run_compare(base, strategies: list[str], nodes: list[int], progress=None) -> list:
    """Results for every (nodes, strategy); speedup against allreduce at the same nodes."""
    from simcomm.pipeline import BASELINE, Context, simulate

    ctx = Context(base)
    ctx.trace()  # a bad trace or cluster is the user's error for every strategy: fail once, here
    out = []
    for n in nodes:
        ctx.cluster(n, 0)
        ref = None
        order = [BASELINE] + [s for s in strategies if s != BASELINE]
        row = {}
        for name in order:
            opts = base.options if name == base.strategy else {}
            scn = replace(base, strategy=name, nodes=n, options=opts)
            try:
                res = simulate(scn, ctx=ctx, baseline=False, analytic=False)
            except (ConfigError, PlanError) as exc:
                if name == base.strategy and base.options:
                    raise  # the user's own options for this strategy are wrong
                res = _unusable(scn, str(exc))
            if name == BASELINE:
                ref = res.mean_s
            if not res.not_applicable and ref:
                res = replace(res, baseline_s=ref, speedup=ref / res.mean_s)
            row[name] = res
            if progress is not None and name in strategies:
                progress()
        out += [row[s] for s in strategies]
    return out


def _unusable(scn, reason: str):
    """A Result marking a strategy that cannot run on these inputs (e.g. a trace without shapes)."""
    from simcomm.result import Result

    return Result(strategy=scn.strategy, options=dict(scn.options), nodes=scn.nodes,
                  gpus_per_node=scn.gpus_per_node or 0, n_ranks=0, cluster=scn.cluster, model="", batch=0,
                  fidelity=scn.fidelity, stack=scn.stack.name, not_applicable=reason)


@app.command("compare")
def compare_command(
    scenario: Optional[Path] = typer.Argument(None, help="Scenario TOML file (flags override it)."),
    strategies: str = typer.Option("all", "--strategies", help="all, or a comma-separated list."),
    nodes: str = typer.Option("4,8,16", "--nodes", help="Comma-separated node counts."),
    gpus_per_node: Optional[int] = typer.Option(None, "--gpus-per-node", "-g"),
    cluster: Optional[str] = typer.Option(None, "--cluster"),
    model: Optional[str] = typer.Option(None, "--model"),
    trace: Optional[Path] = typer.Option(None, "--trace"),
    batch: Optional[int] = typer.Option(None, "--batch"),
    dataset_size: Optional[int] = typer.Option(None, "--dataset-size"),
    fidelity: Optional[str] = typer.Option(None, "--fidelity"),
    seed: Optional[int] = typer.Option(None, "--seed"),
    resolution: Optional[float] = typer.Option(None, "--resolution",
                                               help="Merge flow completions within this fraction (0 = exact)."),
    scaling: Optional[str] = typer.Option(None, "--scaling"),
    bucket_mb: Optional[float] = typer.Option(None, "--bucket-mb"),
    dataload: Optional[str] = typer.Option(None, "--dataload"),
    compute_jitter: Optional[float] = typer.Option(None, "--compute-jitter",
                                                   help="cv of each rank's compute, drawn afresh every iteration."),
    stack: Optional[str] = typer.Option(None, "--stack"),
    stack_efficiency: Optional[float] = typer.Option(None, "--stack-efficiency"),
    stack_overhead: Optional[str] = typer.Option(None, "--stack-overhead"),
    stack_cpu: Optional[str] = typer.Option(None, "--stack-cpu", help="Host CPU time per byte moved, e.g. 25ns."),
    png: Optional[Path] = typer.Option(None, "--png", help="Write the comparison plot here."),
    as_json: bool = typer.Option(False, "--json"),
    as_csv: bool = typer.Option(False, "--csv"),
    quiet: bool = typer.Option(False, "--quiet", help="No progress bar."),
) -> None:
    """Compare strategies across node counts: iteration time, speedup vs allreduce, breakdown."""
    names = parse_strategies(strategies)
    counts = parse_nodes(nodes)
    base = build_scenario(scenario, strategy=None, gpus_per_node=gpus_per_node, cluster=cluster, model=model,
                          trace=trace, batch=batch, dataset_size=dataset_size, fidelity=fidelity, seed=seed,
                          resolution=resolution, scaling=scaling, bucket_mb=bucket_mb, dataload=dataload,
                          compute_jitter=compute_jitter, stack=stack,
                          stack_efficiency=stack_efficiency, stack_overhead=stack_overhead, stack_cpu=stack_cpu)
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
    rows = [{"strategy": r.strategy, "nodes": r.nodes, "ranks": r.n_ranks,
             "mean_s": None if r.not_applicable else r.mean_s,
             "speedup": None if r.not_applicable else r.speedup,
             "not_applicable": r.not_applicable or ""} for r in results]
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
            cells.append("n/a" if r.not_applicable else f"{format_time(r.mean_s)} ({r.speedup:.2f}x)")
        t.add_row(name, *cells)
    con = stdout()
    con.print(t)
    con.print("cells: mean iteration time (speedup vs allreduce at the same nodes)")
    for r in results:
        if r.not_applicable:
            con.print(f"n/a: {r.strategy} at {r.nodes} nodes: {r.not_applicable}")
    if png is not None:
        con.print(f"plot: {png}")
