"""``simcomm calibrate``: measure a cluster with torch.distributed, fit link classes, check predictions.

Modes:

* under ``torchrun`` (``RANK`` and ``WORLD_SIZE`` set, no ``--ranks``): this
  process is one rank; rank 0 fits and writes the files;
* ``--ranks N``: spawn N local ranks on this machine;
* ``--emulate H``: build an emulated cluster of H hosts (root only) and run there;
* ``--check FILE``: no measuring; compare predictions with a recorded run.

Writes ``--out`` (link TOML for ``--links``) and the measurement record as
JSON beside it (same name, ``.json``).  No link file is written when anything
fails or the fit is refused (:mod:`simcomm.calibrate.accept`: above the line
rate, poor R²); a refused measurement is kept as ``<out>.refused.json`` for
diagnosis.  What is doubtful but not wrong is written with ``warning:`` lines.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import typer

from simcomm.cli.console import print_json, stdout, table
from simcomm.errors import ConfigError
from simcomm.fileio import check_room
from simcomm.units import format_size, format_time, parse_bandwidth, parse_size

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
    leaves: int = typer.Option(2, "--leaves", help="Emulated two-tier: leaf switches."),
    trunk_rate: str = typer.Option(None, "--trunk-rate", help="Emulated two-tier: leaf-spine rate (default --rate)."),
    ranks_per_host: int = typer.Option(1, "--ranks-per-host", help="Emulated: ranks per host (2+ adds intra)."),
    mtu: int = typer.Option(1500, "--mtu", help="Emulated: MTU of every link (9000: jumbo frames)."),
    qdisc: str = typer.Option("ackprio", "--qdisc", help="Emulated queueing: ackprio, fq or tbf."),
    burst: str = typer.Option(None, "--burst", help="Emulated token bucket (default 50 us of traffic, >= 2 frames)."),
    line_rate: str = typer.Option(None, "--line-rate", help="Nominal link rate; a faster fit is refused."),
    rounds: int = typer.Option(4, "--rounds", help="Most ping-pong rounds until the bandwidth settles."),
    stable: float = typer.Option(0.03, "--stable", help="Rounds agree when their spread is at most this."),
    timeout: float = typer.Option(30.0, "--timeout", help="Seconds to wait for the ranks to meet."),
    check: Path = typer.Option(None, "--check", help="Compare predictions with this record; measure nothing."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
    allow_misfit: bool = typer.Option(False, "--allow-misfit", help="Write the link file even when it predicts "
                                      "the run's own collectives far off (warned, not refused)."),
    nccl_tests: list[str] = typer.Option(None, "--nccl-tests", help="An nccl-tests output of your cluster "
                                         "(FILE, or FILE:TEST when its header does not name the test; repeatable): "
                                         "fit the NICs' goodput and latency, measure nothing."),
    cluster: str = typer.Option(None, "--cluster", help="With --nccl-tests: the cluster preset or file the "
                                "tables ran on."),
    nodes: int = typer.Option(None, "--nodes", help="With --nccl-tests: nodes (default: the largest table's)."),
    gpus_per_node: int = typer.Option(None, "--gpus-per-node", help="With --nccl-tests: GPUs per node."),
    inter: str = typer.Option(None, "--inter", help="With --nccl-tests: the NIC link class (simcomm list links)."),
    nics_per_node: int = typer.Option(None, "--nics-per-node", help="With --nccl-tests: NICs per node."),
    stack: str = typer.Option(None, "--stack", help="With --nccl-tests: the transport stack (default: the "
                              "cluster's)."),
) -> None:
    """Measure links with torch.distributed, fit alpha/beta, write a link TOML; or --check a record; or fit the
    network from your nccl-tests output (--nccl-tests)."""
    if check is not None:
        _check(check, as_json)
        return
    if nccl_tests:
        from simcomm.cli.calibrate_nccl import calibrate_from_nccl_tests

        if cluster is None:
            raise ConfigError("--nccl-tests: give --cluster, the preset or cluster file the tables ran on "
                              "(simcomm list topologies)")
        calibrate_from_nccl_tests(list(nccl_tests), {"cluster": cluster, "nodes": nodes, "gpus_per_node": gpus_per_node,
                                                     "inter": inter, "nics_per_node": nics_per_node, "stack": stack},
                                  out, as_json)
        return
    given = {"--cluster": cluster, "--nodes": nodes, "--gpus-per-node": gpus_per_node, "--inter": inter,
             "--nics-per-node": nics_per_node, "--stack": stack}
    stray = [flag for flag, v in given.items() if v is not None]
    if stray:
        raise ConfigError(f"{stray[0]}: applies to --nccl-tests only (a measured calibration runs on this machine)")
    from simcomm.calibrate.bench import BenchSpec
    from simcomm.calibrate.launch import launch_emulated, launch_local, run_from_env

    if backend not in BACKENDS:
        raise ConfigError(f"backend: {backend!r} is not one of {', '.join(BACKENDS)}")
    if repeats < 1:
        raise ConfigError(f"repeats: {repeats} must be at least 1")
    if timeout <= 0:
        raise ConfigError(f"timeout: {timeout} must be positive")
    if not 1 <= rounds <= 20:
        raise ConfigError(f"rounds: {rounds} must be between 1 and 20")
    if not 0 < stable < 1:
        raise ConfigError(f"stable: {stable} must be a fraction between 0 and 1 (0.03 = 3 %)")
    line = parse_bandwidth(line_rate, "line-rate") if line_rate is not None else None
    if line is not None and not line > 0:
        raise ConfigError(f"line-rate: {line_rate!r} must be positive")
    if not out.parent.is_dir():
        raise ConfigError(f"out: directory {str(out.parent)!r} does not exist")
    check_room(out.parent, "out", "nothing measured")  # before the minutes of measuring, not after
    emu_kw = _emulator_options(emulate, topology, leaves, trunk_rate, ranks_per_host, mtu, qdisc, burst)
    spec = BenchSpec(parse_sizes(sizes), parse_sizes(coll_sizes, "coll-sizes"), repeats, rounds=rounds,
                     stable=stable)
    load0 = os.getloadavg()[0]
    if emulate:
        from simcomm.calibrate.emulate import EmulatedCluster

        with EmulatedCluster(emulate, rate, topology=topology, **emu_kw) as cl:
            rec = launch_emulated(cl, spec, backend=backend, timeout=timeout, ranks_per_host=ranks_per_host)
    elif ranks or "RANK" not in os.environ:
        rec = launch_local(spec, ranks or 2, backend=backend, timeout=timeout)
    else:
        rec = run_from_env(spec, backend=backend, timeout=timeout)
        if rec is None:  # not rank 0: rank 0 writes the files
            return
    rec["load"] = [load0, os.getloadavg()[0]]  # 1-min load average before / after the measurement
    finish(rec, out, line_rate=line, as_json=as_json, allow_misfit=allow_misfit)


def _emulator_options(emulate: int, topology: str, leaves: int, trunk_rate: str | None, ranks_per_host: int,
                      mtu: int, qdisc: str, burst: str | None) -> dict:
    """EmulatedCluster keywords from the flags, each checked before any namespace is built."""
    from simcomm.calibrate.emulate import QDISCS

    given = {"--trunk-rate": trunk_rate is not None, "--ranks-per-host": ranks_per_host != 1,
             "--mtu": mtu != 1500, "--qdisc": qdisc != "ackprio", "--burst": burst is not None}
    if not emulate:
        used = [k for k, v in given.items() if v]
        if used:
            raise ConfigError(f"{used[0].lstrip('-')}: only applies to an emulated cluster (--emulate H)")
        return {}
    if qdisc not in QDISCS:
        raise ConfigError(f"qdisc: {qdisc!r} is not one of {', '.join(QDISCS)}")
    if not 576 <= mtu <= 9000:
        raise ConfigError(f"mtu: {mtu} must be between 576 and 9000 bytes")
    if not 1 <= ranks_per_host <= 16:
        raise ConfigError(f"ranks-per-host: {ranks_per_host} must be between 1 and 16")
    if trunk_rate is not None and topology != "two-tier":
        raise ConfigError("trunk-rate: only a two-tier topology has trunks (--topology two-tier)")
    kw: dict = {"mtu": mtu, "qdisc": qdisc, "leaves": leaves}
    if trunk_rate is not None:
        kw["trunk_rate"] = parse_bandwidth(trunk_rate, "trunk-rate")
        if not kw["trunk_rate"] > 0:
            raise ConfigError(f"trunk-rate: {trunk_rate!r} must be positive")
    if burst is not None:
        b = parse_size(burst, "burst")
        if not mtu + 14 <= b <= 64 * 1024 * 1024:
            raise ConfigError(f"burst: {burst!r} must hold at least one frame ({mtu + 14} B) and at most 64 MiB")
        kw["burst"] = int(b)
    return kw


def host_header(rec: dict) -> str:
    """The record's host probe as link-file comment lines (empty without one): what CPU collectives cost here."""
    from simcomm.runtimes.host import HostRates

    host = HostRates.from_record(rec)
    if host is None:
        return ""
    return (f"\nhost: reduce {host.reduce_rate / 1e9:.4g} GB/s, copy {host.copy_rate / 1e9:.4g} GB/s per rank, "
            f"every rank at once\nCPU stacks (gloo, mpi-tcp) read it from the record beside this file "
            f"(--stack-reduce {1e9 / host.reduce_rate:.4g}ns)")


def finish(rec: dict, out: Path, *, line_rate: float | None = None, as_json: bool = False,
           allow_misfit: bool = False) -> None:
    """Fit, refuse or warn (accept.py), then write the record and the link file, or nothing."""
    from simcomm.calibrate.accept import accept
    from simcomm.calibrate.fit import CalibrationError
    from simcomm.calibrate.launch import fit_record
    from simcomm.calibrate.linkfile import write_json_atomic, write_link_file

    load = tuple(rec["load"]) if isinstance(rec.get("load"), list) and len(rec["load"]) == 2 else None
    try:
        fits, links = fit_record(rec)
        warns = accept(rec, fits, line_rate=line_rate, load=load, allow_misfit=allow_misfit)
    except CalibrationError as exc:
        # A refused run keeps its measurements for diagnosis, under a name --links never reads.
        kept = write_json_atomic(out.with_suffix(".refused.json"), {**rec, "refused": str(exc)})
        raise CalibrationError(f"{exc}; no link file written, the measurements are in {kept}") from None
    rec["fits"] = {k: f.as_dict() for k, f in fits.items()}
    if line_rate is not None:
        rec["line_rate_Bps"] = line_rate
    record = write_json_atomic(out.with_suffix(".json"), rec)
    try:
        write_link_file(out, links, header=f"backend {rec['backend']}, {rec['world']} ranks on "
                                           f"{len(set(rec['nodes']))} node(s)" + host_header(rec))
    except BaseException:
        record.unlink(missing_ok=True)  # no record without its link file
        raise
    for w in warns:
        sys.stderr.write(f"warning: {' '.join(w.split())}\n")
    if as_json:
        print_json({"links": str(out), "record": str(out.with_suffix(".json")), "fits": rec["fits"],
                    "warnings": warns})
        return
    t = table(f"fitted link classes -> {out}", [("class", "left"), ("bandwidth", "right"), ("latency", "right"),
                                                ("R^2", "right"), ("median |err|", "right"), ("worst", "right")])
    for le in links:
        f = le.fit
        t.add_row(le.name, f"{f.bandwidth / 1e6:.4g} MB/s", format_time(f.alpha), f"{f.r2:.5f}",
                  f"{f.median_rel_error:.1%}", f"{f.max_rel_error:.1%}")
    stdout().print(t)
