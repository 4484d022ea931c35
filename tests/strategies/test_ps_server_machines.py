"""``ps`` with ``placement own`` on a cluster file that names the server's machine (server-machines)."""

from __future__ import annotations

import json

import pytest

from simcomm.errors import ConfigError
from simcomm.pipeline import build_cluster
from simcomm.scenario import from_flat


def _four_machines(tmp_path) -> str:
    """Four machines (rank - PCIe - NIC - 1 GbE - one switch); any of them may be the server's."""
    nodes = ['sw = "switch"'] + [f'{k}{m} = {{ kind = "{kind}", machine = {m} }}'
                                 for m in range(4) for k, kind in (("g", "rank"), ("n", "nic"))]
    edges = [e for m in range(4) for e in ((f"g{m}", f"n{m}", "pcie3"), (f"n{m}", "sw", "eth-1g"))]
    path = tmp_path / "c4.toml"
    path.write_text('ranks = ["g0", "g1", "g2", "g3"]\n[nodes]\n' + "\n".join(nodes) + "\n"
                    + "".join(f'[[edges]]\na = "{a}"\nb = "{b}"\nlink = "{k}"\n' for a, b, k in edges))
    return str(path)


def test_named_machine_serves_after_the_workers(tmp_path):
    f = _four_machines(tmp_path)
    scn = from_flat({"strategy": "ps", "cluster": f, "nodes": 3, "server_machines": "1"})
    assert scn.nodes == 3
    topo = build_cluster(scn, 3, 1)
    # workers g0, g2, g3 first, the server (machine 1's rank) last; no machine attached
    assert topo.ranks == ("g0", "g2", "g3", "g1") and topo.meta["server_ranks"] == (3,)
    assert topo.machine_of(3) == 1 and "servers_attached" not in topo.meta
    assert [topo.link_names[i] for i in topo.route(3, 0)] == ["pcie3", "eth-1g", "eth-1g", "pcie3"]


def test_run_trains_on_the_other_machines(tmp_path, cli):
    f = _four_machines(tmp_path)
    rc, out, err = cli("run", "-s", "ps", "--cluster", f, "--nodes", "3", "--model", "resnet18",
                       "--opt", "server_machines=0", "--no-baseline", "--json")
    assert rc == 0, err
    res = json.loads(out)
    assert res["n_ranks"] == 3 and res["breakdown"]["server"] > 0
    assert any("servers on machine(s) 0 of the cluster file" in a for a in res["assumed"])


@pytest.mark.parametrize("flat, words", [
    ({"nodes": 3}, "declares 4 machine(s); nodes = 3 cannot change it (to make 1 of them parameter servers, "
                   "name them: --opt server_machines=N[,M]"),
    ({"server_machines": "1,1"}, "server-machines: '1,1' must be distinct machine indices"),
    ({"server_machines": "x"}, "server-machines: 'x' must be distinct"),
    ({"server_machines": "1", "placement": "colocated"}, "with placement own"),
    ({"server_machines": "1,2"}, "names 2 machine(s) for 1 server(s)"),
    ({"server_machines": "1", "nodes": 4}, "4 machine(s), 1 of them serving; nodes = 4"),
])
def test_bad_names_are_one_line(tmp_path, flat, words):
    with pytest.raises(ConfigError, match=None) as exc:
        from_flat({"strategy": "ps", "cluster": _four_machines(tmp_path), **flat})
    assert words in str(exc.value) and "\n" not in str(exc.value)


def test_missing_machine_and_preset_are_one_line(tmp_path):
    scn = from_flat({"strategy": "ps", "cluster": _four_machines(tmp_path), "server_machines": "7"})
    with pytest.raises(ConfigError, match="machine 7 is not in cluster 'c4'; its machines: 0, 1, 2, 3"):
        build_cluster(scn, scn.nodes, 1)
    scn = from_flat({"strategy": "ps", "server_machines": "1", "model": "resnet18"})
    with pytest.raises(ConfigError, match="names machines of a cluster file; on preset 'deep-est-esb'"):
        build_cluster(scn, scn.nodes, 1)
