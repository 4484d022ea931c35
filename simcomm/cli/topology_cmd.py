"""``simcomm topology show|route``: inspect a preset or a topology file."""

from __future__ import annotations

from pathlib import Path

import typer

from simcomm.cli.console import print_json, stdout, table
from simcomm.errors import ConfigError
from simcomm.units import format_bandwidth, format_time

topology_app = typer.Typer(help="Inspect cluster topologies: summary, drawing, routes.", no_args_is_help=True)

_TARGET = typer.Argument(..., help="A preset name (simcomm list topologies) or a .toml/.graphml file.")
_NODES = typer.Option(None, "--nodes", help="Override the preset's node count.")
_GPN = typer.Option(None, "--gpus-per-node", help="Override the preset's ranks per node.")


def _load(target: str, nodes: int | None, gpn: int | None):
    from simcomm.topologies import resolve

    return resolve(target, nodes=nodes, gpus_per_node=gpn)


def _summary_json(s) -> dict:
    return {"name": s.name, "builder": s.builder, "ranks": s.ranks, "counts": s.counts, "machines": s.machines,
            "ranks_per_machine": s.ranks_per_machine,
            "links": [{"name": u.name, "family": u.family, "bandwidth_Bps": u.bandwidth, "latency_s": u.latency,
                       "count": u.count} for u in s.links],
            "bisection_Bps": s.bisection, "bisection_method": s.bisection_method,
            "diameter_hops": s.diameter, "diameter_method": s.diameter_method,
            "meta": {k: v for k, v in s.meta.items() if isinstance(v, (str, int, float, list, dict, type(None)))}}


def _placement(topo, shown: int = 3) -> str:
    """'machine 0: ranks 0-7; machine 1: ranks 8-15; ...' (ranks grouped by machine, in rank order)."""
    groups: list[tuple[object, int, int]] = []
    for r in range(topo.n_ranks):
        m = topo.machine_of(r)
        if groups and groups[-1][0] == m and groups[-1][2] == r - 1:
            groups[-1] = (m, groups[-1][1], r)
        else:
            groups.append((m, r, r))
    parts = [f"machine {m}: rank{'s' if a != b else ''} {a}{'-' + str(b) if a != b else ''}" for m, a, b in groups]
    more = f"; ... ({len(groups) - shown} more)" if len(groups) > shown else ""
    return "; ".join(parts[:shown]) + more


@topology_app.command("show")
def show(target: str = _TARGET, nodes: int = _NODES, gpus_per_node: int = _GPN,
         png: Path = typer.Option(None, "--png", help="Also draw the topology to this PNG file."),
         as_json: bool = typer.Option(False, "--json", help="Machine-readable output.")) -> None:
    """Summarize a topology: counts, links per class, bisection bandwidth, placement."""
    from simcomm.topologies.analysis import summarize

    topo = _load(target, nodes, gpus_per_node)
    if png is not None and png.suffix.lower() != ".png":
        raise ConfigError(f"--png: {str(png)!r} must end in .png")
    if png is not None:
        from simcomm.outpath import check_output_path

        png = check_output_path(png, "--png")
    s = summarize(topo)
    if png is not None:
        from simcomm.report.topology_plot import draw_topology

        draw_topology(topo, png)
    if as_json:
        print_json(_summary_json(s))
        return
    con = stdout()
    params = ", ".join(f"{k}={v}" for k, v in s.meta.items() if k != "builder" and v not in (None, {}, ""))
    con.print(f"topology {s.name} (builder {s.builder}{': ' + params if params else ''})")
    con.print(f"ranks {s.ranks} on {s.machines} machines ({s.ranks_per_machine} ranks), "
              f"nics {s.counts['nic']}, switches {s.counts['switch']}")
    t = table("links per class", [("link", "left"), ("family", "left"), ("count", "right"),
                                  ("bandwidth/dir", "right"), ("latency/hop", "right")])
    for u in s.links:
        t.add_row(u.name, u.family, str(u.count), format_bandwidth(u.bandwidth), format_time(u.latency))
    con.print(t)
    con.print(f"bisection bandwidth {format_bandwidth(s.bisection)} per direction ({s.bisection_method})")
    con.print(f"route diameter {s.diameter} links ({s.diameter_method})")
    con.print("placement: " + _placement(topo))
    if png is not None:
        con.print(f"wrote {png}")


@topology_app.command("route")
def route(target: str = _TARGET, src: int = typer.Argument(..., help="Source rank."),
          dst: int = typer.Argument(..., help="Destination rank."), nodes: int = _NODES,
          gpus_per_node: int = _GPN, as_json: bool = typer.Option(False, "--json")) -> None:
    """Print the node path and links a message from SRC to DST crosses."""
    topo = _load(target, nodes, gpus_per_node)
    for name, r in (("SRC", src), ("DST", dst)):
        if not 0 <= r < topo.n_ranks:
            raise ConfigError(f"{name}: rank {r} is out of range 0..{topo.n_ranks - 1}")
    path = topo.path(src, dst)
    hops = [(u, v, topo.graph.edges[u, v]["link"]) for u, v in zip(path, path[1:], strict=False)]
    lat = sum(topo.links[n].latency for _, _, n in hops)
    bott = min((topo.links[n].bandwidth for _, _, n in hops), default=float("inf"))
    if as_json:
        print_json({"src": src, "dst": dst, "path": [str(n) for n in path],
                    "links": [{"from": str(u), "to": str(v), "link": n} for u, v, n in hops],
                    "latency_s": lat, "bottleneck_Bps": bott if hops else None})
        return
    con = stdout()
    con.print(f"route r{src} -> r{dst} on {topo.name}: {len(hops)} links")
    con.print(" -> ".join(str(n) for n in path))
    t = table("links", [("hop", "right"), ("from", "left"), ("to", "left"), ("link", "left"),
                        ("bandwidth/dir", "right"), ("latency", "right")])
    for i, (u, v, n) in enumerate(hops):
        t.add_row(str(i), str(u), str(v), n, format_bandwidth(topo.links[n].bandwidth),
                  format_time(topo.links[n].latency))
    con.print(t)
    if hops:
        con.print(f"latency {format_time(lat)}, bottleneck {format_bandwidth(bott)}")
