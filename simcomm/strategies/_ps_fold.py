"""``ps``'s worker fold: a parameter server's workers simulated in groups (an approximation, ``--opt fold``).

With one server and ``fifo`` queues (``ps``'s default), every push into the server waits for the one before it and
every pull leaves after the one before it: the server's two links carry one serial chain of W·T messages each
(W workers, T tensors; 5.3 M at 16 384 workers and ResNet-50's 161 tensors), and a plan of one op per message
cannot be built, let alone run, in seconds.  The workers are alike (the rank fold's condition: the same computes,
no jitter, equal scales), so their messages differ only in their routes.  The fold cuts the workers, in arrival
order, into ``fold_workers`` groups of m consecutive ones; per tensor and direction a group sends

* its first worker's (the representative's) own message, as the full plan does, and
* the other m - 1 messages as one message of their bytes, from (to) the group's last worker, followed on the
  server's chain by a wait of the other messages' route latencies less the one the merged message pays.

A message that runs alone on its links lasts ``latency + bytes / rate``; when every message of a group has the
same bottleneck rate and no push shares a link with a pull (full-duplex links, the server alone on its node), the
m - 1 messages' chain and the merged message plus the wait end at the same instant in exact arithmetic, so the
representative's timeline is the one its rank has in the full plan, up to float rounding and the event
resolution.  The other workers of a group are not simulated: the representatives are the plan's measured ranks
(every m-th worker, rank 0 first).  Bytes per link family are the full plan's when a group's workers cross the
same number of links of each family (the merged message takes the last worker's route).

Measured bound (``tests/strategies/test_ps_fold.py``, 64 workers in groups of 8 on a DGX A100 cluster, flow
fidelity): the mean iteration within :data:`BOUND` (relative) of ``--opt fold=off``, exact engine and the default
resolution; ``ps-layer-drop`` (the same plan) too.  ``auto`` (default) folds where the rank fold's message fold
does (``Workload.fold_messages``: from 2 048 training ranks, a stack that carries messages as planned, NCCL), ``on``
at any size, ``off`` never; ``--fold-ranks off`` also keeps every worker.  Not folded: several servers or
``concurrent`` queues (messages share links; their merge would change the max-min shares), co-located servers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simcomm.errors import ConfigError
from simcomm.strategies._fold import folds

__all__ = ["BOUND", "FOLDS", "Group", "worker_groups"]

#: fold: ``auto`` from 2 048 training ranks (as ``sgp``'s message fold), ``on`` at any size, ``off`` never
FOLDS = ("auto", "on", "off")
#: relative difference of the mean iteration from the full plan that the test holds the fold to
BOUND = 1e-12


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


def _routes(topology, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, list[bytes]]:
    """Per message ``src[i] -> dst[i]``: its route latency (summed as the engine sums it) and its route class.

    Two messages of one class cross links of the same capacities and families in the same order: alone on the
    network they get the same rate (the stacks scale capacities by family) and add the same bytes per family.
    """
    lens, links = topology.routes(src, dst)
    lat, cap = topology.latency[links], topology.capacity[links]
    family = {name: i for i, name in enumerate(sorted({topology.links[n].family for n in topology.link_names}))}
    fam = np.array([family[topology.links[n].family] for n in topology.link_names], dtype=np.float64)[links]
    out, keys = np.zeros(len(src)), []
    a = 0
    for i, n in enumerate(lens.tolist()):
        out[i] = float(lat[a:a + n].sum())
        keys.append(cap[a:a + n].tobytes() + fam[a:a + n].tobytes())
        a += n
    return out, keys


def _parts(members: np.ndarray, lat: np.ndarray, keys: list[bytes]) -> tuple[tuple[tuple[int, int], ...], float]:
    """Merged messages of ``members`` (indices into ``lat``/``keys``), one per route class, and the chain's wait."""
    first: dict[bytes, list[int]] = {}
    for j in members.tolist():
        first.setdefault(keys[j], [j, 0])[1] += 1
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
    return (f"ps fold: the {workers:,} workers simulated in {len(groups)} groups of up to {size} (each group's first "
            "worker's messages its own, the others' merged into one message of their bytes plus a wait of their "
            f"latencies; within {BOUND:g} of the full plan where measured, docs/engine.md; --opt fold=off simulates "
            "every worker)")
