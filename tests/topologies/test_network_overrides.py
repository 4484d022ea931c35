"""Network overrides change the network and nothing else (issue 25, item 1).

For every preset and every network override: the NVLink domains, the intranode fabric (NVSwitch, NVLink
mesh, PCIe tree, host path), the host CPU, the devices and a server node stay exactly the preset's; the
override is echoed in the run's header, its ``assumed:`` lines and its ``--json``.  An override that
contradicts the machine is one error line, exit status 2.
"""

from __future__ import annotations

import json

import pytest

from simcomm.links.base import INTRANODE_FAMILIES
from simcomm.pipeline import simulate
from simcomm.scenario import from_flat
from simcomm.topologies.overrides import NetworkOverrides, apply_network
from simcomm.topologies.presets import PRESETS, preset, published_size

PRESET_NAMES = PRESETS.names()
#: intranode fabric -> a link class of the family it takes (not every preset's own)
INTRA_LINK = {"nvswitch": "nvswitch-h100", "nvlink-mesh": "nvlink4", "nvlink-cube-mesh": "nvlink3", "pcie": "pcie5",
              "pcie-host": "pcie5", "shm": "shm"}


def _overrides(base) -> dict[str, NetworkOverrides]:
    """Every override field on its own, with a value other than the preset's, plus a mix of them."""
    args = base.recipe.args
    inter = "roce-400g" if args["nic_link"] != "roce-400g" else "ib-ndr"
    return {
        "inter": NetworkOverrides(inter=inter),
        "intra": NetworkOverrides(intra=INTRA_LINK[args["intra"]]),
        "nic": NetworkOverrides(nic="pcie5" if args["nic_attach"] != "pcie5" else "pcie3"),
        "nics_per_node": NetworkOverrides(nics_per_node=1),
        "topology": NetworkOverrides(topology="fat-tree" if args["inter"] != "fat-tree" else "switch"),
        "oversubscription": NetworkOverrides(topology="fat-tree", oversubscription=2.0),
        "all": NetworkOverrides(inter=inter, nic="pcie4", nics_per_node=1, topology="torus"),
    }


def _machine(topo, intra_renamed: bool = False) -> set:
    """Every edge inside a node or an NVLink domain (intranode link families, no NIC end), with its link class
    (only its endpoints when the intranode link class itself was overridden)."""
    g, out = topo.graph, set()
    for u, v, name in g.edges(data="link"):
        if "nic" in (g.nodes[u]["kind"], g.nodes[v]["kind"]) or topo.links[name].family not in INTRANODE_FAMILIES:
            continue
        out.add((*sorted((str(u), str(v))), None if intra_renamed else name))
    return out


def _kept_meta(topo) -> dict:
    keys = ("nvlink_domain", "host", "p2p", "cpu", "device", "server_ranks", "server_device", "gpus_per_node",
            "intra", "planes")
    return {k: topo.meta.get(k) for k in keys}


def _nodes_for(name: str) -> int:
    # gb200-nvl72: 20 trays span two NVLink domains (18 + 2); every other preset: 2 machines
    return 20 if name == "gb200-nvl72" else 2


@pytest.mark.parametrize("name", PRESET_NAMES)
def test_every_network_override_keeps_the_machine(name):
    base = preset(name, nodes=_nodes_for(name))
    ranks = range(base.n_ranks)
    gammas = [base.gamma(r) for r in ranks]
    for what, over in _overrides(base).items():
        topo = apply_network(base, over, name)
        assert topo.network == over, what
        assert _kept_meta(topo) == _kept_meta(base), what
        assert _machine(topo, "intra" in over.given()) == _machine(base, "intra" in over.given()), what
        assert [topo.gamma(r) for r in ranks] == gammas, what  # devices, and a CPU server's own
        assert topo.ranks == base.ranks, what
        # ranks that share a node or an NVLink domain still talk over it (same path, no NIC)
        same = [(a, b) for a in ranks for b in ranks if a < b and base.router.group[a] == base.router.group[b]]
        for a, b in same[:64]:
            assert topo.path(a, b) == base.path(a, b), (what, a, b)
        for key, meta_key in (("inter", "nic_link"), ("intra", "intra_link"), ("nics_per_node", "nics_per_node"),
                              ("topology", "inter")):
            if getattr(over, key) is not None:  # and the network is what was typed
                assert topo.meta[meta_key] == getattr(over, key), (what, key)
        if over.oversubscription is not None:
            assert topo.meta["inter_options"]["oversubscription"] == over.oversubscription


@pytest.mark.parametrize("name", PRESET_NAMES)
def test_the_presets_own_network_as_an_override_is_the_preset(name):
    """Typing the preset's own network (gb200-nvl72 --inter ib-ndr) builds the very same cluster."""
    base = preset(name, nodes=_nodes_for(name))
    a = base.recipe.args
    over = NetworkOverrides(inter=a["nic_link"], nic=a["nic_attach"], nics_per_node=a["nics_per_node"],
                            topology=a["inter"])
    topo = apply_network(base, over, name)
    assert sorted(map(str, topo.graph.edges(data="link"))) == sorted(map(str, base.graph.edges(data="link")))
    assert {k: v for k, v in topo.meta.items()} == base.meta
    assert all(topo.route(0, b) == base.route(0, b) for b in range(base.n_ranks))


@pytest.mark.parametrize("name", PRESET_NAMES)
def test_every_run_echoes_its_overrides(name):
    """Header, assumed: line and --json of a run on every preset with an override."""
    from rich.console import Console

    from simcomm.cli.run_cmd import render_result

    base = preset(name, nodes=2)
    inter = "roce-400g" if base.recipe.args["nic_link"] != "roce-400g" else "ib-ndr"
    res = simulate(from_flat({"cluster": name, "nodes": 2, "strategy": "allreduce", "fidelity": "analytic",
                              "inter": inter, "nics_per_node": 1}), baseline=False, analytic=False)
    assert res.to_dict()["network"] == {"inter": inter, "nics_per_node": 1}
    lines = [x for x in res.assumed if x.startswith("network overrides (given): ")]
    assert lines == [lines[0]] and f"inter={inter}, nics_per_node=1 on {name}" in lines[0]
    console = Console(width=1000, highlight=False, soft_wrap=True)  # the header on one line, whatever its length
    with console.capture() as cap:
        render_result(res, console)
    head = cap.get().splitlines()[0]
    assert head.startswith(f"allreduce on {name} (inter={inter}, nics_per_node=1): 2 node(s)")


def test_a_run_without_overrides_echoes_none():
    res = simulate(from_flat({"cluster": "dgx-a100-hdr", "nodes": 2, "strategy": "allreduce", "fidelity": "analytic"}),
                   baseline=False, analytic=False)
    assert "network" not in res.to_dict()
    assert not any("network overrides" in x or "beyond its published size" in x for x in res.assumed)


def test_gb200_keeps_its_nvlink_domain_under_any_nic(cli):
    """The bug of issue 25: --inter (even the preset's own ib-ndr) rebuilt GB200 without its NVLink domain."""
    rows = {}
    for extra in ((), ("--inter", "ib-ndr"), ("--inter", "roce-400g")):
        rc, out, err = cli("bench", "allreduce", "--cluster", "gb200-nvl72", "--nodes", "2", "--sizes", "1GB",
                           "--json", *extra)
        assert rc == 0, err
        doc = json.loads(out)
        rows[extra] = doc["rows"]
        if extra:
            assert doc["network"] == {"inter": extra[1]}
            assert any(x.startswith(f"network overrides (given): inter={extra[1]} on gb200-nvl72") and
                       "NVLink domains of 18 nodes" in x for x in doc["assumed"])
        else:
            assert "network" not in doc
    # 2 trays of one NVL72 rack never touch a NIC: the numbers are the preset's, NVLS over NVLink
    assert rows[()] == rows[("--inter", "ib-ndr")] == rows[("--inter", "roce-400g")]
    assert rows[()][0]["algorithm"].startswith("NCCL NVLS/")


def test_bench_header_echoes_the_override(cli):
    rc, out, _ = cli("bench", "allreduce", "--cluster", "dgx-a100-hdr", "--nodes", "2", "--sizes", "1MB",
                     "--nics-per-node", "4")
    assert rc == 0
    assert out.startswith("# simcomm bench allreduce: dgx-a100-hdr (nics_per_node=4), 2 node(s)")
    assert "# assumed: network overrides (given): nics_per_node=4 on dgx-a100-hdr: only the network changes; " \
           "kept from the preset: amd host CPU, a100-80g devices" in out


@pytest.mark.parametrize("argv, field", [
    (("--cluster", "l40s-pcie", "--intra", "nvswitch-h100"), "intra"),  # an NVSwitch on a box without NVLink
    (("--cluster", "dgx-a100-hdr", "--intra", "pcie4"), "intra"),  # PCIe as the NVSwitch's links
    (("--cluster", "gb200-nvl72", "--nics-per-node", "8"), "nics_per_node"),  # more NICs than the tray's 4 GPUs
    (("--cluster", "dgx-a100-hdr", "--inter", "nvlink4"), "inter"),  # an intranode link as the network
    (("--cluster", "dgx-a100-hdr", "--nic", "ib-ndr"), "nic"),  # a GPU reaches its NIC over PCIe
    (("--cluster", "dgx-a100-hdr", "--oversubscription", "2"), "oversubscription"),  # a rail network
    (("--cluster", "dgx-a100-hdr", "--inter", "no-such-link"), "inter"),
])
def test_an_override_that_contradicts_the_preset_is_one_line(cli, argv, field):
    rc, out, err = cli("run", "-s", "allreduce", "--nodes", "2", "--no-baseline", *argv)
    assert rc == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {field}: "), err
    assert "Traceback" not in err


def test_a_preset_beyond_its_published_size_says_so_once():
    assert published_size("dgx-a100-hdr").nodes == 32 and published_size("seed004-ps").nodes == 2
    line = "cluster dgx-a100-hdr beyond its published size: 33 nodes where it describes 32"
    res = simulate(from_flat({"cluster": "dgx-a100-hdr", "nodes": 33, "strategy": "allreduce",
                              "fidelity": "analytic"}), baseline=False, analytic=False)
    assert [x for x in res.assumed if "published size" in x] == [
        line + "; simcomm grows it by the preset's own rules (the same machines and links, more of them)"]
    res = simulate(from_flat({"cluster": "dgx-a100-hdr", "nodes": 32, "strategy": "allreduce",
                              "fidelity": "analytic"}), baseline=False, analytic=False)
    assert not any("published size" in x for x in res.assumed)
    assert published_size("gb200-nvl72").beyond("gb200-nvl72", 36, 8) == (
        "cluster gb200-nvl72 beyond its published size: 8 GPUs (ranks) per node where it describes 4; simcomm "
        "grows it by the preset's own rules (the same machines and links, more of them)")


def test_compare_echoes_the_override_once_for_every_strategy(cli):
    """ps runs on a cluster grown by a server node, allreduce on the plain one: the same one line for both."""
    rc, out, err = cli("compare", "--strategies", "allreduce,ps", "--nodes", "2", "--cluster", "dgx-a100-hdr",
                       "--nics-per-node", "4", "--fidelity", "analytic")
    assert rc == 0, err
    assert "compare on dgx-a100-hdr (nics_per_node=4), " in out
    assert out.count("assumed: network overrides (given): nics_per_node=4 on dgx-a100-hdr: only the network "
                     "changes; kept from the preset: amd host CPU, a100-80g devices\n") == 1


def test_oversubscription_on_a_one_switch_preset_says_it_builds_a_fat_tree():
    res = simulate(from_flat({"cluster": "aws-p4d", "nodes": 2, "strategy": "allreduce", "fidelity": "analytic",
                              "oversubscription": 2}), baseline=False, analytic=False)
    line, = [x for x in res.assumed if x.startswith("network overrides (given): oversubscription=2 on aws-p4d")]
    assert line.endswith("; oversubscription is a fat-tree's (a preset on one switch gets a two-level fat-tree)")
    assert preset("aws-p4d").meta["inter"] == "switch"
