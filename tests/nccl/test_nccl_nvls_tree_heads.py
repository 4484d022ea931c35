"""NVLS-Tree across NVL72 racks: only the NVLS heads (at most 32 per NVLink domain) join the trees.

``connectNvls`` (src/graph/connect.cc) links the heads of NCCL's NVLS graph into the trees, and that graph
has at most NCCL_MAX_NVLS_ARITY = 32 heads (src/graph/search.cc): on a 72-GPU rack 32 of the 72 NICs carry
the trees, each 1/32 of the buffer per direction on two racks.
"""

from __future__ import annotations

import numpy as np
import pytest

from simcomm.engine.schedule import route_step
from simcomm.nccl.layout import group_layout
from simcomm.nccl.prepare import prepare_nccl
from simcomm.nccl.tuning import nvls_heads
from simcomm.ops import Collective
from simcomm.runtimes import NcclRuntime
from simcomm.stacks import apply_stack, get_stack
from simcomm.topologies.presets import preset


def test_two_nvl72_racks_carry_the_trees_on_32_nics_each():
    t = apply_stack(preset("gb200-nvl72", nodes=36, gpus_per_node=4), get_stack("ideal"))
    ranks = tuple(range(144))
    assert nvls_heads(group_layout(t, ranks)) == 32
    n = 1e9
    prep = prepare_nccl(Collective(0, "allreduce", ranks, n, "nvls-tree"), t, NcclRuntime())
    step = prep.steps[0]
    r = route_step(t, np.arange(144), step, np.zeros(144))
    load = np.bincount(r.links, weights=np.repeat(r.nbytes, r.route_len), minlength=len(t.capacity))
    uplink = {rank: t.route(rank, (rank + 72) % 144)[1] for rank in ranks}  # rank -> NIC -> leaf
    assert all(t.link_endpoints(uplink[k])[0].startswith("m") for k in ranks)
    heads = [k for k in ranks if k % 72 < 32]
    assert [k for k in ranks if load[uplink[k]] > 0] == heads
    # per direction n/32 through each head's NIC, against n(1 + 1/72) through every GPU's NVLink port
    nvlink_flow = float(step.nbytes[0])
    assert load[uplink[0]] / nvlink_flow == pytest.approx((1 / 32) / (1 + 1 / 72), rel=1e-12)
    assert len({round(float(load[uplink[k]]), 3) for k in heads}) == 1


def test_up_to_32_gpus_per_node_every_gpu_is_a_head():
    t = apply_stack(preset("dgx-h100-ndr", nodes=2), get_stack("ideal"))
    assert nvls_heads(group_layout(t, tuple(range(16)))) == 8


def test_nvls_search_raises_bw_inter_to_the_first_speed_at_twice_bw_intra():
    # search.cc's second pass tests bwInter < 2 bwIntra before each raise, so it stops at the first speed at or
    # above 2 bwIntra that the heads' NIC paths carry: GB200 NVL72 20 -> 22, 24, 30, 40 (= 2 x 20) stop;
    # 2 x 8 H100: 40 -> 42, 45, 48 (the NIC path's 48 GB/s caps it)
    from simcomm.nccl.tuning import graphs

    gb = apply_stack(preset("gb200-nvl72", nodes=36, gpus_per_node=4), get_stack("nccl"))
    g = graphs(group_layout(gb, tuple(range(144))))["nvls"]
    assert (g.n_ch, g.bw_intra, g.bw_inter) == (32, 20, 40)
    h = apply_stack(preset("dgx-h100-ndr", nodes=2), get_stack("nccl"))
    g = graphs(group_layout(h, tuple(range(16))))["nvls"]
    assert (g.n_ch, g.bw_intra, g.bw_inter) == (8, 40, 48)
