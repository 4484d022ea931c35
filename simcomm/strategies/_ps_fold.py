"""``ps``'s worker fold: a parameter server's workers simulated in windows (an approximation, ``--opt fold``).

With one server and ``fifo`` queues (``ps``'s default), every push into the server waits for the one before it and
every pull leaves after the one before it: the server's two links carry one serial chain of W·T messages each
(W workers, T tensors: 5.3 M messages at 16 384 workers and ResNet-50's 161 tensors), and a plan of one op per
message cannot be built, let alone run, in seconds.  The workers are alike (the rank fold's condition: the same
computes, no jitter, equal scales), so their messages differ only in their routes.  The fold keeps worker 0 (rank
0, the critical rank of alike workers) and cuts the others, in arrival order, into ``fold_workers`` windows of m
consecutive workers.  Per tensor and direction, a window sends on the server's chain

* the messages of its first m - 1 workers as one merged message per route class (their bytes, on the route of
  the class's first worker; two routes are of one class when they cross links of the same capacities and
  families in the same order),
* then a wait of those workers' route latencies less the ones the merged messages pay (a ``comm`` compute on the
  server),
* then its last worker's own message.

A message alone on its links lasts ``latency + bytes / rate``, and messages of one route class get the same rate:
when no push shares a link with a pull (full-duplex links), the merged messages plus the wait end when the
m - 1 messages' chain would, in exact arithmetic.  Every simulated worker (0 and each window's last) therefore
keeps the timeline it has in the full plan, up to float rounding and the event resolution, and the last worker
of all, whose period is the longest, is among them; they are the plan's measured and period ranks.  Bytes per
link family are the full plan's (a class adds the same per family).  The other workers have no ops.

The bound (``tests/strategies/test_ps_fold.py``: ``ps`` on a rail-optimised DGX A100 cluster, whose windows mix
route latencies, ``ps-layer-drop`` on a 4:1 fat-tree with two route classes, 64 and 32 workers in windows of 8,
against ``--opt fold=off``): iteration time, closed form, breakdown and bytes per family within :data:`BOUND`
(relative) with the exact engine (measured: 1.5e-13; 3.3e-12 at 2 048 GPUs; 6e-14-1.1e-12 at 256-1 024 GPUs
at the default resolution); at the default resolution the event resolution's own merges may differ between the
plans (measured 4.2e-5 on the fat-tree).  It holds only where the stack carries messages as planned: MPI over
TCP's rendezvous pays one handshake per message, so a merged message pays one for many (1.8 % fast on the
fat-tree).  ``auto`` (default) folds where ``sgp``'s message fold does (``Workload.fold_messages``: from 256
training ranks, a stack that carries messages as planned, such as NCCL), ``on`` at any size (the user's word for
the stack), ``off`` never; ``--fold-ranks off`` also keeps every worker.  Refused by ``on`` (and not done by
``auto``): several servers or ``concurrent`` queues (messages share links max-min; a merge would change the
shares), co-located servers, unequal workers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simcomm.errors import ConfigError
from simcomm.strategies._fold import folds

__all__ = ["BOUND", "FOLDS", "Group", "fold_note", "worker_groups"]

#: fold: ``auto`` from 256 training ranks (FOLD_RANKS, as ``sgp``'s message fold), ``on`` at any size, ``off`` never
FOLDS = ("auto", "on", "off")
#: relative difference from the full plan, exact engine: the two plans round chains of up to W·T additions
#: differently (W·T·2^-53 < 1e-9 at 16 384 workers and 161 tensors); measured 1.5e-13 at 64 workers
BOUND = 1e-9


@dataclass(frozen=True)
class Group:
    """A window of consecutive workers (arrival order) whose last, ``rep``, is simulated with its own messages.

    ``push_parts`` / ``pull_parts``: per route class of the other members (first met first), the member whose route
    carries their merged message and how many messages it merges; ``push_wait`` / ``pull_wait``: seconds the
    server's chain then waits, the other members' route latencies less those the merged messages pay.
    """

    rep: int
    push_parts: tuple[tuple[int, int], ...] = ()
    pull_parts: tuple[tuple[int, int], ...] = ()
    push_wait: float = 0.0
    pull_wait: float = 0.0


def _routes(topology, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per message ``src[i] -> dst[i]``: its route latency and its route class (an integer).

    Two messages of one class cross links of the same classes and capacities in the same order: alone on the
    network they get the same rate (the stacks scale capacities by link family) and add the same bytes per family.
    """
    lens, links = topology.routes(src, dst)
    starts = np.concatenate(([0], np.cumsum(lens)[:-1])).astype(np.int64)
    latency = np.add.reduceat(topology.latency[links], starts)  # routes have at least one link (src != dst)
    _, code = topology.link_class_codes
    _, cap = np.unique(topology.capacity[links], return_inverse=True)
    hop = code[links] * (int(cap.max()) + 1) + cap.reshape(-1)  # one id per (link class, capacity)
    base = int(hop.max()) + 1
    klass = np.zeros(len(src), dtype=np.int64)
    offset = 0
    for n in np.unique(lens).tolist():  # routes of one length: a matrix of hop ids, its distinct rows
        rows = np.flatnonzero(lens == n)
        ids = hop[starts[rows][:, None] + np.arange(n)]
        if base ** n < 2 ** 62:  # each row as one number (exact), far faster than unique rows
            _, inverse = np.unique(ids @ (base ** np.arange(n, dtype=np.int64)), return_inverse=True)
        else:
            _, inverse = np.unique(ids, axis=0, return_inverse=True)
        klass[rows] = offset + inverse.reshape(-1)
        offset += int(inverse.max()) + 1
    return latency, klass


def _parts(members: np.ndarray, lat: np.ndarray, keys: np.ndarray) -> tuple[tuple[tuple[int, int], ...], float]:
    """Merged messages of ``members`` (indices into ``lat``/``keys``), one per route class, and the chain's wait."""
    first: dict[int, list[int]] = {}
    for j, key in zip(members.tolist(), keys[members].tolist(), strict=True):
        first.setdefault(key, [j, 0])[1] += 1
    paid = sum(float(lat[j]) for j, _ in first.values())
    return tuple((j, n) for j, n in first.values()), max(0.0, float(lat[members].sum()) - paid)


def worker_groups(params, w, topology, arrival: list[int], server: int | None) -> list[Group] | None:
    """The groups a folded plan simulates (``None``: every worker, the full plan).  See the module docstring.

    Worker ``arrival[0]`` (rank 0: the critical rank of alike workers) is a group of its own; the others form
    windows of ``ceil(W / fold_workers)``; each window's last worker is simulated, so the last of all (the
    longest period) is.
    """
    p = params
    if p.fold == "off" or (p.fold == "auto" and not (folds(w) and w.fold_messages)):
        return None
    if not (p.fifo and p.servers == 1 and p.placement == "own" and server is not None):
        if p.fold == "on":
            raise ConfigError("fold: on needs one server of its own (placement own) with fifo queues; "
                              "use --opt fold=off")
        return None
    if w.compute_jitter or len(set(w.compute_scale)) > 1:
        if p.fold == "on":
            raise ConfigError("fold: on takes every worker to compute alike; with compute jitter or unequal "
                              "compute scales use --opt fold=off")
        return None
    n = len(arrival)
    size = -(-(n - 1) // p.fold_workers) if n > 1 else 1
    if size <= 1:
        return None
    workers = np.asarray(arrival, dtype=np.int64)
    to_server = np.full(n, server, dtype=np.int64)
    push_lat, push_key = _routes(topology, workers, to_server)
    pull_lat, pull_key = _routes(topology, to_server, workers)
    out = [Group(int(workers[0]))]
    for a in range(1, n, size):
        b = min(a + size, n)
        others = np.arange(a, b - 1)
        push_parts, push_wait = _parts(others, push_lat, push_key)
        pull_parts, pull_wait = _parts(others, pull_lat, pull_key)
        out.append(Group(int(workers[b - 1]), tuple((int(workers[j]), c) for j, c in push_parts),
                         tuple((int(workers[j]), c) for j, c in pull_parts), push_wait, pull_wait))
    return out


def fold_note(workers: int, groups: list[Group]) -> str:
    """The ``assumed:`` words of a folded plan."""
    size = max(sum(c for _, c in grp.push_parts) for grp in groups) + 1
    return (f"ps fold: the {workers:,} workers simulated in {len(groups)} groups of up to {size}, each by its last "
            "worker (rank 0 alone): the others' messages merged per route class, plus a wait of their latencies, "
            f"within {BOUND:g} of every worker simulated where messages travel as planned (docs/engine.md, "
            "\"ps's worker fold\"; --opt fold=off simulates every worker)")
