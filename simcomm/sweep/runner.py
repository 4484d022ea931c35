"""Evaluate a point function over a grid: sequentially, in local processes, or on Dask.

The point function takes a dict of inputs and returns a JSON-serialisable
dict; it must be a module-level function so it can travel to other processes.
A point that raises is recorded with its error line and the sweep goes on.
Results come back in grid order whatever the executor, so the same sweep run
sequentially, in parallel or on a Dask cluster gives identical results.
Distribution uses only concurrent.futures and dask.distributed; nothing home-made.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

from simcomm.errors import ConfigError, SimcommError
from simcomm.sweep.grammar import Grid
from simcomm.sweep.store import PointRecord, ResultStore, point_key

__all__ = ["run_sweep", "evaluate_point"]

Progress = Callable[[int, int], None]


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


def run_sweep(fn: Callable[[dict], dict], grid: Grid, store: ResultStore, *, base: dict | None = None,
              executor: str = "processes", workers: int | None = None, dask: str | None = None,
              progress: Progress | None = None) -> list[PointRecord]:
    """Evaluate ``fn(base | point)`` for every grid point not already in ``store``.

    ``executor`` is ``sequential`` or ``processes``; ``dask`` (a scheduler
    address or a ``dask.distributed.Client``) overrides it.
    """
    grid.check_nonempty()
    base = dict(base or {})
    points = [{**base, **p} for p in grid.points()]
    keys = [point_key(p) for p in points]
    done = store.load()
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
    elif executor == "processes":
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
            pending = {pool.submit(evaluate_point, fn, points[i]): i for i in todo}
            while pending:
                fin, _ = wait(pending, return_when=FIRST_COMPLETED)
                for fut in fin:
                    record(pending.pop(fut), fut.result())
    else:
        raise ConfigError(f"--executor: unknown {executor!r}; valid choices: processes, sequential")
    return [PointRecord(i, k, points[i], done[k].result, done[k].error) for i, k in enumerate(keys)]
