"""Root ``simcomm`` command: wires the sub-commands and turns user errors into one line.

Every user error (a :class:`~simcomm.errors.SimcommError`, or a click usage
error such as an unknown option) is printed as a single ``error: ...`` line on
stderr with exit status 2, never a traceback.
"""

from __future__ import annotations

import errno
import sys

import typer

try:  # typer >= 0.20 vendors click as typer._click
    from typer._click import exceptions as _cx
except ImportError:  # pragma: no cover - older typer depends on click
    from click import exceptions as _cx

from simcomm.errors import SimcommError

app = typer.Typer(
    name="simcomm",
    help="Predict distributed-training iteration time for every communication strategy.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _version(value: bool) -> None:
    if value:
        from simcomm import __version__

        sys.stdout.write(f"simcomm {__version__}\n")
        raise typer.Exit(0)


@app.callback()
def _root(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                       help="Print the version and exit.")) -> None:
    """Predict distributed-training iteration time for every communication strategy."""


#: (command, module under simcomm.cli, function), in the order ``simcomm --help`` lists them
COMMANDS = (("list", "list_cmd", "list_command"), ("cost", "cost_cmd", "cost_command"),
            ("run", "run_cmd", "run_command"), ("compare", "compare_cmd", "compare_command"),
            ("calibrate", "calibrate_cmd", "calibrate_command"), ("whatif", "whatif_cmd", "whatif_command"),
            ("report", "report_cmd", "report_command"), ("validate", "validate_cmd", "validate_command"),
            ("bench", "bench_cmd", "bench_command"),
            ("plan", "plan_cmd", "plan_command"))
#: (group, module, its typer.Typer): commands with sub-commands
GROUPS = (("trace", "trace_cmd", "trace_app"), ("topology", "topology_cmd", "topology_app"))
_registered: list[bool] = []


def _register() -> None:
    """Attach every command to ``app``, once.

    The app imports the commands (they never import the app), lazily, so that
    ``simcomm.cli.app`` stays importable while one command module is broken.
    """
    if _registered:
        return
    from importlib import import_module

    for name, module, attr in COMMANDS:
        app.command(name)(getattr(import_module(f"simcomm.cli.{module}"), attr))
    for name, module, attr in GROUPS:
        app.add_typer(getattr(import_module(f"simcomm.cli.{module}"), attr), name=name)
    _registered.append(True)


def main(argv: list[str] | None = None) -> int:
    """Console-script entry point; returns the exit status."""
    _register()
    cmd = typer.main.get_command(app)
    args = sys.argv[1:] if argv is None else argv
    try:
        rv = cmd.main(args=args, prog_name="simcomm", standalone_mode=False)
    except SimcommError as exc:
        _fail(str(exc))
        return 2
    except _cx.NoArgsIsHelpError as exc:  # bare group: show its help
        sys.stdout.write((exc.ctx.get_help() if exc.ctx else str(exc)) + "\n")
        return 0
    except _cx.UsageError as exc:
        _fail(exc.format_message() if hasattr(exc, "format_message") else str(exc))
        return 2
    except typer.Exit as exc:
        if exc.exit_code == 130:  # typer turns Ctrl-C / SIGTERM (KeyboardInterrupt) into a silent Exit(130)
            _fail("interrupted")
        return exc.exit_code
    except typer.Abort:
        _fail("aborted")
        return 130
    except KeyboardInterrupt:
        _fail("interrupted")
        return 130
    except RecursionError:  # a file nested deeper than Python's parsers recurse (JSON, TOML, Kineto)
        _fail("input nested too deeply: a file or value holds more levels of lists or tables than any real one "
              "(simcomm reads at most a few hundred)")
        return 2
    except OSError as exc:  # a path too long, a full disk, a read-only directory, found outside a reader's own check
        where = f"{exc.filename}: " if exc.filename else "cannot write: " if exc.errno == errno.ENOSPC else ""
        _fail(f"{where}{exc.strerror or exc}" + (" (the disk is full; nothing was kept)"
                                                 if exc.errno == errno.ENOSPC else ""))
        return 2
    return rv if isinstance(rv, int) else 0


def _fail(message: str) -> None:
    line = " ".join(str(message).split())  # one line, whatever the message held
    sys.stderr.write(f"error: {line}\n")


def run() -> None:  # pragma: no cover - thin wrapper for ``python -m simcomm``
    sys.exit(main())
