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
        shown = ", ".join(self.choices) if self.choices else "(none registered)"
        super().__init__(f"unknown {kind} {name!r}; valid choices: {shown}")
