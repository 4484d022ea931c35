"""A calibrated link file (`links`) on a cluster: a route between machines adds up to the fitted latency."""

from __future__ import annotations

import pytest

from simcomm.errors import ConfigError
from simcomm.pipeline import Context
from simcomm.scenario import from_flat

CALIB = ('[links.calib-inter]\nbandwidth = "100 MB/s"\nlatency = "50 us"\nfamily = "ethernet"\nsummary = "fit"\n'
         '[links.calib-intra]\nbandwidth = "2 GB/s"\nlatency = "8 us"\nfamily = "pcie"\nsummary = "fit"\n')


def _route(topo, a, b):
    path = list(topo.path(a, b))
    return [topo.links[topo.graph.edges[u, v]["link"]] for u, v in zip(path, path[1:], strict=False)]


@pytest.mark.parametrize("stack", ["ideal", "mpi-tcp", "nccl", "gloo"])
def test_route_between_machines_adds_up_to_the_fit(tmp_path, stack):
    f = tmp_path / "calib.toml"
    f.write_text(CALIB)
    ctx = Context(from_flat({"cluster": "deep-est-esb", "nodes": 2, "links": str(f), "stack": stack}))
    raw, eff = ctx.cluster(2, 0)
    hops = _route(eff, 0, 1)
    # 50 us end to end whatever the stack adds on the other hops; the measured rate is the bottleneck, unscaled
    assert sum(h.latency for h in hops) == pytest.approx(50e-6, abs=1e-12)
    assert min(h.bandwidth for h in hops) == 100e6
    assert [h.name for h in hops].count("calib-inter") == 2
    assert any(line.startswith("links: ") for line in ctx.calibration_notes(2, 0))


def test_trays_sharing_an_nvlink_domain_keep_it_and_racks_get_the_fit(tmp_path):
    # GB200 NVL72, two racks of 18 trays: tray 0 reaches tray 1 over the rack's NVLink switches (no host link to
    # calibrate), so calib-inter goes on the NIC links of the route to the other rack, which adds up to the fit
    f = tmp_path / "calib.toml"
    f.write_text('[links.calib-inter]\nbandwidth = "10 GB/s"\nlatency = "20 us"\nfamily = "infiniband"\n'
                 'summary = "fit"\n')
    ctx = Context(from_flat({"cluster": "gb200-nvl72", "nodes": 36, "gpus_per_node": 4, "links": str(f),
                             "stack": "nccl"}))
    raw, eff = ctx.cluster(144, 0)
    assert "calib-inter" not in [h.name for h in _route(eff, 0, 4)]  # tray 0 -> tray 1: NVLink only
    across = _route(eff, 0, 72)  # rack 0 -> rack 1
    assert [h.name for h in across].count("calib-inter") == 2
    assert sum(h.latency for h in across) == pytest.approx(20e-6, abs=1e-12)
    assert min(h.bandwidth for h in across) == 10e9


def test_intra_class_goes_inside_a_machine(tmp_path):
    f = tmp_path / "calib.toml"
    f.write_text(CALIB)
    ctx = Context(from_flat({"cluster": "dgx-a100-hdr", "nodes": 2, "links": str(f), "stack": "ideal"}))
    raw, eff = ctx.cluster(2, 0)
    hops = _route(eff, 0, 1)  # GPUs 0 and 1 of machine 0
    assert {h.name for h in hops} == {"calib-intra"} and sum(h.latency for h in hops) == pytest.approx(8e-6)


def test_a_file_without_calibrated_classes_is_one_line(tmp_path):
    f = tmp_path / "other.toml"
    f.write_text('[links.mine]\nbandwidth = "1 GB/s"\nlatency = "1 us"\n')
    ctx = Context(from_flat({"nodes": 2, "links": str(f)}))
    with pytest.raises(ConfigError, match="has no calib-inter or calib-intra class"):
        ctx.cluster(2, 0)


def test_run_and_compare_take_links(cli, tmp_path):
    f = tmp_path / "calib.toml"
    f.write_text(CALIB)
    rc, out, err = cli("run", "-s", "allreduce", "--nodes", "2", "--links", str(f), "--no-baseline")
    assert rc == 0, err
    assert "assumed: links: " in out
    rc, out, err = cli("compare", "--nodes", "2", "--strategies", "allreduce,sgp", "--links", str(f), "--quiet")
    assert rc == 0, err
    rc, out, err = cli("run", "-s", "allreduce", "--nodes", "2", "--links", str(tmp_path / "missing.toml"))
    assert rc == 2 and "links: file" in err and err.count("\n") == 1


@pytest.mark.parametrize("stack", ["ideal", "nccl"])
def test_both_classes_keep_the_inter_route_exact(tmp_path, stack):
    f = tmp_path / "calib.toml"
    f.write_text(CALIB)
    ctx = Context(from_flat({"cluster": "dgx-a100-hdr", "nodes": 2, "links": str(f), "stack": stack}))
    raw, eff = ctx.cluster(2, 0)
    hops = _route(eff, 0, 8)  # GPU 0 of machine 0 to GPU 0 of machine 1
    assert sum(h.latency for h in hops) == pytest.approx(50e-6, abs=1e-12)
    assert sum(h.latency for h in _route(eff, 8, 9)) == pytest.approx(8e-6, abs=1e-12)  # machine 1 alike
