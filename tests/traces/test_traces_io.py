"""Trace files: round trip, one-line errors naming the field, and a fuzzed loader."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simcomm.errors import TraceFormatError
from simcomm.traces.io import dumps_trace, load_trace, loads_trace, save_trace, trace_to_dict
from simcomm.traces.schema import Layer, Trace


def _trace(**kw) -> Trace:
    layers = (Layer("conv", "Conv2d", 10, 40, 1e-3, 2e-3, 1e-4, (3, 8, 8), (4, 8, 8), 1e6, (1.0, 2.0),
                    ((8, 1e-3, 2e-3), (16, 2e-3, 4e-3)), {"forward_iqr_s": 1e-5}),
              Layer("relu", "ReLU", 0, 0, 5e-4, 5e-4))
    base = dict(model="m", batch=8, dtype="fp32", device="v100", device_kind="gpu", method="cpu-timer",
                layers=layers, iteration_s=5e-3, warmup=1, iters=2, frameworks={"torch": "2.13"},
                backward_order=(1, 0), meta={"k": [1, 2]})
    base.update(kw)
    return Trace(**base)


def test_round_trip_is_exact(tmp_path):
    t = _trace()
    path = save_trace(t, tmp_path / "t.json")
    back = load_trace(path)
    assert back == t
    assert back.layers[0].spread == {"forward_iqr_s": 1e-5}
    assert back.ready_order() == (1, 0)
    assert dumps_trace(back) == path.read_text()  # canonical: byte-identical on re-save


def _mutated(tmp_path, mutate) -> str:
    d = trace_to_dict(_trace())
    mutate(d)
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(d))
    with pytest.raises(TraceFormatError) as err:
        load_trace(p)
    msg = str(err.value)
    assert "\n" not in msg
    return msg


@pytest.mark.parametrize("mutate, needle", [
    (lambda d: d.update(version=2), "version: unsupported trace version 2"),
    (lambda d: d.pop("version"), "version"),
    (lambda d: d.update(format="other"), "format"),
    (lambda d: d["layers"][0].update(forward_s=-1.0), "layers[0].forward_s: must be a non-negative"),
    (lambda d: d["layers"][1].update(params="3"), "layers[1].params: expected an integer"),
    (lambda d: d["layers"][1].update(params=True), "layers[1].params: expected an integer"),
    (lambda d: d["layers"][0].pop("name"), "layers[0].name: missing required field"),
    (lambda d: d["layers"][0].update(colour=1), "layers[0].colour: unknown field"),
    (lambda d: d.update(method="guess"), "method: 'guess' is not one of"),
    (lambda d: d.update(dtype="int8"), "dtype"),
    (lambda d: d.update(batch=0), "batch: must be >= 1"),
    (lambda d: d.update(iteration_s=-0.5), "iteration_s"),
    (lambda d: d.update(layers=[]), "layers: a trace needs at least one layer"),
    (lambda d: d.update(backward_order=[0, 0]), "backward_order: must be a permutation"),
    (lambda d: d["layers"][0].update(input_shape=[3, -1]), "layers[0].input_shape[1]"),
    (lambda d: d["layers"][0].update(by_batch=[[8, 1.0]]), "layers[0].by_batch[0]"),
])
def test_bad_files_name_the_field(tmp_path, mutate, needle):
    assert needle in _mutated(tmp_path, mutate)


def test_truncated_and_malformed(tmp_path):
    text = dumps_trace(_trace())
    p = tmp_path / "t.json"
    p.write_text(text[: len(text) // 2])
    with pytest.raises(TraceFormatError, match="truncated"):
        load_trace(p)
    p.write_text("{nope")
    with pytest.raises(TraceFormatError, match="malformed"):
        load_trace(p)
    p.write_text('{"format": "simcomm-trace", "version": 1, "iteration_s": NaN}')
    with pytest.raises(TraceFormatError):
        load_trace(p)
    with pytest.raises(TraceFormatError, match="does not exist"):
        load_trace(tmp_path / "missing.json")


def test_save_is_atomic_and_refuses_invalid(tmp_path):
    bad = _trace(batch=0)
    with pytest.raises(TraceFormatError):
        save_trace(bad, tmp_path / "x.json")
    assert list(tmp_path.iterdir()) == []  # no partial or temp file left


_json = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                     lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids, max_size=4),
                     max_leaves=20)


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=200))
def test_fuzz_text_only_trace_errors(text):
    try:
        loads_trace(text)
    except TraceFormatError as exc:
        assert "\n" not in str(exc)


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_fuzz_mutated_valid_file(data):
    """Replace one field of a valid trace (top level or a layer) with random JSON."""
    d = trace_to_dict(_trace())
    target = data.draw(st.sampled_from(["top", "layer"]))
    obj = d if target == "top" else d["layers"][data.draw(st.integers(0, 1))]
    key = data.draw(st.sampled_from(sorted(obj) + ["extra"]))
    obj[key] = data.draw(_json)
    try:
        t = loads_trace(json.dumps(d, allow_nan=True))
    except TraceFormatError as exc:
        assert "\n" not in str(exc)
    else:
        assert all(x.forward_s >= 0 and x.backward_s >= 0 for x in t.layers)


def test_a_field_name_from_the_file_is_escaped_onto_one_line():
    # a frameworks key holding a newline (found by the fuzz test above): the error names it escaped
    d = trace_to_dict(_trace())
    d["frameworks"] = {"\n": None}
    with pytest.raises(TraceFormatError) as exc:
        loads_trace(json.dumps(d))
    assert str(exc.value).endswith("frameworks.\\n: expected a non-empty string, got NoneType")
    assert "\n" not in str(exc.value)
