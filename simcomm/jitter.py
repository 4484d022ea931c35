"""Per-iteration compute jitter: an iteration's plan chained N times, every rank's compute drawn afresh.

One simulated iteration gives every rank the same compute, so a step that
waits for k ranks never waits for a straggler.  Real ranks do not compute in
lockstep: the OS, the GPU clock, the input pipeline and co-located processes
make each rank's compute time vary from iteration to iteration.  With
``cv`` > 0, :func:`chain` repeats the plan ``n`` times; in copy j the Compute ops
of rank r take ``f[j, r]`` times their time, with

    f[j, r] = max(FLOOR, 1 + cv·z[j, r]),   z iid standard normal (seeded),

and rank r's ops of copy j start only after its own ops of copy j-1 (and the
messages it received in it) are done.  :func:`per_iteration` is then the mean
spacing of the copies' ends, (end[n-1] - end[0]) / (n - 1), the same rule the
emulated-cluster measurement uses (an iteration ends when its slowest rank
does).

What it predicts: a bulk-synchronous step over k ranks waits for the slowest,
E[max of k] - mean ≈ cv·W·e_k for normal draws (e_2 = 0.564, e_4 = 1.029,
e_8 = 1.424, e_16 = 1.766; W the compute time), while a gossip rank that only
needs a message its peer sent at the start of the iteration keeps its own pace.
Chaining, not independent draws per simulated iteration, is what tells the two
apart: a rank drawn slow in one copy is not slow in the next.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from simcomm.errors import ConfigError
from simcomm.ops import CommPlan, Compute, Transfer

__all__ = ["FLOOR", "ITERATIONS", "chain", "draw", "per_iteration"]

#: no rank computes faster than 5 % of its nominal time, however far the normal tail reaches
FLOOR = 0.05
#: copies chained per kind of iteration: for a 4-rank synchronous step the maximum of 4 draws has a
#: spread of about 0.7 cv, so the mean of 15 spacings is within about 0.2 cv (2-4 % at the cv of
#: 0.10-0.18 measured on the emulated cluster, docs/accuracy.md) of its expectation
ITERATIONS = 16


def draw(cv: float, n: int, n_ranks: int, seed) -> np.ndarray:
    """``n`` x ``n_ranks`` compute factors (see the module docstring); deterministic in ``seed``."""
    if not (isinstance(cv, (int, float)) and 0 <= cv < 1):
        raise ConfigError(f"workload.compute_jitter: {cv!r} must be a coefficient of variation in [0, 1)")
    z = np.random.default_rng(seed).standard_normal((n, n_ranks))
    return np.maximum(FLOOR, 1.0 + cv * z)


def chain(plan: CommPlan, factors: np.ndarray) -> tuple[CommPlan, list[range]]:
    """``len(factors)`` copies of ``plan``; returns the chained plan and each copy's op ids."""
    if plan.info.period or plan.info.period_ranks:
        raise ConfigError("workload.compute_jitter: not available for plans that already span two iterations "
                          "(allreduce with overlap 'backward+forward'); use another overlap or compute_jitter 0")
    ops = plan.ops
    n_ops = len(ops)
    # what rank r must have finished before its next iteration: its last op on each stream,
    # and every message it received (a receive occupies no stream of its own)
    last: dict[tuple[int, str], int] = {}
    first: dict[tuple[int, str], int] = {}
    frontier: dict[int, list[int]] = {}
    for op in ops:
        members = (op.src,) if isinstance(op, Transfer) else op.ranks
        for r in members:
            last[(r, op.stream)] = op.id
            first.setdefault((r, op.stream), op.id)
        if isinstance(op, Transfer):
            frontier.setdefault(op.dst, []).append(op.id)
    for (r, _), i in last.items():
        frontier.setdefault(r, []).append(i)
    starts: dict[int, list[int]] = {}
    for (r, _), i in first.items():
        starts.setdefault(i, []).append(r)

    out = []
    copies = []
    for j, f in enumerate(factors):
        base = j * n_ops
        for op in ops:
            deps = [d + base for d in op.deps]
            if j and op.id in starts:
                prev = base - n_ops
                deps.extend(sorted({prev + d for r in starts[op.id] for d in frontier.get(r, ())}))
            kw = {"id": op.id + base, "deps": tuple(deps)}
            if isinstance(op, Compute):
                kw["seconds"] = op.seconds * float(f[op.rank])
            out.append(replace(op, **kw))
        copies.append(range(base, base + n_ops))
    meta = dict(plan.meta, chained=len(factors))
    return CommPlan(plan.n_ranks, tuple(out), meta, plan.info), copies


def per_iteration(ends, copies: list[range]) -> tuple[float, tuple[float, float]]:
    """Mean spacing of the copies' ends (each the latest end of its ops) and the window it spans."""
    e = np.asarray(ends, dtype=float)
    marks = [float(e[c.start:c.stop].max()) for c in copies]
    if len(marks) == 1:  # one copy: its own makespan
        return marks[0], (0.0, marks[0])
    return (marks[-1] - marks[0]) / (len(marks) - 1), (marks[0], marks[-1])
