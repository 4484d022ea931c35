"""``simcomm run``: simulate one strategy on one cluster and print where the time goes.

Flags override a scenario TOML file; everything left unset falls back to
documented defaults (DEEP-EST cluster, the bundled ResNet-50 V100 trace,
ImageNet/CIFAR dataset size), each printed as an ``assumed:`` line.
"""

from __future__ import annotations

import csv
import io
import sys
from pathlib import Path

import typer

from simcomm.cli.console import StageBar, print_json, stderr, stdout, table
from simcomm.cli.scenario_flags import scenario_flags
from simcomm.errors import ConfigError
from simcomm.scenario import Scenario, flat_from_file, from_flat
from simcomm.units import format_size, format_time

__all__ = ["run_command", "build_scenario", "parse_opts", "render_result", "result_rows"]

#: typed flag -> strategy option name
TYPED = ("k_prime", "servers", "placement", "algorithm", "overlap", "drop_ratio")


def parse_opts(opts: list[str] | None) -> dict:
    """``--opt key=value`` pairs into a dict (values stay strings; the strategy converts them)."""
    out = {}
    for item in opts or []:
        if "=" not in item:
            raise ConfigError(f"--opt: {item!r} must look like key=value")
        k, v = item.split("=", 1)
        out[k.strip().replace("-", "_")] = v.strip()
    return out


def build_scenario(scenario: Path | None = None, flags: dict | None = None, *, opts=None, typed=None,
                   **more) -> Scenario:
    """A Scenario from an optional TOML file with flat flag values on top (the one resolver).

    ``flags`` (and keyword ``more``) are scenario keys as the user gave them;
    ``typed`` holds the typed strategy-option flags (``--k-prime`` ...) and
    ``opts`` the ``--opt key=value`` pairs.  ``--opt nccl_algo=...`` is the same
    as ``--nccl-algo`` (a stack setting, like the NCCL_ALGO environment variable).
    """
    flat, seconds = flat_from_file(scenario) if scenario is not None else ({}, set())
    given = {k: v for k, v in {**(flags or {}), **more}.items() if v is not None}
    if {"model", "trace", "model_config"} & set(given):  # a flag replaces whatever the file chose
        flat.pop("model", None)
        flat.pop("trace", None)
        flat.pop("model_config", None)
    flat.update({k: str(v) if isinstance(v, Path) else v for k, v in given.items()})
    flat.update({k: v for k, v in (typed or {}).items() if v is not None})
    flat.update(parse_opts(opts))
    return from_flat(flat, seconds=seconds - set(given) - set(parse_opts(opts)))


def _t(x) -> str:
    return "-" if x is None else "0" if x == 0 else format_time(x)


def result_rows(res) -> list[dict]:
    """One row per iteration kind plus the mean (CSV and tests)."""
    rows = []
    for k in (*res.kinds, None):
        src = k if k is not None else res
        bd = src.breakdown
        rows.append({"strategy": res.strategy, "nodes": res.nodes, "ranks": res.n_ranks,
                     "kind": k.label if k else "mean", "weight": k.weight if k else sum(x.weight for x in res.kinds),
                     "time_s": k.time_s if k else res.mean_s,
                     "closed_form_s": (k.analytic_s if k else res.analytic_mean_s),
                     "compute_s": bd.compute, "dataload_s": bd.dataload, "comm_exposed_s": bd.comm_exposed,
                     "comm_hidden_s": bd.comm_hidden, "compression_s": bd.compression, "server_s": bd.server})
    return rows


def render_result(res, console) -> None:
    """The rich report of one Result."""
    head = (f"{res.strategy} on {res.where}: {res.nodes} node(s) x {res.gpus_per_node} GPU(s) = "
            f"{res.n_ranks} ranks, {res.model}, batch {res.batch}/rank, {res.fidelity} fidelity, stack {res.stack}")
    if res.not_applicable:
        console.print(head)
        console.print(f"not applicable: {res.not_applicable}")
        return
    server = any(k.breakdown.server for k in res.kinds)
    cols = [("iteration", "left"), ("per epoch", "right"), ("simulated", "right"), ("closed form", "right"),
            ("compute", "right"), ("data loading", "right"), ("comm exposed", "right"), ("comm hidden", "right"),
            ("compression", "right")] + ([("server", "right")] if server else [])
    t = table(head, cols)
    for row in result_rows(res):
        if row["kind"] == "mean" and len(res.kinds) == 1:
            continue
        t.add_row(row["kind"], f"{row['weight']:g}", _t(row["time_s"]), _t(row["closed_form_s"]),
                  _t(row["compute_s"]), _t(row["dataload_s"]), _t(row["comm_exposed_s"]),
                  _t(row["comm_hidden_s"]), _t(row["compression_s"]), *([_t(row["server_s"])] if server else []))
    console.print(t)
    tr = table("traffic per iteration", [("link family", "left"),
                                                                              ("bytes", "right")])
    for fam, v in res.link_bytes.items():
        tr.add_row(fam, format_size(v))  # summed over every link a byte crosses
    console.print(tr)
    console.print(f"mean iteration: {_t(res.mean_s)}   closed form: {_t(res.analytic_mean_s)}")
    if res.exposed_by:
        parts = [f"{k} {_t(v)}" for k, v in res.exposed_by.items() if k != "waiting"]
        console.print("exposed by parallelism: " + ", ".join(parts) +
                      f"; waiting (pipeline bubble, other ranks) {_t(res.exposed_by.get('waiting', 0.0))}")
    if res.epoch_s is not None:
        console.print(f"epoch: {_t(res.epoch_s)} ({res.iterations_per_epoch} iterations)")
    console.print(f"throughput: {res.samples_per_s:,.1f} samples/s (global batch {res.global_batch})")
    if res.speedup is not None:
        console.print(f"speedup vs baseline: {res.speedup:.3f}x (baseline {_t(res.baseline_s)}: {res.baseline})")
    for line in res.assumed:
        console.print(f"assumed: {line}")


@scenario_flags()
def run_command(
    scenario: Path | None = typer.Argument(None, help="Scenario TOML file (flags override it)."),
    opt: list[str] | None = typer.Option(None, "--opt", help="Strategy option key=value (repeatable)."),
    k_prime: int | None = typer.Option(None, "--k-prime", help="node-based: iterations between exchanges."),
    servers: int | None = typer.Option(None, "--servers", help="ps: number of servers."),
    placement: str | None = typer.Option(None, "--placement", help="ps: own or colocated."),
    algorithm: str | None = typer.Option(None, "--algorithm", help="all-reduce algorithm or auto."),
    overlap: str | None = typer.Option(None, "--overlap", help="none, backward or backward+forward."),
    drop_ratio: float | None = typer.Option(None, "--drop-ratio", help="ps-layer-drop: fraction dropped."),
    no_baseline: bool = typer.Option(False, "--no-baseline", help="Same as --baseline none."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable JSON."),
    as_csv: bool = typer.Option(False, "--csv", help="CSV: one row per iteration kind and the mean."),
    timeline: Path | None = typer.Option(None, "--timeline",
                                            help="Write a Perfetto/Chrome trace-event JSON of the iteration(s)."),
    flags: dict | None = None,
) -> None:
    """Simulate one strategy and print iteration time, breakdown, traffic, epoch time and speedup."""
    from simcomm.pipeline import simulate

    flags = dict(flags or {})
    if scenario is None and "strategy" not in flags:
        raise ConfigError("strategy: give --strategy NAME or a scenario file")
    if no_baseline:
        flags["baseline"] = "none"
    typed = dict(k_prime=k_prime, servers=servers, placement=placement, algorithm=algorithm, overlap=overlap,
                 drop_ratio=drop_ratio)
    scn = build_scenario(scenario, flags, opts=opt, typed=typed)
    if timeline is not None:
        from simcomm.outpath import check_output_path

        timeline = check_output_path(timeline, "--timeline")  # before the simulation, not after
    kinds: list = []
    topo_box: list = []

    def keep(label, weight, plan, tl, topo):
        kinds.append((label, plan, tl))
        topo_box[:] = [topo]

    with StageBar(enabled=not (as_json or as_csv)) as bar:
        res = simulate(scn, on_timeline=keep if timeline is not None else None, progress=bar)
    if res.not_applicable:
        raise ConfigError(f"strategy {res.strategy!r} is not applicable here: {res.not_applicable}")
    if timeline is not None:
        from simcomm.report.perfetto import kinds_trace_events, write_timeline

        write_timeline(timeline, kinds_trace_events(kinds, machine_of=topo_box[0].machine_of))
        stderr().print(f"timeline: {timeline} (open it at https://ui.perfetto.dev or chrome://tracing)")
    if as_json:
        print_json(res.to_dict())
    elif as_csv:
        rows = result_rows(res)
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
        sys.stdout.write(buf.getvalue())
    else:
        render_result(res, stdout())

