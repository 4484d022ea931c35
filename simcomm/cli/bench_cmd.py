"""``simcomm bench COLLECTIVE``: an nccl-tests-style size sweep of one collective on a cluster."""

from __future__ import annotations

import csv
import io
import sys
from pathlib import Path

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from simcomm.cli.console import print_json, stderr
from simcomm.cli.scenario_flags import scenario_flags
from simcomm.errors import ConfigError
from simcomm.nccl.measured import BANDS as SUITE_BANDS
from simcomm.nccl.measured import UNSETTLED
from simcomm.topologies.nvlink import nvlink_notes

__all__ = ["bench_command", "render_rows", "render_comparison", "comparison_dict", "error_summary"]


def _head(header: str, assumed, columns: list[tuple[str, str, int]]) -> list[str]:
    """A table's first lines: the run, what it assumes, then size, count, ``columns`` (name, unit, width), algorithm."""
    names = " ".join(f"{n:>{w}}" for n, _, w in columns)
    units = " ".join(f"{u:>{w}}" for _, u, w in columns)
    return [f"# {header}", *(f"# assumed: {a}" for a in assumed), "#",
            f"# {'size':>12} {'count':>12} {names}  algorithm", f"# {'(B)':>12} {'(elements)':>12} {units}"]


def render_rows(rows, header: str, assumed: list[str] = ()) -> str:
    """The table in nccl-tests' own layout (out-of-place columns) plus the algorithm that ran."""
    out = _head(header, assumed, [("type", "", 8), ("redop", "", 6), ("root", "", 6), ("time", "(us)", 10),
                         ("algbw", "(GB/s)", 8), ("busbw", "(GB/s)", 8)])
    for r in rows:
        out.append(f"  {r.size:>12.0f} {r.count:>12d} {r.type:>8} {r.redop:>6} {r.root:>6d} {r.time_us:>10.2f} "
                   f"{r.algbw:>8.2f} {r.busbw:>8.2f}  {r.algorithm}")
    avg = sum(r.busbw for r in rows) / len(rows)
    out.append(f"# Avg bus bandwidth    : {avg:.3f} GB/s")
    return "\n".join(out) + "\n"


#: size bands of the error summary: every row, then the public suite's bands (docs/accuracy.md)
BANDS = (("all", 0, float("inf")),) + SUITE_BANDS


def comparison_dict(c) -> dict:
    """One measured row beside its prediction, for --json and --csv (predicted fields None for a no-op row)."""
    p = c.predicted
    return {"size": c.measured_size, "count": c.measured_count, "measured_us": c.measured_us,
            "measured_busbw": round(c.measured_busbw, 6),
            "predicted_us": None if p is None else p.time_us,
            "error": None if c.error is None else round(c.error, 6),
            "predicted_algbw": None if p is None else p.algbw, "predicted_busbw": None if p is None else p.busbw,
            "algorithm": "no-op (count 0: NCCL launches nothing)" if p is None else p.algorithm,
            "unsettled": c.unsettled}


def _engine_paths(row) -> dict | None:
    """The paths the engine took for a row (a simulated row's, a measured row's prediction's; None: a no-op)."""
    run = getattr(row, "predicted", row)
    return None if run is None else run.engine


def error_summary(rows) -> list[tuple[str, float | None]]:
    """Median |error| of the compared rows per size band (None where the band has no row)."""
    import statistics

    out = []
    for label, lo, hi in BANDS:
        errs = [abs(c.error) for c in rows
                if c.error is not None and not c.unsettled and lo <= c.measured_size <= hi]
        out.append((label, statistics.median(errs) if errs else None))
    return out


def render_comparison(rows, header: str, assumed: list[str] = ()) -> str:
    """Measured and predicted out-of-place time per row, the error, and the median |error| per size band."""
    out = _head(header, assumed, [("measured", "(us)", 10), ("predicted", "(us)", 10), ("error", "", 8),
                         ("busbw", "measured", 8), ("busbw", "predicted", 8)])
    for c in rows:
        p = c.predicted
        if p is None:
            out.append(f"  {c.measured_size:>12d} {c.measured_count:>12d} {c.measured_us:>10.2f} {'-':>10} "
                       f"{'-':>8} {c.measured_busbw:>8.2f} {'-':>8}  no-op (count 0: NCCL launches nothing)")
            continue
        err = "-" if c.error is None else f"{100 * c.error:+.1f}%" + ("*" if c.unsettled else "")
        out.append(f"  {c.measured_size:>12d} {c.measured_count:>12d} {c.measured_us:>10.2f} {p.time_us:>10.2f} "
                   f"{err:>8} {c.measured_busbw:>8.2f} {p.busbw:>8.2f}  {p.algorithm}")
    summary = ", ".join(f"{label} {'-' if v is None else f'{100 * v:.1f} %'}" for label, v in error_summary(rows))
    if any(c.unsettled for c in rows):
        out.append(f"# * unsettled: the in-place time differs from the out-of-place one by more than {UNSETTLED:g}x "
                   "in the file itself; left out of the medians")
    out.append(f"# median |error| (predicted - measured, over measured): {summary}")
    return "\n".join(out) + "\n"


@scenario_flags(sections=("stack", "network", "nvlink"))
def bench_command(
    collective: str = typer.Argument(..., help="all_reduce, all_gather, reduce_scatter, broadcast, reduce, "
                                               "alltoall or sendrecv (or allreduce, ...)."),
    cluster: str = typer.Option("dgx-h100-ndr", "--cluster", help="Cluster preset or file."),
    nodes: int = typer.Option(1, "--nodes", "-n", help="Number of nodes."),
    gpus_per_node: int | None = typer.Option(None, "--gpus-per-node", "-g"),
    sizes: str | None = typer.Option(None, "--sizes", help="8B..8GB (doubling), 1KB..1GBx4, or 8,1MB,1GB "
                                                             "[default: 8B..1GB]; GB = 1e9 B, GiB and nccl-tests' "
                                                             "G = 2^30 B (8..8G)."),
    minbytes: str | None = typer.Option(None, "--minbytes", "-b", help="nccl-tests' -b: smallest size (8, 1K, "
                                                                          "32M; K, M, G are powers of 1024) "
                                                                          "[default: 32M]."),
    maxbytes: str | None = typer.Option(None, "--maxbytes", "-e", help="nccl-tests' -e: largest size "
                                                                          "[default: 32M]."),
    stepfactor: int | None = typer.Option(None, "--stepfactor", "-f", help="nccl-tests' -f: multiply each size "
                                                                              "by this [default: 1: add -i]."),
    stepbytes: str | None = typer.Option(None, "--stepbytes", "-i", help="nccl-tests' -i: add this to each "
                                                                            "size when -f is 1 [default: 1M]."),
    measured: str | None = typer.Option(None, "--measured",
                                           help="an nccl-tests output (all_reduce_perf's table, or a whole log; - "
                                                "reads standard input): predict its sizes and type and print "
                                                "each row's error."),
    dtype: str | None = typer.Option(None, "--dtype", help="nccl-tests' type: float, half, bfloat16, "
                                                                "double, int8, int32, int64, uint8, uint32, "
                                                                "uint64, fp8_e4m3, fp8_e5m2 [default: float, or "
                                                                "the --measured file's]."),
    root: int = typer.Option(0, "--root", help="Root rank of broadcast and reduce."),
    stack: str | None = typer.Option(None, "--stack", help="Transport stack (default: the cluster's)."),
    collectives: str | None = typer.Option(None, "--collectives", help="nccl, openmpi, mpich or gloo."),
    nccl_algo: str | None = typer.Option(None, "--nccl-algo", help="Like NCCL_ALGO."),
    nccl_proto: str | None = typer.Option(None, "--nccl-proto", help="Like NCCL_PROTO."),
    fidelity: str = typer.Option("flow", "--fidelity", help="flow or analytic."),
    gpus_per_thread: int | None = typer.Option(None, "--gpus-per-thread",
                                                  help="GPUs one host thread drives, like nccl-tests' -g (each NCCL "
                                                       "call launches on them one after another) [default: 1, or "
                                                       "the --measured file's nGpus]."),
    png: Path | None = typer.Option(None, "--png", help="Write a plot here: busbw against size, coloured by "
                                                           "the algorithm that ran (and the measurement, with "
                                                           "--measured)."),
    as_json: bool = typer.Option(False, "--json"),
    as_csv: bool = typer.Option(False, "--csv"),
    quiet: bool = typer.Option(False, "--quiet", help="No progress bar."),
    flags: dict | None = None,
) -> None:
    """Predict an nccl-tests size sweep: time, algbw, busbw and the algorithm chosen at each size."""
    from simcomm.bench import (
        against_measured,
        bench,
        canonical,
        check_measured,
        describe_sizes,
        nccl_tests_sweep,
        parse_sizes,
        whole_elements,
    )
    from simcomm.scenario import FIDELITIES, from_flat
    from simcomm.scenario.setup import Resolver

    if as_json and as_csv:
        raise ConfigError("--json and --csv: give one of them")
    kind = canonical(collective)
    table, g_from = None, ""
    sweep = {"-b": minbytes, "-e": maxbytes, "-f": stepfactor, "-i": stepbytes}
    nccl_style = [flag for flag, value in sweep.items() if value is not None]
    if nccl_style and sizes is not None:
        raise ConfigError(f"--sizes and {'/'.join(nccl_style)}: give one of them (nccl-tests' -b/-e/-f/-i, or "
                          "simcomm's --sizes)")
    if measured is not None:
        from simcomm.nccl.measured import read_measured

        for flag, value in (("--sizes", sizes), ("--dtype", dtype), *((f, v) for f, v in sweep.items())):
            if value is not None:
                raise ConfigError(f"{flag} and --measured: give one of them (--measured predicts the file's sizes "
                                  "in its type)")
        table = read_measured(measured)
        size_list = [float(r.size) for r in table.rows]
        dtype = table.rows[0].type
        if gpus_per_thread is None and table.gpus_per_thread is not None:
            gpus_per_thread, g_from = table.gpus_per_thread, " (the file's nGpus)"
    elif nccl_style:
        size_list = nccl_tests_sweep(minbytes, maxbytes, stepfactor, stepbytes)
        dtype = dtype or "float"
    else:
        size_list = parse_sizes(sizes if sizes is not None else "8B..1GB")
        dtype = dtype or "float"
    gpus_per_thread = 1 if gpus_per_thread is None else gpus_per_thread
    if png is not None:
        from simcomm.outpath import check_output_path

        png = check_output_path(png, "--png")  # before any simulation: a bad path is one line, at once
    if fidelity not in FIDELITIES:
        raise ConfigError(f"--fidelity: {fidelity!r} is not valid; valid choices: {', '.join(FIDELITIES)}")
    given = {"nodes": nodes, "gpus_per_node": gpus_per_node, "cluster": cluster, "stack": stack,
             "collectives": collectives, "nccl_algo": nccl_algo, "nccl_proto": nccl_proto, **(flags or {})}
    scn = from_flat({k: v for k, v in given.items() if v is not None})  # the one scenario vocabulary
    ctx = Resolver(scn)
    _, topo = ctx.cluster(nodes, 0)
    runtime = ctx.runtime()
    rounded: list[str] = []
    if table is None:
        from simcomm.nccl.measured import TYPE_BYTES

        if dtype not in TYPE_BYTES:
            raise ConfigError(f"--dtype: {dtype!r} is not valid; valid choices: {', '.join(TYPE_BYTES)}")
        size_list, rounded = whole_elements(kind, size_list, dtype, topo.n_ranks,
                                            "-b/-e/-i" if nccl_style else "--sizes")
    else:
        warning = check_measured(kind, table, topo.n_ranks)  # a file of another collective or rank count: refused
        if warning:
            sys.stderr.write(f"warning: {warning}\n")
    def run(progress=None):
        if table is not None:
            return against_measured(kind, topo, runtime, table, root=root, fidelity=fidelity,
                                    gpus_per_thread=gpus_per_thread, progress=progress)
        return bench(kind, topo, runtime, size_list, dtype=dtype, root=root, fidelity=fidelity,
                     gpus_per_thread=gpus_per_thread, progress=progress)

    if quiet or as_json or as_csv:
        rows = run()
    else:
        with Progress(TextColumn("simulating"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=stderr(), transient=True) as bar:
            task = bar.add_task("bench", total=len(size_list))
            rows = run(lambda: bar.advance(task))
    name, why = ctx.stack_choice()
    changed = ", ".join(x for x in (topo.network.label(), f"links={scn.network.links}" if scn.network.links else "")
                        if x)
    nvl = scn.nvlink  # NVLink domains as typed (a default split is an assumed: line instead)
    typed = ", ".join(x for x in (f"nvl_domain={nvl.domain}" if nvl.domain is not None else "",
                                  f"nvl_split={'+'.join(map(str, nvl.split))}" if nvl.split else "") if x)
    changed = ", ".join(x for x in (changed, typed) if x)
    where = f"{cluster} ({changed})" if changed else cluster
    header = (f"simcomm bench {collective}: {where}, {nodes} node(s), {topo.n_ranks} ranks, stack {name} "
              f"({runtime.name} collectives{'' if why is None else '; ' + why}), {fidelity} fidelity, "
              f"{gpus_per_thread} GPU(s) per host thread (--gpus-per-thread, nccl-tests' -g){g_from}")
    # the override, then the runtime's defaults
    assumed = [*ctx.cluster_notes(nodes, 0), *runtime.assumed(kind, topo), *nvlink_notes(topo)]
    if name == "nccl-socket" and why is not None and why == ctx.transport_switch():
        assumed.append(why)
    if table is None:
        header += f"; sizes {describe_sizes(size_list)}"
    if rounded:
        per = " per rank" if kind in ("allgather", "reduce_scatter", "alltoall") else ""
        assumed.append(f"{', '.join(rounded)} rounded down to whole {dtype} elements{per}, as nccl-tests runs them")
    if table is not None:
        header += f"; measured: {measured}"
        dicts = [comparison_dict(c) for c in rows]
    else:
        dicts = [r.to_dict() for r in rows]
    if as_json:
        doc = {"collective": kind, "cluster": cluster, "nodes": nodes, "ranks": topo.n_ranks, "stack": name,
               "collectives": runtime.name, "fidelity": fidelity, "gpus_per_thread": gpus_per_thread,
               "assumed": assumed, "rows": [{**d, "engine": _engine_paths(r)} for d, r in zip(dicts, rows, strict=True)]}
        if nvl.any():
            doc["nvl_domain"], doc["nvl_split"] = nvl.domain, list(nvl.split) or None
        if topo.network.any():
            doc["network"] = topo.network.given()
        if table is not None:
            doc["measured"] = measured
            doc["median_abs_error"] = {label: v for label, v in error_summary(rows)}
        print_json(doc)
    elif as_csv:
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=list(dicts[0]), lineterminator="\n")
        w.writeheader()
        w.writerows(dicts)
        sys.stdout.write(buf.getvalue())
    elif table is not None:
        sys.stdout.write(render_comparison(rows, header, assumed))
    else:
        sys.stdout.write(render_rows(rows, header, assumed))
    if png is not None:
        _plot(png, rows, table is not None, f"{collective} on {where}, {topo.n_ranks} ranks, stack {name}")
        if not (as_json or as_csv):
            sys.stdout.write(f"# plot: {png}\n")


def _plot(png: Path, rows, compared: bool, title: str) -> None:
    from simcomm.report.bench_plot import plot_bench

    if compared:
        predicted = [{"size": c.measured_size, "busbw": c.predicted.busbw, "algorithm": c.predicted.algorithm}
                     for c in rows if c.predicted is not None]
        measured = [{"size": c.measured_size, "busbw": c.measured_busbw, "error": c.error,
                     "unsettled": c.unsettled} for c in rows]
        plot_bench(predicted, png, title, measured)
    else:
        plot_bench([{"size": r.size, "busbw": r.busbw, "algorithm": r.algorithm} for r in rows], png, title)
