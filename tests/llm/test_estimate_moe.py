"""The plan's estimate prices a mixture-of-experts layer's token dispatchers as the emitter issues them.

``strategies/megatron/moe.py``'s :func:`dispatcher_steps` names the collectives around each MoE layer (the
emitter issues exactly those, the estimate prices exactly those), so the two cannot drift; the estimate of a
few Mixtral 8x7B layouts on one DGX H100 is then within 10 % of their flow simulations (issue 24, item 7).
"""

from __future__ import annotations

import pytest

from simcomm.llm.layout import Layout
from simcomm.llm.search import Row
from simcomm.llm.search_parts import _WORKER_PRICERS, estimate_part
from simcomm.llm.simulate import simulate_row
from simcomm.strategies.megatron.moe import DISPATCH_POINTS, dispatcher_steps

BASE = {"cluster": "dgx-h100-ndr", "model": "mixtral-8x7b", "precision": "bf16", "memory": "off"}
LAYOUTS = [Layout(1, 1, 8, zero=1, ep=8),  # experts over the node, no TP
           Layout(2, 1, 4, zero=1, ep=4, etp=1, sequence_parallel=True),  # MoE parallel folding: ep spans TP ranks
           Layout(1, 2, 4, zero=1, ep=2),
           Layout(2, 1, 4, zero=1, ep=2, sequence_parallel=True),
           Layout(2, 1, 4, zero=1, ep=2)]  # no sequence parallelism: DeepSpeed-MoE's token slices


@pytest.fixture(scope="module")
def estimates():
    _WORKER_PRICERS.clear()
    out = estimate_part(BASE, 1, 16, LAYOUTS)
    return out, next(iter(_WORKER_PRICERS.values()))


def test_the_ep_part_is_the_dispatchers_steps_priced(estimates):
    ests, pricer = estimates
    for lay, est in zip(LAYOUTS, ests, strict=True):
        moe = pricer.moe_costs(lay)
        place = lay.placement()
        per_layer = sum(pricer.price(kind, tuple(g for g in getattr(place, f"{which}_groups")(0) if len(g) > 1), n)
                        for where in DISPATCH_POINTS for kind, which, n in dispatcher_steps(moe, where))
        moe_layers = 32 // lay.pp  # every Mixtral block is an MoE block, split evenly over the stages
        assert est.ep == pytest.approx(lay.microbatches(16) * moe_layers * per_layer, rel=1e-12)
        assert est.ep > 0


def test_full_recomputation_runs_the_forward_dispatch_again(estimates):
    _, pricer = estimates
    lay = LAYOUTS[0]
    moe = pricer.moe_costs(lay)
    forward = sum(pricer.price(kind, tuple(g for g in getattr(lay.placement(), f"{which}_groups")(0) if len(g) > 1), n)
                  for where in ("fwd-pre", "fwd-post") for kind, which, n in dispatcher_steps(moe, where))
    full = Layout(1, 1, 8, zero=1, ep=8, recompute="full")
    assert pricer.expert_comm(full) == pytest.approx(pricer.expert_comm(lay) + forward, rel=1e-12)


def test_tp_collectives_as_the_emitter_issues_them_around_moe_layers(estimates):
    # Mixtral has no shared experts: under sequence parallelism an MoE layer has no TP collective of its own, so
    # each of the 32 blocks has only its attention's (an all-gather and a reduce-scatter per pass), plus the
    # embedding's and the head's; without it, DeepSpeed-MoE's all-gather of the token slices per pass instead
    ests, pricer = estimates
    for k in (3, 4):
        lay, est = LAYOUTS[k], ests[k]
        g = pricer.groups(lay)["tp"]
        act = pricer.costs(lay)[pricer.structure.blocks[0][0]].tp_bytes
        if lay.sequence_parallel:
            ar = pricer.price("allgather", g, act) + pricer.price("reduce_scatter", g, act)
            per_block = 2 * ar
        else:
            ar = pricer.price("allreduce", g, act)
            per_block = 2 * ar + 2 * pricer.price("allgather", g, act)
        assert est.tp == pytest.approx(lay.microbatches(16) * (32 * per_block + 2 * ar), rel=1e-12)


def test_a_dense_model_has_no_ep_part():
    (est,) = estimate_part({**BASE, "model": "gpt2-small"}, 1, 16, [Layout(2, 1, 4)])
    assert est.ep == 0.0


@pytest.mark.parametrize("k", range(len(LAYOUTS)), ids=[x.short() for x in LAYOUTS])
def test_the_estimate_is_within_10_percent_of_the_simulation(estimates, k):
    est = estimates[0][k]
    row = simulate_row(Row(LAYOUTS[k], 0, est), {**BASE, "nodes": 1}, 16, "flow")
    assert row.simulated
    assert abs(est.step / row.step_s - 1) <= 0.10
