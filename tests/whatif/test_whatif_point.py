"""The what-if point function: overrides, utilisation, stragglers (hand-derived expectations)."""

import pytest

from simcomm import traces
from simcomm.errors import ConfigError
from simcomm.whatif import evaluate as _evaluate
from simcomm.whatif.params import node_scales
from simcomm.workload import build_workload


def evaluate(point: dict) -> dict:
    """A what-if point on the default trace (deep-est-esb would otherwise run seed 000's Table III setting)."""
    return _evaluate({"model": "resnet50", **point})


def _compute():
    w = build_workload(traces.default_trace(), 4)
    return w.forward_s + w.backward_s, w.update_s


@pytest.mark.parametrize("overlap", ["none", "backward"])
def test_whatif_straggler_slows_allreduce_by_half_its_compute(overlap):
    # Synchronous step: T = s(F+B) + comm + s*U on the straggler, so a scale of 1.5 on one
    # node adds exactly 0.5 (F+B+U) when the communication after backward is unchanged.
    fb, u = _compute()
    base = {"strategy": "allreduce", "nodes": 4, "overlap": overlap}
    a, b = evaluate(base), evaluate({**base, "straggler_scale": 1.5})
    assert b["iteration_s"] - a["iteration_s"] == pytest.approx(0.5 * (fb + u), rel=1e-9)
    # Every rank waits for the straggler's gradients; only the update after the reduction is each rank's own.
    assert b["rank_mean_s"] - a["iteration_s"] == pytest.approx(0.5 * fb + 0.5 * u / 4, rel=1e-9)
    assert b["node_scales"] == [1.5, 1.0, 1.0, 1.0]


def test_whatif_straggler_hurts_sgp_less():
    fb, u = _compute()
    base = {"strategy": "sgp", "nodes": 4, "mode": "overlap"}  # reference SGP: the gossip hides behind compute
    a, b = evaluate(base), evaluate({**base, "straggler_scale": 1.5})
    ar = evaluate({"strategy": "allreduce", "nodes": 4, "straggler_scale": 1.5})
    ar0 = evaluate({"strategy": "allreduce", "nodes": 4})
    # The straggler's own iteration grows by its extra compute (the gossip is hidden) ...
    assert b["iteration_s"] - a["iteration_s"] == pytest.approx(0.5 * (fb + u), rel=1e-9)
    # ... but only the straggler is late: the mean rank is delayed by 0.5 C / R, not 0.5 C.
    assert b["rank_mean_s"] - a["iteration_s"] == pytest.approx(0.5 * (fb + u) / 4, rel=1e-9)
    assert b["rank_mean_s"] - a["iteration_s"] < 0.3 * (ar["rank_mean_s"] - ar0["iteration_s"])


def test_whatif_inter_override_changes_link_family_and_time():
    edr = evaluate({"strategy": "allreduce", "nodes": 8})
    eth = evaluate({"strategy": "allreduce", "nodes": 8, "inter": "eth-25g"})
    assert edr["inter_used"] == "ib-edr" and edr["inter_family"] == "infiniband"
    assert eth["inter_used"] == "eth-25g" and eth["inter_family"] == "ethernet"
    assert "bytes_ethernet" in eth and "bytes_infiniband" not in eth
    assert eth["iteration_s"] > edr["iteration_s"]
    # The same bytes cross the network whatever its speed.
    assert eth["bytes_ethernet"] == pytest.approx(edr["bytes_infiniband"])


def test_whatif_utilisation_is_bytes_over_capacity_time():
    # 4 nodes on one switch with ideal links: 8 directed ib-edr links of 12.5 GB/s.
    r = evaluate({"strategy": "allreduce", "nodes": 4, "stack": "ideal"})
    assert r["util_infiniband"] == pytest.approx(r["bytes_infiniband"] / (r["iteration_s"] * 8 * 12.5e9))
    assert 0 < r["inter_util"] < 1


def test_whatif_oversubscription_implies_fat_tree():
    r = evaluate({"strategy": "node-based", "nodes": 8, "oversubscription": 4.0})
    assert r["topology_used"] == "fat-tree" and r["status"] == "ok"
    with pytest.raises(ConfigError, match="oversubscription"):
        evaluate({"strategy": "allreduce", "nodes": 8, "topology": "torus", "oversubscription": 2.0})


def test_whatif_not_applicable_is_a_status():
    r = evaluate({"strategy": "hierarchical-allreduce", "nodes": 4})
    assert r["status"] == "not-applicable" and "GPU per node" in r["reason"]


def test_whatif_unknown_parameter_lists_choices():
    with pytest.raises(ConfigError, match="unknown parameter 'bogus'; valid choices: .*inter"):
        evaluate({"strategy": "allreduce", "bogus": 1})


def test_whatif_jitter_is_seeded_and_deterministic():
    p = {"jitter": 0.1, "jitter_seed": 7, "jitter_dist": "lognormal"}
    a, b = node_scales(p, 8), node_scales(p, 8)
    assert a == b and len(a) == 8 and len(set(a)) == 8
    assert node_scales({**p, "jitter_seed": 8}, 8) != a
    assert node_scales({}, 8) == ()
    with pytest.raises(ConfigError, match="straggler_node"):
        node_scales({"straggler_scale": 1.5, "straggler_node": 9}, 8)


def test_whatif_compute_jitter_hurts_a_synchronous_step_more_than_gossip():
    # Per-iteration jitter (simcomm.jitter): an all-reduce step waits for the slowest of 8 draws
    # every iteration, about cv * e_8 * C with e_8 = 1.42; an SGP rank needs only the message its
    # in-peer posted at the start of the iteration, so transient slowness is mostly absorbed.
    fb, u = _compute()
    ar, sgp = {"strategy": "allreduce", "nodes": 8, "overlap": "none"}, {"strategy": "sgp", "nodes": 8, "mode": "overlap"}
    d_ar = evaluate({**ar, "compute_jitter": 0.1})["iteration_s"] - evaluate(ar)["iteration_s"]
    d_sgp = evaluate({**sgp, "compute_jitter": 0.1})["iteration_s"] - evaluate(sgp)["iteration_s"]
    assert 0.1 * 1.0 * (fb + u) < d_ar < 0.1 * 1.9 * (fb + u)
    assert 0 <= d_sgp < 0.5 * d_ar
    with pytest.raises(ConfigError, match="compute_jitter"):
        evaluate({**ar, "compute_jitter": 1.5})
