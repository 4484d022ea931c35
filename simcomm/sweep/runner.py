"""Evaluate a point function over a grid: sequentially, in local processes, or on Dask.

The point function takes a dict of inputs and returns a JSON-serialisable
dict; it must be a module-level function so it can travel to other processes.
A point that raises is recorded with its error line and the sweep goes on.
Results come back in grid order whatever the executor, so the same sweep run
sequentially, in parallel or on a Dask cluster gives identical results.
Distribution uses only concurrent.futures and dask.distributed; nothing home-made.

Stopping: SIGTERM is turned into :class:`SweepInterrupted` (a KeyboardInterrupt,
like Ctrl-C) while a sweep runs, and either one terminates the local worker
processes before it propagates, so ``kill -TERM`` never leaves workers behind;
points already stored stay stored.  Workers ignore SIGINT (the parent stops
them) and exit on their own if the parent dies without stopping them (SIGKILL).

Resuming: points are keyed by content (:func:`~simcomm.sweep.store.point_key`);
a rerun says how many stored points it keeps and how many it computes, and
how many of those are recomputed because a file they read or the simcomm
version changed.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from contextlib import contextmanager

from simcomm.errors import ConfigError, SimcommError
from simcomm.sweep.grammar import Grid
from simcomm.sweep.store import (
    FILE_INPUTS,
    PointRecord,
    ResultStore,
    canonical,
    point_key,
)

__all__ = ["SweepInterrupted", "run_sweep", "evaluate_point"]

Progress = Callable[[int, int], None]
Notify = Callable[[str], None]


class SweepInterrupted(KeyboardInterrupt):
    """SIGTERM during a sweep; a KeyboardInterrupt so the CLI reports it like Ctrl-C."""


def _stderr_line(text: str) -> None:
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


@contextmanager
def _sigterm_raises() -> Iterator[None]:
    """While the block runs, SIGTERM raises SweepInterrupted in the main thread (so cleanup runs)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    fired = False

    def handler(signum, frame):
        nonlocal fired
        if not fired:  # a second SIGTERM must not cut short the cleanup the first one started
            fired = True
            raise SweepInterrupted(f"signal {signum}")

    old = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def _watch_parent(parent: int) -> None:
    while True:
        time.sleep(0.5)
        if os.getppid() != parent:  # re-parented: the sweep died without stopping us
            os._exit(1)


def _worker_init(parent: int) -> None:
    """Worker start-up: Ctrl-C is the parent's to handle; die with the parent."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_watch_parent, args=(parent,), daemon=True, name="simcomm-parent-watch").start()


def _stop_pool(pool: ProcessPoolExecutor, grace: float = 5.0) -> None:
    """Cancel queued points and terminate every worker process, waiting until each has exited."""
    procs = list((getattr(pool, "_processes", None) or {}).values())  # no public handle before Python 3.14
    pool.shutdown(wait=False, cancel_futures=True)
    for p in procs:
        if p.is_alive():
            p.terminate()
    deadline = time.monotonic() + grace
    for p in procs:
        p.join(max(0.0, deadline - time.monotonic()))
        if p.is_alive():
            p.kill()
            p.join(grace)


def evaluate_point(fn: Callable[[dict], dict], inputs: dict) -> tuple[dict | None, str | None]:
    """Run ``fn``; a failure becomes an error line instead of killing the sweep."""
    try:
        return fn(inputs), None
    except SimcommError as exc:
        return None, str(exc)
    except Exception as exc:  # noqa: BLE001 - a failed point is data, not a crash
        return None, f"internal error: {type(exc).__name__}: {exc}"


def _dask_client(address: str):
    try:
        from dask.distributed import Client
    except ImportError:
        raise ConfigError("--dask needs the dask extra: pip install 'simcomm[dask]'") from None
    try:
        return Client(address, timeout="5s", set_as_default=False)
    except (OSError, TimeoutError) as exc:
        raise ConfigError(f"--dask {address}: cannot reach the Dask scheduler ({type(exc).__name__})") from None


def _resume_notes(store: ResultStore, points: list[dict], keys: list[str], notify: Notify) -> dict:
    """Load the store for a resume: warn about skipped lines, say what is kept and what is computed."""
    cut = store.repair()
    scan = store.scan()
    if (problem := scan.problem()) is not None:
        notify(f"warning: {store.path}: {problem}; their points are computed again")
    done = scan.by_key()
    if scan.records or cut:
        stored_inputs = {canonical(r.inputs, strict=False) for r in scan.records}
        kept = sum(k in done for k in keys)
        todo = [i for i, k in enumerate(keys) if k not in done]
        stale = sum(canonical(points[i], strict=False) in stored_inputs for i in todo)
        line = f"resume: {store.path}: keeping {kept} stored point(s), computing {len(todo)}"
        if stale:
            line += f" ({stale} recomputed: a file they read or the simcomm version changed)"
        if cut:
            line += "; a last line torn by a kill was cut off"
        notify(line)
    return done


def run_sweep(fn: Callable[[dict], dict], grid: Grid, store: ResultStore, *, base: dict | None = None,
              executor: str = "processes", workers: int | None = None, dask: str | None = None,
              progress: Progress | None = None, notify: Notify | None = None,
              files: tuple[str, ...] = FILE_INPUTS) -> list[PointRecord]:
    """Evaluate ``fn(base | point)`` for every grid point not already in ``store``.

    ``executor`` is ``sequential`` or ``processes``; ``dask`` (a scheduler
    address or a ``dask.distributed.Client``) overrides it.  ``notify``
    receives one-line notes (damaged lines skipped, points kept on resume);
    by default they go to stderr.  ``files`` names the inputs that hold paths
    of files a point reads; their bytes are part of the point's key.
    """
    grid.check_nonempty()
    if executor not in ("processes", "sequential"):
        raise ConfigError(f"--executor: unknown {executor!r}; valid choices: processes, sequential")
    notify = notify or _stderr_line
    base = dict(base or {})
    points = [{**base, **p} for p in grid.points()]
    digests: dict = {}
    keys = [point_key(p, digests, files) for p in points]
    done = _resume_notes(store, points, keys, notify)
    todo = [i for i, k in enumerate(keys) if k not in done]
    total, finished = len(points), len(points) - len(todo)
    if progress:
        progress(finished, total)

    def record(i: int, out: tuple[dict | None, str | None]) -> None:
        nonlocal finished
        rec = PointRecord(i, keys[i], points[i], out[0], out[1])
        store.append(rec)
        done[keys[i]] = rec
        finished += 1
        if progress:
            progress(finished, total)

    with _sigterm_raises():
        _execute(fn, points, todo, record, executor=executor, workers=workers, dask=dask)
    return [PointRecord(i, k, points[i], done[k].result, done[k].error) for i, k in enumerate(keys)]


def _execute(fn, points: list[dict], todo: list[int], record, *, executor: str, workers: int | None,
             dask) -> None:
    if dask is not None:
        client = _dask_client(dask) if isinstance(dask, str) else dask
        try:
            from dask.distributed import as_completed

            # The client is not the process default (set_as_default=False), so make it
            # current while futures are created and awaited.
            with client.as_current():
                futs = {client.submit(evaluate_point, fn, points[i], pure=False): i for i in todo}
                for fut in as_completed(list(futs)):
                    record(futs[fut], fut.result())
        finally:
            if isinstance(dask, str):
                client.close()
    elif executor == "sequential" or len(todo) <= 1:
        for i in todo:
            record(i, evaluate_point(fn, points[i]))
    else:
        ctx = multiprocessing.get_context("spawn")
        pool = ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_worker_init,
                                   initargs=(os.getpid(),))
        with _signals_noted() as noted:
            try:
                pending = {pool.submit(evaluate_point, fn, points[i]): i for i in todo}
                while pending:
                    fin, _ = wait(pending, timeout=0.25, return_when=FIRST_COMPLETED)
                    for fut in fin:
                        record(pending.pop(fut), fut.result())
                    _raise_noted(noted)
            except BaseException:
                # Ctrl-C, SIGTERM or a crash: the `with` block's shutdown would wait for every running
                # point; stop the workers instead so none outlives the sweep.
                _stop_pool(pool)
                raise
        pool.shutdown(wait=True)


@contextmanager
def _signals_noted() -> Iterator[list[int]]:
    """While the pool runs, SIGINT and SIGTERM are only noted; the loop raises between waits.

    An exception raised by a handler lands wherever the main thread happens to be, and inside
    ``concurrent.futures.wait`` that can be while it holds a future's lock: the executor's manager
    thread then blocks on that lock for ever and the interpreter's exit, which joins it, hangs (seen
    once under load).  Raising only between waits keeps every lock released.
    """
    noted: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield noted
        return
    old = {s: signal.signal(s, lambda signum, frame: noted.append(signum)) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield noted
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)


def _raise_noted(noted: list[int]) -> None:
    """Raise what the first noted signal would have: KeyboardInterrupt for SIGINT, else SweepInterrupted."""
    if not noted:
        return
    if noted[0] == signal.SIGINT:
        raise KeyboardInterrupt
    raise SweepInterrupted(f"signal {noted[0]}")
