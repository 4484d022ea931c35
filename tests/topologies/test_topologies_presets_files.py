"""Presets build, custom files round-trip, and bad files fail with one line."""

import pytest

from simcomm.errors import ConfigError, TopologyError, UnknownNameError
from simcomm.topologies import PRESETS, TOPOLOGIES, load_topology_file, preset, two_level
from simcomm.topologies.custom import save_topology_toml


@pytest.mark.parametrize("name", PRESETS.names())
def test_every_preset_builds(name):
    t = preset(name)
    assert t.n_ranks >= 4
    assert len(t.route(0, t.n_ranks - 1)) >= 2
    assert name in TOPOLOGIES and TOPOLOGIES.entry(name).reference


def test_preset_numbers():
    assert preset("deep-est-esb").n_ranks == 20
    assert preset("ceta-ciemat").n_ranks == 16
    assert preset("kisti-neuron", nodes=2).n_ranks == 4
    assert preset("cori-haswell", nodes=8, gpus_per_node=32).n_ranks == 256
    ps = preset("seed004-ps")
    # seed 004: 2 machines x 2 GPU workers, and one CPU server on a node of its own
    assert ps.n_ranks == 5 and [ps.machine_of(r) for r in range(5)] == [0, 0, 1, 1, 2]
    assert ps.meta["server_ranks"] == (4,) and ps.meta["server_device"] == "haswell"
    # seed 001 Table 2's "up to 3125Mb/s" is AWS's "Up to 25 Gigabit" in MB/s: 25 Gb/s, not 3.125
    assert preset("aws-g4dn").links["eth-25g"].bandwidth == 25e9 / 8 and "eth-3125m" not in preset("aws-g4dn").links
    assert preset("dgx-h100-ndr", nodes=2).n_ranks == 16
    with pytest.raises(UnknownNameError, match="unknown topology preset 'nope'"):
        preset("nope")


def test_toml_round_trip(tmp_path):
    t = two_level(2, 2, inter="fat-tree", inter_options={"oversubscription": 2}, gamma=1e-12)
    p = tmp_path / "t.toml"
    save_topology_toml(t, p)
    u = load_topology_file(p)
    assert u.ranks == t.ranks and u.n_ranks == 4
    assert sorted(u.links) == sorted(t.links)
    assert u.links["ib-hdr-os2"].bandwidth == 12.5e9
    assert u.gamma(1) == 1e-12 and u.machine_of(3) == 1
    assert len(u.route(0, 3)) == len(t.route(0, 3))


def test_toml_user_links(tmp_path):
    p = tmp_path / "c.toml"
    p.write_text('ranks = ["a", "b"]\n[links.my-ib]\nbandwidth = "90Gb/s"\nlatency = "1.5us"\n'
                 '[nodes]\na = "rank"\nb = "rank"\ns = "switch"\n'
                 '[[edges]]\na = "a"\nb = "s"\nlink = "my-ib"\n[[edges]]\na = "s"\nb = "b"\nlink = "ib-edr"\n')
    t = load_topology_file(p)
    assert t.name == "c" and t.path(0, 1) == ["a", "s", "b"]
    assert t.route_latency(0, 1) == pytest.approx(1.5e-6 + 0.7e-6)


def test_graphml_round_trip(tmp_path):
    import networkx as nx
    t = two_level(2, 2)
    g = t.graph.copy()
    for i, r in enumerate(t.ranks):
        g.nodes[r]["rank"] = i
    for _, d in g.nodes(data=True):
        if d.get("machine") is None:
            d.pop("machine", None)
    p = tmp_path / "t.graphml"
    nx.write_graphml(g, p)
    u = load_topology_file(p)
    assert u.ranks == t.ranks and u.path(0, 3)[0] == "r0"


@pytest.mark.parametrize("text,err,match", [
    ("ranks = [", ConfigError, "malformed TOML"),
    ('ranks = ["a"]\n[nodes]\na = "rank"\n', TopologyError, "missing 'edges'"),
    ('ranks = ["a","b"]\nedges = []\n[nodes]\na = "rank"\nb = "rank"\n', TopologyError, "disconnected"),
    ('ranks = ["a","z"]\n[nodes]\na = "rank"\nb = "rank"\n[[edges]]\na="a"\nb="b"\nlink="ib-edr"\n',
     TopologyError, "rank 'z' is not a node"),
    ('ranks = ["a","b"]\n[nodes]\na = "rank"\nb = "rank"\n[[edges]]\na="a"\nb="b"\nlink="warp"\n',
     UnknownNameError, "unknown link class 'warp'"),
    ('ranks = ["a","b"]\n[nodes]\na = "gpu"\nb = "rank"\n[[edges]]\na="a"\nb="b"\nlink="ib-edr"\n',
     TopologyError, "kind 'gpu'; valid choices"),
    ('ranks = ["a","b"]\n[nodes]\na = "rank"\nb = "rank"\n[[edges]]\na="a"\nb="c"\nlink="ib-edr"\n',
     TopologyError, "names node 'c'"),
])
def test_bad_toml(tmp_path, text, err, match):
    p = tmp_path / "bad.toml"
    p.write_text(text)
    with pytest.raises(err, match=match) as e:
        load_topology_file(p)
    assert "\n" not in str(e.value)


def test_bad_graphml_and_suffix(tmp_path):
    p = tmp_path / "bad.graphml"
    p.write_text("<graphml><graph><node id='a'/>")
    with pytest.raises(ConfigError, match="malformed GraphML"):
        load_topology_file(p)
    with pytest.raises(ConfigError, match="unknown format"):
        load_topology_file(tmp_path / "x.json")
    with pytest.raises(ConfigError, match="cannot read"):
        load_topology_file(tmp_path / "missing.toml")
