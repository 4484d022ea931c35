"""One typed engine-options object: checked once, one place for the resolution defaults."""

from __future__ import annotations

import pytest

from simcomm.engine import EngineOptions, simulate
from simcomm.engine.options import EXACT, SCENARIO_RESOLUTION
from simcomm.errors import ConfigError
from simcomm.links.base import LinkClass
from simcomm.ops import PlanBuilder
from simcomm.runtimes.mpi import MPICH
from simcomm.topologies.full_mesh import full_mesh


def test_defaults_come_from_one_place():
    from simcomm.scenario import DEFAULT_RESOLUTION, Scenario

    assert EngineOptions().resolution == EXACT == 0.0
    assert Scenario().resolution == DEFAULT_RESOLUTION == SCENARIO_RESOLUTION == 0.01


@pytest.mark.parametrize("kwargs, message", [
    ({"resolution": 1.0}, "resolution: 1.0 must be a number in [0, 1)"),
    ({"comm_cpu": float("nan")}, "comm_cpu: nan must be a non-negative number"),
    ({"ppn": 0}, "ppn: 0 must be a positive integer"),
    ({"reference": {"coalesce", "nope"}}, "reference: 'nope' is unknown; valid choices: one_pass, direct, callbacks"),
    ({"max_live": True}, "max_live: True must be a positive integer"),
    ({"bogus": 1}, "engine option 'bogus' is unknown; valid choices: reference, max_live, ppn"),
])
def test_bad_options_are_one_line(kwargs, message):
    with pytest.raises(ConfigError) as exc:
        EngineOptions.of(**kwargs)
    assert message in str(exc.value)


def test_keywords_and_the_options_object_run_the_same():
    b = PlanBuilder(2)
    b.transfer(0, 1, 1e6)
    plan = b.build()
    topo = full_mesh(2, LinkClass("l", 1e9, 1e-6, "infiniband"))
    a = simulate(plan, topo, resolution=0.01, reference={"coalesce"}, runtime=MPICH)
    c = simulate(plan, topo, options=EngineOptions(resolution=0.01, reference=frozenset({"coalesce"})), runtime=MPICH)
    # 1e-6 + 1e6 / 1e9 = 1.001 ms, whichever way the options arrive
    assert a.end.tolist() == c.end.tolist() == [pytest.approx(1.001e-3, rel=1e-12)]
