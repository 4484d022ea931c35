"""The GPU memory estimate: hand-computed tiny models, published memory facts, and one-line errors."""

from __future__ import annotations

from dataclasses import replace

import pytest

from simcomm.errors import ConfigError, UnknownNameError
from simcomm.memory.replicated import CONTEXT_BYTES, MemoryEstimate, check_fits, estimate
from simcomm.traces import get_device, load_bundled
from simcomm.traces.calibration import load_memory_statements
from simcomm.traces.zoo.spec import ModelSpec, SpecOps

GIB = 2**30


def _spec(arch, shape) -> ModelSpec:
    ops = SpecOps()
    arch(ops, shape)
    return ModelSpec("tiny", shape, tuple(ops.layers))


def _mlp(ops, x):
    x = ops.linear("fc1", x, 5)  # 55 parameters
    x = ops.act("relu", x)  # in place: no tensor of its own
    return ops.linear("fc2", x, 2)  # 12 parameters


def test_mlp_fp32_sgd_by_hand():
    e = estimate(_spec(_mlp, (10,)), 4, optimizer="sgd", context_bytes=0)
    # 67 parameters x 4 B each for weights, gradients and the momentum buffer
    assert (e.parameters, e.gradients, e.optimizer_state) == (268, 268, 268)
    # per sample: input 10x4 + fc1 out 5x4 + relu 0 + fc2 out 2x4 = 68; in-flight grads 2 x 5 x 4 = 40; x batch 4
    assert e.activations == 4 * (68 + 40) == 432
    assert e.total == 1236 and e.context == 0


def test_mlp_mixed_precision_adam_by_hand():
    e = estimate(_spec(_mlp, (10,)), 4, dtype="fp16", optimizer="adam", context_bytes=0)
    assert e.parameters == 67 * 2  # fp16 weights
    # the fp32 master copy and two fp32 moments are the optimizer state: 16 bytes/param in all (ZeRO's K = 12)
    assert e.gradients == 67 * 2 and e.optimizer_state == 67 * (4 + 8)
    assert e.activations == 4 * ((10 + 5 + 2) * 2 + 2 * 5 * 2) == 216
    assert e.total == 134 + 134 + 804 + 216


def test_residual_dropout_layernorm_by_hand():
    def block(ops, x):
        h = ops.dropout("drop", ops.linear("fc", x, 4), 0.1)
        return ops.layernorm("ln", ops.add(x, h))  # the residual sum is LayerNorm's input: kept, no layer made it

    e = estimate(_spec(block, (4,)), 1, optimizer="none", context_bytes=0)
    assert e.parameters == (20 + 8) * 4 and e.optimizer_state == 0
    # input 16 + fc 16 + dropout 16 and its 1-byte mask 4 + ln 16 + residual sum 16; in flight 2 x 4 x 4
    assert e.activations == 16 + 16 + 20 + 16 + 16 + 32


def test_attention_and_maxpool_internals_by_hand():
    e = estimate(_spec(lambda ops, x: ops.attn_core("attn", x, heads=1, dropout=0.1), (3, 6)), 1,
                 optimizer="none", context_bytes=0)
    # input 18x4, output 6x4, probabilities and dropped probabilities 2 x 9 x 4, 1-byte mask 9, in flight 2 x 6 x 4
    assert e.activations == 72 + 24 + 72 + 9 + 48
    e = estimate(_spec(lambda ops, x: ops.maxpool("pool", x, 2, 2), (1, 4, 4)), 1, optimizer="none", context_bytes=0)
    assert e.activations == 64 + 4 * 4 + 4 * 8 + 2 * 4 * 4  # input, output, int64 indices, in flight


def test_trace_and_zoo_name_agree_and_context_is_added():
    trace = load_bundled("resnet50-v100-roofline")
    assert estimate(trace, 64) == estimate("resnet50", 64)
    assert estimate("resnet50", 64).context == CONTEXT_BYTES == 800_000_000


def test_non_zoo_trace_says_what_it_could_not_count():
    trace = load_bundled("vit-s-cifar10-v100-roofline")
    renamed = replace(trace, model="my-vit")
    e = estimate(renamed, 8)
    assert "attention/recurrent internals not counted" in e.note and e.activations < estimate(trace, 8).activations


# published facts (data/published_memory.json); our maximum batch for each, pinned
def _max_batch(m) -> int:
    def fits(b):
        return estimate(m.model, b, dtype=m.dtype, optimizer=m.optimizer).total <= m.memory_gib * GIB
    lo, hi = 0, 1
    while fits(hi):
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        lo, hi = ((lo + hi) // 2, hi) if fits((lo + hi) // 2) else (lo, (lo + hi) // 2)
    return lo


OURS = {"ngc-rn50-fp32-v100": 133, "ngc-rn50-fp16-v100": 263, "dle-rn50-fp32-v100": 133, "lambda-rn50-fp32-v100": 133,
        "lambda-rn50-fp16-v100": 263, "lambda-bertl-fp32-v100": 8, "lambda-bertl-fp16-v100": 16,
        "lambda-rn50-fp32-a100": 704, "lambda-rn50-fp16-a100": 1389, "lambda-bertl-fp32-a100": 61,
        "lambda-bertl-fp16-a100": 115, "dle-bertl512-fp32-v100": 5, "dle-bertl512-fp16-v100": 10,
        "lambda-rn50-fp32-rtx6000ada": 418, "lambda-bertl-fp16-rtx6000ada": 65,
        "google-bert-base": 84, "google-bert-base-squad": 20, "google-bert-base-512": 13, "google-bert-large": 20,
        "google-bert-large-squad": 5, "google-bert-large-512": 3, "tf-bertl512-fp32-v100-oom": 5}


@pytest.mark.parametrize("m", load_memory_statements(), ids=lambda m: m.id)
def test_published_memory_facts(m):
    ours = _max_batch(m)
    assert ours == OURS[m.id]
    if m.kind == "fits" and m.framework.startswith(("PyTorch", "TensorFlow (NVIDIA")):
        # PyTorch runs: our maximum is within 20 % of the published batch; below it only for BERT-large fp32
        # on an A100 80GB (61 vs 64) and ResNet-50 fp32 on an RTX 6000 Ada (418 vs 496)
        assert ours >= 0.8 * m.batch
    if m.kind in ("max", "oom"):
        # TensorFlow 1.x needs 2-4x more than this PyTorch-style estimate: documented, not hidden
        assert ours >= m.batch


def test_resnet50_on_a_v100_matches_nvidias_suggested_batches():
    v100 = get_device("v100").memory
    check_fits(estimate("resnet50", 128), v100, "V100 16GB")  # "128 for single precision per V100 16 GB"
    check_fits(estimate("resnet50", 256, dtype="fp16"), v100, "V100 16GB")  # "256 for mixed precision"
    with pytest.raises(ConfigError):
        check_fits(estimate("resnet50", 256), v100, "V100 16GB")


def test_check_fits_message_is_one_line_with_the_numbers():
    e = estimate("resnet50", 20000)
    with pytest.raises(ConfigError) as err:
        check_fits(e, get_device("t4").memory, "T4")
    msg = str(err.value)
    assert "\n" not in msg
    assert msg.startswith("memory: resnet50 at batch 20000 (fp32, sgd) needs 2.")
    assert "TB per GPU (weights 102.2 MB, gradients 102.2 MB, optimizer 102.2 MB, activations 2." in msg
    assert "buffers 800 MB) but a T4 has 17.18 GB (short by 2." in msg
    assert e.explain().startswith("memory: resnet50 at batch 20000 (fp32, sgd) needs 2.")
    check_fits(estimate("resnet50", 8), get_device("t4").memory, "T4")  # fits: no error


@pytest.mark.parametrize("kwargs, needle", [
    ({"batch": 0}, "batch: must be a positive integer, got 0"),
    ({"batch": 8, "optimizer": "lamb"}, "optimizer: 'lamb' is not one of adam, sgd, none"),
    ({"batch": 8, "dtype": "fp8"}, "dtype: 'fp8' is not one of bf16, fp16, fp32"),
    ({"batch": 8, "context_bytes": -1}, "context_bytes: must be >= 0"),
])
def test_errors_are_one_line(kwargs, needle):
    with pytest.raises(ConfigError, match=needle):
        estimate("resnet50", **kwargs)


def test_unknown_model_and_bad_inputs():
    with pytest.raises(UnknownNameError, match=r"unknown model 'resnet9' \(did you mean 'resnet50' or 'resnet34' or "
                                               r"'resnet18'\?\); valid choices:"):
        estimate("resnet9", 8)
    with pytest.raises(ConfigError, match="memory: expected a Trace, a ModelSpec or a zoo model name, got int"):
        estimate(3, 8)
    with pytest.raises(ConfigError, match="gpu_memory: must be a finite size > 0 bytes"):
        check_fits(estimate("resnet50", 8), 0, "T4")
    assert isinstance(estimate("lstm-mnist", 4), MemoryEstimate)
