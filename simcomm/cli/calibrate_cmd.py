"""``simcomm calibrate``: measure a cluster with torch.distributed, fit link classes, check predictions.

Modes:

* under ``torchrun`` (``RANK`` and ``WORLD_SIZE`` set, no ``--ranks``): this
  process is one rank; rank 0 fits and writes the files;
* ``--ranks N``: spawn N local ranks on this machine;
* ``--emulate H``: build an emulated cluster of H hosts (root only) and run there;
* ``--check FILE``: no measuring; compare predictions with a recorded run.

Writes ``--out`` (link TOML for ``--links``) and the measurement record as
JSON beside it (same name, ``.json``).  Nothing is written when anything fails.
"""

from __future__ import annotations

import os
from pathlib import Path

import typer

from simcomm.cli.app import app
from simcomm.cli.console import print_json, stdout, table
from simcomm.errors import ConfigError
from simcomm.units import format_size, format_time, parse_size

BACKENDS = ("gloo", "nccl")


def parse_sizes(text: str, field: str = "sizes") -> tuple[int, ...]:
    """``"1KB..4MB"`` (powers of 4 from the lower bound, upper bound included) or ``"1MB,4MB"``."""
    if ".." in text:
        lo_s, hi_s = text.split("..", 1)
        lo, hi = parse_size(lo_s, field), parse_size(hi_s, field)
        if hi < lo:
            raise ConfigError(f"{field}: {text!r} ends below its start")
        out, n = [], lo
        while n < hi * (1 - 1e-9):
            out.append(int(n))
            n *= 4
        out.append(int(hi))
    else:
        out = [int(parse_size(s, field)) for s in text.split(",") if s.strip()]
    out = sorted(set(out))
    if not out:
        raise ConfigError(f"{field}: {text!r} names no size")
    return tuple(out)


def _check(file: Path, as_json: bool) -> None:
    from simcomm.calibrate.check import check_record, load_record, summary

    rows = check_record(load_record(file))
    s = summary(rows)
    if as_json:
        print_json({"rows": [{"case": r.case, "ranks": r.ranks, "nbytes": r.nbytes, "measured_s": r.measured,
                              "predicted_s": r.predicted, "closed_form_s": r.closed, "error": r.error} for r in rows],
                    "summary": s})
        return
    t = table(f"prediction vs measurement ({file})", [("case", "left"), ("ranks", "right"), ("size", "right"),
              ("measured", "right"), ("predicted", "right"), ("error", "right"), ("textbook closed form", "right")])
    for r in rows:
        t.add_row(r.case, str(r.ranks), format_size(r.nbytes), format_time(r.measured), format_time(r.predicted),
                  f"{r.error:+.1%}", format_time(r.closed) if r.closed is not None else "-")
    out = stdout()
    out.print(t)
    out.print(f"median |error| {s['median_abs_error']:.1%}, worst {s['max_abs_error']:.1%} over {s['cases']} cases")


@app.command("calibrate")
def calibrate_command(
    backend: str = typer.Option("gloo", "--backend", help="gloo (CPU) or nccl (GPU)."),
    sizes: str = typer.Option("1KB..4MB", "--sizes", help="Ping-pong sizes: A..B (x4 steps) or a comma list."),
    coll_sizes: str = typer.Option("1MB,4MB", "--coll-sizes", help="Collective sizes."),
    repeats: int = typer.Option(5, "--repeats", help="Timed repeats per case (median kept)."),
    out: Path = typer.Option(Path("links.toml"), "--out", help="Link TOML to write; the record goes beside it as .json."),
    ranks: int = typer.Option(0, "--ranks", help="Spawn this many local ranks (default: torchrun env, else 2)."),
    emulate: int = typer.Option(0, "--emulate", help="Run on an emulated cluster of this many hosts (root)."),
    rate: str = typer.Option("200Mb/s", "--rate", help="Emulated host-link rate."),
    topology: str = typer.Option("star", "--topology", help="Emulated topology: star or two-tier."),
    timeout: float = typer.Option(30.0, "--timeout", help="Seconds to wait for the ranks to meet."),
    check: Path = typer.Option(None, "--check", help="Compare predictions with this record; measure nothing."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """Measure links with torch.distributed, fit alpha/beta, write a link TOML; or --check a record."""
    if check is not None:
        _check(check, as_json)
        return
    from simcomm.calibrate.bench import BenchSpec
    from simcomm.calibrate.launch import fit_record, launch_emulated, launch_local, run_from_env
    from simcomm.calibrate.linkfile import write_json_atomic, write_link_file

    if backend not in BACKENDS:
        raise ConfigError(f"backend: {backend!r} is not one of {', '.join(BACKENDS)}")
    if repeats < 1:
        raise ConfigError(f"repeats: {repeats} must be at least 1")
    if timeout <= 0:
        raise ConfigError(f"timeout: {timeout} must be positive")
    spec = BenchSpec(parse_sizes(sizes), parse_sizes(coll_sizes, "coll-sizes"), repeats)
    if emulate:
        from simcomm.calibrate.emulate import EmulatedCluster

        with EmulatedCluster(emulate, rate, topology=topology) as cl:
            rec = launch_emulated(cl, spec, backend=backend, timeout=timeout)
    elif ranks or "RANK" not in os.environ:
        rec = launch_local(spec, ranks or 2, backend=backend, timeout=timeout)
    else:
        rec = run_from_env(spec, backend=backend, timeout=timeout)
        if rec is None:  # not rank 0: rank 0 writes the files
            return
    fits, links = fit_record(rec)
    rec["fits"] = {k: f.as_dict() for k, f in fits.items()}
    record = write_json_atomic(out.with_suffix(".json"), rec)
    try:
        write_link_file(out, links, header=f"backend {rec['backend']}, {rec['world']} ranks on "
                                           f"{len(set(rec['nodes']))} node(s)")
    except BaseException:
        record.unlink(missing_ok=True)  # no record without its link file
        raise
    if as_json:
        print_json({"links": str(out), "record": str(out.with_suffix(".json")), "fits": rec["fits"]})
        return
    t = table(f"fitted link classes -> {out}", [("class", "left"), ("bandwidth", "right"), ("latency", "right"),
                                                ("R^2", "right"), ("median |err|", "right"), ("worst", "right")])
    for le in links:
        f = le.fit
        t.add_row(le.name, f"{f.bandwidth / 1e6:.4g} MB/s", format_time(f.alpha), f"{f.r2:.5f}",
                  f"{f.median_rel_error:.1%}", f"{f.max_rel_error:.1%}")
    stdout().print(t)
