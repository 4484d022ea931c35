"""``simcomm plan``'s last step: flow-simulate the best layouts by estimate and rank by those simulations.

:func:`simulate_best` picks the ``K`` best layouts by estimate whose plans are small enough
(``max_ops`` per plan, ``budget_ops`` in all; both count ops, so the choice is deterministic), runs each
through :func:`simcomm.pipeline.simulate` exactly as ``simcomm run --strategy megatron`` with the layout's
options would (:func:`simulate_row`), and ranks every simulated row above every estimate-only one
(:func:`simcomm.llm.search.rank_rows`).  :func:`bound_notes` says when a bound passed layouts over.

The simulations are independent, so they run in ``workers`` processes (:mod:`simcomm.llm.workers`).  Each
result goes back to its row by index, so the rows, their order and every float are the same for any number
of workers (``tests/llm/test_plan_workers.py``).

Pure library: no typer, rich or matplotlib here.
"""

from __future__ import annotations

from dataclasses import replace

from simcomm.llm.estimate import plan_ops
from simcomm.llm.layout import Layout
from simcomm.llm.search import ANALYTIC, FLOW, Found, Row, rank_rows
from simcomm.llm.workers import default_workers, run_chained, run_parts

__all__ = ["simulate_best", "simulate_row", "scenario_keys", "bound_notes", "default_workers", "MAX_OPS", "PARALLEL_OPS",
           "PRUNED"]

#: ``--max-ops``' default: the largest plan simulated (about 10 s of CPU a plan at ~30 000 ops a second)
MAX_OPS = 300_000
#: the note of a row :func:`simulate_best` passed over by its lower bound
PRUNED = "not simulated: lower bound"
#: :func:`simulate_best` runs the simulations in worker processes once their plans hold this many ops in all
#: (fewer take less than starting a worker, about 1 s)
PARALLEL_OPS = 100_000


def scenario_keys(lay: Layout, base: dict, global_batch: int, fidelity: str, precision: str | None = None) -> dict:
    """The flat scenario (``base`` + strategy megatron, the fidelity and the layout's options; ``precision``
    when the row has its own) a row runs."""
    out = {**base, "strategy": "megatron", "fidelity": fidelity, **lay.options(global_batch)}
    if precision is not None:
        out["precision"] = precision
    return out


class _Passed(Exception):
    """:func:`simulate_row`'s screen: the plan's lower bound exceeds the best simulated step it was given."""

    def __init__(self, bound: float):
        super().__init__(bound)
        self.bound = bound


def simulate_row(row: Row, base: dict, global_batch: int, fidelity: str, best: float | None = None,
                 bound: bool = False) -> Row:
    """Run ``row``'s layout through :func:`simcomm.pipeline.simulate` (``base``: flat scenario keys), exactly
    as ``simcomm run --strategy megatron`` with the layout's options does.

    ``bound`` (flow fidelity): also work out a lower bound on the step from the built plan
    (:func:`simcomm.engine.bound.makespan_bound`) into :attr:`Row.bound_s`; with ``best`` (a step another layout
    was simulated at), a plan whose bound exceeds it is not run: the row comes back unsimulated, with its bound
    (it cannot be faster than that layout)."""
    from simcomm.pipeline import simulate
    from simcomm.scenario import from_flat

    # The layout's global batch is the megatron option, exactly; the workload keeps the trace's per-rank batch
    # (megatron does not read it).  Strong scaling would split the batch over the ranks and round it up to
    # ceil(B / R)·R (and refuse B < R), changing the number the user gave.
    scn = from_flat(scenario_keys(row.layout, base, global_batch, fidelity, row.precision))
    found: list[float] = []

    def screen(plans, topology, runtime, resolution) -> None:
        from simcomm.engine.bound import makespan_bound

        # the step is the kinds' weighted mean makespan (pipeline.plans.mean_of), so the bounds' mean bounds it
        total = sum(w for w, _ in plans)
        found.append(sum(w * makespan_bound(p, topology, runtime, resolution=resolution) for w, p in plans) / total)
        if best is not None and found[0] > best:
            raise _Passed(found[0])

    use = bound and fidelity == "flow" and not scn.workload.compute_jitter
    try:
        res = simulate(scn, baseline=False, analytic=False, screen=screen if use else None)
    except _Passed as stop:
        return replace(row, bound_s=stop.bound)
    if res.not_applicable:
        return replace(row, note=f"not simulated: {res.not_applicable}")
    return replace(row, step_s=res.mean_s, priced=FLOW if fidelity == "flow" else ANALYTIC,
                   compute_s=res.breakdown.compute, exposed_s=res.mean_s - res.breakdown.compute,
                   bound_s=found[0] if found else None, engine=tuple(k.engine for k in res.kinds))


def choose(found: Found, cfg, global_batch: int, k: int, max_ops: int,
           budget_ops: int | None, gpus_per_node: int | None = None) -> tuple[list[Row], list[int]]:
    """(rows, indices to simulate): the ``k`` best by estimate within the bounds; a row passed over gets a note
    naming the bound (the first row within ``max_ops`` is always taken, whatever ``budget_ops``)."""
    rows = list(found.rows)
    todo: list[int] = []
    spent = 0
    for i, r in enumerate(rows):
        if len(todo) == k:
            break
        ops = plan_ops(cfg, r.layout, found.gpus, global_batch, gpus_per_node)
        if ops > max_ops:
            rows[i] = replace(r, note=f"not simulated: plan of ~{ops:,} ops > --max-ops {max_ops:,}")
        elif todo and budget_ops is not None and spent + ops > budget_ops:
            rows[i] = replace(r, note=f"not simulated: ~{ops:,} ops more would pass --sim-ops {budget_ops:,}")
        else:
            todo.append(i)
            spent += ops
    return rows, todo


def simulate_best(found: Found, cfg, base: dict, nodes: int, global_batch: int, k: int, fidelity: str,
                  max_ops: int = MAX_OPS, budget_ops: int | None = None, progress=None,
                  workers: int = 1, parallel_from: int = PARALLEL_OPS, prune: bool = False) -> list[Row]:
    """Simulate the ``k`` best layouts by estimate, in estimate order, passing over (with a note) a layout whose
    plan has more than ``max_ops`` ops (:func:`~simcomm.llm.estimate.plan_ops`) or, once one is simulated, would
    take the simulated ops past ``budget_ops`` (None: no budget); returns every row ranked by
    :func:`~simcomm.llm.search.rank_rows`: the simulated ones first.  ``workers`` > 1 runs the simulations in
    that many processes when their plans hold ``parallel_from`` ops or more in all; the rows are the same for
    any number.

    ``prune`` (flow fidelity): a layout is not simulated when a lower bound on its step (its plan's,
    :func:`simcomm.engine.bound.makespan_bound`) exceeds the best step simulated among the layouts before it by
    estimate; it could not have been faster, so the winner is the one simulating all ``k`` gives, and the rows
    that are simulated keep their every float (:func:`_prune`: the same rows for any number of workers)."""
    gpn = max(1, found.gpus // nodes)
    rows, todo = choose(found, cfg, global_batch, k, max_ops, budget_ops, gpn)
    sizes = {i: plan_ops(cfg, rows[i].layout, found.gpus, global_batch, gpn) for i in todo}
    ops = sum(sizes.values())
    tick = progress(f"simulating {len(todo)} layout(s) ({fidelity})", len(todo)) if progress and todo else None
    where = {**base, "nodes": nodes}
    prune = prune and fidelity == "flow"
    before = {i: rows[i] for i in todo}
    if workers > 1 and len(todo) > 1 and ops >= parallel_from:
        if prune:
            _pruned_in_processes(rows, todo, where, global_batch, fidelity, min(workers, len(todo)), tick)
        else:
            _in_processes(rows, todo, sizes, where, global_batch, fidelity, min(workers, len(todo)), tick)
    else:
        best = None
        for n, i in enumerate(todo):
            rows[i] = simulate_row(rows[i], where, global_batch, fidelity, best if prune else None, prune and n > 0)
            if rows[i].simulated and (best is None or rows[i].step_s < best):
                best = rows[i].step_s
            if tick:
                tick()
    if prune:
        _prune(rows, todo, before)
    return rank_rows(rows)


def _in_processes(rows: list[Row], todo: list[int], sizes: dict[int, int], base: dict, global_batch: int,
                  fidelity: str, workers: int, tick) -> None:
    """:func:`simulate_row` of ``rows[i]`` for each ``i`` in ``todo`` in ``workers`` processes
    (:func:`simcomm.llm.workers.run_parts`), each result put back at its own index.  The largest plans go
    first (:func:`~simcomm.llm.estimate.plan_ops`, ties in estimate order), so that no worker is left with a
    large plan after the others have run out (longest-first scheduling)."""
    order = sorted(todo, key=lambda i: -sizes[i])  # stable: ties stay in estimate order
    got = run_parts(simulate_row, [(rows[i], base, global_batch, fidelity) for i in order], workers,
                    None if tick is None else lambda _k: tick())
    for i, row in zip(order, got, strict=True):
        rows[i] = row


def _prune(rows: list[Row], todo: list[int], before: dict[int, Row]) -> None:
    """Unsimulate, in estimate order, every row whose bound exceeds the best step simulated before it (a row the
    workers passed over already has such a bound: they compared it with the best known when it started, which is
    no better than this one).  What the workers ran beyond that (a row started before a better one ended) is
    dropped, so the rows do not depend on which finished first."""
    best: Row | None = None
    for i in todo:
        r = rows[i]
        if best is not None and r.bound_s is not None and r.bound_s > best.step_s:
            rows[i] = replace(before[i], bound_s=r.bound_s,
                              note=f"{PRUNED} {r.bound_s:.4g} s > {best.step_s:.4g} s simulated "
                                   f"(est# {best.estimate_rank}, {best.layout.short()})")
        elif r.simulated and (best is None or r.step_s < best.step_s):
            best = r


def _pruned_in_processes(rows: list[Row], todo: list[int], base: dict, global_batch: int, fidelity: str,
                         workers: int, tick) -> None:
    """:func:`simulate_row` with bounds in ``workers`` processes, started in estimate order, each told the best step
    simulated so far (:func:`simcomm.llm.workers.run_chained`; every one of those was before it by estimate)."""
    def args(n: int, done: dict) -> tuple:
        steps = [r.step_s for r in done.values() if r.simulated]
        return rows[todo[n]], base, global_batch, fidelity, min(steps) if steps else None, n > 0

    got = run_chained(simulate_row, len(todo), args, workers, None if tick is None else lambda _k: tick())
    for i, row in zip(todo, got, strict=True):
        rows[i] = row


def bound_notes(rows: list[Row], max_ops: int, budget_ops: int | None) -> list[str]:
    """One line per bound that passed layouts over (:func:`choose` notes them while it looks for ``k``, and
    :func:`_prune` those whose lower bound exceeds a simulated step), naming how many, the best-estimated of
    them and the flag that would take them in; none when no bound binds."""
    out = []
    for flag, bound in (("--max-ops", max_ops), ("--sim-ops", budget_ops)):
        over = sorted((r for r in rows if flag in r.note), key=lambda r: r.estimate_rank)
        if not over:
            continue
        first = over[0]
        out.append(f"{flag} {bound:,} passed over {len(over)} of the best layouts by estimate (the best of them: "
                   f"est# {first.estimate_rank}, {first.layout.short()}, "
                   f"{first.estimate.step:.4g} s estimated, {first.note.removeprefix('not simulated: ')}); "
                   f"raise {flag} to simulate them")
    pruned = sorted((r for r in rows if r.note.startswith(PRUNED)), key=lambda r: r.estimate_rank)
    if pruned:
        low = min(pruned, key=lambda r: (r.bound_s, r.estimate_rank))
        out.append(f"{len(pruned)} of the best layouts by estimate not simulated: a lower bound on each one's step "
                   f"(its plan's longest path of computes and of transfers at link capacity, no contention: "
                   f"docs/plan.md, section 4) exceeds a step simulated before it, so none of them can win (the "
                   f"lowest: {low.bound_s:.4g} s, est# {low.estimate_rank}, {low.layout.short()}); --no-prune "
                   f"simulates them")
    return out
