"""kineto import on a hand-built profile: layer and iteration times average the middle half of the steps."""

import json

import pytest

from simcomm.traces.kineto import import_profile


def _profile(step_us, fwd_us, bwd_us):
    events = []
    for k, (s, f, b) in enumerate(zip(step_us, fwd_us, bwd_us, strict=False)):
        t = 10_000 * k
        events.append({"ph": "X", "name": f"ProfilerStep#{k}", "cat": "user_annotation", "ts": t, "dur": s, "tid": 1})
        events.append({"ph": "X", "name": "nn.Module: Linear_0", "cat": "python_function", "ts": t + 1, "dur": f,
                       "tid": 1, "args": {"Python id": 100 + k}})
        events.append({"ph": "X", "name": "aten::addmm", "cat": "cpu_op", "ts": t + 1, "dur": f, "tid": 1,
                       "args": {"Sequence number": k}})
        events.append({"ph": "X", "name": "autograd::engine::evaluate_function: AddmmBackward0", "cat": "cpu_op",
                       "ts": t + 1 + f, "dur": b, "tid": 2, "args": {"Sequence number": k}})
    return {"traceEvents": events}


def test_one_preempted_step_does_not_move_the_times(tmp_path):
    p = tmp_path / "prof.json"
    # step 3 was preempted: 950 us, its forward 900 us and backward 90 us
    p.write_text(json.dumps(_profile([500, 600, 700, 950], [100, 200, 300, 900], [10, 20, 30, 90])))
    t = import_profile(str(p), allow_zero_params=True)  # timing only: no shapes recorded
    (layer,) = t.layers
    # the middle half by step duration is steps 1 and 2
    assert layer.forward_s == pytest.approx(250e-6)
    assert layer.backward_s == pytest.approx(25e-6)
    assert t.iteration_s == pytest.approx(650e-6) and layer.module_type == "Linear"


def test_without_steps_every_call_counts(tmp_path):
    prof = _profile([500, 600, 700, 950], [100, 200, 300, 900], [10, 20, 30, 90])
    prof["traceEvents"] = [e for e in prof["traceEvents"] if not e["name"].startswith("ProfilerStep")]
    p = tmp_path / "prof.json"
    p.write_text(json.dumps(prof))
    (layer,) = import_profile(str(p), allow_zero_params=True).layers
    assert layer.forward_s == pytest.approx(375e-6) and layer.backward_s == pytest.approx(37.5e-6)
