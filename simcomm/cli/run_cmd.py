"""``simcomm run``: simulate one strategy on one cluster and print where the time goes.

Flags override a scenario TOML file; everything left unset falls back to
documented defaults (DEEP-EST cluster, the bundled ResNet-50 V100 trace,
ImageNet/CIFAR dataset size), each printed as an ``assumed:`` line.
"""

from __future__ import annotations

import csv
import io
import sys
from dataclasses import replace
from pathlib import Path
from typing import Optional

import typer

from simcomm.cli.app import app
from simcomm.cli.console import stderr, print_json, stdout, table
from simcomm.errors import ConfigError
from simcomm.scenario import Scenario, StackSpec, WorkloadSpec, load_scenario, parse_baseline
from simcomm.units import format_size, format_time, parse_time

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


def _floats(text: str | None, field: str) -> tuple[float, ...] | None:
    if text is None:
        return None
    try:
        return tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise ConfigError(f"{field}: {text!r} must be comma-separated numbers") from None


def build_scenario(scenario: Optional[Path], *, strategy=None, nodes=None, gpus_per_node=None, cluster=None,
                   model=None, trace=None, batch=None, dataset_size=None, fidelity=None, seed=None,
                   resolution=None, scaling=None, bucket_mb=None, dataload=None, dataload_overlap=None, compute_scale=None,
                   compute_jitter=None, stack=None, stack_efficiency=None, stack_overhead=None, stack_cpu=None, opts=None,
                   typed=None, precision=None, wire_dtype=None, collectives=None, nccl_algo=None, nccl_proto=None,
                   baseline=None) -> Scenario:
    """A Scenario from an optional TOML file with CLI values on top.

    ``--opt nccl_algo=...`` / ``--opt nccl_proto=...`` are accepted for any strategy
    (they are stack settings, like the NCCL_ALGO/NCCL_PROTO environment variables).
    """
    scn = load_scenario(scenario) if scenario is not None else Scenario(strategy=strategy or "allreduce")
    if model is not None or trace is not None:  # a flag replaces whatever the file chose
        scn = replace(scn, model=None, trace=None)
    scn = scn.with_(strategy=strategy, nodes=nodes, gpus_per_node=gpus_per_node, cluster=cluster, model=model,
                    trace=str(trace) if trace is not None else None, batch=batch, dataset_size=dataset_size,
                    fidelity=fidelity, seed=seed, resolution=resolution)
    w = scn.workload
    scn = replace(scn, workload=WorkloadSpec(
        scaling=scaling or w.scaling, bucket_mb=w.bucket_mb if bucket_mb is None else bucket_mb,
        dataload_s=w.dataload_s if dataload is None else parse_time(dataload, "--dataload"),
        dataload_overlap=w.dataload_overlap if dataload_overlap is None else dataload_overlap,
        compute_scale=_floats(compute_scale, "--compute-scale") or w.compute_scale,
        compute_jitter=w.compute_jitter if compute_jitter is None else compute_jitter,
        precision=precision or w.precision, wire_dtype=wire_dtype or w.wire_dtype))
    options = dict(scn.options)
    options.update({k: v for k, v in (typed or {}).items() if v is not None})
    options.update(parse_opts(opts))
    nccl_algo = options.pop("nccl_algo", None) or nccl_algo
    nccl_proto = options.pop("nccl_proto", None) or nccl_proto
    s = scn.stack
    scn = replace(scn, stack=StackSpec(
        name=stack or s.name, efficiency=s.efficiency if stack_efficiency is None else stack_efficiency,
        overhead=s.overhead if stack_overhead is None else parse_time(stack_overhead, "--stack-overhead"),
        cpu_per_byte=s.cpu_per_byte if stack_cpu is None else parse_time(stack_cpu, "--stack-cpu"),
        collectives=collectives or s.collectives, nccl_algo=nccl_algo or s.nccl_algo,
        nccl_proto=nccl_proto or s.nccl_proto))
    if baseline is not None:
        scn = replace(scn, baseline=parse_baseline(baseline))
    return replace(scn, options=options)


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
    head = (f"{res.strategy} on {res.cluster}: {res.nodes} node(s) x {res.gpus_per_node} GPU(s) = "
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
    if res.epoch_s is not None:
        console.print(f"epoch: {_t(res.epoch_s)} ({res.iterations_per_epoch} iterations)")
    console.print(f"throughput: {res.samples_per_s:,.1f} samples/s (global batch {res.global_batch})")
    if res.speedup is not None:
        console.print(f"speedup vs baseline: {res.speedup:.3f}x (baseline {_t(res.baseline_s)}: {res.baseline})")
    for line in res.assumed:
        console.print(f"assumed: {line}")


@app.command("run")
def run_command(
    scenario: Optional[Path] = typer.Argument(None, help="Scenario TOML file (flags override it)."),
    strategy: Optional[str] = typer.Option(None, "--strategy", "-s", help="Strategy name (simcomm list strategies)."),
    nodes: Optional[int] = typer.Option(None, "--nodes", "-n", help="Number of nodes."),
    gpus_per_node: Optional[int] = typer.Option(None, "--gpus-per-node", "-g", help="GPUs (ranks) per node."),
    cluster: Optional[str] = typer.Option(None, "--cluster", help="Cluster preset name or TOML file."),
    model: Optional[str] = typer.Option(None, "--model", help="Bundled trace or zoo model name."),
    trace: Optional[Path] = typer.Option(None, "--trace", help="Trace file (JSON)."),
    batch: Optional[int] = typer.Option(None, "--batch", help="Per-rank batch (weak) or global batch (strong)."),
    dataset_size: Optional[int] = typer.Option(None, "--dataset-size", help="Samples per epoch."),
    fidelity: Optional[str] = typer.Option(None, "--fidelity", help="flow or analytic."),
    seed: Optional[int] = typer.Option(None, "--seed"),
    resolution: Optional[float] = typer.Option(None, "--resolution",
                                               help="Merge flow completions within this fraction of their "
                                                    "duration (default 0.01; 0 = exact)."),
    scaling: Optional[str] = typer.Option(None, "--scaling", help="weak or strong."),
    bucket_mb: Optional[float] = typer.Option(None, "--bucket-mb", help="DDP bucket size in MB (0 = one bucket)."),
    dataload: Optional[str] = typer.Option(None, "--dataload", help="Data loading time per iteration, e.g. 20ms."),
    dataload_overlap: Optional[bool] = typer.Option(None, "--dataload-overlap/--dataload-blocking"),
    compute_scale: Optional[str] = typer.Option(None, "--compute-scale", help="Per-node (or per-rank) factors, a,b,..."),
    compute_jitter: Optional[float] = typer.Option(None, "--compute-jitter",
                                                   help="Coefficient of variation of each rank's compute, drawn "
                                                        "afresh every iteration (0 = none; e.g. 0.05)."),
    stack: Optional[str] = typer.Option(None, "--stack", help="Transport stack (simcomm list stacks); default: the "
                                        "cluster preset's own."),
    collectives: Optional[str] = typer.Option(None, "--collectives", help="How auto picks collective algorithms: "
                                              "nccl, openmpi, mpich, gloo (default: the stack's)."),
    nccl_algo: Optional[str] = typer.Option(None, "--nccl-algo", help="Like NCCL_ALGO: ring, tree, nvls, "
                                            "nvls-tree, collnet-direct, collnet-chain, pat."),
    nccl_proto: Optional[str] = typer.Option(None, "--nccl-proto", help="Like NCCL_PROTO: ll, ll128, simple."),
    precision: Optional[str] = typer.Option(None, "--precision", help="fp32, amp-fp16, amp-bf16, fp16, bf16 "
                                            "(compute and wire dtype)."),
    wire_dtype: Optional[str] = typer.Option(None, "--wire-dtype", help="What gradients/models travel in: fp32, "
                                             "fp16, bf16, fp64 (default: the precision's)."),
    stack_efficiency: Optional[float] = typer.Option(None, "--stack-efficiency", help="Fraction of line rate."),
    stack_overhead: Optional[str] = typer.Option(None, "--stack-overhead", help="Per-message overhead, e.g. 20us."),
    stack_cpu: Optional[str] = typer.Option(None, "--stack-cpu", help="Host CPU time per byte sent or received, "
                                            "charged to the compute it overlaps, e.g. 25ns (CPU training)."),
    opt: Optional[list[str]] = typer.Option(None, "--opt", help="Strategy option key=value (repeatable)."),
    k_prime: Optional[int] = typer.Option(None, "--k-prime", help="node-based: iterations between exchanges."),
    servers: Optional[int] = typer.Option(None, "--servers", help="ps: number of servers."),
    placement: Optional[str] = typer.Option(None, "--placement", help="ps: own or colocated."),
    algorithm: Optional[str] = typer.Option(None, "--algorithm", help="all-reduce algorithm or auto."),
    overlap: Optional[str] = typer.Option(None, "--overlap", help="none, backward or backward+forward."),
    drop_ratio: Optional[float] = typer.Option(None, "--drop-ratio", help="ps-layer-drop: fraction dropped."),
    baseline: Optional[str] = typer.Option(None, "--baseline", help="What speedup compares with: none, a "
                                           "strategy, or NAME:key=value,... (default: the strategy's paper "
                                           "baseline)."),
    no_baseline: bool = typer.Option(False, "--no-baseline", help="Same as --baseline none."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable JSON."),
    as_csv: bool = typer.Option(False, "--csv", help="CSV: one row per iteration kind and the mean."),
    timeline: Optional[Path] = typer.Option(None, "--timeline",
                                            help="Write a Perfetto/Chrome trace-event JSON of the iteration(s)."),
) -> None:
    """Simulate one strategy and print iteration time, breakdown, traffic, epoch time and speedup."""
    from simcomm.pipeline import simulate

    if scenario is None and strategy is None:
        raise ConfigError("strategy: give --strategy NAME or a scenario file")
    typed = dict(k_prime=k_prime, servers=servers, placement=placement, algorithm=algorithm, overlap=overlap,
                 drop_ratio=drop_ratio)
    scn = build_scenario(scenario, strategy=strategy, nodes=nodes, gpus_per_node=gpus_per_node, cluster=cluster,
                         model=model, trace=trace, batch=batch, dataset_size=dataset_size, fidelity=fidelity,
                         seed=seed, resolution=resolution, scaling=scaling, bucket_mb=bucket_mb, dataload=dataload,
                         dataload_overlap=dataload_overlap, compute_scale=compute_scale,
                         compute_jitter=compute_jitter, stack=stack,
                         stack_efficiency=stack_efficiency, stack_overhead=stack_overhead, stack_cpu=stack_cpu,
                         opts=opt, typed=typed, precision=precision, wire_dtype=wire_dtype, collectives=collectives,
                         nccl_algo=nccl_algo, nccl_proto=nccl_proto, baseline="none" if no_baseline else baseline)
    if timeline is not None and not timeline.parent.resolve().is_dir():
        raise ConfigError(f"--timeline: directory {str(timeline.parent)!r} does not exist")
    kinds: list = []
    topo_box: list = []

    def keep(label, weight, plan, tl, topo):
        kinds.append((label, plan, tl))
        topo_box[:] = [topo]

    res = simulate(scn, on_timeline=keep if timeline is not None else None)
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

