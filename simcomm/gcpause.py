"""Pausing CPython's cyclic garbage collector around allocation-heavy work.

A plan at 1 024 ranks holds hundreds of thousands of ops, and an engine run
allocates millions of short-lived objects (SimPy events, small arrays).  Each
allocation burst makes the generational collector run, and its older
generations traverse every live op and pending event again and again: about
30 % of a flow run of blocking SGP on ResNet-50 at 1 024 GPUs
(docs/engine.md, "How the speed was reached (history)").  Neither plans nor runs leave reference cycles behind
(what they free, reference counting frees), so nothing is lost by collecting
once afterwards instead.  Collection is only paused, never forced; the
previous state is restored on exit, also on error, and nested pauses keep it
off until the outermost one ends.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["gc_paused"]


@contextmanager
def gc_paused() -> Iterator[None]:
    """Run the body with the cyclic garbage collector disabled (restored afterwards)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
