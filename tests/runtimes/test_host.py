"""CPU collectives: the host's reduction and copy rates as a cost, hand-computed (simcomm/runtimes/host.py)."""

from __future__ import annotations

import json

import pytest

from simcomm import engine
from simcomm.calibrate.check import CalibrationError, validate_record
from simcomm.calibrate.predict import cluster_topology, predict
from simcomm.errors import ConfigError
from simcomm.links.base import LinkClass
from simcomm.ops import PlanBuilder
from simcomm.runtimes.host import HostRates, host_gamma, loopback_rate, recorded_host, reduced_bytes
from simcomm.runtimes.mpi import MPICH
from simcomm.stacks import apply_stack, get_stack
from simcomm.topologies.full_mesh import full_mesh

MB = 1_000_000
#: one thread adds at 1 GB/s and copies at 2 GB/s: 1 ns per byte reduced, loopback at 1 GB/s
HOST = HostRates(1e9, 2e9, "test")


def test_rates_and_gamma():
    assert host_gamma(HOST) == pytest.approx(1e-9)
    assert loopback_rate(HOST) == pytest.approx(1e9)  # two copies per byte on the same host
    assert reduced_bytes(4, 8 * MB) == pytest.approx(6 * MB)  # (p - 1)/p of the buffer
    with pytest.raises(ConfigError, match="^host reduce rate 0.0 must be a positive bandwidth"):
        HostRates(0.0, 1e9)
    with pytest.raises(ConfigError, match="copy rate"):
        HostRates(1e9, float("nan"))


def test_two_ranks_of_one_host_allreduce_is_cpu_bound():
    """2 ranks on one host, gloo's ring all-reduce of 2 MB: the reduce-scatter step moves 1 MB over the
    loopback (two copies at 2 GB/s: 1 ms) and reduces 1 MB at 1 GB/s (1 ms); the all-gather step moves 1 MB
    (1 ms): 3 ms.  Without the host probe the same-host link is free: 2 MB at 100 GB/s, 20 us."""
    cpu = cluster_topology((0, 0), (0,), 1e-6, 1e8, host=HOST)
    free = cluster_topology((0, 0), (0,), 1e-6, 1e8)
    assert predict("allreduce", 2, 2 * MB, cpu) == pytest.approx(3e-3, rel=1e-9)
    assert predict("allreduce", 2, 2 * MB, free) == pytest.approx(2e-5, rel=1e-9)
    # across hosts at 100 MB/s with 1 us (two hops of 0.5 us) the link dominates: 2 x (1 us + 10 ms) plus the
    # 1 ms reduction, with the delayed-ACK share of a bidirectional ring on the wire
    two = cluster_topology((0, 1), (0, 0), 1e-6, 1e8, host=HOST)
    share = (1514 / (1514 + 33))
    assert predict("allreduce", 2, 2 * MB, two) == pytest.approx(2 * (1e-6 + 1e-2 / share) + 1e-3, rel=1e-9)


def test_stack_reduce_sets_every_rank_gamma():
    """A CPU stack given the host's cost replaces every rank's device gamma; a 4-rank ring of 4 MB at 1 GB/s
    links (1 us) then costs 6 x (1 us + 1 ms) + 3 x 1 MB x 1 ns = 9.006 ms."""
    link = LinkClass("t-1g", 1e9, 1e-6, "ethernet", "test", "tests")
    topo = full_mesh(4, link)
    stack = get_stack("ideal").with_overrides(reduce_per_byte=1e-9)
    eff = apply_stack(topo, stack)
    assert list(eff.gammas()) == [1e-9] * 4 and list(topo.gammas()) == [0.0] * 4
    b = PlanBuilder(4)
    b.collective("allreduce", range(4), 4 * MB, algorithm="ring")
    tl = engine.simulate(b.build(), eff, fidelity="flow", runtime=MPICH)
    assert tl.makespan == pytest.approx(6 * (1e-6 + 1e-3) + 3 * 1e-3, rel=1e-9)


def test_record_host_entry(tmp_path):
    assert HostRates.from_record({"p2p": {}}) is None
    got = HostRates.from_record({"host": {"reduce_Bps": 2e9, "copy_Bps": 4e9}})
    assert (got.reduce_rate, got.copy_rate) == (2e9, 4e9)
    with pytest.raises(ConfigError, match="host needs reduce_Bps and copy_Bps"):
        HostRates.from_record({"host": {"reduce_Bps": 2e9}})
    links = tmp_path / "links.toml"
    assert recorded_host(links) is None  # no record beside it
    (tmp_path / "links.json").write_text(json.dumps({"host": {"reduce_Bps": 2e9, "copy_Bps": 4e9}}))
    assert recorded_host(links).reduce_rate == 2e9
    (tmp_path / "links.json").write_text("{not json")
    with pytest.raises(ConfigError, match="cannot be read as JSON"):
        recorded_host(links)


def test_malformed_host_in_a_record_is_one_error():
    rec = {"world": 2, "p2p": {"inter": {"sizes": [1], "times": [1.0]}},
           "collectives": [{"kind": "allreduce", "ranks": 2, "nbytes": 4, "time": 1.0}]}
    validate_record(rec)
    with pytest.raises(CalibrationError, match="host.copy_Bps"):
        validate_record({**rec, "host": {"reduce_Bps": 1e9, "copy_Bps": -1}})
    with pytest.raises(CalibrationError, match="host"):
        validate_record({**rec, "host": [1, 2]})


def test_a_scenario_on_a_cpu_stack_reduces_at_the_host_rate_and_says_so(tmp_path):
    from simcomm.pipeline import simulate
    from simcomm.scenario import NetworkSpec, Scenario, StackSpec

    def run(**stack):
        scn = Scenario(strategy="allreduce", nodes=2, cluster="gbe-4gpu", fidelity="flow",
                       stack=StackSpec("gloo", **stack))
        return simulate(scn, baseline=False, analytic=False)

    base, slow = run(), run(reduce_per_byte=10e-9)
    assert slow.mean_s > base.mean_s
    assert any("reduce on the host CPU at 10 ns per byte" in line for line in slow.assumed)
    assert not any("reduce on the host CPU" in line for line in base.assumed)
    with pytest.raises(ConfigError, match="^stack.reduce_per_byte: applies to collectives in host memory"):
        simulate(Scenario(strategy="allreduce", nodes=2, cluster="gbe-4gpu", stack=StackSpec("nccl",
                          reduce_per_byte=1e-9)), baseline=False)
    # the calibration record beside --links carries the host probe: a CPU stack uses it without being told
    links = tmp_path / "links.toml"
    links.write_text('[links.calib-inter]\nbandwidth = "117 MB/s"\nlatency = "60 us"\nfamily = "ethernet"\n')
    (tmp_path / "links.json").write_text(json.dumps({"host": {"reduce_Bps": 1e8, "copy_Bps": 1e9}}))
    scn = Scenario(strategy="allreduce", nodes=2, cluster="gbe-4gpu", fidelity="flow", stack=StackSpec("gloo"),
                   network=NetworkSpec(links=str(links)))
    got = simulate(scn, baseline=False, analytic=False)
    assert any("reduce on the host CPU at 10 ns per byte" in line for line in got.assumed)


def test_same_host_traffic_takes_the_loopback_fit_where_the_record_has_one():
    """The intra ping-pong's fit (alpha 20 us, 2 GB/s) prices same-host traffic: two rank-host hops of 10 us;
    a 2-rank all-reduce of 2 MB: 2 x (20 us + 0.5 ms) + 1 MB reduced at 1 ns/B = 2.04 ms."""
    topo = cluster_topology((0, 0), (0,), 1e-6, 1e8, host=HOST, loopback=(20e-6, 2e9))
    assert predict("allreduce", 2, 2 * MB, topo) == pytest.approx(2 * (20e-6 + 0.5e-3) + 1e-3, rel=1e-9)
    assert predict("p2p", 2, 2 * MB, topo) == pytest.approx(20e-6 + 1e-3, rel=1e-9)
