"""gloo's schedules priced by simcomm's flow engine on the calibrated cluster, against hand-computed answers."""

import pytest

from simcomm.calibrate.check import CheckRow, check_record, summary, topology_for
from simcomm.calibrate.predict import ACK_SHARE, case_plan, closed_form, cluster_topology, predict
from simcomm.errors import ConfigError

B, A = 1e6, 1e-4  # 1 MB/s links, 100 us per message


def star(p, ppn=1):
    return cluster_topology(tuple(r // ppn for r in range(p)), (0,) * (p // ppn), A, B)


def two_tier(p, ratio):
    return cluster_topology(tuple(range(p)), tuple(h // (p // 2) for h in range(p)), A, B, ratio)


def test_host_route_adds_up_to_the_fitted_alpha():
    t = star(2)
    assert t.route_latency(0, 1) == pytest.approx(A)
    assert predict("p2p", 2, 1e6, t) == pytest.approx(A + 1.0, rel=1e-12)


def test_ring_allreduce_equals_closed_form():
    n = 4e6
    # rings carry data both ways, so TCP ACKs take 33 B per 1514 B of each direction (ACK_SHARE)
    assert predict("allreduce", 4, n, star(4)) == pytest.approx(2 * 3 * (A + n / 4 / (B * ACK_SHARE)), rel=1e-12)
    assert closed_form("allreduce", 4, n, A, 1 / B) == pytest.approx(2 * 3 * (A + n / 4 / B), rel=1e-12)


def test_ring_allgather_equals_closed_form():
    assert predict("allgather", 4, 4e6, star(4)) == pytest.approx(3 * (A + 1e6 / (B * ACK_SHARE)), rel=1e-12)


def test_ring_ack_share_uses_the_clusters_frame_size():
    share = 9014 / 9047  # jumbo frames: one 66-byte ACK per two 9014-byte frames
    assert predict("allgather", 4, 4e6, star(4), mtu=9000) == pytest.approx(3 * (A + 1e6 / (B * share)), rel=1e-12)
    # one-way cases never carry the reverse ACKs
    assert predict("ps_push", 4, 1e6, star(4), mtu=9000) == predict("ps_push", 4, 1e6, star(4))


def test_gloo_broadcast_root_feeds_children_at_once():
    # p=4: 0 sends to 1 and 2 together (each at B/2), then 1 sends to 3
    n = 1e6
    assert predict("broadcast", 4, n, star(4)) == pytest.approx(2 * n / B + A + n / B + A, rel=1e-12)
    # p=8: 0->{1,2,4} at B/3; then 1->{3,5} at B/2 and 2->6; then 3->7 (bulk-synchronous waves)
    assert predict("broadcast", 8, n, star(8)) == pytest.approx(3 * n / B + 2 * n / B + n / B + 3 * A, rel=1e-12)
    # the textbook binomial closed form knows nothing of the shared root link
    assert closed_form("broadcast", 4, n, A, 1 / B) == pytest.approx(2 * (A + n / B))


def test_incast_shares_the_server_link():
    assert predict("ps_push", 4, 1e6, star(4)) == pytest.approx(3e6 / B + A, rel=1e-12)
    assert predict("ps_pull", 4, 1e6, star(4)) == pytest.approx(3e6 / B + A, rel=1e-12)


def test_oversubscribed_trunk_slows_the_cross_leaf_flows():
    # ranks 2,3 cross a B/2 trunk (B/4 each), rank 1 gets B/2, then the trunk flows keep B/4
    assert predict("ps_push", 4, 1e6, two_tier(4, 0.5)) == pytest.approx(4e6 / B + A, rel=1e-12)
    # every ring step moves 1 MB across each trunk direction at B/2
    assert predict("allreduce", 4, 4e6, two_tier(4, 0.5)) == pytest.approx(6 * (A + 1e6 / (B / 2 * ACK_SHARE)),
                                                                       rel=1e-12)
    assert predict("allreduce", 4, 4e6, two_tier(4, 1.0)) == pytest.approx(6 * (A + 1e6 / (B * ACK_SHARE)), rel=1e-12)


def test_ranks_on_one_host_talk_for_free():
    # 2 hosts x 2 ranks: the ring crosses the network twice per step, each host link once per direction
    assert predict("allgather", 4, 4e6, star(4, ppn=2)) == pytest.approx(3 * (A + 1e6 / (B * ACK_SHARE)), rel=1e-9)
    assert predict("ps_push", 4, 1e6, star(4, ppn=2)) == pytest.approx(2e6 / B + A, rel=1e-9)


def test_ack_share_is_derived_from_frame_sizes():
    # one 66-byte delayed ACK per two 1514-byte data frames
    assert pytest.approx(1514 / 1547, rel=1e-15) == ACK_SHARE


def test_unknown_case_is_one_line():
    with pytest.raises(ConfigError, match="case: 'gather' is not one of allreduce"):
        case_plan("gather", 4, 1.0)


def test_check_record_uses_recorded_cluster():
    sizes = [1024, 65536, 1048576, 4194304]
    rec = {"version": 1, "backend": "gloo", "world": 4, "nodes": ["h0", "h1", "h2", "h3"],
           "cluster": {"hosts": 4, "topology": "two-tier", "leaves": 2, "rate_Bps": 2e6, "trunk_rate_Bps": 1e6},
           "p2p": {"inter": {"sizes": sizes, "times": [A + n / B for n in sizes]}},
           "collectives": [{"kind": "ps_push", "ranks": 4, "nbytes": 1000000, "time": 4.0001}]}
    topo = topology_for(rec, A, B)
    assert topo.links["calib-trunk"].bandwidth == pytest.approx(B / 2, rel=1e-6)
    assert topo.machine_of(2) == 2
    (row,) = check_record(rec)
    assert row.predicted == pytest.approx(4.0 + A, rel=1e-6)
    assert abs(row.error) < 1e-6
    assert summary([row, CheckRow("x", 2, 1, 1.0, 1.1, None)])["max_abs_error"] == pytest.approx(0.1)
