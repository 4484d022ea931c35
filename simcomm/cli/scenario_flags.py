"""Scenario flags generated from the one vocabulary (:data:`simcomm.scenario.KEYS`).

``@scenario_flags()`` gives a command one ``--key`` option per scenario key
it does not declare itself (``--inter``, ``--dataload``, ``--stack-cpu`` ...),
each with the key's help text and bounds, and hands the command the values
the user gave as a flat dict ``flags``.  Every value arrives as text and is
checked once, by the scenario resolver, exactly as the same key in a TOML
file or a what-if axis is: ``run``, ``compare`` and ``whatif`` cannot drift
apart.
"""

from __future__ import annotations

import functools
import inspect

import typer

from simcomm.scenario import KEYS, Key

__all__ = ["scenario_flags", "flag_help"]

#: bool keys whose "off" spelling is not --no-KEY
_OFF = {"dataload_overlap": "--dataload-blocking"}


def flag_help(key: Key) -> str:
    text = key.help
    bounds = key.bounds_text() if key.kind in ("int", "float", "time", "floats", "ints") else ""
    return f"{text}." + (f" Range: {bounds}." if bounds else "")


def _option(key: Key) -> inspect.Parameter:
    if key.kind == "bool":
        decl = f"{key.flag}/{_OFF.get(key.name, '--no-' + key.name.replace('_', '-'))}"
        default = typer.Option(None, decl, help=flag_help(key))
        annotation = bool | None
    else:
        decls = [key.flag] + ([key.short] if key.short else [])
        default = typer.Option(None, *decls, help=flag_help(key))
        annotation = str | None
    return inspect.Parameter(key.name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation)


def scenario_flags(*, skip: tuple[str, ...] = (), sections: tuple[str, ...] | None = None):
    """Decorator: add the scenario keys' flags the command lacks; pass their given values as ``flags``.

    ``sections`` limits the keys to those sections (``("stack", "network")`` for
    ``bench``, which times one collective and has no workload).
    """

    def deco(fn):
        sig = inspect.signature(fn)
        own = [p for p in sig.parameters.values() if p.name != "flags"]
        taken = {p.name for p in own} | set(skip)
        generated = [_option(k) for k in KEYS if k.name not in taken
                     and (sections is None or k.section in sections)]
        names = [p.name for p in generated]

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            flags = {n: kwargs.pop(n) for n in names if kwargs.get(n) is not None}
            for n in names:
                kwargs.pop(n, None)
            return fn(*args, flags=flags, **kwargs)

        wrapper.__signature__ = sig.replace(parameters=own + generated)
        return wrapper

    return deco
