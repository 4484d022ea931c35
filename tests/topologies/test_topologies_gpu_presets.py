"""GPU system presets: structure, hand-checked rates, and the conventions the NCCL model reads.

Each number here is the one stated in docs/topologies.md ("GPU system presets").
"""

from collections import Counter

import pytest

from simcomm.cli.app import main
from simcomm.topologies import preset
from simcomm.topologies.intranode import DGX1_NVLINKS

GPU_PRESETS = ["dgx1-v100", "dgx-a100-hdr", "dgx-h100-ndr", "dgx-h100-fat-tree", "dgx-h200-ndr", "hgx-b200",
               "gb200-nvl72", "l40s-pcie", "aws-p4d", "aws-p5", "gcp-a3-mega"]

# preset: (GPUs per node, NICs per node, NIC rate GB/s, device, host CPU vendor)
FACTS = {
    "dgx1-v100": (8, 4, 12.5, "v100", "intel"),
    "dgx-a100-hdr": (8, 8, 25.0, "a100-80g", "amd"),
    "dgx-h100-ndr": (8, 8, 50.0, "h100", "intel"),
    "dgx-h100-fat-tree": (8, 8, 50.0, "h100", "intel"),
    "dgx-h200-ndr": (8, 8, 50.0, "h200", "intel"),
    "hgx-b200": (8, 8, 50.0, "b200", "intel"),
    "gb200-nvl72": (4, 4, 50.0, "gb200", None),
    "l40s-pcie": (8, 4, 50.0, "l40s", "intel"),
    "aws-p4d": (8, 4, 12.5, "a100", "intel"),
    "aws-p5": (8, 8, 50.0, "h100", "amd"),
    "gcp-a3-mega": (8, 8, 25.0, "h100", "intel"),
}


def _kind(t, n):
    return t.graph.nodes[n]["kind"]


def _nic_of(t, r):
    """The NIC node adjacent to rank r (the convention simcomm/nccl/layout.py reads)."""
    nics = [n for n in t.graph.adj[t.ranks[r]] if _kind(t, n) == "nic"]
    assert len(nics) == 1
    return nics[0]


def _families(t, a, b):
    return [t.links[t.link_names[lid]].family for lid in t.route(a, b)]


@pytest.mark.parametrize("name", GPU_PRESETS)
def test_structure_gpus_nics_device(name):
    gpn, nics, rate, device, cpu = FACTS[name]
    t = preset(name, nodes=2)
    assert t.n_ranks == 2 * gpn
    per_machine = Counter(d["machine"] for _, d in t.graph.nodes(data=True) if d["kind"] == "nic")
    assert per_machine == {0: nics, 1: nics}
    for r in range(t.n_ranks):  # every rank has exactly one NIC, on its own machine, of the stated rate
        nic = _nic_of(t, r)
        assert t.graph.nodes[nic]["machine"] == t.machine_of(r)
        up = [t.links[t.graph.edges[nic, x]["link"]] for x in t.graph.adj[nic] if _kind(t, x) != "rank"]
        assert len(up) == 1 and up[0].bandwidth == pytest.approx(rate * 1e9)
    assert t.meta["device"] == device and t.meta.get("cpu") == cpu
    assert t.gamma(0) > 0
    assert "sharp" not in t.meta  # no published configuration here enables SHARP


@pytest.mark.parametrize("name", GPU_PRESETS)
def test_cli_show_two_nodes(capsys, name):
    assert main(["topology", "show", name, "--nodes", "2"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"topology {name} ") and "bisection bandwidth" in out


def test_default_sizes():
    sizes = {"dgx1-v100": 256, "dgx-h200-ndr": 256, "hgx-b200": 256, "gb200-nvl72": 144, "l40s-pcie": 32,
             "aws-p4d": 128, "aws-p5": 128, "gcp-a3-mega": 128, "dgx-h100-fat-tree": 256}
    for name, n in sizes.items():
        assert preset(name).n_ranks == n, name


def test_dgx1_hybrid_cube_mesh():
    t = preset("dgx1-v100", nodes=1)
    g = t.graph
    bricks = {}
    for a in range(8):
        for b in range(a + 1, 8):
            if g.has_edge(t.ranks[a], t.ranks[b]):
                bricks[(a, b)] = round(t.links[g.edges[t.ranks[a], t.ranks[b]]["link"]].bandwidth / 25e9)
    # nvidia-smi topo -m of a DGX-1V: NV1 / NV2 per pair; NCCL's dump (nccl#671) for GPUs 0 and 1
    assert bricks == DGX1_NVLINKS
    assert bricks[(0, 1)] == 1 and bricks[(0, 2)] == 1 and bricks[(0, 3)] == 2 and bricks[(0, 4)] == 2
    assert bricks[(1, 2)] == 2 and bricks[(1, 3)] == 1 and bricks[(1, 5)] == 2
    for gpu in range(8):  # six NVLink2 bricks per V100 = 150 GB/s per direction
        assert sum(v for k, v in bricks.items() if gpu in k) == 6
    assert len(bricks) == 16 and sum(bricks.values()) == 24
    assert t.links["nvlink2x2"].bandwidth == 50e9
    # a joined pair talks directly; an unjoined pair (0-5: other socket) crosses PCIe, memory and QPI
    assert t.path(0, 3) == ["r0", "r3"]
    assert t.path(0, 5) == ["r0", "m0.pcie0", "m0.cpu0", "m0.mem0", "m0.cpu0", "m0.cpu1", "m0.pcie2", "r5"]
    assert [t.link_names[lid] for lid in t.route(0, 5)] == ["pcie3", "pcie3", "shm", "shm", "qpi-bdw", "pcie3",
                                                           "pcie3"]
    for a in range(8):
        for b in range(8):
            if a != b and (min(a, b), max(a, b)) not in DGX1_NVLINKS:
                assert "nvlink" not in _families(t, a, b) and "shm" in _families(t, a, b)


def test_dgx1_nics_share_a_pcie_switch_with_their_gpus():
    t = preset("dgx1-v100", nodes=2)
    for r in range(8):
        nic = _nic_of(t, r)
        assert nic == f"m0.nic{r // 2}"  # 4 EDR NICs, GPUs 2j and 2j+1 on PCIe switch j with NIC j
        assert t.graph.has_edge(t.ranks[r], f"m0.pcie{r // 2}")
    assert t.links["ib-edr"].bandwidth == 12.5e9


def test_gb200_nvlink_domain_spans_18_trays():
    t = preset("gb200-nvl72", nodes=36)
    assert t.meta["nvlink_domain"] == 18 and t.n_ranks == 144
    hub = "d0.nvsw"
    assert sum(1 for n in t.graph.adj[hub] if _kind(t, n) == "rank") == 72
    # trays 0 and 17 (ranks 0 and 71) share the domain: NVLink only, no NIC
    assert t.path(0, 71) == ["r0", hub, "r71"]
    assert set(_families(t, 0, 71)) == {"nvswitch"}
    assert t.links["nvswitch-nvl72"].bandwidth == 900e9
    # tray 18 is in the next rack: the route leaves through the NICs
    far = t.path(0, 72)
    assert far[1] == "m0.nic0" and far[-2] == "m18.nic0" and "nvswitch" not in _families(t, 0, 72)


def test_gb200_two_trays_stay_on_nvlink():
    t = preset("gb200-nvl72", nodes=2)
    assert set(_families(t, 0, 7)) == {"nvswitch"}


def test_l40s_without_p2p_routes_through_host_memory():
    t = preset("l40s-pcie", nodes=1)
    g = t.graph
    assert t.meta["p2p"] is False
    assert not any(_kind(t, u) == "rank" and _kind(t, v) == "rank" for u, v in g.edges)  # no NVLink, no P2P
    assert not any(lc.family in ("nvlink", "nvswitch") for lc in t.links.values())
    # same PCIe switch: up to the CPU, into memory, out of memory, down again
    assert t.path(0, 1) == ["r0", "m0.pcie0", "m0.cpu0", "m0.mem0", "m0.cpu0", "m0.pcie0", "r1"]
    # other socket: the receiver reads the sender socket's memory across UPI
    assert t.path(0, 7) == ["r0", "m0.pcie0", "m0.cpu0", "m0.mem0", "m0.cpu0", "m0.cpu1", "m0.pcie3", "r7"]
    for a in range(8):
        for b in range(8):
            if a != b:
                fams = _families(t, a, b)
                assert fams.count("pcie") == 4 and "shm" in fams
    assert t.links["pcie4"].bandwidth == 31.5e9 and t.links["shm-ddr5-4800x8"].bandwidth == 153.6e9
    assert t.links["upi-spr"].bandwidth == 22e9 and t.links["pcie5"].bandwidth == 63e9


def test_l40s_two_gpus_and_one_nic_per_pcie_switch():
    t = preset("l40s-pcie", nodes=2)
    for r in range(8):
        assert _nic_of(t, r) == f"m0.nic{r // 2}" and t.graph.has_edge(t.ranks[r], f"m0.pcie{r // 2}")
    assert t.links["roce-400g"].bandwidth == 50e9  # 200 Gb/s per GPU on average


def test_cloud_presets_nics():
    p4d = preset("aws-p4d", nodes=2)
    assert [_nic_of(p4d, r) for r in range(8)] == [f"m0.nic{j // 2}" for j in range(8)]  # 2 GPUs per EFA
    assert p4d.links["efa-100g"].bandwidth == 12.5e9 and p4d.links["nvswitch-a100"].bandwidth == 300e9
    p5 = preset("aws-p5", nodes=2)
    assert len({_nic_of(p5, r) for r in range(8)}) == 8 and p5.links["efa-400g"].bandwidth == 50e9
    a3 = preset("gcp-a3-mega", nodes=2)
    assert a3.links["tcpxo-200g"].bandwidth == 25e9 and len({_nic_of(a3, r) for r in range(8)}) == 8
    for t in (p4d, p5, a3):  # one non-blocking switch: NIC -> switch -> NIC
        assert t.path(0, 8)[1:-1] == ["m0.nic0", "sw0", "m1.nic0"]


def test_nvswitch_rates_and_fat_tree_variant():
    assert preset("hgx-b200", nodes=2).links["nvswitch-b200"].bandwidth == 900e9
    assert preset("dgx-h200-ndr", nodes=2).links["nvswitch-h200"].bandwidth == 450e9
    assert preset("dgx-h200-ndr", nodes=2).gamma(0) == pytest.approx(3 / 4.8e12)
    ft = preset("dgx-h100-fat-tree", nodes=4)
    assert ft.meta["inter"] == "fat-tree" and ft.router.fabric.routing == "ecmp" and ft.router.fabric.levels == 3
    assert preset("dgx-h100-ndr", nodes=4).meta["inter"] == "rail"
