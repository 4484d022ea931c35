"""``trace import`` of hostile profiles: exit 0 with a valid trace, or exit 2 with one ``error:`` line.

The named tests are the reproducers of a fuzz campaign against the importer (each crashed with a
traceback, ran until memory ran out, or imported nonsense before the fix); the hypothesis test
mutates a small valid profile (types, values, structure) and checks the contract on every result:
never a traceback, never a partial or leftover output file.
"""

from __future__ import annotations

import copy
import gzip
import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simcomm.cli.app import main
from simcomm.traces import kineto
from simcomm.traces.io import load_trace


def _profile() -> dict:
    """Four steps of a Net_0 holding one Linear(8, 16) (weight 16x8 + bias 16 = 144 parameters) and a ReLU."""
    ev = []
    for k in range(4):
        t = 10_000 * k
        ev += [
            {"ph": "X", "name": f"ProfilerStep#{k}", "cat": "user_annotation", "ts": t, "dur": 500 + 50 * k,
             "tid": 1, "pid": 1},
            {"ph": "X", "name": "nn.Module: Net_0", "cat": "python_function", "ts": t + 1, "dur": 300, "tid": 1,
             "pid": 1, "args": {"Python id": 1, "Python parent id": 0}},
            {"ph": "X", "name": "nn.Module: Linear_0", "cat": "python_function", "ts": t + 2, "dur": 100, "tid": 1,
             "pid": 1, "args": {"Python id": 2, "Python parent id": 1}},
            {"ph": "X", "name": "aten::linear", "cat": "cpu_op", "ts": t + 3, "dur": 90, "tid": 1, "pid": 1,
             "args": {"Sequence number": k, "Input Dims": [[4, 8], [16, 8], [16]],
                      "Input type": ["float", "float", "float"]}},
            {"ph": "X", "name": "nn.Module: ReLU_0", "cat": "python_function", "ts": t + 110, "dur": 20, "tid": 1,
             "pid": 1, "args": {"Python id": 3, "Python parent id": 1}},
            {"ph": "X", "name": "aten::relu", "cat": "cpu_op", "ts": t + 112, "dur": 15, "tid": 1, "pid": 1,
             "args": {"Sequence number": 100 + k, "Input Dims": [[4, 16]], "Input type": ["float"]}},
            {"ph": "X", "name": "autograd::engine::evaluate_function: AddmmBackward0", "cat": "cpu_op",
             "ts": t + 400, "dur": 20, "tid": 2, "pid": 1, "args": {"Sequence number": k}},
        ]
    return {"traceEvents": ev}


def _run(capsys, tmp_path, profile, raw: bytes | None = None, extra=()):
    """Import ``profile`` (or ``raw`` bytes) through the CLI; return (status, stderr, output path)."""
    src = tmp_path / "prof.json"
    src.write_bytes(raw if raw is not None else json.dumps(profile).encode())
    out = tmp_path / "out" / "t.json"
    out.parent.mkdir(exist_ok=True)
    out.unlink(missing_ok=True)
    rc = main(["trace", "import", str(src), "--out", str(out), *extra])
    return rc, capsys.readouterr().err, out


def _check_contract(rc, err, out):
    if rc == 0:
        t = load_trace(out)  # a valid, finite trace (the loader refuses anything else)
        assert t.layers and math.isfinite(t.iteration_s) and err == ""
    else:
        assert rc == 2, (rc, err)
        assert err.startswith("error: ") and err.count("\n") == 1, err
        assert not out.exists()
    assert [p.name for p in out.parent.iterdir() if p.name != "t.json"] == []  # no temp files left


def test_the_base_profile_imports_with_its_true_parameter_count(capsys, tmp_path):
    rc, err, out = _run(capsys, tmp_path, _profile())
    assert rc == 0, err
    t = load_trace(out)
    assert [(x.name, x.params, x.grad_bytes) for x in t.layers] == [("Net_0.Linear_0", 144, 576), ("Net_0.ReLU_0", 0, 0)]
    assert t.layers[0].forward_s == pytest.approx(90e-6) and t.iteration_s == pytest.approx(575e-6)


# --- reproducers of the fuzz campaign -----------------------------------------------------------------

def _mutate(index, path, value):
    prof = _profile()
    obj = prof["traceEvents"][index]  # 2: nn.Module: Linear_0 of step 0; 3: its aten::linear
    *head, last = path
    for key in head:
        obj = obj[key]
    obj[last] = value
    return prof


# What the code before this fix did with each: a traceback, or exit 0 with the event silently dropped
# (its layer or its time missing from the trace).
@pytest.mark.parametrize("index, path, value, needle", [
    (2, ("args",), [1], "traceEvents[2].args: expected an object"),  # was: dropped, exit 0
    (2, ("tid",), [1], "traceEvents[2].tid: expected an integer or a string"),  # was: TypeError unhashable 'list'
    (2, ("tid",), {"a": 1}, "traceEvents[2].tid: expected an integer or a string"),  # was: TypeError unhashable
    (2, ("dur",), math.inf, "traceEvents[2].dur: expected a finite number"),  # was: dropped, exit 0
    (2, ("dur",), True, "traceEvents[2].dur: expected a finite number"),  # was: dropped, exit 0
    (2, ("name",), 7, "traceEvents[2].name: expected a string"),  # was: dropped, exit 0
    (2, ("cat",), ["python_function"], "traceEvents[2].cat: expected a string"),  # was: dropped, exit 0
    (3, ("args", "Sequence number"), [3], "traceEvents[3].args.Sequence number: expected an integer"),
])
def test_malformed_event_fields_are_one_line_errors(capsys, tmp_path, index, path, value, needle):
    prof = _mutate(index, path, value)
    raw = json.dumps(prof).replace("Infinity", "1e999").encode()
    rc, err, out = _run(capsys, tmp_path, None, raw=raw)
    assert rc == 2 and needle in err, err
    _check_contract(rc, err, out)


def test_overflowing_end_time_is_refused(capsys, tmp_path):
    prof = _profile()
    prof["traceEvents"][2].update(ts=1e308, dur=1e308)
    rc, err, out = _run(capsys, tmp_path, prof)
    assert rc == 2 and "traceEvents[2]: ts + dur is not a finite number" in err, err


def test_malformed_input_dims_of_a_weight_are_named(capsys, tmp_path):
    prof = _profile()
    prof["traceEvents"][3]["args"]["Input Dims"] = [[4, 8], [16, "8"], [16]]
    rc, err, out = _run(capsys, tmp_path, prof)
    assert rc == 2 and "traceEvents[3].args.Input Dims[1]: expected a list of non-negative integers" in err, err


def test_deeply_nested_json_is_refused(capsys, tmp_path):
    # was: RecursionError traceback from the JSON decoder
    raw = b'{"traceEvents": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    rc, err, out = _run(capsys, tmp_path, None, raw=raw)
    assert rc == 2 and "nested too deeply" in err, err
    _check_contract(rc, err, out)


def test_a_module_that_is_its_own_parent_terminates(capsys, tmp_path):
    # a ~300-byte profile: Net_0's parent id is its own id and it encloses an identical copy of itself.
    # Following parent ids looped until memory ran out; nesting by time containment cannot loop, and
    # the code before this fix ended with the misleading "layers: a trace needs at least one layer".
    ev = [{"ph": "X", "name": "nn.Module: Net_0", "cat": "python_function", "ts": 0, "dur": 10, "tid": 1,
           "args": {"Python id": 1, "Python parent id": 1}} for _ in range(2)]
    rc, err, out = _run(capsys, tmp_path, {"traceEvents": ev})
    assert rc == 2 and "no leaf modules" in err, err
    _check_contract(rc, err, out)


def test_module_nesting_beyond_the_bound_is_refused(capsys, tmp_path):
    depth = kineto.MAX_MODULE_DEPTH + 1
    ev = [{"ph": "X", "name": f"nn.Module: M_{i}", "cat": "python_function", "ts": i, "dur": 2 * (depth - i),
           "tid": 1} for i in range(depth)]
    rc, err, out = _run(capsys, tmp_path, {"traceEvents": ev}, extra=["--allow-zero-params"])
    assert rc == 2 and f"nested more than {kineto.MAX_MODULE_DEPTH} deep" in err, err


def test_a_zero_length_step_is_refused(capsys, tmp_path):
    prof = _profile()
    prof["traceEvents"][7]["dur"] = 0  # ProfilerStep#1
    rc, err, out = _run(capsys, tmp_path, prof)
    assert rc == 2 and "ProfilerStep#1 (traceEvents[7]) lasts 0 us" in err, err
    _check_contract(rc, err, out)


def test_non_event_entries_and_wrong_top_level(capsys, tmp_path):
    for prof, needle in (({"traceEvents": [1]}, "traceEvents[0]: expected an event object"),
                         ({"traceEvents": {}}, "traceEvents: expected a list"), ("x", "traceEvents: expected a list")):
        rc, err, out = _run(capsys, tmp_path, prof)
        assert rc == 2 and needle in err, err


def test_a_gzip_bomb_is_refused_by_the_decompressed_size(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(kineto, "PROFILE_MAX_BYTES", 1 << 20)
    raw = gzip.compress(json.dumps(_profile()).encode() + b" " * (2 << 20))  # 2 MiB of padding, ~2 KB compressed
    rc, err, out = _run(capsys, tmp_path, None, raw=raw)
    assert rc == 2 and "decompresses to more than 1 MiB" in err, err


def test_truncated_gzip_is_refused(capsys, tmp_path):
    raw = gzip.compress(json.dumps(_profile()).encode())
    rc, err, out = _run(capsys, tmp_path, None, raw=raw[: len(raw) // 2])
    assert rc == 2 and "truncated gzip" in err, err


def test_gzip_profile_imports_like_plain(capsys, tmp_path):
    rc, err, out = _run(capsys, tmp_path, None, raw=gzip.compress(json.dumps(_profile()).encode()))
    assert rc == 0, err
    assert load_trace(out).params == 144


# --- fuzzing --------------------------------------------------------------------------------------------

_scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70),
                     st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12),
                     st.sampled_from(["nn.Module: Linear_0", "nn.Module: Net_0", "ProfilerStep#9", "cpu_op",
                                      "python_function", "aten::linear", "kernel", "cuda_runtime", "X", "B"]))
_values = st.recursive(_scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                        st.dictionaries(st.text(max_size=6), inner, max_size=3)),
                       max_leaves=6)
_keys = st.sampled_from(["ph", "name", "cat", "ts", "dur", "tid", "pid", "args"])
_arg_keys = st.sampled_from(["Sequence number", "correlation", "Input Dims", "Input type", "Python id"])

_mutation = st.one_of(
    st.tuples(st.just("set"), st.integers(0, 27), _keys, _values),
    st.tuples(st.just("arg"), st.integers(0, 27), _arg_keys, _values),
    st.tuples(st.just("del"), st.integers(0, 27), _keys, st.none()),
    st.tuples(st.just("dup"), st.integers(0, 27), st.none(), st.none()),
    st.tuples(st.just("drop"), st.integers(0, 27), st.none(), st.none()),
    st.tuples(st.just("shift"), st.integers(0, 27), st.sampled_from(["ts", "dur"]),
              st.floats(-1e6, 1e6, allow_nan=False)),
    st.tuples(st.just("top"), st.integers(0, 3), st.none(), _values),
)


def _apply(prof: dict, mutations) -> object:
    top = prof
    for kind, i, key, value in mutations:
        ev = prof["traceEvents"]
        if not ev:
            break
        e = ev[i % len(ev)]
        if kind == "set" and isinstance(e, dict):
            e[key] = value
        elif kind == "arg" and isinstance(e, dict) and isinstance(e.get("args"), dict):
            e["args"][key] = value
        elif kind == "del" and isinstance(e, dict):
            e.pop(key, None)
        elif kind == "dup":
            ev.insert(i % len(ev), copy.deepcopy(e))
        elif kind == "drop":
            ev.pop(i % len(ev))
        elif kind == "shift" and isinstance(e, dict) and isinstance(e.get(key), (int, float)) \
                and not isinstance(e.get(key), bool):
            e[key] = e[key] + value
        elif kind == "top":
            top = [prof["traceEvents"], {"traceEvents": value}, {"traceEvents": prof["traceEvents"],
                                                                 "deviceProperties": value}, value][i]
    return top


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(mutations=st.lists(_mutation, min_size=1, max_size=4), allow=st.booleans())
def test_fuzzed_profiles_exit_0_with_a_valid_trace_or_2_with_one_line(capsys, tmp_path, mutations, allow):
    prof = _apply(_profile(), mutations)
    raw = json.dumps(prof, allow_nan=True).encode()  # NaN and Infinity tokens, as Python writes them
    rc, err, out = _run(capsys, tmp_path, None, raw=raw, extra=["--allow-zero-params"] if allow else [])
    _check_contract(rc, err, out)


def test_module_event_without_a_name_is_one_line(capsys, tmp_path):
    profile = _profile()
    for e in profile["traceEvents"]:
        if e["name"] == "nn.Module: Linear_0":
            e["name"] = "nn.Module: "
    rc, err, out = _run(capsys, tmp_path, profile)
    assert rc == 2 and len(err.splitlines()) == 1
    assert err.startswith("error: ") and "'nn.Module:' event with no module name" in err, err
    assert not out.exists()
