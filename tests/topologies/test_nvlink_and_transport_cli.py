"""NVLink domain keys, multi-node NVLink and cloud presets, and Ethernet under NCCL, as a user types them."""

from __future__ import annotations

import pytest

from simcomm.links import link_class
from simcomm.links.ethernet import socket_transport_reason, tcp_only
from simcomm.scenario import from_flat, to_flat
from simcomm.topologies import preset
from simcomm.topologies.nvlink import NvlinkSpec, domain_split

BENCH = ["bench", "all_reduce", "--quiet", "--sizes", "1GiB"]


def test_keys_spell_a_split_three_ways():
    for value in ("18,14", "18+14", [18, 14]):
        scn = from_flat({"cluster": "gb200-nvl72", "nodes": 32, "nvl_split": value, "nvl_domain": "72"})
        assert scn.nvlink == NvlinkSpec(72, (18, 14))
    assert to_flat(scn)["nvl_split"] == [18, 14] and to_flat(scn)["nvl_domain"] == 72


@pytest.mark.parametrize("argv, err", [
    (["--cluster", "gb200-nvl72", "-n", "2", "--nvl-domain", "72"],
     "error: nvl_domain: 72 GPUs per NVLink domain is more than the cluster's 8 (2 nodes x 4)"),
    (["--cluster", "gb200-nvl72", "-n", "32", "--nvl-split", "18,15"],
     "error: nvl_split: 18+15 = 33 trays, but the cluster has 32 nodes"),
    (["--cluster", "gb200-nvl72", "-n", "32", "--nvl-split", "18,zero"], "error: nvl_split: 'zero' must be an integer"),
    (["--cluster", "gb200-nvl72", "-n", "32", "--nvl-split", "32,0"], "error: nvl_split: 0 is out of range"),
    (["--cluster", "dgx-h100-ndr", "-n", "2", "--nvl-domain", "16"],
     "error: nvl_domain/nvl_split: preset 'dgx-h100-ndr' has no NVLink between machines"),
])
def test_bad_nvlink_input_is_one_line_exit_2(cli, argv, err):
    rc, out, errtext = cli(BENCH + argv)
    assert rc == 2 and out == ""
    assert errtext.strip().startswith(err) and len(errtext.strip().splitlines()) == 1


def test_default_split_is_printed_and_a_given_one_is_not(cli):
    rc, out, _ = cli(BENCH + ["--cluster", "gb200-nvl72", "-n", "32"])
    assert rc == 0 and "# assumed: NVLink domains: 18 + 14 nodes (trays) of 4 GPUs" in out and "NVLSTree" in out
    rc, out, _ = cli(BENCH + ["--cluster", "gb200-nvl72", "-n", "32", "--nvl-split", "16,16"])
    assert rc == 0 and "NVLink domains" not in out and "NVLSTree" in out
    assert out.startswith("# simcomm bench all_reduce: gb200-nvl72 (nvl_split=16+16), 32 node(s)")
    import json

    rc, out, _ = cli(BENCH + ["--cluster", "gb200-nvl72", "-n", "32", "--nvl-split", "16+16", "--json"])
    doc = json.loads(out)
    assert rc == 0 and doc["nvl_split"] == [16, 16] and doc["nvl_domain"] is None


@pytest.mark.parametrize("name, max_gpus, default_split, gpn, device", [
    ("gb200-nvl72", 72, (18, 18), 4, "gb200"),
    ("gb300-nvl72", 72, (18, 18), 4, "gb300"),
    ("gb200-nvl36", 72, (9, 9, 9, 9), 4, "gb200"),
    ("h100-nvl256", 256, (32,), 8, "h100"),
])
def test_multi_node_nvlink_presets(name, max_gpus, default_split, gpn, device):
    from simcomm.topologies.presets import NVLINK_PRESETS

    t = preset(name)
    assert NVLINK_PRESETS[name] == max_gpus and t.meta["device"] == device
    assert domain_split(t.meta, t.meta["nodes"]) == default_split and t.meta["gpus_per_node"] == gpn


def test_nvl36x2_pairs_two_racks_into_one_domain():
    t = preset("gb200-nvl36", nodes=18, nvlink=NvlinkSpec(domain=72))
    assert domain_split(t.meta, 18) == (18,)


# preset: (GPUs per node, NICs per node, NIC class, device, host CPU vendor), as its docstring's source states
CLOUD = {
    "aws-p5e": (8, 8, "efa-400g", "h200", "amd"),
    "gcp-a3-high": (8, 4, "tcpx-200g", "h100", "intel"),
    "gcp-a4": (8, 8, "roce-400g", "b200", "intel"),
    "azure-nd-h100-v5": (8, 8, "ib-ndr", "h100", "intel"),
    "oci-h100": (8, 8, "roce-400g", "h100", "intel"),
}


@pytest.mark.parametrize("name", sorted(CLOUD))
def test_cloud_presets(name):
    gpn, nics, nic, device, cpu = CLOUD[name]
    t = preset(name, nodes=2)
    assert t.n_ranks == 2 * gpn and t.meta["nics_per_node"] == nics and t.meta["nic_link"] == nic
    assert t.meta["device"] == device and t.meta["cpu"] == cpu
    assert socket_transport_reason(t.links.values()) is None  # RDMA or a vendor plugin: not NCCL's sockets


def test_only_plain_ethernet_is_tcp_only():
    assert tcp_only(link_class("eth-400g")) and tcp_only(link_class("eth-3125m"))
    assert not any(tcp_only(link_class(n)) for n in ("roce-400g", "efa-400g", "tcpxo-200g", "tcpx-200g", "ib-ndr"))
    why = socket_transport_reason([link_class("eth-400g"), link_class("nvswitch-h100")])
    assert why is not None and why.startswith("NCCL over TCP sockets: eth-400g is Ethernet without RDMA")
    assert socket_transport_reason([link_class("eth-400g"), link_class("roce-400g")]) is None
    assert "(--inter roce-400g)" in why  # the RoCE class of the same rate, where there is one
    assert "(a roce-* class with --inter: simcomm list links)" in socket_transport_reason([link_class("eth-10g")])


def test_eth_under_nccl_runs_sockets_unless_roce_is_named(cli):
    rc, eth, _ = cli(BENCH + ["--cluster", "dgx-h100-ndr", "-n", "2", "--inter", "eth-400g"])
    assert rc == 0 and "stack nccl-socket" in eth
    assert "# assumed: NCCL over TCP sockets: eth-400g is Ethernet without RDMA" in eth
    rc, roce, _ = cli(BENCH + ["--cluster", "dgx-h100-ndr", "-n", "2", "--inter", "roce-400g"])
    assert rc == 0 and "stack nccl (" in roce and "TCP sockets" not in roce
    rc, forced, _ = cli(BENCH + ["--cluster", "dgx-h100-ndr", "-n", "2", "--inter", "eth-400g", "--stack",
                                 "nccl-socket"])

    def busbw(text):
        return float(next(x for x in text.splitlines() if x.strip().startswith("1073741824")).split()[7])

    # the switch runs simcomm's own nccl-socket stack: the same numbers as naming it, far below RoCE
    assert busbw(eth) == busbw(forced) and busbw(eth) < 0.7 * busbw(roce)


def test_a_scenario_file_spells_the_keys_as_an_nvlink_table():
    from simcomm.scenario.resolve import flat_from_toml

    flat, _ = flat_from_toml({"cluster": "gb200-nvl72", "nodes": 32, "nvlink": {"domain": 72, "split": [18, 14]}})
    assert from_flat(flat).nvlink == NvlinkSpec(72, (18, 14))


def test_two_level_split_hangs_each_domain_off_its_own_switch():
    from simcomm.topologies.two_level import two_level

    t = two_level(5, 2, nvlink_domain=(3, 2), nics_per_node=2)
    assert t.meta["nvlink_domain"] == (3, 2)
    hubs = {n for n, d in t.graph.nodes(data=True) if d["kind"] == "switch" and str(n).endswith(".nvsw")}
    assert hubs == {"d0.nvsw", "d1.nvsw"}
    assert len(t.route(0, 5)) == 2 and len(t.route(5, 6)) > 2  # r0 -> d0 -> r5 on NVLink; r5 -> r6 leaves d0
