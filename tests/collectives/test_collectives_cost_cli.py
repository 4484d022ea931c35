"""``simcomm cost``: golden table and JSON output, the flagship command, bad input."""

from __future__ import annotations

import json

import pytest

LINKS_TOML = """
[links.test-100g]
bandwidth = "100Gb/s"
latency = "1us"

[links.test-nvl]
bandwidth = "300GB/s"
latency = "0.5us"
"""


@pytest.fixture
def links(tmp_path):
    f = tmp_path / "links.toml"
    f.write_text(LINKS_TOML)
    return str(f)



@pytest.mark.parametrize("case,argv", [
    ("allreduce_table.txt", ["cost", "allreduce", "--size", "100MB", "--ranks", "64", "--link", "test-100g"]),
    ("allreduce_hier_loggp.txt", ["cost", "allreduce", "--size", "64MiB", "--ranks", "48", "--link", "test-100g",
                                  "--ppn", "8", "--intra-link", "test-nvl", "--gamma", "0.1ns/B", "--model", "loggp"]),
    ("allgather_small.txt", ["cost", "allgather", "--size", "4KB", "--ranks", "33", "--link", "test-100g"]),
    ("broadcast_json.json", ["cost", "broadcast", "--size", "1MB", "--ranks", "16", "--link", "test-100g", "--json"]),
    ("alltoall_auto_json.json", ["cost", "alltoall", "--size", "1KB", "--ranks", "8", "--link", "test-100g",
                                 "--algo", "auto", "--json"]),
])
def test_collectives_cost_cli_golden(capsys, links, case, argv, cli, golden):
    rc, out, err = cli(argv + ["--links", links])
    assert rc == 0, err
    golden("cost/" + case, out)
    if case.endswith(".json"):
        data = json.loads(out)
        assert sum(a["fastest"] for a in data["algorithms"]) == 1


def test_collectives_cost_cli_table_content(capsys, links, cli):
    rc, out, _ = cli(["cost", "allreduce", "--size", "100MB", "--ranks", "64", "--link", "test-100g",
                      "--links", links, "--json"])
    assert rc == 0
    data = json.loads(out)
    ring = next(a for a in data["algorithms"] if a["name"] == "ring")
    # 2·63 µs latency; 2·63/64·1e8 B / 12.5e9 B/s = 15.75 ms
    assert ring["latency_s"] == pytest.approx(126e-6) and ring["bandwidth_s"] == pytest.approx(15.75e-3)
    assert data["auto"] == "rabenseifner" and data["fastest"] == "rabenseifner"
    assert len(data["algorithms"]) == 7


def test_collectives_cost_cli_flagship(capsys, cli):
    pytest.importorskip("simcomm.links.infiniband")
    rc, out, err = cli(["cost", "allreduce", "--size", "100MB", "--ranks", "64", "--link", "ib-edr"])
    assert rc == 0, err
    assert "<- fastest" in out and "auto (MPICH default selection) picks: rabenseifner" in out
    for name in ("ring", "recursive-doubling", "rabenseifner", "binomial", "binary-tree", "double-binary-tree"):
        assert name in out


def test_collectives_cost_cli_hierarchical_skipped_when_ppn_mismatch(capsys, links, cli):
    rc, out, _ = cli(["cost", "allreduce", "--size", "1MB", "--ranks", "7", "--link", "test-100g",
                      "--links", links, "--json"])
    assert rc == 0
    assert "hierarchical" in [a["name"] for a in json.loads(out)["algorithms"]]  # ppn=1 divides 7


@pytest.mark.parametrize("argv,needle", [
    (["cost", "allred", "--size", "1MB", "--ranks", "4", "--link", "test-100g"], "unknown collective 'allred'"),
    (["cost", "allreduce", "--size", "1MB", "--ranks", "4", "--link", "nope"], "unknown link class"),
    (["cost", "allreduce", "--size", "1MB", "--ranks", "4", "--link", "test-100g", "--algo", "x"],
     "unknown allreduce algorithm 'x'; valid choices: auto"),
    (["cost", "allreduce", "--size", "1MB", "--ranks", "4", "--link", "test-100g", "--model", "x"],
     "unknown cost model 'x'; valid choices: hockney, loggp"),
    (["cost", "allreduce", "--size", "0", "--ranks", "4", "--link", "test-100g"], "size: '0' must be positive"),
    (["cost", "allreduce", "--size", "-5MB", "--ranks", "4", "--link", "test-100g"], "must be positive"),
    (["cost", "allreduce", "--size", "5XB", "--ranks", "4", "--link", "test-100g"], "size: cannot parse"),
    (["cost", "allreduce", "--size", "1MB", "--ranks", "0", "--link", "test-100g"], "ranks: 0"),
    (["cost", "allreduce", "--size", "1MB", "--ranks", "-2", "--link", "test-100g"], "ranks: -2"),
    (["cost", "allreduce", "--size", "1MB", "--ranks", "four", "--link", "test-100g"], "ranks"),
    (["cost", "allreduce", "--size", "1MB", "--ranks", "4", "--link", "test-100g", "--gamma", "fast"], "gamma"),
    (["cost", "allreduce", "--size", "1MB", "--ranks", "8", "--link", "test-100g", "--ppn", "3"], "ppn: 3"),
    (["cost", "allreduce", "--size", "1MB", "--ranks", "8", "--link", "test-100g", "--ppn", "3",
      "--algo", "hierarchical"], "ppn"),
    (["cost", "allreduce", "--size", "1MB", "--ranks", "4", "--link", "test-100g", "--overhead", "1us"],
     "overhead"),
])
def test_collectives_cost_cli_bad_input(capsys, links, argv, needle, cli):
    rc, out, err = cli(argv + ["--links", links])
    assert rc == 2
    assert out == ""
    assert err.startswith("error: ") and err.count("\n") == 1 and needle in err
    assert "Traceback" not in err


def test_collectives_cost_cli_bad_links_file(capsys, tmp_path, cli):
    bad = tmp_path / "bad.toml"
    bad.write_text("[links\n")
    rc, _, err = cli(["cost", "allreduce", "--size", "1MB", "--ranks", "4", "--link", "x",
                      "--links", str(bad)])
    assert rc == 2 and "malformed TOML" in err


def test_collectives_list_catalogues(capsys, cli):
    rc, out, _ = cli(["list", "collectives", "--json"])
    names = [e["name"] for e in json.loads(out)]
    assert rc == 0 and "allreduce/double-binary-tree" in names and len(names) >= 24
    rc, out, _ = cli(["list", "cost-models", "--json"])
    assert rc == 0 and [e["name"] for e in json.loads(out)] == ["hockney", "loggp"]


def test_collectives_cost_cli_deterministic(capsys, links, cli):
    argv = ["cost", "reduce_scatter", "--size", "10MB", "--ranks", "12", "--link", "test-100g", "--links", links,
            "--model", "loggp", "--json"]
    assert cli(argv)[1] == cli(argv)[1]
