"""What-if points speak the one scenario vocabulary (:mod:`simcomm.scenario.keys`).

A what-if point is a flat dict such as ``{"strategy": "sgp", "nodes": 16,
"inter": "ib-hdr"}``: the same keys as a scenario file and the scenario
flags of ``simcomm run``.  :data:`PARAMS` is that vocabulary with its help
text; strategy options (``k_prime``, ``density``, ...) are accepted too and
passed only to the strategies that have them.  Everything is validated at the
edge by the scenario resolver, so a bad key or value fails the whole sweep
with one line before any point runs.

``compute_jitter`` is the workload's per-iteration jitter (simcomm.jitter).
The straggler and static-jitter knobs (``straggler_scale``, ``jitter`` ...)
become per-node compute scale factors (:func:`simcomm.scenario.node_scales`).
"""

from __future__ import annotations

from simcomm.errors import ConfigError
from simcomm.scenario import KEY, KEYS, Scenario, coerce, from_flat, known_keys, node_scales, strategy_options
from simcomm.scenario.keys import JITTER_DISTS

__all__ = ["JITTER_DISTS", "PARAMS", "TOPOLOGY_KEYS", "check_point", "known_params", "node_scales",
           "strategy_options", "to_scenario"]

#: every scenario key with its help text (strategy options come on top: :func:`known_params`)
PARAMS: dict[str, str] = {k.name: k.help for k in KEYS}
TOPOLOGY_KEYS = tuple(k.name for k in KEYS if k.section == "network")


def known_params() -> dict[str, str]:
    """Every key a point may carry: the scenario vocabulary plus all strategy options."""
    return known_keys()


def check_point(point: dict) -> dict:
    """Validate one point's keys and values (as the resolver will read them); returns a normalised copy.

    Values keep their spelling (``"20ms"`` stays a string), so stored inputs
    read back exactly; each is checked by :func:`simcomm.scenario.coerce`.
    """
    known = known_params()
    out = {}
    for key, value in point.items():
        k = str(key).replace("-", "_")
        if k not in known:
            raise ConfigError(f"unknown parameter {key!r}; valid choices: {', '.join(sorted(known))}")
        if k in KEY:
            coerce(k, value)
        out[k] = value
    return out


def to_scenario(point: dict) -> Scenario:
    """The Scenario of a checked point (options of other strategies in the sweep are dropped)."""
    return from_flat(point, foreign_options="drop")
