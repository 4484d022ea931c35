"""The small-message residuals of the public nccl-tests suite, run by run, and what each prediction is made of.

    python benchmarks/nccl/small.py            # one line per (run, algorithm) with rows <= 64 KB

For every counted run (not anomalous, not the calibration run) and every (algorithm, protocol) simcomm ran on
its rows of at most 64 KB (issue 25's band): the rows, how many are within 15 %, the median signed error, and
the smallest counted size's measured time against its prediction, split into what the prediction adds up:
NCCL's own table latency for the chosen pair (``ModelTime.latency_us``, :mod:`simcomm.nccl.tuning`), the
proxy's wait (:func:`simcomm.nccl.execution.proxy_wait_us`), the fabric's latency beyond InfiniBand's at each
network step (:func:`simcomm.nccl.fabric.fabric_latency_us`), the kernel launches of nccl-tests' ``-g``
(:func:`simcomm.nccl.execution.launch_s`) and the rest (the bytes' time on the flows).  Grouped point-to-point
calls (all-to-all) have no table latency: their table, wait and fabric parts are in the rest ("p2p").

A diagnostic for docs/accuracy.md ("Small messages: what remains"); it predicts nothing and fits nothing.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import tomllib

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

#: issue 25's band and its target
SMALL, TARGET = 64e3, 0.15


def small_rows(result: dict) -> list[dict]:
    """A scored run's counted rows of at most 64 KB (:func:`score.score_run`'s ``rows``)."""
    return [x for x in result["rows"] if x["counted"] and x["size"] <= SMALL]


def groups(results: list[dict]) -> list[dict]:
    """One entry per (run, algorithm) of the counted runs' rows <= 64 KB, in the runs' order.

    Each: ``id``, ``class``, ``algorithm``, ``rows``, ``within`` (|error| <= 15 %), ``median`` (signed),
    ``first`` (the smallest counted size's row).
    """
    out = []
    for r in results:
        if r["anomalous"] or r["calibration"]:
            continue
        by_algo: dict[str, list[dict]] = {}
        for x in small_rows(r):
            by_algo.setdefault(x["algorithm"], []).append(x)
        for algo, xs in by_algo.items():
            out.append({"id": r["id"], "class": r["class"], "algorithm": algo, "rows": len(xs),
                        "within": sum(abs(x["error"]) <= TARGET for x in xs),
                        "median": statistics.median(x["error"] for x in xs), "first": xs[0]})
    return out


def needed(results: list[dict]) -> tuple[int, int, int]:
    """(counted rows <= 64 KB, rows within 15 %, rows within 15 % a median of at most 15 % needs)."""
    rows = [x for r in results if not (r["anomalous"] or r["calibration"]) for x in small_rows(r)]
    return len(rows), sum(abs(x["error"]) <= TARGET for x in rows), len(rows) // 2 + 1


def _score():
    """benchmarks/nccl/score.py, loaded from beside this file under its own name (a bare ``import score`` can
    find benchmarks/megatron/score.py first when both folders are on the path, as in a test process)."""
    import importlib.util

    mod = sys.modules.get("nccl_score")
    if mod is None:
        spec = importlib.util.spec_from_file_location("nccl_score", HERE / "score.py")
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        sys.modules["nccl_score"] = mod
        spec.loader.exec_module(mod)
    return mod


def parts(model: dict, collective: str, nbytes: float) -> dict:
    """The fixed parts of simcomm's prediction for one row: table latency, proxy wait, fabric, launch (us)."""
    score = _score()

    import simcomm.nccl.algorithms  # noqa: F401  (registers the catalogue)
    from simcomm.bench import COLLECTIVES
    from simcomm.nccl.execution import launch_s, proxy_wait_us
    from simcomm.nccl.fabric import fabric_latency_us
    from simcomm.nccl.layout import group_layout
    from simcomm.nccl.prepare import choose

    topo, runtime = score.build(model)
    layout = group_layout(topo, tuple(range(topo.n_ranks)))
    kind = COLLECTIVES[collective]
    _, mt = choose(kind, layout, nbytes, runtime.nccl_algo, runtime.nccl_proto)
    launch = 1e6 * launch_s(int(model.get("gpus_per_thread", 1)))
    if mt is None:
        return {"table": None, "proxy": 0.0, "fabric": 0.0, "launch": launch}
    return {"table": mt.latency_us, "proxy": proxy_wait_us(mt, kind, layout, nbytes),
            "fabric": fabric_latency_us(mt.algo, kind, layout), "launch": launch}


def render(results: list[dict], models: dict, runs: dict) -> str:
    n, within, need = needed(results)
    lines = [f"Counted rows <= 64 KB: {n}; within 15 %: {within}; a median of at most 15 % needs {need} "
             f"({max(0, need - within)} more).", "",
             "| run | class | simcomm ran | rows | within 15 % | median signed | smallest size: measured -> "
             "predicted (us) | = NCCL table + proxy wait + fabric + launch + rest |",
             "|---|---|---|---:|---:|---:|---|---|"]
    for g in groups(results):
        first = g["first"]
        p = parts(models[g["id"]], runs[g["id"]]["collective"], float(first["size"]))
        fixed = (p["table"] or 0.0) + p["proxy"] + p["fabric"] + p["launch"]
        table = "p2p" if p["table"] is None else f"{p['table']:.1f}"
        lines.append(f"| {g['id']} | {g['class']} | {g['algorithm']} | {g['rows']} | {g['within']} | "
                     f"{100 * g['median']:+.0f} % | {first['size']:g} B: {first['measured_us']:.1f} -> "
                     f"{first['predicted_us']:.1f} | {table} + {p['proxy']:.1f} + {p['fabric']:.1f} + {p['launch']:.1f} + "
                     f"{first['predicted_us'] - fixed:.1f} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    score = _score()

    models = tomllib.loads((HERE / "models.toml").read_text(encoding="utf-8"))
    runs, results = {}, []
    for path in sorted((HERE / "runs").glob("*.toml")):
        run = tomllib.loads(path.read_text(encoding="utf-8"))
        runs[run["id"]] = run
        results.append(score.score_run(run, models[run["id"]]))
    sys.stdout.write(render(results, models, runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
