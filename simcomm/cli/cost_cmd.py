"""``simcomm cost COLLECTIVE``: closed-form time of every algorithm of one collective.

Prices each algorithm (or one, or MPICH's ``auto`` choice) with a cost model
(Hockney α-β-γ or LogGP) for a message size, a group size and a link class,
and prints a table of the latency, bandwidth and reduction terms with the
fastest marked, or ``--json``.  Units are parsed here, once.
"""

from __future__ import annotations

import math
from pathlib import Path

import typer

from simcomm.cli.console import print_json, stdout, table
from simcomm.errors import ConfigError, UnitError, UnknownNameError
from simcomm.units import format_bandwidth, format_size, format_time, parse_size, parse_time

__all__ = ["cost_command", "parse_gamma", "compute"]


#: the slowest reduction ``--gamma`` accepts: a millisecond per byte, a million times slower than any real host
MAX_GAMMA = 1e-3


def parse_gamma(text: str) -> float:
    """Reduction cost in s/byte from ``"0.1ns/B"``, ``"0.1 ns/byte"`` or a bare number (s/B)."""
    s = str(text).strip()
    for suffix in ("/byte", "/B"):
        if s.endswith(suffix):
            s = s[: -len(suffix)]
            break
    try:
        gamma = parse_time(s, "gamma")
    except UnitError:
        raise UnitError(f"gamma: cannot parse {text!r}; expected seconds per byte such as "
                        f"'0.1ns/B' or a bare number of s/B") from None
    if gamma > MAX_GAMMA:  # beyond it a collective's reduction time overflows or means nothing real
        raise ConfigError(f"gamma: {text!r} is more than {MAX_GAMMA:g} s per byte (1 KB/s of reduction); "
                          "real hosts reduce at GB/s, e.g. 0.1ns/B")
    return gamma


def _links(path: Path | None) -> dict:
    if path is None:
        return {}
    from simcomm.links import load_link_file

    return load_link_file(path)


def _link(name: str, user: dict, field: str):
    from simcomm.links import LINKS, link_class

    if name in user:
        return user[name]
    if name not in LINKS:
        raise UnknownNameError(f"link class ({field})", name, list(LINKS.names()) + list(user))
    return link_class(name)


def _params(link) -> dict:
    return {"name": link.name, "bandwidth_Bps": link.bandwidth, "latency_s": link.latency}


#: the closed forms build per-rank schedules: the engine's rank cap bounds them (memory and time)
MAX_COST_RANKS = 262_144
MAX_COST_BYTES = 1e15


def compute(collective: str, size: float, ranks: int, link, *, algo: str = "all", model: str = "hockney",
            gamma: float = 0.0, ppn: int = 1, intra=None, overhead: float | None = None, rules: str = "mpich") -> dict:
    """Price the algorithms; returns the JSON-ready result (SI units).

    ``busbw`` is nccl-tests' bus bandwidth, ``algbw x`` the collective's factor
    (2(n-1)/n for all-reduce, (n-1)/n for all-gather, reduce-scatter, all-to-all).
    ``rules`` chooses whose ``auto`` is shown: mpich, openmpi, openmpi-3.1 or gloo.
    """
    from simcomm.bench import busbw_factor
    from simcomm.cost_models import COST_MODELS
    from simcomm.runtimes.mpi import algorithms_for, resolve, select

    cm = COST_MODELS.get(model)
    if overhead is not None:
        if model != "loggp":
            raise ConfigError("overhead: only the loggp cost model has a per-message overhead")
        cm = cm.with_overhead(overhead)
    if ranks < 1 or ranks > MAX_COST_RANKS:
        raise ConfigError(f"ranks: {ranks} must be between 1 and {MAX_COST_RANKS:,} (the engine's rank cap)")
    if not math.isfinite(size) or size > MAX_COST_BYTES:
        raise ConfigError(f"size: {size:g} bytes is more than {MAX_COST_BYTES:.0e} (1 PB); give a real message size")
    if ppn < 1 or ranks % ppn:
        raise ConfigError(f"ppn: {ppn} must be at least 1 and divide ranks ({ranks})")
    if algo == "all":
        algs = [a for a in algorithms_for(collective, rules) if a.supports(ranks, ppn)]
    else:
        algs = [resolve(collective, algo, ranks, size, rules)]
    factor = busbw_factor(collective, ranks)
    rows = []
    for a in algs:
        t = cm.price(a, ranks, size, link, gamma=gamma, ppn=ppn, intra=intra)
        rows.append({"name": a.name, "latency_s": t.latency, "bandwidth_s": t.bandwidth,
                     "reduction_s": t.reduction, "total_s": t.total,
                     "algbw_Bps": size / t.total if t.total > 0 else None,
                     "busbw_Bps": size / t.total * factor if t.total > 0 else None})
    best = min(rows, key=lambda r: r["total_s"])["name"]
    for r in rows:
        r["fastest"] = r["name"] == best
    return {"collective": collective, "size_bytes": size, "ranks": ranks, "ppn": ppn, "model": model,
            "gamma_s_per_byte": gamma, "link": _params(link),
            "intra_link": _params(intra) if intra is not None else None,
            "algorithms": rows, "fastest": best, "rules": rules, "auto": select(collective, ranks, size, rules)}


def _render(res: dict) -> None:
    link = res["link"]
    title = (f"{res['collective']}: {format_size(res['size_bytes'])} on {res['ranks']} ranks, "
             f"{res['model']} model")
    notes = [f"link {link['name']}: {format_bandwidth(link['bandwidth_Bps'])} per direction, "
             f"{format_time(link['latency_s'])} per hop; gamma {res['gamma_s_per_byte']:g} s/B"]
    if res["ppn"] > 1:
        intra = res["intra_link"] or link
        notes.append(f"{res['ppn']} ranks per node (node-major), intranode link {intra['name']}: "
                     f"{format_bandwidth(intra['bandwidth_Bps'])}, {format_time(intra['latency_s'])}")
    t = table(title, [("algorithm", "left"), ("latency", "right"), ("bandwidth", "right"),
                      ("reduction", "right"), ("total", "right"), ("algbw", "right"), ("busbw", "right"),
                      ("", "left")])
    for r in res["algorithms"]:
        algbw = format_bandwidth(r["algbw_Bps"]) if r["algbw_Bps"] else "-"
        busbw = format_bandwidth(r["busbw_Bps"]) if r["busbw_Bps"] else "-"
        t.add_row(r["name"], format_time(r["latency_s"]), format_time(r["bandwidth_s"]),
                  format_time(r["reduction_s"]), format_time(r["total_s"]), algbw, busbw,
                  "<- fastest" if r["fastest"] else "")
    out = stdout()
    for line in notes:
        out.print(line)
    out.print(t)
    out.print(f"fastest: {res['fastest']}")
    who = {"mpich": "MPICH default selection", "openmpi": "Open MPI 4.1 coll/tuned rules",
           "openmpi-3.1": "Open MPI 3.1 coll/tuned rules", "gloo": "gloo's fixed algorithms"}[res["rules"]]
    out.print(f"auto ({who}) picks: {res['auto']}")
    out.print("busbw = algbw x " + ("2(n-1)/n" if res["collective"] == "allreduce" else "(n-1)/n" if
                                    res["collective"] in ("allgather", "reduce_scatter", "alltoall") else "1")
              + " (nccl-tests' bus bandwidth); for NCCL's own algorithms on a cluster: simcomm bench")


def cost_command(
    collective: str = typer.Argument(..., help="allreduce, reduce_scatter, allgather, broadcast, reduce, "
                                               "gather, scatter, alltoall or p2p."),
    size: str = typer.Option(..., "--size", help="Message size, e.g. 100MB (see docs/cost-models.md for "
                                                "each collective's convention)."),
    ranks: int = typer.Option(..., "--ranks", help="Number of ranks in the group."),
    link: str = typer.Option(..., "--link", help="Link class between ranks/nodes (simcomm list links)."),
    algo: str = typer.Option("all", "--algo", help="An algorithm name, 'all' or 'auto'."),
    model: str = typer.Option("hockney", "--model", help="Cost model: hockney or loggp."),
    gamma: str = typer.Option("0", "--gamma", help="Reduction cost per byte, e.g. 0.1ns/B (bare number: s/B)."),
    ppn: int = typer.Option(1, "--ppn", help="Ranks per node (node-major); used by hierarchical algorithms."),
    intra_link: str = typer.Option(None, "--intra-link", help="Link class inside a node (default: --link)."),
    links_file: Path = typer.Option(None, "--links", help="TOML file with extra link classes."),
    overhead: str = typer.Option(None, "--overhead", help="LogGP per-message overhead o (default α/4)."),
    rules: str = typer.Option("mpich", "--rules", help="Whose auto choice to show and whose algorithms to list: "
                                                     "mpich, openmpi, openmpi-3.1, gloo."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """Closed-form time of each algorithm of COLLECTIVE; the fastest is marked."""
    from simcomm.collectives import COLLECTIVES
    from simcomm.cost_models import COST_MODELS

    if collective not in COLLECTIVES:
        raise UnknownNameError("collective", collective, COLLECTIVES)
    if model not in COST_MODELS:
        raise UnknownNameError("cost model", model, COST_MODELS.names())
    nbytes = parse_size(size, "size")
    user = _links(links_file)
    lk = _link(link, user, "--link")
    intra = _link(intra_link, user, "--intra-link") if intra_link else None
    o = parse_time(overhead, "overhead") if overhead is not None else None
    res = compute(collective, nbytes, ranks, lk, algo=algo, model=model, gamma=parse_gamma(gamma), ppn=ppn,
                  intra=intra, overhead=o, rules=rules)
    if as_json:
        print_json(res)
    else:
        _render(res)
