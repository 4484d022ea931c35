"""Define and run a what-if sweep: grid + fixed inputs -> stored points -> results files.

A sweep is a :class:`~simcomm.sweep.grammar.Grid` over point parameters,
with the chosen strategies as the last (fastest) axis so every
configuration's strategies sit side by side, and ``base``: the fixed inputs,
with the main ones always present so every results row has every input
column.  ``describe`` validates all of it up front (unknown keys, unknown
names, options no chosen strategy has) so a bad sweep fails in one line
before any point runs.

A ``[sweep]`` table in a scenario TOML holds the same as the flags::

    cluster = "deep-est-esb"
    [sweep]
    question = "Do we need HDR, or will EDR do?"
    strategies = ["allreduce", "node-based", "sgp"]
    vary = ["inter=ib-edr,ib-hdr,eth-25g", "nodes=4..64x2"]   # or:
    [sweep.axes]
    straggler_scale = [1.0, 1.5]
"""

from __future__ import annotations

import json
from pathlib import Path

from simcomm.errors import ConfigError
from simcomm.scenario import read_scenario_toml
from simcomm.sweep import Grid, ResultStore, parse_values, parse_vary, run_sweep
from simcomm.whatif.params import PARAMS, check_point, known_params, strategy_options
from simcomm.whatif.results import (
    SWEEP_FILE,
    rows_from_records,
    write_results,
    write_text_atomic,
)

__all__ = ["ALWAYS", "describe", "load_sweep_toml", "run_whatif"]

#: inputs present in every row, with their defaults (None: the preset's / the trace's)
ALWAYS = {"cluster": "deep-est-esb", "nodes": 4, "gpus_per_node": None, "inter": None, "topology": None,
          "model": None, "batch": None, "fidelity": "flow", "seed": 0, "straggler_scale": 1.0, "jitter": 0.0}


def _check_names(values: dict[str, set]) -> None:
    """Unknown strategies, link classes, clusters, topology kinds: one line each, before running."""
    from simcomm.links import link_class
    from simcomm.strategies.base import STRATEGIES
    from simcomm.topologies.presets import PRESETS
    from simcomm.topologies.two_level import INTER

    for s in values.get("strategy", ()):
        STRATEGIES.entry(s)
    for key in ("inter", "intra", "nic"):
        for v in values.get(key, ()):
            if v is not None:
                link_class(str(v))
    for v in values.get("topology", ()):
        if v is not None and v not in INTER:
            raise ConfigError(f"topology: unknown {v!r}; valid choices: {', '.join(INTER)}")
    for v in values.get("cluster", ()):
        if v is not None and not Path(str(v)).is_file():
            PRESETS.entry(str(v))


def describe(vary: list[str], strategies: list[str], fixed: dict, *, axes: dict | None = None,
             question: str | None = None) -> tuple[Grid, dict]:
    """Validate a sweep; returns (grid, sweep description for sweep.json / reports)."""
    known = known_params()
    grid = parse_vary(vary, known)
    extra = dict(grid.axes)
    for key, vals in (axes or {}).items():
        k = key.replace("-", "_")
        if k not in known:
            raise ConfigError(f"[sweep.axes]: unknown parameter {key!r}; valid choices: {', '.join(sorted(known))}")
        if k in extra:
            raise ConfigError(f"sweep: parameter {k!r} given twice")
        extra[k] = tuple(vals) if isinstance(vals, list) else parse_values(k, str(vals))
        if not extra[k]:
            raise ConfigError(f"[sweep.axes]: {k!r} has no values")
    if strategies:
        if "strategy" in extra:
            raise ConfigError("--strategies: strategy is also a --vary axis; give it once")
        extra["strategy"] = tuple(strategies)
    grid = Grid(tuple(extra.items())).check_nonempty()
    base = {k: v for k, v in ALWAYS.items() if k not in extra}
    for k, v in fixed.items():
        k = k.replace("-", "_")
        if k in extra:
            raise ConfigError(f"{k}: fixed and varied at once; give it either as a flag or as --vary")
        base[k] = v
    if "strategy" not in extra and "strategy" not in base:
        base["strategy"] = "allreduce"
    check_point(base)
    values: dict[str, set] = {k: set(v) for k, v in extra.items()}
    for k, v in base.items():
        values.setdefault(k, set()).add(v)
    for v in list(grid.points())[:1]:
        check_point({**base, **v})
    _check_names(values)
    chosen = values.get("strategy", set())
    owners = strategy_options()
    for k in values:
        if k not in PARAMS and not set(owners.get(k, ())) & chosen:
            raise ConfigError(f"{k}: option of {', '.join(owners.get(k, ()))}, none of which is in this sweep "
                              f"({', '.join(sorted(chosen))})")
    # Sorted base keys: the description reads back identically from sweep.json (written with sorted keys).
    sweep = {"question": question, "axes": [[k, list(v)] for k, v in grid.axes], "base": dict(sorted(base.items()))}
    return grid, sweep


def load_sweep_toml(path: Path) -> tuple[list[str], list[str], dict, dict, str | None]:
    """(vary, strategies, fixed, axes, question) from a scenario TOML with a ``[sweep]`` table."""
    p = Path(path)
    raw = read_scenario_toml(p)
    sw = raw.pop("sweep", {})
    if not isinstance(sw, dict):
        raise ConfigError("scenario: [sweep] must be a table")
    unknown = sorted(set(sw) - {"question", "strategies", "vary", "axes"})
    if unknown:
        raise ConfigError(f"[sweep]: unknown key {unknown[0]!r}; valid keys: axes, question, strategies, vary")
    fixed: dict = {}
    for k, v in raw.pop("workload", {}).items():
        fixed[{"dataload_s": "dataload"}.get(k, k)] = v
    for k, v in raw.pop("stack", {}).items():
        fixed[{"name": "stack", "efficiency": "stack_efficiency", "overhead": "stack_overhead"}.get(k, k)] = v
    fixed.update(raw.pop("options", {}))
    fixed.update(raw)
    for key in ("trace", "cluster"):
        v = fixed.get(key)
        if isinstance(v, str) and v.endswith((".json", ".toml")) and not Path(v).is_absolute():
            fixed[key] = str(p.parent / v)
    strategies = sw.get("strategies", [])
    if isinstance(strategies, str):
        strategies = [s.strip() for s in strategies.split(",") if s.strip()]
    vary = sw.get("vary", [])
    vary = [vary] if isinstance(vary, str) else list(vary)
    if "strategy" in fixed and strategies:
        fixed.pop("strategy")
    return vary, list(strategies), fixed, dict(sw.get("axes", {})), sw.get("question")


def run_whatif(grid: Grid, sweep: dict, out: Path, *, executor: str = "processes", workers: int | None = None,
               dask=None, progress=None) -> list[dict]:
    """Run (or resume) the sweep into ``out``; writes sweep.json, points.jsonl, results.csv/json."""
    from simcomm.whatif.point import evaluate

    store = ResultStore(out)  # its load() cuts a torn tail left by a killed sweep
    write_text_atomic(store.dir / SWEEP_FILE, json.dumps(sweep, indent=1, sort_keys=True) + "\n")
    records = run_sweep(evaluate, grid, store, base=sweep["base"], executor=executor, workers=workers,
                        dask=dask, progress=progress)
    rows = rows_from_records(records)
    write_results(store.dir, sweep, rows)
    return rows
