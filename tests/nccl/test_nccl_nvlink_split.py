"""NVLink domains of unequal size: 32 GB200 trays as 18 + 14 and as 16 + 16 both run NVLS-Tree, as NCCL does.

NCCL's nodes are the NVLink cliques (MNNVL fuses a clique's topology; ``src/init.cc``), ``minLocalRanks`` and
``maxLocalRanks`` may differ, and every node keeps the fewest NVLS heads any node found (``minHeadNum`` in
``ncclTopoPostset``, ``src/graph/connect.cc``).  Each node still reduces over all of its own GPUs.  Numbers
below are counted by hand from those rules.
"""

from __future__ import annotations

import pytest

from simcomm.errors import ConfigError
from simcomm.nccl.algorithms.nvls_tree import NVLSTree
from simcomm.nccl.layout import group_layout
from simcomm.nccl.prepare import choose, prepare_nccl
from simcomm.nccl.tuning import nvls_heads
from simcomm.ops import Collective
from simcomm.runtimes import NcclRuntime
from simcomm.stacks import apply_stack, get_stack
from simcomm.topologies.nvlink import NvlinkSpec, domain_split, resolve_split
from simcomm.topologies.presets import preset
from simcomm.topologies.two_level import two_level


def _gb200(split=None, nodes=32):
    spec = NvlinkSpec(split=tuple(split)) if split else None
    return apply_stack(preset("gb200-nvl72", nodes=nodes, nvlink=spec), get_stack("nccl"))


@pytest.mark.parametrize("split, sizes", [(None, (72, 56)), ((18, 14), (72, 56)), ((16, 16), (64, 64))])
def test_32_trays_run_nvls_tree_over_two_domains(split, sizes):
    t = _gb200(split)
    layout = group_layout(t, tuple(range(128)))
    assert tuple(len(n) for n in layout.nodes) == sizes
    assert layout.min_ppn == min(sizes) and nvls_heads(layout) == 32  # min(56 or 64, NCCL_MAX_NVLS_ARITY 32)
    assert NVLSTree().missing("allreduce", layout) is None
    algo, _ = choose("allreduce", layout, 2 ** 30, None, None)
    assert algo == "nvls-tree"


def test_unequal_domains_reduce_each_over_its_own_gpus():
    # 2 domains of 3 and 2 machines x 2 GPUs (6 + 4 GPUs): every GPU of a node moves n(1 + 1/L) through its
    # port, L its own node's size; heads = min(6, 4) = 4, so 4 rails per node carry the two trees
    t = apply_stack(two_level(5, 2, nvlink_domain=(3, 2), nics_per_node=2), get_stack("ideal"))
    t.meta["gpu_arch"] = 90  # an NVSwitch of the Hopper generation: NVLS
    layout = group_layout(t, tuple(range(10)))
    assert [len(n) for n in layout.nodes] == [6, 4] and nvls_heads(layout) == 4
    src, dst, nb = NVLSTree().flows("allreduce", layout, 1200.0, 0)
    flows = sorted(zip(src.tolist(), dst.tolist(), nb.tolist(), strict=False))
    in_node = [f for f in flows if layout.node_of[f[0]] == layout.node_of[f[1]]]
    across = [f for f in flows if layout.node_of[f[0]] != layout.node_of[f[1]]]
    assert sorted({round(b, 9) for a, _, b in in_node if a < 6}) == [1400.0]   # 1200 (1 + 1/6)
    assert sorted({round(b, 9) for a, _, b in in_node if a >= 6}) == [1500.0]  # 1200 (1 + 1/4)
    # 4 heads x 2 trees x both ways, 1200 / 4 / 2 each: n/H = 300 per head's NIC and direction
    assert len(across) == 16 and {b for _, _, b in across} == {150.0}
    assert sorted({a for a, _, _ in across if a < 6}) == [0, 1, 2, 3]  # the first 4 GPUs of the 6-GPU node


def test_the_split_is_an_input():
    t = preset("gb200-nvl72", nodes=32, nvlink=NvlinkSpec(split=(16, 16)))
    assert t.meta["nvlink_domain"] == (16, 16) and "nvlink_note" not in t.meta
    d = preset("gb200-nvl72", nodes=32)  # racks filled in order, and said so
    assert d.meta["nvlink_domain"] == 18 and domain_split(d.meta, 32) == (18, 14)
    assert d.meta["nvlink_note"].startswith("NVLink domains: 18 + 14 nodes (trays) of 4 GPUs")
    assert domain_split(preset("gb200-nvl72", nodes=32, nvlink=NvlinkSpec(domain=32)).meta, 32) == (8, 8, 8, 8)
    prep = prepare_nccl(Collective(0, "allreduce", tuple(range(128)), 2.0 ** 30), _gb200((16, 16)), NcclRuntime())
    assert prep.label == "NCCL NVLSTree/Simple"


@pytest.mark.parametrize("spec, nodes, err", [
    (NvlinkSpec(domain=144), 32, "nvl_domain: 144 GPUs per NVLink domain is more than the cluster's 128"),
    (NvlinkSpec(domain=96), 32, "more than preset gb200-nvl72's NVLink switches join in one domain (72)"),
    (NvlinkSpec(domain=70), 32, "not a whole number of 4-GPU trays"),
    (NvlinkSpec(split=(18, 15)), 32, "nvl_split: 18+15 = 33 trays, but the cluster has 32 nodes"),
    (NvlinkSpec(split=(20, 12)), 32, "a domain of 20 trays (80 GPUs) is more than preset gb200-nvl72's"),
    (NvlinkSpec(domain=32, split=(10, 22)), 32, "a domain of 22 trays (88 GPUs) is more than nvl_domain = 32"),
])
def test_bad_domains_are_one_line(spec, nodes, err):
    with pytest.raises(ConfigError, match=err.replace("(", r"\(").replace(")", r"\)").replace("+", r"\+")):
        resolve_split(spec, nodes, 4, 18, 72, "gb200-nvl72")


def test_machines_past_a_split_are_domains_of_their_own():
    from simcomm.topologies.nvlink import domain_of_machines

    assert domain_of_machines({"nvlink_domain": (2, 1)}, 5) == [0, 0, 1, 2, 3]
    assert domain_of_machines({"nvlink_domain": 2}, 5) == [0, 0, 1, 1, 2]
    assert domain_of_machines({}, 3) == [0, 1, 2]


def test_nvls_allgather_needs_at_most_32_gpus_per_node():
    from simcomm.nccl.algorithms.nvls import NVLS

    rack = group_layout(_gb200(nodes=18), tuple(range(72)))
    assert "at most 32 GPUs per node" in NVLS().missing("allgather", rack)
    assert NVLS().missing("allreduce", rack) is None
