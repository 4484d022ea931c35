"""The stream probe's CPU cost of communication: measured from the records, used by the stack."""

import pytest
from e2e import E2ESpec, measure

from simcomm.errors import ConfigError
from simcomm.pipeline import simulate
from simcomm.scenario import Scenario, StackSpec


def _rec(probe, stream):
    spec = E2ESpec("allreduce", workers=2, warmup=0, iters=2)
    ranks = [{"rank": r, "ends": [0.0, 1.0, 2.0], "kinds": ["every iteration"] * 2, "probe": probe[r],
              "stream_probe": stream[r], "stream_bytes": 2_000_000} for r in range(2)]
    return {"spec": spec.__dict__, "ranks": ranks}


def test_cpu_per_byte_is_the_median_slowdown_per_byte_moved():
    m = measure(_rec([[0.20, 0.22], [0.21, 0.19]], [[0.25, 0.27], [0.26, 0.30]]))
    # medians: probe 0.205, stream 0.265 -> 0.06 s over 2 MB moved
    assert m.probe_s == pytest.approx(0.205) and m.stream_probe_s == pytest.approx(0.265)
    assert m.cpu_per_byte == pytest.approx(0.06 / 2e6)


def test_a_faster_stream_probe_means_no_cost():
    assert measure(_rec([[0.3], [0.3]], [[0.2], [0.2]])).cpu_per_byte == 0.0


def test_old_records_without_a_stream_probe_have_no_cost():
    rec = _rec([[0.2], [0.2]], [[], []])
    for r in rec["ranks"]:
        del r["stream_probe"]
    m = measure(rec)
    assert m.cpu_per_byte == 0.0 and m.stream_probe_s is None


def test_stack_cost_slows_overlapped_gossip_and_is_stated():
    # overlapped SGP (reference SGP) on the same stack, with and without a host CPU cost per byte
    base = Scenario(strategy="sgp", nodes=4, gpus_per_node=1, cluster="deep-est-esb", model="resnet20-cifar",
                    stack=StackSpec("nccl"), options={"mode": "overlap"})
    slow = Scenario(strategy="sgp", nodes=4, gpus_per_node=1, cluster="deep-est-esb", model="resnet20-cifar",
                    stack=StackSpec("nccl", cpu_per_byte=1e-8), options={"mode": "overlap"})
    a, b = simulate(base, baseline=False), simulate(slow, baseline=False)
    assert b.mean_s > a.mean_s
    assert any("host CPU cost of communication 10 ns per byte" in line and "closed form omits it" in line
               for line in b.assumed)
    assert not any("host CPU cost" in line for line in a.assumed)


def test_negative_stack_cost_is_rejected():
    with pytest.raises(ConfigError, match="stack.cpu_per_byte"):
        StackSpec("nccl", cpu_per_byte=-1.0)


def test_scenario_file_and_cli_flag_set_the_cost(tmp_path):
    from simcomm.cli.run_cmd import build_scenario

    f = tmp_path / "s.toml"
    f.write_text('strategy = "sgp"\nnodes = 4\n[stack]\nname = "gloo"\ncpu_per_byte = "25ns"\n')
    scn = build_scenario(f)
    assert scn.stack.name == "gloo" and scn.stack.cpu_per_byte == pytest.approx(25e-9)
    # a flag replaces the file's value, other stack fields kept
    scn = build_scenario(f, stack_cpu="5ns", stack_efficiency=0.5)
    assert scn.stack.cpu_per_byte == pytest.approx(5e-9) and scn.stack.efficiency == 0.5


@pytest.mark.parametrize("value, match", [("-3ns", "stack_cpu: '-3ns' must be non-negative"),
                                          ("fast", "stack_cpu: cannot parse 'fast'")])
def test_cli_rejects_a_bad_cost_in_one_line(capsys, value, match):
    from simcomm.cli.app import main

    assert main(["run", "--strategy", "sgp", "--nodes", "4", "--stack-cpu", value]) == 2
    err = capsys.readouterr().err
    assert match in err and err.count("\n") == 1


def test_ack_share_follows_the_frame_size():
    from simcomm.calibrate.predict import ACK_SHARE, ack_share

    assert ack_share(1500) == ACK_SHARE == pytest.approx(1514 / 1547, rel=1e-15)
    assert ack_share(9000) == pytest.approx(9014 / 9047, rel=1e-15)


def test_flow_queueing_is_limited_to_16_hosts():
    from simcomm.calibrate.emulate import EmulatedCluster

    with pytest.raises(ConfigError, match="up to 16 hosts"):
        EmulatedCluster(17, "100Mb/s", qdisc="fq")
    with pytest.raises(ConfigError, match="qdisc"):
        EmulatedCluster(2, "100Mb/s", qdisc="fq_codel")
