"""Worker processes for ``simcomm plan``: the search's memory model and estimate, and the simulations of the
best layouts, are independent per layout, so they run in parts over a few processes.

Every part's result goes back in the order the parts were given, whatever order they finish in, so the
caller's rows are the ones one process gives (``tests/llm/test_plan_workers.py``).  The processes are
started with ``spawn`` (a fresh interpreter, about 1 s of imports each), not ``fork``: the caller may hold
threads (a progress bar's refresh thread), and a child forked while one of them held a lock (the console's,
a stream's buffer) would block on it.  So that one ``plan`` starts them once, not once per phase (memory,
estimate, simulations), the pool of each size is kept for the next call (:func:`_pool`) and shut down when the
interpreter exits; a part's result never depends on what its process ran before (each worker function says
why), so keeping them changes no row.
"""

from __future__ import annotations

import atexit
import os

__all__ = ["default_workers", "run_parts"]

#: the live pools by number of processes, kept between calls of run_parts (see the module docstring)
_POOLS: dict = {}


def default_workers() -> int:
    """Worker processes ``simcomm plan`` uses: the CPUs this process may run on, at most 2 (a simulated plan
    holds a few hundred MB; more workers than CPUs would only add memory)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cpus = os.cpu_count() or 1
    return max(1, min(2, cpus))


def run_parts(fn, parts: list[tuple], workers: int, done=None) -> list:
    """``[fn(*args) for args in parts]`` in ``workers`` processes; ``done(k)`` is called as part ``k`` finishes
    (in finishing order); the results come back in ``parts``' order.  ``fn`` must be importable (a module's
    top-level function) and its arguments and result picklable."""
    from concurrent.futures import as_completed

    out: list = [None] * len(parts)
    size = max(1, workers)
    pool = _pool(size)
    try:
        futures = {pool.submit(fn, *args): k for k, args in enumerate(parts)}
        for fut in as_completed(futures):
            k = futures[fut]
            out[k] = fut.result()
            if done is not None:
                done(k)
    except BaseException as exc:
        _drop_if_lost(exc, size, pool)
        raise
    return out


def run_chained(fn, count: int, args_of, workers: int, done=None) -> list:
    """``[fn(*args_of(k, finished)) for k in range(count)]`` in ``workers`` processes, part ``k`` started (in
    order) once a process is free, its arguments made then from ``finished`` (part index -> result of the parts
    ended so far); ``done(k)`` as in :func:`run_parts`.  What the parts see of each other depends on which ended
    first: the caller makes its rows independent of that (:func:`simcomm.llm.simulate._prune`)."""
    from concurrent.futures import FIRST_COMPLETED, wait

    out: list = [None] * count
    finished: dict = {}
    size = max(1, workers)
    pool = _pool(size)
    running: dict = {}
    nxt = 0
    try:
        while nxt < count or running:
            while nxt < count and len(running) < size:
                running[pool.submit(fn, *args_of(nxt, finished))] = nxt
                nxt += 1
            ended, _ = wait(running, return_when=FIRST_COMPLETED)
            for fut in sorted(ended, key=running.__getitem__):
                k = running.pop(fut)
                out[k] = finished[k] = fut.result()
                if done is not None:
                    done(k)
    except BaseException as exc:
        _drop_if_lost(exc, size, pool)
        raise
    return out


def _drop_if_lost(exc: BaseException, size: int, pool) -> None:
    """After a lost process (BrokenProcessPool) or an interrupt, this pool is not used again; a part that raised
    leaves it sound (its exception came back as a result)."""
    from concurrent.futures.process import BrokenProcessPool

    if isinstance(exc, (BrokenProcessPool, KeyboardInterrupt)):
        _POOLS.pop(size, None)
        pool.shutdown(wait=False, cancel_futures=True)


def _pool(size: int):
    """The pool of ``size`` spawned processes, started on first use (processes start as parts need them)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    pool = _POOLS.get(size)
    if pool is None:
        if not _POOLS:
            atexit.register(_shutdown)
        pool = _POOLS[size] = ProcessPoolExecutor(max_workers=size, mp_context=multiprocessing.get_context("spawn"))
    return pool


def _shutdown() -> None:
    """Shut every kept pool down (at the interpreter's exit: its processes are idle by then)."""
    while _POOLS:
        _POOLS.popitem()[1].shutdown(wait=True)
