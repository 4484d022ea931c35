"""Error types that the CLI turns into one clear line and exit status 2.

Every error a user can cause (a bad file, an unknown name, an impossible value)
is raised as a :class:`SimcommError` subclass whose message is a single,
self-contained sentence naming the offending field and, where there is a
finite set, the valid choices.  Anything else escaping to the CLI is a bug.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = [
    "SimcommError",
    "ConfigError",
    "DoesNotFitError",
    "UnitError",
    "UnknownNameError",
    "TopologyError",
    "TraceFormatError",
    "PlanError",
]


class SimcommError(Exception):
    """Base class for user-facing errors; ``str(err)`` is the one line shown."""


class ConfigError(SimcommError):
    """A value given by the user (flag, TOML key, option) is invalid."""


class DoesNotFitError(ConfigError):
    """A setting's state would not fit in the device's memory (``memory: ...``, with the numbers).

    Its own class so that a run that can go on without that setting (a comparison whose default
    baseline does not fit) tells it apart from other configuration errors.
    """

    @property
    def why(self) -> str:
        """The message without its ``memory:`` field name."""
        return str(self).removeprefix("memory: ")


class UnitError(ConfigError):
    """A quantity with a unit (size, bandwidth, time) could not be parsed."""


class TopologyError(ConfigError):
    """A topology is malformed: disconnected, missing ranks, bad link names."""


class TraceFormatError(SimcommError):
    """A trace file is malformed, truncated or of an unsupported version."""


class PlanError(SimcommError):
    """A strategy produced (or was asked for) an impossible communication plan."""


class UnknownNameError(ConfigError):
    """A name was looked up in a catalogue that does not contain it."""

    def __init__(self, kind: str, name: str, choices: Iterable[str]):
        self.kind = kind
        self.name = name
        self.choices = tuple(sorted(choices))
        self.close = close_names(name, self.choices)
        shown = ", ".join(self.choices) if self.choices else "(none registered)"
        hint = f" (did you mean {' or '.join(repr(c) for c in self.close)}?)" if self.close else ""
        super().__init__(f"unknown {kind} {name!r}{hint}; valid choices: {shown}")


def close_names(name: object, choices: Iterable[str], most: int = 3) -> tuple[str, ...]:
    """Up to ``most`` of ``choices`` a user who typed ``name`` probably meant, compared without case and
    punctuation: the one it spells (``llama-3-8b``: ``llama3-8b``), else those it begins (``gb200``:
    ``gb200-nvl36``, ``gb200-nvl72``), else the nearest (:func:`difflib.get_close_matches`, ratio 0.75)."""
    if not isinstance(name, str) or not name:
        return ()
    import difflib

    def bare(text: str) -> str:
        return "".join(ch for ch in text.lower() if ch.isalnum())

    key = bare(name)
    by_bare: dict[str, str] = {}  # each spelling's first choice
    for choice in choices:
        by_bare.setdefault(bare(choice), choice)
    if not key:
        return ()
    if key in by_bare:
        return (by_bare[key],)
    begun = [c for b, c in by_bare.items() if b.startswith(key)]
    if begun:
        return tuple(begun[:most])
    return tuple(by_bare[b] for b in difflib.get_close_matches(key, list(by_bare), n=most, cutoff=0.75))
