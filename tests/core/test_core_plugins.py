"""Third-party plug-ins arrive through entry points and join the catalogue like built-ins."""

import sys
import types
from importlib.metadata import EntryPoint

import pytest

import simcomm.registry as registry_mod
from simcomm.registry import Registry


@pytest.fixture
def plugin_module(monkeypatch):
    mod = types.ModuleType("simcomm_test_plugin")

    class Fancy:
        """Fancy strategy: does fancy things.

        More text.
        """

        reference = "Doe et al., 2031"

    mod.Fancy = Fancy
    monkeypatch.setitem(sys.modules, "simcomm_test_plugin", mod)
    eps = [EntryPoint(name="fancy", value="simcomm_test_plugin:Fancy", group="simcomm.test")]
    monkeypatch.setattr(registry_mod, "entry_points", lambda group: eps if group == "simcomm.test" else [])
    return Fancy


def test_entry_point_is_registered_with_summary_and_reference(plugin_module):
    reg = Registry("strategy", "simcomm.test")
    reg.add("builtin", object(), summary="built in", reference="here")
    assert reg.names() == ("builtin", "fancy")
    entry = reg.entry("fancy")
    assert entry.obj is plugin_module
    assert entry.summary == "Fancy strategy: does fancy things."
    assert entry.reference == "Doe et al., 2031"


def test_plugin_that_registers_itself_is_not_added_twice(monkeypatch):
    reg = Registry("widget", "simcomm.selfreg")
    mod = types.ModuleType("simcomm_selfreg")

    def _load():
        reg.add("self-made", 42, summary="registered on import", reference="plug-in docs")
        return 42

    ep = types.SimpleNamespace(name="other-name", value="simcomm_selfreg:x", load=_load)
    monkeypatch.setitem(sys.modules, "simcomm_selfreg", mod)
    monkeypatch.setattr(registry_mod, "entry_points", lambda group: [ep])
    assert reg.names() == ("self-made",)


def test_builtin_strategy_registry_uses_the_entry_point_group():
    from simcomm.strategies import STRATEGIES

    assert STRATEGIES.group == "simcomm.strategies"


def test_entry_points_read_once_are_importlibs_group_by_group():
    """The registries' plug-ins come from one read of the installed metadata: each group as importlib gives it."""
    import importlib.metadata as md

    groups = {ep.group for dist in md.distributions() for ep in dist.entry_points}
    for group in sorted(groups) + ["simcomm.strategies", "simcomm.no-such-group"]:
        assert list(registry_mod.entry_points(group)) == list(md.entry_points(group=group))
