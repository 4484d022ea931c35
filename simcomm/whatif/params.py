"""The what-if parameter vocabulary: a flat dict of knobs -> Scenario + topology overrides.

A what-if point is a flat dict such as ``{"strategy": "sgp", "nodes": 16,
"inter": "ib-hdr"}``.  :data:`PARAMS` lists every key the point function
understands (with its help text); strategy options (``k_prime``,
``density``, ...) are accepted too and passed only to the strategies that
have them.  Everything is validated here, at the edge, so a bad key or value
fails the whole sweep with one line before any point runs.

``compute_jitter`` is the workload's per-iteration jitter (simcomm.jitter): every rank's
compute drawn afresh each iteration, unlike the static per-node draws below.

Straggler and heterogeneity knobs turn into per-node compute scale factors:
``straggler_scale`` multiplies node ``straggler_node``'s compute; ``jitter``
draws every node's factor from ``jitter_dist`` (``normal``: 1 + j·z,
``uniform``: 1 + j·U(-1, 1), ``lognormal``: exp(j·z)) with a numpy
Generator seeded from ``(jitter_seed, nodes)``, so a point is reproducible.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from simcomm.errors import ConfigError
from simcomm.scenario import FIDELITIES, Scenario, StackSpec, WorkloadSpec
from simcomm.units import parse_time

__all__ = [
    "JITTER_DISTS",
    "PARAMS",
    "TOPOLOGY_KEYS",
    "Overrides",
    "check_point",
    "known_params",
    "node_scales",
    "strategy_options",
    "to_scenario",
]

PARAMS: dict[str, str] = {
    "strategy": "strategy name (simcomm list strategies)",
    "cluster": "cluster preset name or cluster TOML file",
    "nodes": "number of nodes",
    "gpus_per_node": "GPUs (ranks) per node",
    "inter": "link class of the internode network (NIC link and fabric), e.g. ib-edr, ib-hdr, eth-25g",
    "intra": "link class inside a node, e.g. pcie3, nvswitch-a100",
    "nic": "link class attaching a GPU to its NIC, e.g. pcie3, pcie4",
    "nics_per_node": "NICs per node",
    "topology": "internode network kind: switch, fat-tree, dragonfly, torus, ring",
    "oversubscription": "fat-tree uplink oversubscription r (>= 1; implies topology fat-tree)",
    "model": "bundled trace or zoo model name",
    "trace": "trace file (JSON)",
    "batch": "per-rank batch (weak) or global batch (strong)",
    "dataset_size": "samples per epoch",
    "fidelity": "flow or analytic",
    "seed": "simulation seed",
    "scaling": "weak or strong",
    "bucket_mb": "DDP bucket size in MB (0 = one bucket)",
    "dataload": "data-loading time per iteration, e.g. 20ms",
    "dataload_overlap": "true: data loading overlaps the iteration",
    "stack": "transport stack (simcomm list stacks; default: the cluster preset's)",
    "stack_efficiency": "fraction of line rate the stack reaches",
    "stack_overhead": "per-message software overhead, e.g. 20us",
    "straggler_scale": "compute scale factor of the straggling node (1 = none)",
    "straggler_node": "index of the straggling node (default 0)",
    "jitter": "spread of per-node compute scale (0 = none)",
    "jitter_dist": "normal, uniform or lognormal",
    "jitter_seed": "seed of the per-node jitter draw",
    "compute_jitter": "per-iteration jitter: cv of each rank's compute, drawn afresh every iteration (0 = none)",
}
TOPOLOGY_KEYS = ("inter", "intra", "nic", "nics_per_node", "topology", "oversubscription")
JITTER_DISTS = ("normal", "uniform", "lognormal")
_INT = {"nodes", "gpus_per_node", "nics_per_node", "batch", "dataset_size", "seed", "straggler_node", "jitter_seed"}
_FLOAT = {"oversubscription", "bucket_mb", "stack_efficiency", "straggler_scale", "jitter", "compute_jitter"}


def strategy_options() -> dict[str, tuple[str, ...]]:
    """Option name -> the strategies that have it, over every registered strategy."""
    from simcomm.strategies.base import STRATEGIES, option_names

    out: dict[str, list[str]] = {}
    for name in STRATEGIES.names():
        for opt in option_names(STRATEGIES.get(name)):
            out.setdefault(opt, []).append(name)
    return {k: tuple(v) for k, v in out.items()}


def known_params() -> dict[str, str]:
    """Every key a point may carry: :data:`PARAMS` plus all strategy options."""
    out = dict(PARAMS)
    for opt, owners in sorted(strategy_options().items()):
        out.setdefault(opt, f"strategy option of {', '.join(owners)}")
    return out


def _typed(key: str, value):
    if value is None:
        return None
    if key in _INT:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{key}: {value!r} must be an integer")
        return value
    if key in _FLOAT:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{key}: {value!r} must be a number")
        return float(value)
    if key == "dataload_overlap":
        if isinstance(value, bool):
            return value
        if str(value).lower() in ("true", "false", "1", "0", "yes", "no"):
            return str(value).lower() in ("true", "1", "yes")
        raise ConfigError(f"dataload_overlap: {value!r} must be true or false")
    return value


def check_point(point: dict) -> dict:
    """Normalise and validate one point's keys and simple values; returns a typed copy."""
    known = known_params()
    out = {}
    for key, value in point.items():
        k = key.replace("-", "_")
        if k not in known:
            raise ConfigError(f"unknown parameter {key!r}; valid choices: {', '.join(sorted(known))}")
        out[k] = _typed(k, value)
    if out.get("fidelity") is not None and out["fidelity"] not in FIDELITIES:
        raise ConfigError(f"fidelity: {out['fidelity']!r} is not valid; valid choices: {', '.join(FIDELITIES)}")
    if out.get("jitter_dist") is not None and out["jitter_dist"] not in JITTER_DISTS:
        raise ConfigError(f"jitter_dist: {out['jitter_dist']!r} is not valid; valid choices: "
                          f"{', '.join(JITTER_DISTS)}")
    if out.get("jitter") is not None and out["jitter"] < 0:
        raise ConfigError(f"jitter: {out['jitter']!r} must be >= 0")
    if out.get("compute_jitter") is not None and not 0 <= out["compute_jitter"] < 1:
        raise ConfigError(f"compute_jitter: {out['compute_jitter']!r} must be a coefficient of variation in [0, 1)")
    if out.get("straggler_scale") is not None and not out["straggler_scale"] > 0:
        raise ConfigError(f"straggler_scale: {out['straggler_scale']!r} must be > 0")
    return out


def node_scales(point: dict, nodes: int) -> tuple[float, ...]:
    """Per-node compute scale factors from the straggler/jitter knobs (() when all are nominal)."""
    s = point.get("straggler_scale") or 1.0
    j = point.get("jitter") or 0.0
    if s == 1.0 and j == 0.0:
        return ()
    scale = np.ones(nodes)
    if j > 0:
        rng = np.random.default_rng([int(point.get("jitter_seed") or 0), nodes])
        dist = point.get("jitter_dist") or "normal"
        if dist == "lognormal":
            scale = np.exp(j * rng.standard_normal(nodes))
        elif dist == "uniform":
            scale = 1.0 + j * rng.uniform(-1.0, 1.0, nodes)
        else:
            scale = 1.0 + j * rng.standard_normal(nodes)
        scale = np.maximum(scale, 0.05)  # a node never computes infinitely fast
    node = point.get("straggler_node") or 0
    if not 0 <= node < nodes:
        raise ConfigError(f"straggler_node: {node} is out of range for {nodes} nodes (0..{nodes - 1})")
    scale[node] *= s
    return tuple(float(x) for x in scale)


@dataclass(frozen=True)
class Overrides:
    """Changes to the cluster preset's two-level parameters (None = keep the preset's)."""

    inter: str | None = None
    intra: str | None = None
    nic: str | None = None
    nics_per_node: int | None = None
    topology: str | None = None
    oversubscription: float | None = None

    def any(self) -> bool:
        return any(v is not None for v in (self.inter, self.intra, self.nic, self.nics_per_node, self.topology,
                                           self.oversubscription))


def to_scenario(point: dict) -> tuple[Scenario, Overrides]:
    """The Scenario and topology overrides of a checked point."""
    from simcomm.strategies.base import STRATEGIES, option_names

    p = point
    strategy = p.get("strategy") or "allreduce"
    own = set(option_names(STRATEGIES.get(strategy)))
    options = {k: v for k, v in p.items() if k not in PARAMS and k in own and v is not None}
    scn = Scenario(strategy=strategy).with_(
        nodes=p.get("nodes"), gpus_per_node=p.get("gpus_per_node"), cluster=p.get("cluster"),
        model=p.get("model"), trace=p.get("trace"), batch=p.get("batch"), dataset_size=p.get("dataset_size"),
        fidelity=p.get("fidelity"), seed=p.get("seed"))
    w = WorkloadSpec()
    dl = p.get("dataload")
    w = replace(w, scaling=p.get("scaling") or w.scaling,
                bucket_mb=w.bucket_mb if p.get("bucket_mb") is None else p["bucket_mb"],
                dataload_s=w.dataload_s if dl is None else parse_time(dl, "dataload"),
                dataload_overlap=bool(p.get("dataload_overlap") or False),
                compute_scale=node_scales(p, scn.nodes),
                compute_jitter=p.get("compute_jitter") or 0.0)
    ov = p.get("stack_overhead")
    stack = StackSpec(name=p.get("stack"), efficiency=p.get("stack_efficiency"),
                      overhead=None if ov is None else parse_time(ov, "stack_overhead"))
    scn = replace(scn, workload=w, stack=stack, options=options)
    over = Overrides(**{k: p.get(k) for k in TOPOLOGY_KEYS})
    return scn, over
