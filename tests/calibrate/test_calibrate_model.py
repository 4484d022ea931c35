"""gloo schedules over a max-min fluid network, against hand-computed answers."""

import pytest

from simcomm.calibrate.check import CheckRow, check_record, net_for, summary
from simcomm.calibrate.gloo_model import Flow, Net, fluid_makespan, predict

B, A = 1e6, 1e-4  # 1 MB/s links, 100 us per message


def star(p):
    return Net(tuple([0] * p), tuple(range(p)), B, B, A)


def two_tier(p, trunk):
    return Net(tuple(h // (p // 2) for h in range(p)), tuple(range(p)), B, trunk, A)


def test_ring_allreduce_equals_closed_form():
    n = 4e6
    assert predict("allreduce", 4, n, star(4)) == pytest.approx(2 * 3 * (A + n / 4 / B), rel=1e-12)


def test_ring_allgather_equals_closed_form():
    assert predict("allgather", 4, 4e6, star(4)) == pytest.approx(3 * (A + 1e6 / B), rel=1e-12)


def test_gloo_broadcast_root_feeds_children_at_once():
    # p=4: 0 sends to 1 and 2 together (each at B/2), then 1 sends to 3
    n = 1e6
    assert predict("broadcast", 4, n, star(4)) == pytest.approx(2 * n / B + A + n / B + A, rel=1e-12)
    # p=8: 0->{1,2,4} at B/3; 1->{3,5} at B/2 and 2->6; 3->7
    assert predict("broadcast", 8, n, star(8)) == pytest.approx(3 * n / B + 2 * n / B + n / B + 3 * A, rel=1e-12)


def test_incast_shares_the_server_link():
    assert predict("ps_push", 4, 1e6, star(4)) == pytest.approx(3e6 / B + A, rel=1e-12)
    assert predict("ps_pull", 4, 1e6, star(4)) == pytest.approx(3e6 / B + A, rel=1e-12)


def test_oversubscribed_trunk_slows_the_cross_leaf_flows():
    # ranks 2,3 cross a B/2 trunk (B/4 each), rank 1 gets B/2 then the trunk flows keep B/4
    assert predict("ps_push", 4, 1e6, two_tier(4, B / 2)) == pytest.approx(4e6 / B + A, rel=1e-12)
    # each trunk direction carries all 6 ring steps of one edge at B/2: at least 12 s, and
    # no slower than running the 6 steps in lock-step
    t = predict("allreduce", 4, 4e6, two_tier(4, B / 2))
    assert 6 * 1e6 / (B / 2) <= t <= 6 * (A + 1e6 / (B / 2))
    assert predict("allreduce", 4, 4e6, two_tier(4, B)) == pytest.approx(6 * (A + 1e6 / B), rel=1e-12)


def test_dependencies_and_rate_recomputation():
    # two flows share a link; when the short one ends the long one speeds up
    flows = [Flow(0, 1, 1e6), Flow(0, 2, 3e6)]
    assert fluid_makespan(flows, star(3)) == pytest.approx(2e6 / B + 2e6 / B + A, rel=1e-12)


def test_check_record_uses_recorded_cluster():
    sizes = [1024, 65536, 1048576, 4194304]
    rec = {"version": 1, "backend": "gloo", "world": 4, "nodes": ["h0", "h1", "h2", "h3"],
           "cluster": {"hosts": 4, "topology": "two-tier", "leaves": 2, "rate_Bps": 2e6, "trunk_rate_Bps": 1e6},
           "p2p": {"inter": {"sizes": sizes, "times": [A + n / B for n in sizes]}},
           "collectives": [{"kind": "ps_push", "ranks": 4, "nbytes": 1000000, "time": 4.0001}]}
    net = net_for(rec, A, B)
    assert net.trunk_bw == pytest.approx(B / 2) and net.leaf_of == (0, 0, 1, 1)
    (row,) = check_record(rec)
    assert row.predicted == pytest.approx(4.0 + A, rel=1e-9)
    assert abs(row.error) < 1e-9
    assert summary([row, CheckRow("x", 2, 1, 1.0, 1.1, None)])["max_abs_error"] == pytest.approx(0.1)
