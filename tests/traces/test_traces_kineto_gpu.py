"""kineto import of CUDA profiles: layers are charged the GPU time of the work they launched.

The real profile is a torch.profiler recording of ResNet-50 training steps (batch 64, fp32) on an
NVIDIA H100, 2026-11-26 (benchmarks/gpu/profile_cuda.py; benchmarks/gpu/h100-2026-11-26-kineto/).
"""

import json
from pathlib import Path

import pytest

from simcomm.errors import TraceFormatError
from simcomm.traces.kineto import import_profile

RUN = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu" / "h100-2026-11-26-kineto"


def test_a_real_h100_profile_gives_the_gpu_step():
    t = import_profile(str(RUN / "resnet50-b64-cuda-profile.json.gz"), model="resnet50", batch=64)
    unhooked = json.loads((RUN / "profile_results.json").read_text())["resnet50"]["unhooked_step_s"]
    assert t.device == "NVIDIA H100 80GB HBM3" and t.device_kind == "gpu" and len(t.layers) == 158
    # the GPU span of each profiled step against a plain step timed with CUDA events, same run: 37.78 vs 37.95 ms
    assert t.iteration_s == pytest.approx(unhooked, rel=0.03)
    # layers hold the GPU time of their kernels; residual adds, the loss and the optimizer are the rest
    assert 0.85 * t.iteration_s < t.layer_sum_s < t.iteration_s
    conv = [x for x in t.layers if x.module_type == "Conv2d"]
    assert len(conv) == 53 and all(x.forward_s > 0 and x.backward_s > 0 for x in conv)
    # a convolution's backward computes input and weight gradients, about twice its forward; the stem's
    # input needs no gradient, so only it is below its forward
    assert [x.name for x in conv if x.backward_s < x.forward_s] == ["conv1"]
    assert 1.5 < sum(x.backward_s for x in conv) / sum(x.forward_s for x in conv) < 3.0  # 2.58 measured


def _gpu_profile(with_bogus_parents: bool = False):
    ev = [{"ph": "X", "name": "ProfilerStep#1", "cat": "user_annotation", "ts": 0, "dur": 1000, "tid": 1},
          {"ph": "X", "name": "ProfilerStep#1", "cat": "gpu_user_annotation", "ts": 0, "dur": 5, "tid": 9},
          {"ph": "X", "name": "nn.Module: Net_0", "cat": "python_function", "ts": 10, "dur": 300, "tid": 1,
           "args": {"Python id": 1, "Python parent id": 1 if with_bogus_parents else 0}},
          {"ph": "X", "name": "nn.Module: Linear_0", "cat": "python_function", "ts": 20, "dur": 100, "tid": 1,
           "args": {"Python id": 2, "Python parent id": 2 if with_bogus_parents else 1}},
          {"ph": "X", "name": "aten::addmm", "cat": "cpu_op", "ts": 30, "dur": 50, "tid": 1,
           "args": {"Sequence number": 7}},
          # forward: two kernels launched inside Linear_0 (40 + 60 us of GPU time), one outside it
          {"ph": "X", "name": "cudaLaunchKernel", "cat": "cuda_runtime", "ts": 35, "dur": 5, "tid": 1,
           "args": {"correlation": 100}},
          {"ph": "X", "name": "cudaLaunchKernel", "cat": "cuda_runtime", "ts": 60, "dur": 5, "tid": 1,
           "args": {"correlation": 101}},
          {"ph": "X", "name": "cudaLaunchKernel", "cat": "cuda_runtime", "ts": 200, "dur": 5, "tid": 1,
           "args": {"correlation": 102}},
          {"ph": "X", "name": "gemm", "cat": "kernel", "ts": 400, "dur": 40, "tid": 9, "args": {"correlation": 100}},
          {"ph": "X", "name": "bias", "cat": "kernel", "ts": 440, "dur": 60, "tid": 9, "args": {"correlation": 101}},
          {"ph": "X", "name": "loss", "cat": "kernel", "ts": 500, "dur": 10, "tid": 9, "args": {"correlation": 102}},
          # backward on the autograd thread: 90 us of GPU time for the op with sequence number 7
          {"ph": "X", "name": "autograd::engine::evaluate_function: AddmmBackward0", "cat": "cpu_op", "ts": 400,
           "dur": 100, "tid": 2, "args": {"Sequence number": 7}},
          {"ph": "X", "name": "cudaLaunchKernel", "cat": "cuda_runtime", "ts": 410, "dur": 5, "tid": 2,
           "args": {"correlation": 103}},
          {"ph": "X", "name": "gemm_bwd", "cat": "kernel", "ts": 520, "dur": 90, "tid": 9,
           "args": {"correlation": 103}}]
    return {"deviceProperties": [{"name": "Test GPU"}], "traceEvents": ev}


@pytest.mark.parametrize("bogus", [False, True])
def test_gpu_time_by_hand(tmp_path, bogus):
    p = tmp_path / "prof.json"
    p.write_text(json.dumps(_gpu_profile(bogus)))
    t = import_profile(str(p), allow_zero_params=True)  # timing only: the profile records no shapes
    (layer,) = t.layers  # Net_0 holds Linear_0 (by time containment, whatever the parent ids say)
    assert layer.name == "Net_0.Linear_0" and layer.module_type == "Linear"
    assert layer.forward_s == pytest.approx(100e-6) and layer.backward_s == pytest.approx(90e-6)
    # the step's GPU work runs from 400 to 610 us
    assert t.iteration_s == pytest.approx(210e-6) and t.device == "Test GPU" and t.device_kind == "gpu"


@pytest.mark.parametrize("dur, needle", [(True, "expected a finite number"), ("1", "expected a finite number"),
                                         (None, "expected a finite number"), (float("inf"), "expected a finite number"),
                                         (-5, "must be >= 0")])
def test_non_finite_or_non_numeric_durations_are_refused(tmp_path, dur, needle):
    # refused, not skipped: dropping the range would silently move its time to other layers
    prof = {"traceEvents": [{"ph": "X", "name": "nn.Module: Linear_0", "cat": "python_function", "ts": 0,
                             "dur": dur, "tid": 1}]}
    p = tmp_path / "prof.json"
    p.write_text(json.dumps(prof).replace("Infinity", "1e999"))
    with pytest.raises(TraceFormatError, match=r"traceEvents\[0\]\.dur: " + needle):
        import_profile(str(p))
