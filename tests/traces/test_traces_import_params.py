"""``trace import`` of a user's own model (not in the zoo): true parameter counts, or a refusal.

Before, every layer got 0 parameters and ``simcomm run --trace`` then reported 0 B of traffic
without a word.  The profiles are recorded here with torch.profiler on CPU from
``factories_traces.user_net`` (1630 parameters, counted by hand in its docstring).
"""

from __future__ import annotations

import os

import pytest

torch = pytest.importorskip("torch")

from simcomm.cli.app import main  # noqa: E402
from simcomm.traces.io import load_trace  # noqa: E402

FACT = "tests.traces.factories_traces"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(autouse=True)
def _importable(monkeypatch):
    monkeypatch.syspath_prepend(ROOT)


@pytest.fixture(scope="module")
def profiles(tmp_path_factory):
    """Two CPU profiles of three training steps of user_net: with and without recorded shapes."""
    import sys

    sys.path.insert(0, ROOT)
    try:
        from tests.traces.factories_traces import user_net
    finally:
        sys.path.remove(ROOT)
    torch.manual_seed(0)
    model, x = user_net(), torch.randn(2, 3, 8, 8)
    out = {}
    for shapes in (True, False):
        path = tmp_path_factory.mktemp("prof") / f"user_net-{'shapes' if shapes else 'plain'}.json"
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], with_stack=True,
                                    record_shapes=shapes) as prof:
            for _ in range(3):
                model(x).square().mean().backward()
                prof.step()
        prof.export_chrome_trace(str(path))
        out[shapes] = path
    return out


def _import(capsys, tmp_path, profile, *extra):
    out = tmp_path / "t.json"
    rc = main(["trace", "import", str(profile), "--out", str(out), *extra])
    cap = capsys.readouterr()
    return rc, cap, out


def test_recorded_shapes_give_the_true_parameter_count(capsys, tmp_path, profiles):
    rc, cap, out = _import(capsys, tmp_path, profiles[True])
    assert rc == 0, cap.err
    t = load_trace(out)
    assert [(x.module_type, x.params) for x in t.layers] == [
        ("Conv2d", 112), ("BatchNorm2d", 8), ("ReLU", 0), ("Flatten", 0), ("Linear", 1450), ("Linear", 50),
        ("LayerNorm", 10)]
    assert t.params == 1630 and t.grad_bytes == 1630 * 4
    assert t.meta["params"].startswith("from the profile's recorded input shapes")


def test_without_shapes_the_import_is_refused(capsys, tmp_path, profiles):
    rc, cap, out = _import(capsys, tmp_path, profiles[False])
    assert rc == 2 and cap.err.count("\n") == 1 and not out.exists()
    assert cap.err.startswith("error: params: 5 of 7 layers have no parameter count (Sequential_0.Conv2d_0, "), cap.err
    assert "--module pkg.mod:factory" in cap.err and "--allow-zero-params" in cap.err


def test_module_factory_gives_names_and_counts(capsys, tmp_path, profiles):
    for shapes in (False, True):  # with shapes the two counts are cross-checked
        rc, cap, out = _import(capsys, tmp_path, profiles[shapes], "--module", f"{FACT}:user_net")
        assert rc == 0, cap.err
        t = load_trace(out)
        assert [x.name for x in t.layers] == ["0", "1", "2", "3", "4", "5", "6"]  # the model's attribute names
        assert t.params == 1630 and t.meta["params"] == f"counted with torch from {FACT}:user_net"


def test_module_of_another_model_is_refused(capsys, tmp_path, profiles):
    rc, cap, out = _import(capsys, tmp_path, profiles[False], "--module", f"{FACT}:tiny")
    assert rc == 2 and not out.exists()
    assert "module: the profile holds 1 BatchNorm2d leaf module(s)" in cap.err and cap.err.count("\n") == 1


def test_allow_zero_params_says_so_in_the_trace(capsys, tmp_path, profiles):
    rc, cap, out = _import(capsys, tmp_path, profiles[False], "--allow-zero-params")
    assert rc == 0, cap.err
    t = load_trace(out)
    assert t.params == 0 and t.meta["params"].startswith("UNKNOWN for 5 of 7 layers, set to 0")
