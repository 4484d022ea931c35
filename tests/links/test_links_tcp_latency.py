"""TCP's small-message latency is counted once: in the ``eth-*`` links, not again by a TCP stack.

Sources (docs/links.md, docs/strategies.md): [M7] (nccl-tests #82) measured an 8-byte NCCL broadcast over TCP
sockets between two nodes at 38.17-45.82 us, end to end.  ``eth-*`` classes take it as 19 us per hop (38 us over
host -> switch -> host); ``mpi-tcp``, ``gloo``, ``cpu-ps`` and ``nccl-socket`` take the same measurement as their
40 us per network message.  On ``eth-*`` the stack adds no network overhead; elsewhere (InfiniBand) it does.
Every expected time below is written out by hand from those figures.
"""

from __future__ import annotations

import pytest

from simcomm import engine
from simcomm.engine import EngineOptions
from simcomm.errors import ConfigError
from simcomm.links import link_class
from simcomm.links.toml_file import parse_link_table
from simcomm.ops import PlanBuilder
from simcomm.runtimes import get_runtime
from simcomm.stacks import apply_stack, get_stack
from simcomm.stacks.base import socket_overhead_note
from simcomm.topologies.star import star
from simcomm.topologies.two_level import two_level

US = 1e-6
ETH_1G = 1e9 / 8  # bytes/s per direction


def _message(topo, stack: str, nbytes: float = 8.0) -> float:
    """Seconds the flow engine takes to carry one message rank 0 -> rank 1 on ``topo`` under ``stack``."""
    st = get_stack(stack)
    rt = get_runtime(st.collectives).with_tcp(st.tcp_protocol)
    b = PlanBuilder(2)
    b.transfer(0, 1, nbytes)
    plan = rt.exchanges(b.build(), apply_stack(topo, st))
    return engine.simulate(plan, apply_stack(topo, st), fidelity="flow",
                           options=EngineOptions(runtime=rt)).makespan


def test_eth_classes_hold_the_socket_latency_and_others_do_not():
    for name in ("eth-1g", "eth-10g", "eth-56g", "eth-400g", "eth-3125m", "tcpxo-200g", "tcpx-200g"):
        assert link_class(name).socket_latency, name
        assert link_class(name).latency == pytest.approx(19 * US)  # [M7]: 38 us over two hops
    for name in ("eth-40g-usnic", "ib-edr", "roce-100g", "efa-100g", "pcie4"):
        assert not link_class(name).socket_latency, name
    assert link_class("eth-1g").scaled(0.5).socket_latency  # a tapered uplink keeps it


@pytest.mark.parametrize(("stack", "efficiency"), [("mpi-tcp", 0.4), ("gloo", 0.5), ("cpu-ps", 0.94)])
def test_an_8_byte_message_between_two_hosts_on_eth_1g_pays_m7_once(stack, efficiency):
    # host -> switch -> host, ranks on the hosts: 2 x 19 us of the eth-1g links ([M7], 38 us), no stack
    # overhead on top (it is the same measurement), plus 8 B at the stack's share of 1 Gb/s:
    # mpi-tcp 8 / (0.4 x 125e6) = 0.16 us, gloo 8 / (0.5 x 125e6) = 0.128 us, cpu-ps 8 / (0.94 x 125e6)
    topo = star(2, "eth-1g")
    want = 2 * 19 * US + 8 / (efficiency * ETH_1G)
    assert _message(topo, stack) == pytest.approx(want, rel=1e-9)
    assert want < 38.2 * US  # inside [M7]'s 38.17-45.82 us, where 2 x 19 + 40 = 78 us was not


def test_gpu_hosts_add_their_pcie_hops_and_the_intranode_overhead():
    # rank -pcie4- NIC -eth-1g- switch -eth-1g- NIC -pcie4- rank:
    # mpi-tcp: 2 x 19 (eth) + 2 x 1.0 (PCIe LL hop, [NCCL-tuning]) + 1.0 us shared-memory overhead (0.5 at each
    #          rank end, [UCX-11020]) + 8 B / (0.4 x 125e6) = 41.16 us
    # gloo:    38 + 2 + 5 us (its intranode overhead, assumed) + 8 B / (0.5 x 125e6) = 45.128 us
    topo = two_level(2, 1, intra="pcie", intra_link="pcie4", nic_link="eth-1g", nic_attach="pcie4",
                     device="h100", name="two-eth")
    assert _message(topo, "mpi-tcp") * 1e6 == pytest.approx(38 + 2 + 1 + 0.16, rel=1e-9)
    assert _message(topo, "gloo") * 1e6 == pytest.approx(38 + 2 + 5 + 0.128, rel=1e-9)


def test_on_infiniband_the_tcp_stack_still_charges_its_40_us():
    # TCP over InfiniBand (seed 000): the links hold the hardware's 0.7 us per hop, the stack TCP's 40 us:
    # 1.4 + 40 us + 8 B / (0.4 x 12.5e9)
    topo = star(2, "ib-edr")
    assert _message(topo, "mpi-tcp") * 1e6 == pytest.approx(1.4 + 40 + 8 / (0.4 * 12.5e9) * 1e6, rel=1e-9)
    assert socket_overhead_note(topo, get_stack("mpi-tcp")) == []


def test_a_given_stack_overhead_is_charged_as_given():
    # --stack-overhead 20us on mpi-tcp over eth-1g: the user's 20 us on top of the links' 38 us
    st = get_stack("mpi-tcp").with_overrides(overhead=20 * US)
    assert not st.socket_overhead
    eff = apply_stack(star(2, "eth-1g"), st)
    assert eff.route_latency(0, 1) == pytest.approx(58 * US, rel=1e-12)
    assert socket_overhead_note(star(2, "eth-1g"), st) == []


def test_one_assumed_line_says_the_overhead_is_in_the_links():
    (line,) = socket_overhead_note(star(2, "eth-1g"), get_stack("gloo"))
    assert line == ("gloo's 40 us per network message is TCP sockets' latency [M7], already in eth-1g's 19 us "
                    "per hop (the same measurement): not charged again on them (docs/links.md; --stack-overhead "
                    "charges one)")
    assert socket_overhead_note(star(2, "eth-1g"), get_stack("nccl")) == []  # NCCL's 3 us is not [M7]'s


def test_a_user_class_may_say_its_latency_went_through_sockets():
    got = parse_link_table({"lab-eth": {"bandwidth": "10Gb/s", "latency": "25us", "family": "ethernet",
                                        "socket-latency": True}}, "test")
    assert got["lab-eth"].socket_latency
    assert apply_stack(star(2, got["lab-eth"]), get_stack("mpi-tcp")).route_latency(0, 1) == pytest.approx(50 * US)
    plain = parse_link_table({"lab-eth": {"bandwidth": "10Gb/s", "latency": "25us"}}, "test")["lab-eth"]
    assert not plain.socket_latency
    with pytest.raises(ConfigError, match="socket-latency must be true or false"):
        parse_link_table({"x": {"bandwidth": "1Gb/s", "latency": "1us", "socket-latency": "yes"}}, "test")
