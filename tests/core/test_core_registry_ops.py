"""Registry and op-vocabulary contracts."""

import pytest

from simcomm.errors import PlanError, UnknownNameError
from simcomm.ops import CommPlan, Compute, PlanBuilder, Transfer
from simcomm.registry import Registry


def test_registry_register_get_and_list():
    reg = Registry("widget")
    reg.add("a", 1, summary="first", reference="ref A")

    @reg.register("b", summary="second", reference="ref B")
    class B:
        pass

    assert reg.get("a") == 1 and reg.get("b") is B
    assert reg.names() == ("a", "b")
    assert [e.summary for e in reg.entries()] == ["first", "second"]
    assert "a" in reg and "zz" not in reg and len(reg) == 2


def test_registry_duplicate_and_missing_metadata_are_errors():
    reg = Registry("widget")
    reg.add("a", 1, summary="s", reference="r")
    with pytest.raises(ValueError, match="twice"):
        reg.add("a", 2, summary="s", reference="r")
    with pytest.raises(ValueError, match="summary"):
        reg.add("c", 3, summary="", reference="r")


def test_unknown_name_lists_choices_sorted():
    reg = Registry("widget")
    for n in ("zeta", "alpha"):
        reg.add(n, n, summary="s", reference="r")
    with pytest.raises(UnknownNameError) as info:
        reg.get("beta")
    assert str(info.value) == "unknown widget 'beta' (did you mean 'zeta'?); valid choices: alpha, zeta"


def test_builder_chains_streams_in_program_order():
    b = PlanBuilder(2)
    f0 = b.compute(0, 1.0, label="fwd")
    c = b.collective("allreduce", [0, 1], 100.0)
    g0 = b.compute(0, 2.0, label="bwd")
    t = b.transfer(1, 0, 10.0, after=[g0])
    plan = b.build(strategy="test")
    assert plan.ops[c].deps == ()  # comm stream is independent of compute
    assert plan.ops[g0].deps == (f0,)  # same (rank, compute) stream
    assert plan.ops[t].deps == (c, g0)  # rank 1's comm stream tail + explicit dep
    assert plan.meta == {"strategy": "test"}


@pytest.mark.parametrize(("ops", "match"), [
    ((Compute(0, 0, 1.0, deps=(0,)),), "not an earlier op"),
    ((Compute(1, 0, 1.0),), "ids must equal positions"),
    ((Compute(0, 5, 1.0),), "outside"),
    ((Compute(0, 0, -1.0),), "negative"),
    ((Transfer(0, 0, 0, 1.0),), "itself"),
    ((Transfer(0, 0, 1, float("nan")),), "byte count"),
])
def test_validate_rejects_broken_plans(ops, match):
    with pytest.raises(PlanError, match=match):
        CommPlan(2, ops).validate()


def test_collective_group_checks():
    b = PlanBuilder(3)
    with pytest.raises(PlanError, match="distinct"):
        b.collective("allreduce", [0, 0], 1.0)
        b.build()
    b = PlanBuilder(3)
    b.collective("broadcast", [0, 1], 1.0, root=2)
    with pytest.raises(PlanError, match="root"):
        b.build()
