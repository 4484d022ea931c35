"""One resolver: flat scenario keys (file, flags, what-if point) -> a checked :class:`Scenario`.

Every entry point speaks the flat vocabulary of :mod:`simcomm.scenario.keys`:

* a scenario TOML file becomes a flat dict (:func:`flat_from_file`; its
  ``[workload]``, ``[stack]``, ``[network]``, ``[baseline]`` and ``[options]``
  sections are other spellings of the same keys);
* ``run``/``compare``/``whatif`` flags and ``--set``/``--opt`` pairs are flat
  already;
* a what-if point is the sweep's fixed keys plus one value per axis.

Layers are merged as plain dicts (later wins: file, then flags), and
:func:`from_flat` checks and converts every value once and builds the
Scenario.  Keys outside the vocabulary are strategy options.
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Set as AbstractSet
from pathlib import Path

import numpy as np

from simcomm.errors import ConfigError
from simcomm.scenario.keys import KEY, KEYS, MAX_NODES, coerce
from simcomm.scenario.seed_settings import SETTINGS, apply_seed_setting
from simcomm.scenario.spec import MemorySpec, NetworkSpec, Scenario, ShapeSpec, StackSpec, WorkloadSpec
from simcomm.topologies.nvlink import NvlinkSpec

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = ["read_scenario_toml", "flat_from_toml", "flat_from_file", "load_scenario", "from_flat", "to_flat",
           "node_scales", "strategy_options", "known_keys", "MAX_SCENARIO_BYTES", "file_cluster", "file_nodes"]

#: a scenario file larger than this is refused before it is read (real ones are a few kB)
MAX_SCENARIO_BYTES = 1 << 20
_SECTIONS = ("workload", "stack", "network", "model", "memory", "nvlink")
#: the Scenario attribute of a section whose name is not one ([model] is Scenario.shape: Scenario.model is its name)
_ATTR = {"model": "shape"}
#: section.key spellings -> flat key
_SPELLING = {**{f"{k.section}.{k.attr}": k.name for k in KEYS if k.section},
             **{t: k.name for k in KEYS for t in k.toml}}
_IN_SECONDS = {t for k in KEYS for t in k.toml if t.endswith(("_s", "cpu_per_byte", "reduce_per_byte"))}


def read_scenario_toml(path: str | Path) -> dict:
    """The raw table of a scenario file; a missing, special, huge or malformed file is a one-line ConfigError."""
    p = Path(path)
    try:
        st = os.stat(p)
    except (FileNotFoundError, NotADirectoryError):
        raise ConfigError(f"scenario: file {str(p)!r} does not exist") from None
    except OSError as exc:
        raise ConfigError(f"scenario: cannot read {str(p)!r} ({exc.strerror or exc})") from None
    if not stat.S_ISREG(st.st_mode):
        raise ConfigError(f"scenario: {str(p)!r} is not a regular file")
    if st.st_size > MAX_SCENARIO_BYTES:
        raise ConfigError(f"scenario: {str(p)!r} is {st.st_size:,} bytes; a scenario file may be at most "
                          f"{MAX_SCENARIO_BYTES:,}")
    try:
        return tomllib.loads(p.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError, RecursionError) as exc:
        raise ConfigError(f"scenario: {str(p)!r} is not valid TOML ({exc})") from None
    except OSError as exc:
        raise ConfigError(f"scenario: cannot read {str(p)!r} ({exc.strerror or exc})") from None


def _table(raw: dict, name: str) -> dict:
    sec = raw.pop(name, {})
    if not isinstance(sec, dict):
        raise ConfigError(f"scenario: [{name}] must be a table")
    return sec


def flat_from_toml(raw: dict, base_dir: Path | None = None) -> tuple[dict, set[str]]:
    """(flat keys, keys whose numbers are in seconds) of a scenario table (``[sweep]`` must be removed first).

    Relative ``trace`` and cluster files are made relative to ``base_dir`` (the file's folder).
    """
    raw = dict(raw)
    flat: dict = {}
    seconds: set[str] = set()

    def put(name: str, value, where: str) -> None:
        if name in flat:
            raise ConfigError(f"scenario: {name!r} is given twice ({where} and another spelling)")
        flat[name] = value
        if where in _IN_SECONDS:
            seconds.add(name)

    for section in _SECTIONS:
        if section in KEY and section in raw and not isinstance(raw[section], dict):
            continue  # ``stack = "nccl"``: the flat key, not the [stack] table
        for key, value in _table(raw, section).items():
            spelled = f"{section}.{key}"
            if spelled not in _SPELLING:
                valid = sorted(k.split(".", 1)[1] for k in _SPELLING if k.startswith(section + "."))
                raise ConfigError(f"scenario: unknown key {section}.{key!r}; valid keys: {', '.join(valid)}")
            put(_SPELLING[spelled], value, spelled)
    if "baseline" in raw:
        put("baseline", raw.pop("baseline"), "baseline")
    for key, value in _table(raw, "options").items():
        if not isinstance(key, str) or key.replace("-", "_") in KEY:
            raise ConfigError(f"scenario: [options] {key!r} is a scenario key, not a strategy option; "
                              "give it at the top level")
        put(key.replace("-", "_"), value, "options")
    for key, value in raw.items():
        put(str(key).replace("-", "_"), value, key)
    if base_dir is not None:
        links = flat.get("links")
        if isinstance(links, str) and links and not Path(links).is_absolute():
            flat["links"] = str(base_dir / links)
        for key in ("trace", "model_config"):
            path = flat.get(key)
            if isinstance(path, str) and path and not Path(path).is_absolute():
                flat[key] = str(base_dir / path)
        cluster = flat.get("cluster")
        if isinstance(cluster, str) and cluster.endswith((".toml", ".graphml")) and not Path(cluster).is_absolute():
            flat["cluster"] = str(base_dir / cluster)
    return flat, seconds


def flat_from_file(path: str | Path) -> tuple[dict, set[str]]:
    """A scenario file as flat keys (and the keys written in seconds); a ``[sweep]`` table is refused here."""
    p = Path(path)
    raw = read_scenario_toml(p)
    if "sweep" in raw:
        raise ConfigError(f"scenario: {str(p)!r} has a [sweep] table; run it with simcomm whatif")
    return flat_from_toml(raw, p.parent)


def strategy_options() -> dict[str, tuple[str, ...]]:
    """Option name -> the strategies that have it, over every registered strategy."""
    from simcomm.strategies.base import STRATEGIES, option_names

    out: dict[str, list[str]] = {}
    for name in STRATEGIES.names():
        for opt in option_names(STRATEGIES.get(name)):
            out.setdefault(opt, []).append(name)
    return {k: tuple(v) for k, v in out.items()}


def known_keys() -> dict[str, str]:
    """Every flat key with its help: the vocabulary plus every strategy option."""
    out = {k.name: k.help for k in KEYS}
    for opt, owners in sorted(strategy_options().items()):
        out.setdefault(opt, f"strategy option of {', '.join(owners)}")
    return out


def from_flat(flat: dict, *, seconds: AbstractSet[str] = frozenset(), foreign_options: str = "error") -> Scenario:
    """The Scenario of flat keys (values as TOML or as strings), every value checked once.

    ``foreign_options``: what to do with an option another strategy has but this
    one does not: ``"error"`` (``run``) or ``"drop"`` (a what-if sweep over
    strategies, where ``k_prime`` belongs to node-based only).
    """
    values: dict = {}
    options: dict = {}
    owners = None
    for raw_key, value in flat.items():
        if not isinstance(raw_key, str):
            raise ConfigError(f"scenario: key {raw_key!r} must be a name")
        key = raw_key.replace("-", "_")
        if key in KEY:
            values[key] = coerce(key, value, spelled_in_seconds=key in seconds)
            continue
        owners = owners if owners is not None else strategy_options()
        if key not in owners:
            valid = ", ".join(sorted(known_keys()))
            raise ConfigError(f"unknown key {raw_key!r}; valid keys: {valid}")
        if value is not None:
            options[key] = value
    strategy = values.get("strategy") or "allreduce"
    if options:
        from simcomm.strategies.base import STRATEGIES, option_names

        cls = STRATEGIES.get(strategy)
        if foreign_options == "drop":
            own = set(option_names(cls))
            options = {k: v for k, v in options.items() if k in own}
        options = _typed_options(cls, options)
    sections: dict[str, dict] = {s: {} for s in _SECTIONS}
    top: dict = {}
    for key, value in values.items():
        if value is None:
            continue
        k = KEY[key]
        (sections[k.section] if k.section else top)[k.attr] = value
    if file_cluster(top.get("cluster", "")):
        machines = file_nodes(top["cluster"])
        serving = _server_machines(strategy, options)  # ps: machines of the file that serve, not train
        declared = machines - len(serving)
        if "nodes" in top and top["nodes"] != declared:
            hint = "omit nodes, or use a preset to vary it"
            if not serving and top["nodes"] < machines and "server_machines" in option_names_of(strategy):
                hint = (f"to make {machines - top['nodes']} of them parameter servers, name them: "
                        "--opt server_machines=N[,M] (placement own)")
            raise ConfigError(f"nodes: cluster file {top['cluster']!r} declares {machines} machine(s)"
                              + (f", {len(serving)} of them serving" if serving else "")
                              + f"; nodes = {top['nodes']} cannot change it ({hint})")
        top["nodes"] = declared
    nodes = top.get("nodes", 4)
    gpn = top.get("gpus_per_node")
    if gpn is not None and nodes * gpn > MAX_NODES:
        raise ConfigError(f"nodes x gpus_per_node: {nodes} x {gpn} = {nodes * gpn:,} ranks is more than simcomm "
                          f"simulates ({MAX_NODES:,})")
    wl = sections["workload"]
    if "straggler_node" in wl and wl["straggler_node"] >= nodes:
        raise ConfigError(f"straggler_node: {wl['straggler_node']} is out of range for {nodes} nodes "
                          f"(0..{nodes - 1})")
    # a seed preset runs its paper's setting where the user gave none (simcomm.scenario.seed_settings)
    assumed = apply_seed_setting(strategy, top, wl, sections["model"], options)
    return Scenario(strategy=strategy, workload=WorkloadSpec(**wl), stack=StackSpec(**sections["stack"]),
                    network=NetworkSpec(**sections["network"]), shape=ShapeSpec(**sections["model"]),
                    memory=MemorySpec(**sections["memory"]), nvlink=NvlinkSpec(**sections["nvlink"]), options=options,
                    assumed=assumed,
                    **{k: v for k, v in top.items() if k != "strategy"})


def option_names_of(strategy: str) -> tuple[str, ...]:
    """The option names of ``strategy`` (none for an unknown name: that error comes elsewhere)."""
    from simcomm.strategies.base import STRATEGIES, option_names

    try:
        return tuple(option_names(STRATEGIES.get(strategy)))
    except ConfigError:
        return ()


def _server_machines(strategy: str, options: dict) -> tuple[int, ...]:
    """The machines a parameter server's ``server_machines`` names (checked with its other options)."""
    if not options.get("server_machines"):
        return ()
    from simcomm.strategies.base import STRATEGIES, make_params

    return make_params(STRATEGIES.get(strategy), options).machines


def _typed_options(cls, options: dict) -> dict:
    """Options converted to the strategy's own field types (``"5"`` from a flag and ``5`` from TOML agree)."""
    from simcomm.strategies.base import make_params

    params = make_params(cls, options)  # an option the strategy lacks: one line listing its options
    return {k: getattr(params, k) for k in options}


def file_cluster(cluster: str) -> bool:
    """True when ``cluster`` names a topology file rather than a preset."""
    if not isinstance(cluster, str) or not cluster:
        return False
    if cluster.endswith((".toml", ".graphml")):
        return True
    try:
        return Path(cluster).is_file()
    except (OSError, ValueError):  # a name too long for a path, or with a NUL: not a file, so a preset name
        return False


def file_nodes(cluster: str) -> int:
    """Machines a topology file declares (its size is the file's, never a flag's)."""
    from simcomm.topologies.custom import load_topology_file

    topo = load_topology_file(cluster)
    machines = {topo.machine_of(r) for r in range(topo.n_ranks)}
    return max(1, len(machines - {None}) + sum(1 for r in range(topo.n_ranks) if topo.machine_of(r) is None))


def load_scenario(path: str | Path) -> Scenario:
    """Read a scenario TOML file; unknown keys are errors naming the valid ones."""
    flat, seconds = flat_from_file(path)
    return from_flat(flat, seconds=seconds)


def to_flat(scn: Scenario) -> dict:
    """The flat keys of ``scn`` that differ from the defaults (round-trips through :func:`from_flat`)."""
    default = Scenario()
    out: dict = {}
    for k in KEYS:
        attr = _ATTR.get(k.section, k.section)
        obj, ref = (scn, default) if not k.section else (getattr(scn, attr), getattr(default, attr))
        value = getattr(obj, k.attr)
        # a seed preset fills in the loading when none is given: say a 0 s one explicitly
        seeded = k.name == "dataload" and scn.cluster in SETTINGS
        if k.name == "strategy" or value != getattr(ref, k.attr) or seeded:
            if value is None:
                continue
            if k.kind == "time":
                value = f"{value!r}s"  # repr round-trips the float exactly
            elif k.kind == "size":
                value = f"{value!r}B"
            elif k.kind == "baseline":
                value = "none" if value.none else value.strategy + (
                    ":" + ",".join(f"{a}={b}" for a, b in value.options) if value.options else "")
            elif k.kind in ("floats", "ints"):
                value = list(value)
            out[k.name] = value
    out.update(scn.options)
    return out


def node_scales(wl: WorkloadSpec | dict, nodes: int) -> tuple[float, ...]:
    """Per-node compute scale factors from the straggler/jitter knobs (() when all are nominal).

    ``straggler_scale`` multiplies node ``straggler_node``'s compute; ``jitter``
    draws every node's factor from ``jitter_dist`` (``normal``: 1 + j z,
    ``uniform``: 1 + j U(-1, 1), ``lognormal``: exp(j z)) with a numpy
    Generator seeded from ``(jitter_seed, nodes)``, so a point is reproducible.
    ``wl`` may also be flat keys (a what-if point).
    """
    if isinstance(wl, dict):
        wl = from_flat({k: v for k, v in wl.items() if k in KEY and KEY[k].section == "workload"}).workload
    if not wl.heterogeneous:
        return ()
    if not 0 <= wl.straggler_node < nodes:
        raise ConfigError(f"straggler_node: {wl.straggler_node} is out of range for {nodes} nodes (0..{nodes - 1})")
    scale = np.ones(nodes)
    j = wl.jitter
    if j > 0:
        rng = np.random.default_rng([int(wl.jitter_seed), nodes])
        if wl.jitter_dist == "lognormal":
            scale = np.exp(j * rng.standard_normal(nodes))
        elif wl.jitter_dist == "uniform":
            scale = 1.0 + j * rng.uniform(-1.0, 1.0, nodes)
        else:
            scale = 1.0 + j * rng.standard_normal(nodes)
        scale = np.maximum(scale, 0.05)  # a node never computes infinitely fast
    scale[wl.straggler_node] *= wl.straggler_scale
    return tuple(float(x) for x in scale)

