"""``simcomm whatif``: sweep cluster, network and strategy parameters; write results and a report.

Example::

    simcomm whatif --cluster deep-est-esb --vary inter=ib-edr,ib-hdr,eth-25g \\
        --vary nodes=4..64x2 --strategies allreduce,node-based,sgp --out edr-vs-hdr

Points run in local processes by default (``--workers N``), or one after the
other (``--sequential``), or on a Dask cluster (``--dask tcp://host:8786``).
Finished points are stored at once in OUT/points.jsonl; rerunning the same
command skips them.  A failed point is reported, not fatal.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import typer
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from simcomm.cli.console import stderr, stdout, table
from simcomm.cli.scenario_flags import scenario_flags
from simcomm.errors import ConfigError
from simcomm.sweep.grammar import parse_scalar

#: bytes written and removed in --out before the first point: a disk without room for the sweep's first
#: files (sweep.json, the first points) is refused before anything is simulated
WRITE_PROBE_BYTES = 1 << 20

__all__ = ["print_summary", "whatif_command"]


def _fixed_pairs(items: list[str] | None) -> dict:
    out = {}
    for item in items or []:
        if "=" not in item:
            raise ConfigError(f"--set: {item!r} must look like key=value")
        k, v = item.split("=", 1)
        out[k.strip().replace("-", "_")] = parse_scalar(v)
    return out


def print_summary(sweep: dict, rows: list[dict], out: Path, console) -> None:
    """Ranked top rows, the findings and where the files are."""
    from simcomm.whatif.summary import findings, ranked_table

    head, body = ranked_table(sweep, rows, limit=10)
    t = table(f"best configurations ({min(10, len(body))} of {len(rows)} points)", [(h, "right") for h in head])
    for row in body:
        t.add_row(*row)
    console.print(t)
    for line in findings(sweep, rows):
        console.print(f"- {line}")
    failed = [r for r in rows if r.get("status") == "failed"]
    if failed:
        console.print(f"{len(failed)} point(s) failed; see the status/error columns of the results")
    console.print(f"results: {out / 'results.csv'}, {out / 'results.json'}")


@scenario_flags(skip=("strategy",))
def whatif_command(
    scenario: Path | None = typer.Argument(None, help="Scenario TOML with a [sweep] table (flags add to it)."),
    vary: list[str] | None = typer.Option(None, "--vary", help="KEY=VALUES axis, e.g. nodes=4..64x2 or "
                                             "inter=ib-edr,ib-hdr (repeatable)."),
    strategies: str | None = typer.Option(None, "--strategies", help="Comma-separated strategies (an axis)."),
    fixed: list[str] | None = typer.Option(None, "--set", help="Fixed parameter KEY=VALUE (repeatable)."),
    question: str | None = typer.Option(None, "--question", help="The question the report answers."),
    out: Path = typer.Option(Path("whatif-results"), "--out", help="Results directory (resumable)."),
    workers: int | None = typer.Option(None, "--workers", help="Local worker processes (default: all cores)."),
    sequential: bool = typer.Option(False, "--sequential", help="Run points one after the other."),
    dask: str | None = typer.Option(None, "--dask", help="Dask scheduler address, e.g. tcp://host:8786."),
    html: bool = typer.Option(True, "--html/--no-html", help="Also write the self-contained report.html."),
    report: bool = typer.Option(True, "--report/--no-report", help="Write report.md (and .html)."),
    force: bool = typer.Option(False, "--force", help="Write into a non-empty --out that holds no sweep."),
    flags: dict | None = None,
) -> None:
    """Sweep a grid of cluster/network/strategy parameters; write results.csv/json and a report."""
    from simcomm.whatif.sweep import describe, load_sweep_toml, run_whatif

    if workers is not None and workers < 1:
        raise ConfigError(f"--workers: {workers} must be a positive integer")
    if sum(bool(x) for x in (sequential, dask, workers)) > 1:
        raise ConfigError("--sequential, --workers and --dask: choose one way to run the sweep")
    t_vary, t_strats, t_fixed, t_axes, t_q = ([], [], {}, {}, None)
    if scenario is not None:
        t_vary, t_strats, t_fixed, t_axes, t_q = load_sweep_toml(scenario)

    # scenario flags are fixed keys, read like --set values (one vocabulary: simcomm.scenario.keys)
    flag_values = {k: v if isinstance(v, bool) else parse_scalar(v) for k, v in (flags or {}).items()}
    fixed_all = {**t_fixed, **flag_values, **_fixed_pairs(fixed)}
    strats = [s.strip() for s in strategies.split(",") if s.strip()] if strategies is not None else t_strats
    if strategies is not None and not strats:
        raise ConfigError("--strategies: give at least one strategy name")
    vary_all = [*t_vary, *(vary or [])]
    if not vary_all and not t_axes and len(strats) <= 1:
        raise ConfigError("sweep grid is empty: give at least one --vary KEY=VALUES (or a [sweep] table)")
    grid, sweep = describe(vary_all, strats, fixed_all, axes=t_axes, question=question or t_q)
    from simcomm.sweep.store import check_out_dir

    check_out_dir(out, force=force)  # never replace a user's own report.md / results.csv
    made = not out.exists()
    try:  # the one place results go: made (or refused) before any point runs or any progress is drawn
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".simcomm-write-test"
        try:  # room for the sweep's first files (a full disk fails here, not after the points ran)
            probe.write_bytes(bytes(WRITE_PROBE_BYTES))
        finally:
            probe.unlink(missing_ok=True)
    except OSError as exc:
        if made:  # leave nothing behind: the directory was ours and holds nothing
            with contextlib.suppress(OSError):
                out.rmdir()
        raise ConfigError(f"--out: cannot write results into {str(out)!r} ({exc.strerror or exc})") from None
    err = stderr()
    err.print(f"whatif: {len(grid)} point(s) into {out}")
    with Progress(TextColumn("simulating"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TextColumn("ETA"), TimeRemainingColumn(), console=err, transient=False) as bar:
        task = bar.add_task("points", total=len(grid))
        try:
            rows = run_whatif(grid, sweep, out, executor="sequential" if sequential else "processes",
                              workers=workers, dask=dask,
                              progress=lambda done, total: bar.update(task, completed=done, total=total))
        except KeyboardInterrupt:
            bar.stop()
            _say_saved(err, out, len(grid))
            raise
    if report:
        from simcomm.report.html import write_reports

        for p in write_reports(out, sweep, rows, html_report=html):
            err.print(f"report: {p}")
    print_summary(sweep, rows, out, stdout())


def _say_saved(err, out: Path, total: int) -> None:
    """After Ctrl-C: how many points the store kept and how to resume (every finished point is on disk)."""
    from simcomm.sweep.store import ResultStore

    try:
        saved = len(ResultStore(out, create=False).scan().by_key())
    except Exception:  # noqa: BLE001 - a damaged store is reported by the resumed run, not here
        saved = 0
    err.print(f"interrupted: {saved} of {total} point(s) saved in {out / ResultStore.FILE}; run the same command "
              "again to resume from there", soft_wrap=True)
