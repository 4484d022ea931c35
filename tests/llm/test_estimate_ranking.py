"""The estimate only prunes, so it must order layouts as the simulation does (issue 24, item 7).

On four searches (three dense, one mixture of experts), the 20 best layouts by estimate are flow-simulated
with the pipeline ``simcomm run`` uses; the estimate's order of them agrees with the simulation's (Kendall
tau-b >= 0.8, ties counted as tau-b counts them) and every estimate is within 10 % of its simulation.  The
searches are small enough to run in seconds each and cover ZeRO 0-3, tensor, pipeline (1F1B, interleaved),
recomputation and expert-parallel choices.
"""

from __future__ import annotations

import pytest

from simcomm.llm import search, simulate
from simcomm.traces.zoo.transformer import transformer_config


def kendall_tau_b(x: list[float], y: list[float]) -> float:
    """Kendall's tau-b of two equally long sequences (ties in either do not count as (dis)cordant)."""
    concordant = discordant = only_x = only_y = 0
    for i in range(len(x)):
        for j in range(i + 1, len(x)):
            a = (x[i] > x[j]) - (x[i] < x[j])
            b = (y[i] > y[j]) - (y[i] < y[j])
            if a and b:
                concordant += a == b
                discordant += a != b
            elif a:
                only_x += 1
            elif b:
                only_y += 1
    den = ((concordant + discordant + only_x) * (concordant + discordant + only_y)) ** 0.5
    return (concordant - discordant) / den if den else 1.0


def test_kendall_tau_b_by_hand():
    assert kendall_tau_b([1, 2, 3], [1, 2, 3]) == 1.0
    assert kendall_tau_b([1, 2, 3], [3, 2, 1]) == -1.0
    # pairs (1,2) concordant, (1,3) concordant, (2,3) tied in x only: (2 - 0) / sqrt(2 · 3)
    assert kendall_tau_b([1, 2, 2], [1, 2, 3]) == pytest.approx(2 / 6 ** 0.5)


SEARCHES = {
    # model, cluster, nodes, global batch
    "gpt2-small, 1 node": ("gpt2-small", "dgx-a100-hdr", 1, 16),
    "gpt2-medium, 2 nodes": ("gpt2-medium", "dgx-a100-hdr", 2, 32),
    "gpt3-1.3b, 2 nodes": ("gpt3-1.3b", "dgx-a100-hdr", 2, 32),
    # mixture of experts: ep and etp searched, the dispatchers' collectives and the expert gradients'
    # own data-parallel groups priced (the top 20 span 7 %, so the order is a fine test)
    "mixtral-8x7b, 2 nodes": ("mixtral-8x7b", "dgx-h100-ndr", 2, 32),
}


@pytest.fixture(scope="module", params=list(SEARCHES))
def simulated(request):
    model, cluster, nodes, batch = SEARCHES[request.param]
    cfg = transformer_config(model)
    base = {"cluster": cluster, "model": model, "precision": "bf16"}
    found = search.search(cfg, base, nodes, batch, search.Space(), "bf16")
    rows = simulate.simulate_best(found, cfg, base, nodes, batch, 20, "flow", 300_000)
    sim = sorted((r for r in rows if r.simulated), key=lambda r: r.estimate_rank)
    return request.param, sim


def test_the_estimates_order_of_the_top_20_agrees_with_the_simulations(simulated):
    name, rows = simulated
    assert len(rows) == 20
    tau = kendall_tau_b([r.estimate.step for r in rows], [r.step_s for r in rows])
    assert tau >= 0.8, f"{name}: Kendall tau {tau:.3f}"


def test_every_simulated_row_is_within_10_percent_of_its_estimate(simulated):
    """Every row, Megatron's interleaved schedule with as many micro-batches as stages included (every forward
    first: the estimate's list schedule, docs/plan.md section 5; before it, gpt2-medium's tp 2 pp 2 dp 4 v 12
    mb 4 row was estimated 10.9 % short)."""
    name, rows = simulated
    for r in rows:
        err = (r.estimate.step - r.step_s) / r.step_s
        assert abs(err) <= 0.10, f"{name}: {r.layout.short()} {r.layout.recompute}: estimate {err:+.1%}"
