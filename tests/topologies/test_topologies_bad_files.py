"""Issue 15 reproducers for topology and link files: one line, never a hang, a merge or an infinite time."""

from __future__ import annotations

import os

import pytest

from simcomm.errors import ConfigError
from simcomm.topologies.custom import load_topology_file

BASE = ('ranks = ["r0", "r1"]\n{links}[nodes]\nr0 = {{ kind = "rank", machine = 0 }}\n'
        'r1 = {{ kind = "rank", machine = 1 }}\nsw = "switch"\n'
        '[[edges]]\na = "r0"\nb = "sw"\nlink = "{link}"\n[[edges]]\na = "r1"\nb = "sw"\nlink = "{link}"\n{extra}')


def _write(tmp_path, links="", link="eth-10g", extra=""):
    p = tmp_path / "t.toml"
    p.write_text(BASE.format(links=links, link=link, extra=extra))
    return p


def test_duplicate_edges_are_refused_not_merged(tmp_path):
    p = _write(tmp_path, extra='[[edges]]\na = "sw"\nb = "r0"\nlink = "ib-edr"\n')
    with pytest.raises(ConfigError, match="edge 2 joins 'sw' and 'r0' again"):
        load_topology_file(p)


@pytest.mark.parametrize("bw, lat, what", [("1Gb/s", "1e308s", "latency"), ("1e-3 B/s", "1us", "bandwidth"),
                                           ("1e30 B/s", "1us", "bandwidth")])
def test_absurd_link_values_are_refused(tmp_path, bw, lat, what):
    links = f'[links.mine]\nbandwidth = "{bw}"\nlatency = "{lat}"\n'
    with pytest.raises(ConfigError, match=f"{what} .* is out of range"):
        load_topology_file(_write(tmp_path, links=links, link="mine"))


def test_a_link_to_a_device_is_refused_before_reading(tmp_path):
    p = tmp_path / "zero.toml"
    os.symlink("/dev/zero", p)
    with pytest.raises(ConfigError, match="not a regular file"):
        load_topology_file(p)


def test_the_cli_says_it_in_one_line(cli, tmp_path):
    p = tmp_path / "zero.toml"
    os.symlink("/dev/zero", p)
    rc, out, err = cli("run", "-s", "allreduce", "--cluster", str(p))
    assert rc == 2 and err.startswith("error: ") and err.count("\n") == 1 and "not a regular file" in err
