"""``simcomm topology show|route`` and ``simcomm list``: golden output and exit codes."""

import json

import pytest

from simcomm.cli.app import main


@pytest.mark.parametrize("args,name", [
    (["topology", "show", "ceta-ciemat"], "show_ceta_ciemat.txt"),
    (["topology", "show", "dgx-a100-hdr", "--nodes", "4"], "show_dgx_a100_4.txt"),
    (["topology", "route", "ceta-ciemat", "0", "13"], "route_ceta_0_13.txt"),
    (["list", "links"], "list_links.txt"),
])
def test_golden(capsys, args, name, golden):
    assert main(args) == 0
    golden("topology/" + name, capsys.readouterr().out)


def test_show_json_and_png(capsys, tmp_path):
    png = tmp_path / "t.png"
    assert main(["topology", "show", "seed004-ps", "--json", "--png", str(png)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["ranks"] == 5 and data["bisection_Bps"] == pytest.approx(125e6)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main(["topology", "show", "cori-haswell", "--png", str(tmp_path / "big.png")]) == 0


@pytest.mark.parametrize("args,match", [
    (["topology", "show", "nope"], "unknown topology preset 'nope'; valid choices: aws-g4dn"),
    (["topology", "route", "ceta-ciemat", "0", "99"], "DST: rank 99 is out of range 0..15"),
    (["topology", "show", "deep-est-esb", "--nodes", "0"], "nodes must be an integer >= 1"),
    (["topology", "show", "missing.toml"], "cannot read"),
])
def test_errors_exit_2(capsys, args, match):
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and match in err and err.count("\n") == 1


def test_bad_files_exit_2(capsys, tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("ranks = [")
    assert main(["topology", "show", str(bad)]) == 2
    assert "malformed TOML" in capsys.readouterr().err
    disc = tmp_path / "disc.toml"
    disc.write_text('ranks = ["a","b"]\nedges = []\n[nodes]\na = "rank"\nb = "rank"\n')
    assert main(["topology", "show", str(disc)]) == 2
    assert "disconnected" in capsys.readouterr().err
    gml = tmp_path / "bad.graphml"
    gml.write_text("<graphml>")
    assert main(["topology", "show", str(gml)]) == 2
    assert "malformed GraphML" in capsys.readouterr().err


def test_list_topologies(capsys):
    assert main(["list", "topologies", "--json"]) == 0
    names = [e["name"] for e in json.loads(capsys.readouterr().out)]
    assert {"fat-tree", "two-level", "deep-est-esb", "seed004-ps"} <= set(names)
