"""Two-level builder features: NVLink domains, host paths (cube mesh, no P2P), PCIe NIC affinity, planes."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simcomm.errors import ConfigError
from simcomm.topologies.intranode import HostPath, nic_by_switch
from simcomm.topologies.two_level import two_level


def _same_as_pair_by_pair(topo, n=500, seed=0):
    rng = np.random.default_rng(seed)
    p = topo.n_ranks
    src, dst = rng.integers(0, p, n), rng.integers(0, p, n)
    src[:p], dst[:p] = np.arange(p), np.arange(p)[::-1]
    routes = [topo.route(a, b) for a, b in zip(src.tolist(), dst.tolist(), strict=False)]
    topo._routes_one_by_one = None  # the array path must not fall back
    lens, links = topo.routes(src, dst)
    assert lens.tolist() == [len(r) for r in routes]
    assert links.tolist() == [x for r in routes for x in r]


def test_nvlink_domain_joins_machines_through_one_nvswitch():
    t = two_level(5, 4, nvlink_domain=2, inter="fat-tree", nics_per_node=4)  # domains {0,1} {2,3} {4}
    assert t.path(0, 7) == ["r0", "d0.nvsw", "r7"]           # machines 0 and 1
    assert t.path(8, 15) == ["r8", "d1.nvsw", "r15"]         # machines 2 and 3
    assert t.path(0, 8)[1] == "m0.nic0"                      # other domain: network
    assert t.graph.nodes["d0.nvsw"]["machine"] is None
    assert t.meta["nvlink_domain"] == 2
    assert [t.machine_of(r) for r in (0, 4, 8)] == [0, 1, 2]  # machines stay trays
    with pytest.raises(ConfigError, match="nvlink_domain needs intra 'nvswitch'"):
        two_level(4, 2, intra="pcie", nvlink_domain=2)
    with pytest.raises(ConfigError, match="nvlink_domain must be an integer >= 1"):
        two_level(4, 2, nvlink_domain=0)


def test_a_pcie_gpu_reaches_its_nic_through_its_one_port():
    # no NVLink: a GPU's x16 port to the PCIe switch carries its peer traffic and its NIC traffic alike
    t = two_level(2, 4, intra="pcie", intra_link="pcie5", nics_per_node=2, nic_attach="pcie5")
    assert t.path(0, 1) == ["r0", "m0.pcie", "r1"]
    assert t.path(0, 4) == ["r0", "m0.pcie", "m0.nic0", "sw0", "m1.nic0", "m1.pcie", "r4"]
    assert t.route(0, 1)[0] == t.route(0, 4)[0]  # the same directed port link
    assert t.path(3, 7)[2] == "m0.nic1"
    # NVLink machines keep their NIC on the GPU's own PCIe path, apart from NVLink
    n = two_level(2, 4, intra="nvswitch", nics_per_node=2)
    assert n.path(0, 4) == ["r0", "m0.nic0", "sw0", "m1.nic0", "r4"]
    assert two_level(2, 1, intra="pcie").path(0, 1) == ["r0", "m0.nic0", "sw0", "m1.nic0", "r1"]


def test_host_path_same_switch_and_cross_socket():
    host = HostPath(pcie_switches=2, sockets=2, uplink="pcie5", memory="shm-ddr5-4800x8", socket_link="upi-spr")
    t = two_level(1, 4, intra="pcie-host", host=host)
    assert t.path(0, 1) == ["r0", "m0.pcie0", "m0.cpu0", "m0.mem0", "m0.cpu0", "m0.pcie0", "r1"]
    assert t.path(3, 0) == ["r3", "m0.pcie1", "m0.cpu1", "m0.mem1", "m0.cpu1", "m0.cpu0", "m0.pcie0", "r0"]
    # the uplink is crossed up and down (two directed links), memory written then read
    ids = t.route(0, 1)
    assert len(set(ids)) == len(ids) == 6
    assert t.meta["host"] == {"pcie_switches": 2, "sockets": 2, "uplink": "pcie5", "memory": "shm-ddr5-4800x8",
                              "socket_link": "upi-spr"}


def test_host_path_defaults_and_errors():
    t = two_level(1, 8, intra="pcie-host")  # 4 switches (2 GPUs each) on 2 sockets
    assert t.meta["host"]["pcie_switches"] == 4 and t.meta["host"]["sockets"] == 2
    assert two_level(1, 1, intra="pcie-host").meta["host"]["sockets"] == 1
    # a switch's upstream port is of the GPUs' generation unless given: a Gen3 box has Gen3 uplinks
    gen3 = two_level(1, 2, intra="pcie-host", intra_link="pcie3", host=HostPath(pcie_switches=1, sockets=1))
    assert gen3.meta["host"]["uplink"] == "pcie3"
    assert gen3.graph.edges["m0.pcie0", "m0.cpu0"]["link"] == "pcie3"
    assert two_level(1, 8, intra="nvlink-cube-mesh").meta["host"]["uplink"] == "pcie4"
    with pytest.raises(ConfigError, match="host is only used by intra"):
        two_level(2, 2, host=HostPath())
    with pytest.raises(ConfigError, match="pcie_switches must be at most the GPUs per node"):
        two_level(1, 2, intra="pcie-host", host=HostPath(pcie_switches=4))
    with pytest.raises(ConfigError, match="sockets must be at most pcie_switches"):
        two_level(1, 2, intra="pcie-host", host=HostPath(pcie_switches=1, sockets=2))
    with pytest.raises(ConfigError, match="at most 8 GPUs per node"):
        two_level(1, 16, intra="nvlink-cube-mesh")


def test_cube_mesh_subset_of_gpus():
    t = two_level(1, 4, intra="nvlink-cube-mesh")
    assert t.path(0, 3) == ["r0", "r3"] and t.path(1, 2) == ["r1", "r2"]
    # the first face of the cube: every pair joined, so no route uses the host path (which is still built)
    assert all(len(t.route(a, b)) == 1 for a in range(4) for b in range(4) if a != b)
    assert {"nvlink2", "nvlink2x2", "pcie4", "shm"} <= set(t.links)


def test_nic_by_switch():
    assert nic_by_switch(8, 4, 4) == [0, 0, 1, 1, 2, 2, 3, 3]      # DGX-1, p4d-like
    assert nic_by_switch(8, 8, 4) == list(range(8))                # DGX A100: 2 GPUs + 2 NICs per switch
    assert nic_by_switch(8, 2, 4) == [0, 0, 0, 0, 1, 1, 1, 1]      # switches 1, 3 have no NIC
    assert nic_by_switch(4, 2, 2) == [0, 0, 1, 1]


def test_planes_are_independent_and_cross_plane_traffic_is_relayed():
    t = two_level(4, 8, nics_per_node=8, planes=8, inter="fat-tree", inter_options={"levels": 2})
    g = t.graph
    for j in range(8):  # NIC j of every node sits on plane j's switches only
        for m in range(4):
            ups = [x for x in g.adj[f"m{m}.nic{j}"] if g.nodes[x]["kind"] == "switch"]
            assert ups and all(x.startswith(f"p{j}.") for x in ups)
    # same plane: straight through it
    assert t.path(0, 8) == ["r0", "m0.nic0", "p0.leaf0", "m1.nic0", "r8"]
    # rank 0 (NIC 0) to rank 13 (NIC 5): via GPU 5 of node 0 (NVSwitch), its NIC, plane 5
    assert t.path(0, 13) == ["r0", "m0.nvsw", "r5", "m0.nic5", "p5.leaf0", "m1.nic5", "r13"]
    assert t.meta["planes"] == 8
    with pytest.raises(ConfigError, match="planes \\(3\\) must divide nics_per_node \\(8\\)"):
        two_level(2, 8, nics_per_node=8, planes=3)
    with pytest.raises(ConfigError, match="has no GPU on plane 1"):
        two_level(2, [1, 2], nics_per_node=2, planes=2)


def test_planes_with_rail_fabric():
    t = two_level(4, 8, nics_per_node=8, planes=2, inter="rail", inter_options={"nodes_per_leaf": 2})
    # plane 0 holds NICs 0, 2, 4, 6 as its 4 rails, plane 1 NICs 1, 3, 5, 7; 2 nodes per scalable unit
    assert t.path(0, 8) == ["r0", "m0.nic0", "p0.leaf0.r0", "m1.nic0", "r8"]
    assert t.path(0, 16) == ["r0", "m0.nic0", "p0.leaf0.r0", "p0.spine0", "p0.leaf1.r0", "m2.nic0", "r16"]
    assert t.path(1, 9) == ["r1", "m0.nic1", "p1.leaf0.r0", "m1.nic1", "r9"]
    # NIC 0 to NIC 1 (other plane): relayed by GPU 1 of node 0
    assert t.path(0, 17)[:4] == ["r0", "m0.nvsw", "r1", "m0.nic1"]


@settings(max_examples=20, deadline=None)
@given(nodes=st.integers(2, 12), case=st.sampled_from(["cube", "host", "domain", "planes", "planes-rail",
                                                       "switch", "pcie"]), seed=st.integers(0, 50))
def test_new_features_route_in_arrays_as_pair_by_pair(nodes, case, seed):
    if case == "cube":
        t = two_level(nodes, 8, intra="nvlink-cube-mesh", nics_per_node=4, inter="fat-tree")
    elif case == "host":
        t = two_level(nodes, 6, intra="pcie-host", nics_per_node=3, inter="fat-tree",
                      host=HostPath(pcie_switches=3, sockets=2))
    elif case == "domain":
        t = two_level(nodes, 4, nvlink_domain=3, nics_per_node=4, inter="rail", inter_options={"nodes_per_leaf": 4})
    elif case == "planes":
        t = two_level(nodes, 8, nics_per_node=8, planes=4, inter="fat-tree")
    elif case == "pcie":  # NICs behind the PCIe switch; a mixed machine with one GPU keeps its direct NIC
        t = two_level(nodes, [4] * (nodes - 1) + [1], intra="pcie", nics_per_node=2, inter="fat-tree")
    elif case == "planes-rail":
        t = two_level(nodes, 8, intra="pcie-host", nics_per_node=4, planes=2, inter="rail",
                      inter_options={"nodes_per_leaf": 3})
    else:
        t = two_level(nodes, 4, nics_per_node=2, inter="switch")
    _same_as_pair_by_pair(t, seed=seed)
