"""A run's inputs: one flat vocabulary (:mod:`.keys`), frozen specs (:mod:`.spec`), one resolver (:mod:`.resolve`).

TOML files, the scenario flags of ``run``/``compare``/``whatif`` and what-if
axes all speak the keys of :data:`simcomm.scenario.keys.KEYS`;
:func:`from_flat` turns any merge of them into a checked :class:`Scenario`
(docs/architecture.md, "One scenario vocabulary").
"""

from simcomm.scenario.keys import FIDELITIES, KEY, KEYS, SCALINGS, Key, coerce
from simcomm.scenario.resolve import (
    flat_from_file,
    flat_from_toml,
    from_flat,
    known_keys,
    load_scenario,
    node_scales,
    read_scenario_toml,
    strategy_options,
    to_flat,
)
from simcomm.scenario.spec import (
    COLLECTIVE_RULES,
    DEFAULT_RESOLUTION,
    NO_BASELINE,
    BaselineSpec,
    MemorySpec,
    NetworkSpec,
    Scenario,
    StackSpec,
    WorkloadSpec,
    parse_baseline,
)

__all__ = ["Scenario", "WorkloadSpec", "StackSpec", "NetworkSpec", "MemorySpec", "BaselineSpec", "NO_BASELINE", "parse_baseline",
           "load_scenario", "read_scenario_toml", "flat_from_file", "flat_from_toml", "from_flat", "to_flat",
           "node_scales", "strategy_options", "known_keys", "FIDELITIES", "SCALINGS", "COLLECTIVE_RULES",
           "DEFAULT_RESOLUTION", "KEYS", "KEY", "Key", "coerce"]
