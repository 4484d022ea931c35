"""Link-class presets: every family present, numbers pinned to docs/links.md."""

import pytest

from simcomm.errors import ConfigError, UnknownNameError
from simcomm.links import LINKS, LinkClass, link_class

REQUIRED = ["nvlink1", "nvlink2", "nvlink3", "nvlink4", "nvswitch-a100", "nvswitch-h100",
            "pcie3", "pcie4", "pcie5", "ib-fdr", "ib-edr", "ib-hdr", "ib-ndr", "roce-100g",
            "eth-1g", "eth-10g", "eth-25g", "eth-40g", "eth-56g", "eth-100g", "eth-200g",
            "eth-400g", "aries", "shm", "nvlink5", "nvswitch-h200", "nvswitch-b200", "nvswitch-nvl72",
            "nvswitch-b200-nccl", "nvlink2-nccl", "ib-ndr-nccl", "roce-400g", "efa-100g", "efa-400g", "tcpxo-200g",
            "shm-ddr5-4800x8", "qpi-bdw", "upi-spr"]


@pytest.mark.parametrize("name", REQUIRED)
def test_required_presets_exist(name):
    lc = link_class(name)
    assert lc.name == name
    assert lc.bandwidth > 0 and lc.latency > 0
    assert lc.reference and lc.summary
    assert LINKS.entry(name).reference == lc.reference


@pytest.mark.parametrize("name,gbps,lat_us", [
    ("ib-edr", 12.5, 0.7), ("ib-hdr", 25.0, 0.7), ("ib-ndr", 50.0, 0.7),
    ("eth-1g", 0.125, 19.0), ("eth-100g", 12.5, 19.0), ("eth-56g", 7.0, 19.0),
    ("pcie3", 15.75, 1.0), ("pcie4", 31.5, 1.0), ("pcie5", 63.0, 1.0),
    ("nvlink2", 25.0, 0.6), ("nvswitch-a100", 300.0, 0.3), ("nvswitch-h100", 450.0, 0.3),
    ("aries", 8.0, 0.25), ("roce-100g", 12.5, 0.7), ("eth-3125m", 0.390625, 19.0),
    # GPU systems (docs/links.md): hand-checked from the vendor figures
    ("nvlink5", 1800 / 18 / 2, 0.6),             # 1.8 TB/s bidirectional over 18 links, per direction
    ("nvswitch-b200", 14400 / 8 / 2, 0.3),       # DGX B200: 14.4 TB/s aggregate over 8 GPUs, per direction
    ("nvswitch-nvl72", 18 * 50.0, 0.3), ("nvswitch-h200", 900 / 2, 0.3),
    ("nvswitch-b200-nccl", 18 * 40.1, 0.3), ("nvlink2-nccl", 20.0, 0.6), ("ib-ndr-nccl", 48.0, 0.7),
    ("roce-400g", 50.0, 0.7), ("efa-100g", 12.5, 9.87 / 2), ("efa-400g", 4 * 12.5, 9.87 / 2),
    ("tcpxo-200g", 25.0, 19.0), ("shm-ddr5-4800x8", 8 * 4.8 * 8 / 2, 0.46), ("qpi-bdw", 6.0, 0.46),
    ("upi-spr", 22.0, 0.46),
])
def test_preset_numbers(name, gbps, lat_us):
    lc = link_class(name)
    assert lc.bandwidth == pytest.approx(gbps * 1e9, rel=1e-12)
    assert lc.latency == pytest.approx(lat_us * 1e-6, rel=1e-12)


def test_names_are_kebab_case_and_families_known():
    from simcomm.links.toml_file import FAMILIES
    for e in LINKS.entries():
        assert e.name == e.name.lower() and " " not in e.name and "_" not in e.name
        assert e.obj.family in FAMILIES


def test_nccl_variants_are_slower_than_peak():
    for e in LINKS.entries():
        if e.name.endswith("-nccl"):
            assert e.obj.bandwidth < link_class(e.name[:-5]).bandwidth


def test_unknown_link_lists_choices():
    with pytest.raises(UnknownNameError, match=r"unknown link class 'ib-gdr' \(did you mean 'ib-xdr' or 'ib-ndr' or "
                                               r"'ib-hdr'\?\); valid choices: .*ib-edr"):
        link_class("ib-gdr")


def test_linkclass_validation_and_scaling():
    with pytest.raises(ConfigError, match="bandwidth must be positive"):
        LinkClass("x", 0.0, 1e-6)
    with pytest.raises(ConfigError, match="latency must be non-negative"):
        LinkClass("x", 1.0, -1.0)
    up = link_class("ib-edr").scaled(0.25)
    assert up.bandwidth == 12.5e9 / 4 and up.name == "ib-edrx0.25" and up.latency == 0.7e-6
