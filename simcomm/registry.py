"""One registry mechanism for every pluggable catalogue.

Strategies, collective algorithms, topology builders, link classes and cost
models each register here with a kebab-case ``name``, a one-line ``summary``
and a ``reference`` (the paper or source the item implements).  ``simcomm
list`` prints the catalogues from these registries, so docs and CLI cannot
drift apart.  Third parties add items through the entry-point group given to
each registry; an entry point's object is registered under the entry point's
name unless it registered itself on import.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from importlib import metadata
from typing import Generic, TypeVar

from simcomm.errors import UnknownNameError

__all__ = ["Entry", "Registry", "scan"]

T = TypeVar("T")


def entry_points(group: str) -> Iterable:
    """``importlib.metadata.entry_points(group=group)``: the entry points of ``group``, in the same order.

    The installed distributions' metadata is read once for every group (each read walks every installed
    distribution, ~4 ms; a run loads six registries' plug-ins) and kept: a registry loads its plug-ins once anyway.
    """
    return _installed_entry_points().select(group=group)


@lru_cache(maxsize=1)
def _installed_entry_points():
    return metadata.entry_points()


@dataclass(frozen=True)
class Entry(Generic[T]):
    """A catalogue item: what it is called, what it does, where it comes from."""

    name: str
    summary: str
    reference: str
    obj: T


class Registry(Generic[T]):
    """A named catalogue of plug-ins.

    Parameters
    ----------
    kind:
        What the items are, used in error messages ("strategy", "link class").
    group:
        Entry-point group scanned once, lazily, for third-party items.
    """

    def __init__(self, kind: str, group: str | None = None):
        self.kind = kind
        self.group = group
        self._items: dict[str, Entry[T]] = {}
        self._plugins_loaded = group is None

    def register(self, name: str, *, summary: str, reference: str) -> Callable[[T], T]:
        """Decorator form of :meth:`add`."""

        def deco(obj: T) -> T:
            self.add(name, obj, summary=summary, reference=reference)
            return obj

        return deco

    def add(self, name: str, obj: T, *, summary: str, reference: str) -> None:
        """Register ``obj`` as ``name``; a duplicate name is an error, never ignored."""
        if name in self._items:
            raise ValueError(f"{self.kind} {name!r} is registered twice")
        if not summary or not reference:
            raise ValueError(f"{self.kind} {name!r} needs a summary and a reference")
        self._items[name] = Entry(name, summary, reference, obj)

    def _load_plugins(self) -> None:
        if self._plugins_loaded:
            return
        self._plugins_loaded = True
        if self.group is None:
            return
        for ep in entry_points(group=self.group):
            before = set(self._items)
            obj = ep.load()
            if ep.name not in self._items and set(self._items) == before:
                summary = (getattr(obj, "summary", None) or (obj.__doc__ or ep.name).strip().splitlines()[0])
                self.add(ep.name, obj, summary=summary,
                         reference=getattr(obj, "reference", f"third-party plug-in {ep.value}"))

    def entry(self, name: str) -> Entry[T]:
        """Return the entry for ``name`` or raise :class:`UnknownNameError` listing the choices."""
        self._load_plugins()
        try:
            return self._items[name]
        except KeyError:
            raise UnknownNameError(self.kind, name, self._items) from None

    def get(self, name: str) -> T:
        """Return the registered object for ``name``."""
        return self.entry(name).obj

    def names(self) -> tuple[str, ...]:
        """Registered names, in registration order."""
        self._load_plugins()
        return tuple(self._items)

    def entries(self) -> tuple[Entry[T], ...]:
        self._load_plugins()
        return tuple(self._items.values())

    def __contains__(self, name: object) -> bool:
        self._load_plugins()
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())


def scan(package: str, *, skip: Iterable[str] = ()) -> None:
    """Import every public module of ``package``, in name order; its items register themselves on import.

    The one registration idiom: an item is a module that registers itself with its
    catalogue's decorator, and the catalogue's package scans itself.  Adding a
    strategy, algorithm, builder or link family touches that one module.
    """
    pkg = importlib.import_module(package)
    skipped = set(skip)
    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
        if not info.name.startswith("_") and info.name not in skipped:
            importlib.import_module(f"{package}.{info.name}")
