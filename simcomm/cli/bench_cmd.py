"""``simcomm bench COLLECTIVE``: an nccl-tests-style size sweep of one collective on a cluster."""

from __future__ import annotations

import csv
import io
import sys
from typing import Optional

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from simcomm.cli.scenario_flags import scenario_flags
from simcomm.cli.console import print_json, stderr
from simcomm.errors import ConfigError

__all__ = ["bench_command", "render_rows"]


def render_rows(rows, header: str) -> str:
    """The table in nccl-tests' own layout (out-of-place columns) plus the algorithm that ran."""
    out = [f"# {header}",
           "#",
           f"# {'size':>12} {'count':>12} {'type':>8} {'redop':>6} {'root':>6} {'time':>10} {'algbw':>8} "
           f"{'busbw':>8}  algorithm",
           f"# {'(B)':>12} {'(elements)':>12} {'':>8} {'':>6} {'':>6} {'(us)':>10} {'(GB/s)':>8} {'(GB/s)':>8}"]
    for r in rows:
        out.append(f"  {r.size:>12.0f} {r.count:>12d} {r.type:>8} {r.redop:>6} {r.root:>6d} {r.time_us:>10.2f} "
                   f"{r.algbw:>8.2f} {r.busbw:>8.2f}  {r.algorithm}")
    avg = sum(r.busbw for r in rows) / len(rows)
    out.append(f"# Avg bus bandwidth    : {avg:.3f} GB/s")
    return "\n".join(out) + "\n"


@scenario_flags(sections=("stack", "network"))
def bench_command(
    collective: str = typer.Argument(..., help="all_reduce, all_gather, reduce_scatter, broadcast, reduce, "
                                               "alltoall or sendrecv (or allreduce, ...)."),
    cluster: str = typer.Option("dgx-h100-ndr", "--cluster", help="Cluster preset or file."),
    nodes: int = typer.Option(1, "--nodes", "-n", help="Number of nodes."),
    gpus_per_node: Optional[int] = typer.Option(None, "--gpus-per-node", "-g"),
    sizes: str = typer.Option("8B..1GB", "--sizes", help="8B..8GB (doubling), 1KB..1GBx4, or 8,1MB,1GB."),
    dtype: str = typer.Option("float", "--dtype", help="float, half, bfloat16, double, int32, int8."),
    root: int = typer.Option(0, "--root", help="Root rank of broadcast and reduce."),
    stack: Optional[str] = typer.Option(None, "--stack", help="Transport stack (default: the cluster's)."),
    collectives: Optional[str] = typer.Option(None, "--collectives", help="nccl, openmpi, mpich or gloo."),
    nccl_algo: Optional[str] = typer.Option(None, "--nccl-algo", help="Like NCCL_ALGO."),
    nccl_proto: Optional[str] = typer.Option(None, "--nccl-proto", help="Like NCCL_PROTO."),
    fidelity: str = typer.Option("flow", "--fidelity", help="flow or analytic."),
    gpus_per_thread: int = typer.Option(1, "--gpus-per-thread",
                                        help="GPUs one host thread drives, like nccl-tests' -g (each NCCL call "
                                             "launches on them one after another)."),
    as_json: bool = typer.Option(False, "--json"),
    as_csv: bool = typer.Option(False, "--csv"),
    quiet: bool = typer.Option(False, "--quiet", help="No progress bar."),
    flags: dict | None = None,
) -> None:
    """Predict an nccl-tests size sweep: time, algbw, busbw and the algorithm chosen at each size."""
    from simcomm.bench import bench, canonical, parse_sizes
    from simcomm.pipeline import Context
    from simcomm.scenario import FIDELITIES, from_flat

    if as_json and as_csv:
        raise ConfigError("--json and --csv: give one of them")
    kind = canonical(collective)
    size_list = parse_sizes(sizes)
    if fidelity not in FIDELITIES:
        raise ConfigError(f"--fidelity: {fidelity!r} is not valid; valid choices: {', '.join(FIDELITIES)}")
    given = {"nodes": nodes, "gpus_per_node": gpus_per_node, "cluster": cluster, "stack": stack,
             "collectives": collectives, "nccl_algo": nccl_algo, "nccl_proto": nccl_proto, **(flags or {})}
    scn = from_flat({k: v for k, v in given.items() if v is not None})  # the one scenario vocabulary
    ctx = Context(scn)
    _, topo = ctx.cluster(nodes, 0)
    runtime = ctx.runtime()
    if quiet or as_json or as_csv:
        rows = bench(kind, topo, runtime, size_list, dtype=dtype, root=root, fidelity=fidelity,
                     gpus_per_thread=gpus_per_thread)
    else:
        with Progress(TextColumn("simulating"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=stderr(), transient=True) as bar:
            task = bar.add_task("bench", total=len(size_list))
            rows = bench(kind, topo, runtime, size_list, dtype=dtype, root=root, fidelity=fidelity,
                         gpus_per_thread=gpus_per_thread, progress=lambda: bar.advance(task))
    name, why = ctx.stack_choice()
    changed = ", ".join(f"{k}={getattr(scn.network, k)}" for k in ("inter", "intra", "nic", "nics_per_node",
                                                                       "topology", "oversubscription", "links")
                        if getattr(scn.network, k) is not None)
    where = f"{cluster} ({changed})" if changed else cluster
    header = (f"simcomm bench {collective}: {where}, {nodes} node(s), {topo.n_ranks} ranks, stack {name} "
              f"({runtime.rules} collectives{'' if why is None else '; ' + why}), {fidelity} fidelity, "
              f"{gpus_per_thread} GPU(s) per host thread (-g)")
    if as_json:
        print_json({"collective": kind, "cluster": cluster, "nodes": nodes, "ranks": topo.n_ranks, "stack": name,
                    "collectives": runtime.rules, "fidelity": fidelity,
                    "gpus_per_thread": gpus_per_thread, "rows": [r.to_dict() for r in rows]})
    elif as_csv:
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=list(rows[0].to_dict()), lineterminator="\n")
        w.writeheader()
        w.writerows(r.to_dict() for r in rows)
        sys.stdout.write(buf.getvalue())
    else:
        sys.stdout.write(render_rows(rows, header))
