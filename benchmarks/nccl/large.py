"""Where the public nccl-tests suite's rows of at least 1 MB miss: by what ran and its size, and run by run.

    python benchmarks/nccl/large.py            # the tables of docs/accuracy.md, ">= 1 MB: where the rows miss"

Issue 25's band (rows of at least 1 MB, target: a median |error| of at most 15 %).  For the counted runs (not
anomalous, not the calibration run):

* by what simcomm ran (``NCCL Ring/LL128`` ...) and size group (1-16 MiB, 32-64 MiB, >= 128 MiB): rows, rows
  outside 15 % (too fast / too slow), median signed error;
* by run: rows, rows outside 15 %, the median signed error at 1-64 MiB and at >= 128 MiB, and what ran at
  1-64 MiB.  A run that misses at >= 128 MiB misses its rate (a NIC, a host path, a network stack), which no
  mid-size mechanism moves; :func:`mid_size_only` counts the rows outside 15 % of the runs that do not.

A diagnostic; it predicts nothing and fits nothing.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import tomllib

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

#: issue 25's band and its target
LARGE, TARGET = 1e6, 0.15
MiB = 1 << 20
#: size groups of the band (label, lowest, highest bytes)
SIZES = (("1-16 MiB", 0, 16 * MiB), ("32-64 MiB", 16 * MiB + 1, 128 * MiB - 1), (">= 128 MiB", 128 * MiB, float("inf")))


def large_rows(result: dict) -> list[dict]:
    """A scored run's counted rows of at least 1 MB (:func:`score.score_run`'s ``rows``)."""
    return [x for x in result["rows"] if x["counted"] and x["size"] >= LARGE]


def _counted(results: list[dict]) -> list[dict]:
    return [r for r in results if not (r["anomalous"] or r["calibration"])]


def _group(size: float) -> str:
    return next(label for label, lo, hi in SIZES if lo <= size <= hi)


def by_algorithm(results: list[dict]) -> list[dict]:
    """One entry per (what ran, size group): ``algorithm``, ``sizes``, ``rows``, ``fast`` and ``slow`` (rows
    outside 15 % each way), ``median`` (signed); most rows outside first, then by size group."""
    groups: dict[tuple[str, str], list[float]] = {}
    for r in _counted(results):
        for x in large_rows(r):
            groups.setdefault((x["algorithm"], _group(x["size"])), []).append(x["error"])
    order = [label for label, _, _ in SIZES]
    out = [{"algorithm": a, "sizes": s, "rows": len(es), "fast": sum(e < -TARGET for e in es),
            "slow": sum(e > TARGET for e in es), "median": statistics.median(es)} for (a, s), es in groups.items()]
    return sorted(out, key=lambda g: (-(g["fast"] + g["slow"]), order.index(g["sizes"]), g["algorithm"]))


def by_run(results: list[dict]) -> list[dict]:
    """One entry per counted run with rows >= 1 MB: ``id``, ``class``, ``rows``, ``outside``, ``mid`` and
    ``big`` (median signed error at 1-64 MiB and at >= 128 MiB, None without such rows), ``ran`` (what ran at
    1-64 MiB, sorted); most rows outside first, then by id."""
    out = []
    for r in _counted(results):
        xs = large_rows(r)
        if not xs:
            continue
        mid = [x for x in xs if x["size"] < 128 * MiB]
        big = [x["error"] for x in xs if x["size"] >= 128 * MiB]
        out.append({"id": r["id"], "class": r["class"], "rows": len(xs),
                    "outside": sum(abs(x["error"]) > TARGET for x in xs),
                    "mid": statistics.median(x["error"] for x in mid) if mid else None,
                    "big": statistics.median(big) if big else None,
                    "ran": sorted({x["algorithm"] for x in mid})})
    return sorted(out, key=lambda g: (-g["outside"], g["id"]))


def needed(results: list[dict]) -> tuple[int, int, int]:
    """(counted rows >= 1 MB, rows within 15 %, rows within 15 % a median of at most 15 % needs)."""
    rows = [x for r in _counted(results) for x in large_rows(r)]
    return len(rows), sum(abs(x["error"]) <= TARGET for x in rows), len(rows) // 2 + 1


def mid_size_only(results: list[dict]) -> tuple[int, int]:
    """Rows outside 15 % (too fast, too slow) of the runs whose rows >= 128 MiB are within 15 % (median
    signed) or that have none: the most any mechanism acting below 128 MiB alone could bring in."""
    fast = slow = 0
    for g in by_run(results):
        if g["big"] is not None and abs(g["big"]) > TARGET:
            continue
        r = next(r for r in results if r["id"] == g["id"])
        fast += sum(x["error"] < -TARGET for x in large_rows(r))
        slow += sum(x["error"] > TARGET for x in large_rows(r))
    return fast, slow


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:+.0f} %"


def render(results: list[dict]) -> str:
    n, within, need = needed(results)
    fast, slow = mid_size_only(results)
    lines = [f"Counted rows >= 1 MB: {n}; within 15 %: {within}; a median of at most 15 % needs {need} "
             f"({max(0, need - within)} more). Outside 15 % in runs whose rows >= 128 MiB are within 15 % (or that "
             f"have none): {fast + slow} ({fast} too fast, {slow} too slow).", "",
             "| simcomm ran | sizes | rows | outside 15 %: too fast / too slow | median signed |",
             "|---|---|---:|---|---:|"]
    lines += [f"| {g['algorithm']} | {g['sizes']} | {g['rows']} | {g['fast']} / {g['slow']} | {_pct(g['median'])} |"
              for g in by_algorithm(results)]
    lines += ["", "| run | class | rows | outside 15 % | 1-64 MiB, median signed | >= 128 MiB, median signed | "
              "ran at 1-64 MiB |", "|---|---|---:|---:|---:|---:|---|"]
    lines += [f"| {g['id']} | {g['class']} | {g['rows']} | {g['outside']} | {_pct(g['mid'])} | {_pct(g['big'])} | "
              f"{', '.join(a.removeprefix('NCCL ') for a in g['ran'])} |" for g in by_run(results) if g["outside"]]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    from small import _score

    score = _score()
    models = tomllib.loads((HERE / "models.toml").read_text(encoding="utf-8"))
    results = [score.score_run(tomllib.loads(p.read_text(encoding="utf-8")),
                               models[p.stem]) for p in sorted((HERE / "runs").glob("*.toml"))]
    sys.stdout.write(render(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
