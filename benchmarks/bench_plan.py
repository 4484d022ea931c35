"""Where ``simcomm plan``'s time goes: the search (enumeration, memory fit, estimate) and the simulations.

Runs :func:`simcomm.llm.search.search` and :func:`simcomm.llm.simulate.simulate_best` as ``simcomm plan`` does
(default axes, bf16, ``--workers`` processes for the search and the simulations) and prints the CPU seconds of
each phase (the workers' too, ``resource.RUSAGE_CHILDREN``) and the wall time.  ``--dump FILE`` writes every fitting row's
(layout, memory, estimate) and every simulated row's step as JSON lines, so that a speed change can be checked
to leave every number the same (``--compare FILE``: exit status 1 on the first difference).

    python benchmarks/bench_plan.py --model llama3-70b --cluster dgx-h100-ndr --nodes 16 --global-batch 512
    python benchmarks/bench_plan.py ... --simulate 0 --dump /tmp/before.jsonl   # search only
    python benchmarks/bench_plan.py ... --simulate 0 --compare /tmp/before.jsonl
    python benchmarks/bench_plan.py ... --compare /tmp/all20.jsonl   # a --no-prune dump: rows the bound passed
                                                                     # over must be the only differences, each
                                                                     # simulated there at or above its bound

Results: docs/performance.md, "simcomm plan".
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time

from simcomm.llm import search, simulate
from simcomm.traces.zoo.transformer import transformer_config


def _row(r, gb: int) -> str:
    return json.dumps({"layout": r.layout.to_dict(), "precision": getattr(r, "precision", None),
                       "memory": r.memory_bytes, "estimate": r.to_dict(gb)["estimate"],
                       "step_s": r.step_s if r.simulated else None}, sort_keys=True)


def _without_pruned(want: list[str], got: list[str], bounds: dict[int, float]) -> tuple[list[str], list[str]]:
    """``want`` and ``got`` without the rows the bound passed over (``bounds``: their indices in ``got``), once
    each is found in ``want`` the same but for a simulated step no lower than its bound (else it is kept, and the
    comparison fails)."""
    def key(line: str) -> str:
        d = json.loads(line)
        return json.dumps([d["layout"], d["precision"]], sort_keys=True)

    where = {key(x): i for i, x in enumerate(want)}
    drop_want, drop_got = set(), set()
    for i, bound in bounds.items():
        j = where.get(key(got[i]))
        if j is None:
            continue
        w, g = json.loads(want[j]), json.loads(got[i])
        step = w.pop("step_s")
        g.pop("step_s")
        if w == g and step is not None and step >= bound:
            drop_want.add(j)
            drop_got.add(i)
    return ([x for j, x in enumerate(want) if j not in drop_want],
            [x for i, x in enumerate(got) if i not in drop_got])


def _live_workers_cpu() -> float:
    """CPU seconds (user + system) the worker processes :mod:`simcomm.llm.workers` keeps alive between phases have
    used so far (Linux ``/proc``; RUSAGE_CHILDREN counts a child only once it has ended)."""
    import os

    from simcomm.llm import workers

    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pool in workers._POOLS.values():
        for pid in list(getattr(pool, "_processes", None) or ()):
            try:
                with open(f"/proc/{pid}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
            except OSError:  # ended meanwhile: counted in RUSAGE_CHILDREN once reaped
                continue
            total += (int(fields[11]) + int(fields[12])) / tick  # utime, stime (fields 14, 15 of stat)
    return total


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="llama3-70b")
    ap.add_argument("--cluster", default="dgx-h100-ndr")
    ap.add_argument("--nodes", type=int, default=16)
    ap.add_argument("--global-batch", type=int, default=512)
    ap.add_argument("--precision", default="bf16")
    ap.add_argument("--simulate", type=int, default=20, help="K layouts to simulate (0: the search only)")
    ap.add_argument("--max-ops", type=int, default=simulate.MAX_OPS)
    ap.add_argument("--sim-ops", type=int, default=None, help="op budget of all simulations (default none)")
    ap.add_argument("--no-prune", action="store_true", help="simulate all K (plan's --no-prune)")
    ap.add_argument("--workers", type=int, default=simulate.default_workers(), help="simulation processes")
    ap.add_argument("--dump", help="write every row as JSON lines here")
    ap.add_argument("--compare", help="compare every row with this dump (exit 1 on a difference)")
    a = ap.parse_args(argv)

    cfg = transformer_config(a.model)
    base = {"cluster": a.cluster, "model": a.model, "precision": a.precision}
    stages: list[tuple[str, float, float]] = []

    def cpu() -> float:  # this process's CPU, its finished children's and its kept worker processes' so far
        kids = resource.getrusage(resource.RUSAGE_CHILDREN)
        return time.process_time() + kids.ru_utime + kids.ru_stime + _live_workers_cpu()

    def progress(stage: str, total: int):
        stages.append((stage, cpu(), time.perf_counter()))

    t0, w0 = cpu(), time.perf_counter()
    found = search.search(cfg, base, a.nodes, a.global_batch, search.Space(cps=None, shard_groups=(search.NODE,)),
                          a.precision, progress, workers=a.workers)
    t1, w1 = cpu(), time.perf_counter()
    marks = [("setup and enumeration", t0, w0), *stages, ("end", t1, w1)]
    parts = ", ".join(f"{name}: {marks[i + 1][1] - at:.1f} s CPU, {marks[i + 1][2] - wall:.1f} s wall"
                      for i, (name, at, wall) in enumerate(marks[:-1]))
    print(f"search: {found.enumerated} layouts, {found.fit} fit, {t1 - t0:.1f} s CPU, {w1 - w0:.1f} s wall "
          f"({a.workers} worker(s); {parts})")
    rows = found.rows
    if a.simulate:
        rows = simulate.simulate_best(found, cfg, base, a.nodes, a.global_batch, a.simulate, "flow", a.max_ops,
                                      a.sim_ops, workers=a.workers, prune=not a.no_prune)
        sim = [r for r in rows if r.simulated]
        pruned = sum(r.note.startswith(simulate.PRUNED) for r in rows)
        print(f"simulate: {len(sim)} layouts ({pruned} passed over by their bound), {cpu() - t1:.1f} s CPU "
              f"({a.workers} worker(s)), {time.perf_counter() - w1:.1f} s wall; winner {sim[0].layout.short()} "
              f"{sim[0].step_s:.4g} s")
        for line in simulate.bound_notes(rows, a.max_ops, a.sim_ops):
            print(f"note: {line}")
    print(f"total: {cpu() - t0:.1f} s CPU, {time.perf_counter() - w0:.1f} s wall")
    lines = [_row(r, a.global_batch) for r in rows]
    if a.dump:
        with open(a.dump, "w") as fh:
            fh.write("\n".join(lines) + "\n")
    if a.compare:
        with open(a.compare) as fh:
            want = fh.read().splitlines()
        bounds = {i: r.bound_s for i, r in enumerate(rows) if r.note.startswith(simulate.PRUNED)}
        want, lines = _without_pruned(want, lines, bounds)
        if bounds:
            print(f"{len(bounds)} rows passed over by their bound: each simulated at or above it in the dump")
        if want != lines:
            bad = next((i for i, (x, y) in enumerate(zip(want, lines, strict=False)) if x != y), min(len(want), len(lines)))
            print(f"DIFFERENT at row {bad}: {len(want)} rows before, {len(lines)} now", file=sys.stderr)
            return 1
        print(f"same: {len(lines)} rows identical")
    return 0


if __name__ == "__main__":
    sys.exit(main())
