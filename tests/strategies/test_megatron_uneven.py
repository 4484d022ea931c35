"""Uneven pipeline stages (Megatron-core's --decoder-first/last-pipeline-num-layers): placement, time, errors."""

from __future__ import annotations

import pytest

from simcomm.errors import ConfigError
from simcomm.ops import Compute
from simcomm.strategies.megatron import MegatronParams, stage_layers
from tests.strategies.test_strategies_megatron import TB, TF, plan_of, run, tiny


def _compute(plan, rank):
    return sum(op.seconds for op in plan.ops if isinstance(op, Compute) and op.rank == rank
               and op.category == "compute")


def test_stage_counts():
    assert stage_layers(MegatronParams(pp=16, first_stage_layers=7, last_stage_layers=7), 126) == (7,) + (8,) * 14 + (7,)
    assert stage_layers(MegatronParams(pp=3, first_stage_layers=1), 5) == (1, 2, 2)
    assert stage_layers(MegatronParams(pp=2, last_stage_layers=3), 5) == (2, 3)
    assert stage_layers(MegatronParams(pp=4), 8) is None


@pytest.mark.parametrize("opts, text", [
    ({"pp": 4, "first_stage_layers": 2, "last_stage_layers": 2}, "5 layers minus 2 + 2 leave 1, which do not split"),
    ({"pp": 2, "first_stage_layers": 2, "last_stage_layers": 2}, "leave 1, which do not split evenly"),
    ({"pp": 3, "first_stage_layers": 1, "schedule": "interleaved", "virtual": 2}, "first-stage-layers: 1 is not a multiple of virtual 2"),
    ({"pp": 3}, "5 layers do not divide into pp 3 × virtual 1 = 3 stages (uneven stages"),
    ({"pp": 3, "first_stage_layers": 0}, "first-stage-layers: 0 must be a positive integer"),
])
def test_bad_counts_one_line(opts, text):
    with pytest.raises(ConfigError, match=text.replace("(", r"\(").replace("+", r"\+")):
        plan_of(opts["pp"], {**opts, "microbatches": 4, "global_batch": 4}, trace=tiny(5))


def test_blocks_and_gpipe_time_by_hand():
    """5 uniform blocks on 3 stages as 1 + 2 + 2, GPipe, m = 2, free links.

    Stage k computes c_k blocks per micro-batch; identical jobs through a flow shop finish at
    sum_k t_k + (m - 1) max_k t_k, forward then backward; with TF = 1 ms and TB = 2 ms per block:
    forward 5 + 2 = 7 ms, backward 10 + 4 = 14 ms, 21 ms in all.
    """
    opts = {"pp": 3, "first_stage_layers": 1, "schedule": "gpipe", "microbatches": 2, "global_batch": 2}
    plan, tl = run(3, opts, trace=tiny(5, ends=False))
    assert [_compute(plan, r) for r in range(3)] == pytest.approx([2 * c * (TF + TB) for c in (1, 2, 2)])
    assert max(tl.end) == pytest.approx(21e-3, rel=1e-9)
