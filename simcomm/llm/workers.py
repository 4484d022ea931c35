"""Worker processes for ``simcomm plan``: the search's memory model and estimate, and the simulations of the
best layouts, are independent per layout, so they run in parts over a few processes.

Every part's result goes back in the order the parts were given, whatever order they finish in, so the
caller's rows are the ones one process gives (``tests/llm/test_plan_workers.py``).  The processes are
started with ``spawn`` (a fresh interpreter, about 1 s of imports each), not ``fork``: the caller may hold
threads (a progress bar's refresh thread), and a child forked while one of them held a lock (the console's,
a stream's buffer) would block on it.
"""

from __future__ import annotations

import os

__all__ = ["default_workers", "run_parts"]


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
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    out: list = [None] * len(parts)
    with ProcessPoolExecutor(max_workers=max(1, min(workers, len(parts))),
                             mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = {pool.submit(fn, *args): k for k, args in enumerate(parts)}
        for fut in as_completed(futures):
            k = futures[fut]
            out[k] = fut.result()
            if done is not None:
                done(k)
    return out
