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
    for k, v in base.items():  # a list value (compute_scale = [1.0, 2.0]) is one value: hashed as a tuple
        values.setdefault(k, set()).add(tuple(v) if isinstance(v, list) else v)
    # Every value of every axis, not only the first point: --vary nodes=2,0 fails here, not as a failed point.
    for k, vals in grid.axes:
        for v in vals:
            check_point({**base, k: v})
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


_SWEEP_KEYS = ("axes", "question", "strategies", "vary")
_SCALARS = (str, int, float, bool)


def _names(value, key: str) -> list[str]:
    """A ``[sweep]`` entry that is a string or a list of strings (``strategies``, ``vary``)."""
    if isinstance(value, str):
        return [value] if value.strip() else []
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise ConfigError(f"[sweep] {key}: {value!r} must be a string or a list of non-empty strings")
    return list(value)


def _axis(key: str, value, base_dir: Path) -> list | str:
    """One ``[sweep.axes]`` entry: a grammar string, one value, or a non-empty flat list of one kind."""
    from simcomm.scenario import KEY, coerce
    from simcomm.sweep.grammar import typed_axis

    if isinstance(value, str):
        return value  # grammar text such as "4..64x2", expanded and checked by describe()
    vals = value if isinstance(value, list) else [value]
    if not vals or not all(isinstance(v, _SCALARS) for v in vals):
        raise ConfigError(f"[sweep.axes] {key}: {value!r} must be a non-empty list of values (numbers, strings "
                          "or true/false, not lists or tables) or a range string such as \"4..64x2\"")
    vals = list(typed_axis(key, vals, where="[sweep.axes]"))
    if key in KEY:
        for v in vals:
            coerce(key, v)  # every value, not just the first point's: a bad one fails before any point runs
    if key in ("trace", "cluster"):  # files are relative to the scenario file, as for fixed values
        vals = [str(base_dir / v) if isinstance(v, str) and v.endswith((".json", ".toml", ".graphml"))
                and not Path(v).is_absolute() else v for v in vals]
    return vals


def _check_stacks(names: list) -> None:
    """Transport stack names of the file (``stack = "x"``), checked before any point runs."""
    from simcomm.stacks.base import STACKS

    for name in names:
        if isinstance(name, str):
            STACKS.entry(name)


def _sweep_table(sw) -> tuple[list[str], list[str], dict, str | None]:
    """(vary, strategies, raw axes, question) of a ``[sweep]`` table, its structure and types checked."""
    if not isinstance(sw, dict):
        raise ConfigError("scenario: [sweep] must be a table with keys: " + ", ".join(_SWEEP_KEYS))
    unknown = sorted(set(sw) - set(_SWEEP_KEYS))
    if unknown:
        raise ConfigError(f"[sweep]: unknown key {unknown[0]!r}; valid keys: {', '.join(_SWEEP_KEYS)}")
    question = sw.get("question")
    if question is not None and not isinstance(question, str):
        raise ConfigError(f"[sweep] question: {question!r} must be a string")
    strategies = _names(sw.get("strategies", []), "strategies")
    if len(strategies) == 1 and "," in strategies[0]:
        strategies = [s.strip() for s in strategies[0].split(",") if s.strip()]
    vary = _names(sw.get("vary", []), "vary")
    axes = sw.get("axes", {})
    if not isinstance(axes, dict):
        raise ConfigError(f"[sweep] axes: {axes!r} must be a table of parameter = [values], "
                          "e.g. [sweep.axes] nodes = [4, 8]")
    return vary, [s.strip() for s in strategies], axes, question


def load_sweep_toml(path: Path) -> tuple[list[str], list[str], dict, dict, str | None]:
    """(vary, strategies, fixed, axes, question) from a scenario TOML with a ``[sweep]`` table.

    The whole file's structure and value types are checked here, before any
    point runs: a wrong type anywhere is one ConfigError naming the key and
    what is valid.  Fixed keys are read by the scenario resolver
    (:func:`simcomm.scenario.flat_from_toml`: ``[workload]``, ``[stack]``,
    ``[network]``, ``[options]`` and top-level keys).
    """
    from simcomm.scenario import KEY, flat_from_toml

    p = Path(path)
    raw = read_scenario_toml(p)
    vary, strategies, axes_raw, question = _sweep_table(raw.pop("sweep", {}))
    fixed, seconds = flat_from_toml(raw, p.parent)
    for k, v in list(fixed.items()):
        kind = KEY[k].kind if k in KEY else "option"
        if kind == "baseline" or (kind == "floats" and isinstance(v, list)):
            continue
        if not isinstance(v, _SCALARS):
            what = "a list" if isinstance(v, list) else "a table" if isinstance(v, dict) else type(v).__name__
            raise ConfigError(f"{k}: {v!r} is {what}; a fixed parameter takes one value (a string, number or "
                              "true/false); to sweep it, list its values under [sweep.axes] or use --vary")
        if k in seconds and isinstance(v, (int, float)) and not isinstance(v, bool):
            fixed[k] = f"{v!r}s"  # workload.dataload_s = 0.02 names its unit; keep it explicit for the resolver
    axes = {}
    for key, value in axes_raw.items():
        k = str(key).replace("-", "_")
        axes[k] = _axis(k, value, p.parent)
    _check_stacks([fixed.get("stack"), *(axes.get("stack") if isinstance(axes.get("stack"), list) else [])])
    if "strategy" in fixed and strategies:
        fixed.pop("strategy")
    return vary, strategies, fixed, axes, question


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
