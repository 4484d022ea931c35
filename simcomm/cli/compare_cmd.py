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
from pathlib import Path

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from simcomm.cli.console import print_json, stderr, stdout, table
from simcomm.cli.run_cmd import build_scenario
from simcomm.cli.scenario_flags import scenario_flags
from simcomm.compare import baseline_of, common_assumptions, exposed_rows, ranked, run_compare, verdict
from simcomm.errors import ConfigError
from simcomm.scenario.resolve import file_cluster
from simcomm.units import format_time

__all__ = ["compare_command", "parse_nodes", "parse_strategies", "run_compare"]


def parse_nodes(text: str) -> list[int]:
    """``4,8,16`` -> [4, 8, 16], each checked like the scenario key ``nodes`` (bounds included)."""
    from simcomm.scenario import coerce

    items = [x for x in text.split(",") if x.strip()]
    if not items or len(items) > 64:
        raise ConfigError(f"--nodes: {text!r} must be 1 to 64 comma-separated positive integers, e.g. 4,8,16")
    return sorted({coerce("nodes", x) for x in items})


def parse_strategies(text: str) -> list[str]:
    """``all``, or names and variants: ``allreduce,megatron:tp=8,pp=2 megatron:tp=4,pp=4``.

    A variant is ``NAME:key=value,...`` (the ``--baseline`` spelling); a ``key=value`` item after it
    belongs to it, so commas and spaces both separate entries.  Each variant is checked (its name and
    its options' names and types) here; layouts that then do not divide or fit are per-point ``n/a``.
    """
    from simcomm.compare import split_variant
    from simcomm.strategies import STRATEGIES

    if text.strip() == "all":
        return list(STRATEGIES.names())
    specs: list[str] = []
    for item in (x.strip() for x in text.replace(" ", ",").split(",")):
        if not item:
            continue
        if "=" in item and ":" not in item:
            if not specs or ":" not in specs[-1]:
                raise ConfigError(f"--strategies: {item!r} is an option with no variant before it; write "
                                  "NAME:key=value,key=value (e.g. megatron:tp=8,pp=2)")
            specs[-1] += "," + item
        else:
            specs.append(item)
    out = []
    for spec in specs:
        name, opts = split_variant(spec)
        STRATEGIES.entry(name)  # unknown name: one line listing the choices
        if opts:
            from simcomm.pipeline import make_strategy

            try:
                make_strategy(name, opts)
            except ConfigError as exc:
                raise ConfigError(f"--strategies {spec}: {exc}") from None
        label = name + (":" + ",".join(f"{k}={v}" for k, v in opts.items()) if opts else "")
        if label in out:
            raise ConfigError(f"--strategies: {label!r} given twice")
        out.append(label)
    return out


def _options_owner(names: list[str], opts: list[str] | None) -> str | None:
    """The first compared strategy that has every ``--opt`` key (the scenario is checked as that strategy's, so
    ``--opt tp=2`` is valid with ``--strategies allreduce,megatron``); None: no options, or none has them all
    (the resolver then names the option that belongs to no compared strategy)."""
    if not opts:
        return None
    from simcomm.cli.run_cmd import parse_opts
    from simcomm.compare import split_variant
    from simcomm.scenario import KEY
    from simcomm.strategies.base import STRATEGIES, option_names

    keys = {k for k in parse_opts(opts) if k not in KEY}  # --opt nccl_algo=... is a stack setting, not an option
    if not keys:
        return None
    for spec in names:
        name = split_variant(spec)[0]
        if keys <= set(option_names(STRATEGIES.get(name))):
            return name
    return None


@scenario_flags(skip=("strategy", "nodes"))
def compare_command(
    scenario: Path | None = typer.Argument(None, help="Scenario TOML file (flags override it)."),
    strategies: str = typer.Option("all", "--strategies", help="all, or a comma-separated list; a variant is "
                                   "NAME:key=value,... (e.g. megatron:tp=8,pp=2 megatron:tp=4,pp=4)."),
    nodes: str | None = typer.Option(None, "--nodes", help="Comma-separated node counts (default 4,8,16; a "
                                        "topology file's own size)."),
    png: Path | None = typer.Option(None, "--png", help="Write the comparison plot here."),
    as_json: bool = typer.Option(False, "--json"),
    as_csv: bool = typer.Option(False, "--csv"),
    quiet: bool = typer.Option(False, "--quiet", help="No progress bar."),
    workers: int | None = typer.Option(None, "--workers", help="Processes the runs go to (default: the CPUs, at "
                                       "most 2, when the largest run has 1,024 ranks or more, else 1; the results "
                                       "are the same for any number)."),
    opt: list[str] | None = typer.Option(None, "--opt", help="Strategy option key=value (repeatable), for the "
                                            "strategies that have it."),
    flags: dict | None = None,
) -> None:
    """Compare strategies across node counts: iteration time, speedup vs allreduce, breakdown."""
    names = parse_strategies(strategies)
    owner = _options_owner(names, opt)
    base = build_scenario(scenario, flags, opts=opt, **({"strategy": owner} if owner else {}))
    counts = parse_nodes(nodes) if nodes is not None else [base.nodes] if file_cluster(base.cluster) else [4, 8, 16]
    if file_cluster(base.cluster) and counts != [base.nodes]:
        raise ConfigError(f"--nodes: cluster {base.cluster!r} is a topology file with {base.nodes} node(s); its size "
                          "is fixed by the file (omit --nodes, or use a preset to vary it)")
    if workers is not None and workers < 1:
        raise ConfigError(f"--workers: {workers} must be a positive integer (1 runs everything in this process)")
    if png is not None:
        from simcomm.outpath import check_output_path

        png = check_output_path(png, "--png")  # before the simulations, not after
    if quiet or as_json or as_csv:
        results = run_compare(base, names, counts, workers=workers)
    else:
        with Progress(TextColumn("simulating"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=stderr(), transient=True) as bar:
            task = bar.add_task("compare", total=len(names) * len(counts))
            results = run_compare(base, names, counts, progress=lambda: bar.advance(task), workers=workers)
    if png is not None:
        from simcomm.report.compare_plot import plot_compare

        plot_compare(results, png)
    ref = baseline_of(base)
    kinds, _ = exposed_rows(results)  # layouts that split their exposed time add one column per parallelism
    rows = [{"strategy": r.strategy, "nodes": r.nodes, "ranks": r.n_ranks,
             "mean_s": None if r.not_applicable else r.mean_s,
             "speedup": None if r.not_applicable else r.speedup,
             **{f"exposed_{k}_s": None if r.not_applicable else r.exposed_by.get(k) for k in kinds},
             "baseline": r.baseline or "", "not_applicable": r.not_applicable or ""} for r in results]
    if as_json:  # (and the engine paths each run took, per kind of iteration: docs/engine.md, "Engine paths")
        print_json([{**row, "engine": [k.engine for k in r.kinds]} for row, r in zip(rows, results, strict=True)])
        return
    if as_csv:
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
        sys.stdout.write(buf.getvalue())
        return
    first = next((r for r in results if not r.not_applicable), None)
    title = "compare" if first is None else (f"compare on {first.where}, {first.model}, batch {first.batch}/rank, "
                                              f"{first.fidelity} fidelity, stack {first.stack}")
    t = table(title, [("strategy", "left")] + [(f"{n} nodes", "right") for n in counts])
    for name in ranked(results, names, counts):  # fastest first at the largest node count
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
                                             f" (speedup vs the baseline at the same nodes: {base_line})")
              + "; rows fastest first at the largest node count")
    own = sorted({(r.strategy, r.global_batch, r.batch * r.n_ranks) for r in results
                  if not r.not_applicable and r.speedup is not None and r.samples_per_iteration})
    if own:
        con.print("speedups per sample where a strategy trains its own global batch: "
                  + "; ".join(f"{name} {g:,} samples per iteration (the workload's {w:,})" for name, g, w in own))
    kinds, split = exposed_rows(results)
    if split:
        e = table("exposed time by parallelism (critical rank; waiting: pipeline bubble and other ranks)",
                  [("strategy", "left"), ("nodes", "right")] + [(k, "right") for k in kinds])
        order = ranked(results, names, counts)
        for x in sorted(split, key=lambda x: (order.index(x["strategy"]), x["nodes"])):
            e.add_row(x["strategy"], str(x["nodes"]), *("-" if x[k] is None else format_time(x[k]) for k in kinds))
        con.print(e)
    for r in results:
        if r.not_applicable:
            con.print(f"n/a: {r.strategy} at {r.nodes} nodes: {r.not_applicable}")
    for line in common_assumptions(results):
        con.print(f"assumed: {line}")
    con.print("(each strategy's own assumptions: simcomm run -s NAME with the same flags)")
    for line in verdict(results, counts):
        con.print(f"verdict: {line}")
    if png is not None:
        con.print(f"plot: {png}")
