"""Small messages as NCCL runs them: which algorithm NCCL can choose, and what a small call costs."""

from __future__ import annotations

import pytest

import simcomm.nccl.algorithms  # noqa: F401  (registers the catalogue)
from simcomm.errors import ConfigError
from simcomm.nccl.layout import group_layout
from simcomm.nccl.prepare import choose
from simcomm.stacks import apply_stack, get_stack
from simcomm.topologies.two_level import two_level


def hopper_box(gpus: int, nodes: int = 1):
    topo = two_level(nodes, gpus, intra="nvswitch", intra_link="nvswitch-h100", nic_link="ib-ndr",
                     nics_per_node=gpus, nic_attach="pcie5", inter="rail", device="h100", name="test-h100")
    return apply_stack(topo, get_stack("nccl"))


@pytest.mark.parametrize("nbytes", [8.0, 65536.0, float(1 << 20), float(1 << 30), float(8 << 30)])
def test_two_hopper_gpus_never_run_nvls(nbytes):
    # ncclNvlsInit (src/transport/nvls.cc): no NVLS support when the node has <= 2 GPUs, so neither NVLS nor
    # NVLS-Tree is a candidate, at any size; with 3 GPUs NVLS is one again
    two = group_layout(hopper_box(2), list(range(2)))
    assert choose("allreduce", two, nbytes, None, None)[0] not in ("nvls", "nvls-tree")
    across = group_layout(hopper_box(2, nodes=2), list(range(4)))
    assert choose("allreduce", across, nbytes, None, None)[0] not in ("nvls", "nvls-tree")


def test_nvls_returns_from_three_gpus_and_forcing_it_on_two_is_one_line():
    three = group_layout(hopper_box(3), list(range(3)))
    assert choose("allreduce", three, float(8 << 30), "nvls", None)[0] == "nvls"  # a candidate again
    eight = group_layout(hopper_box(8), list(range(8)))
    assert choose("allreduce", eight, float(1 << 30), None, None)[0] == "nvls"
    two = group_layout(hopper_box(2), list(range(2)))
    with pytest.raises(ConfigError, match=r"NVLS needs at least 3 GPUs in each NVLink domain .* the smallest here "
                                          r"has 2"):
        choose("allreduce", two, 8.0, "nvls", None)


def _ops(topo, kind, nbytes, **rt):
    from simcomm.nccl.prepare import prepare_nccl
    from simcomm.ops import Collective
    from simcomm.runtimes import NcclRuntime

    return prepare_nccl(Collective(0, kind, tuple(range(topo.n_ranks)), nbytes), topo, NcclRuntime(**rt))


def test_proxy_serves_a_steps_channels_in_turn_pinned_by_hand():
    from simcomm.nccl import tuning
    from simcomm.nccl.execution import channels_used, proxy_wait_us

    lay = group_layout(hopper_box(8, nodes=2), list(range(16)))
    tree = tuning.model("tree", "ll", "allreduce", lay, 8.0)
    # Tree/LL drops to one channel below 4 KiB (512 threads x 8 B): its proxy posts that channel's one send
    # (NCCL's table prices it); the receive was posted ahead and the GPU polls the LL flags, so nothing waits
    assert channels_used("tree", "ll", "allreduce", lay, 8.0)[0] == 1
    assert proxy_wait_us(tree, "allreduce", lay, 8.0) == 0.0
    # 64 KiB: 16 channels over 8 NICs' proxies, 2 each: the second send waits 1 post of netOverhead (1 us,
    # Intel) at each of the tree's 2 network steps (up and down one level): 2 us
    assert channels_used("tree", "ll", "allreduce", lay, 65536.0)[0] == 16
    assert proxy_wait_us(tree, "allreduce", lay, 65536.0) == pytest.approx(2.0)
    # one node: no network step, no proxy; NVLS-Tree keeps NCCL's own price for its fixed channels
    one = group_layout(hopper_box(8), list(range(8)))
    assert proxy_wait_us(tuning.model("ring", "ll", "allreduce", one, 8.0), "allreduce", one, 8.0) == 0.0
    nvls_tree = tuning.model("nvls-tree", "simple", "allreduce", lay, float(1 << 30))
    assert proxy_wait_us(nvls_tree, "allreduce", lay, float(1 << 30)) == 0.0


def test_simple_waits_for_sends_and_receives_ll128_for_sends_only():
    from simcomm.nccl import tuning
    from simcomm.nccl.execution import channels_used, proxy_wait_us

    lay = group_layout(hopper_box(8, nodes=2), list(range(16)))
    n = float(1 << 20)
    # 1 MiB on a 2 x 8 ring: every one of the 16 channels runs (LL128 and Simple alike), 2 per NIC's proxy;
    # the ring crosses the node boundary twice for an all-reduce
    assert channels_used("ring", "ll128", "allreduce", lay, n)[0] == 16
    assert channels_used("ring", "simple", "allreduce", lay, n)[0] == 16
    # LL128: the GPU polls each line's flag, so only the sends serialise: 1 post ahead x 1 us x 2 steps
    ll128 = tuning.model("ring", "ll128", "allreduce", lay, n)
    assert proxy_wait_us(ll128, "allreduce", lay, n) == pytest.approx(2.0)
    # Simple: the GPU waits for the tail the proxy writes after each receive, so a step's 2 sends and 2
    # receives serialise: 3 operations ahead x 3 x 1 us x 2 steps
    simple = tuning.model("ring", "simple", "allreduce", lay, n)
    assert proxy_wait_us(simple, "allreduce", lay, n) == pytest.approx(18.0)


def test_one_gpu_per_node_on_an_amd_host_pays_simples_triple_overhead():
    from simcomm.nccl import tuning
    from simcomm.nccl.execution import proxy_wait_us

    topo = hopper_box(1, nodes=2)
    topo.meta["cpu"] = "amd"
    lay = group_layout(topo, [0, 1])
    ring = tuning.model("ring", "simple", "allreduce", lay, 8.0)
    # 1 channel, 1 proxy (its send and receive): 1 operation of 3 x 2 us (Simple, AMD) at each of the ring's
    # 2 network steps (the one node boundary crossed twice): 12 us
    assert proxy_wait_us(ring, "allreduce", lay, 8.0) == pytest.approx(12.0)
    # an all-gather's ring crosses it once
    assert proxy_wait_us(ring, "allgather", lay, 8.0) == pytest.approx(6.0)


def test_small_all_reduce_time_is_the_execution_model_pinned_by_hand():
    from simcomm.nccl.execution import LAUNCH_PER_GPU_S

    prep = _ops(hopper_box(8, nodes=2), "allreduce", 8.0)
    assert prep.label == "NCCL Tree/LL"
    # NCCL's Tree/LL latency 6.8 + 2 x (7 x 0.6 + 1 x 5.0) = 25.2 us, no proxy wait (one channel: above), the launch
    assert prep.latency[0] == pytest.approx(25.2e-6 + LAUNCH_PER_GPU_S, rel=1e-12)
    # on one node nothing is added to NCCL's Ring/LL latency 6.6 + 14 x 0.6 = 15.0 us
    one = _ops(hopper_box(8), "allreduce", 8.0)
    assert one.label == "NCCL Ring/LL"
    assert one.latency[0] == pytest.approx(15.0e-6 + LAUNCH_PER_GPU_S, rel=1e-12)


@pytest.mark.parametrize("nodes, algo, proto, latency_us", [
    # one node of 8 H100: Ring/LL 6.6 + 14 x 0.6; Tree/LL 6.8 + 2 x 7 x 0.6; NVLS one NVLink step of 25 us
    (1, "ring", "ll", 6.6 + 14 * 0.6),
    (1, "tree", "ll", 6.8 + 2 * 7 * 0.6),
    (1, "nvls", "simple", 25.0),
    # 2 x 8: Ring/LL 6.6 + 28 intranode steps at max(0.6, netOverhead 1.0) + 2 network steps of 2.7, no proxy
    # wait (1 channel: its one send is NCCL's own; the receive is posted ahead); Ring/Simple 8.4 + 28 x max(3.4,
    # 3 x 1.0) + 2 x 14 and the proxy's wait (its send and receive: 1 operation of 3 x 1 us at each of the 2
    # network steps); NVLS-Tree 25 + 2 x 20.9, no proxy wait
    (2, "ring", "ll", 6.6 + 28 * 1.0 + 2 * 2.7),
    (2, "ring", "simple", 8.4 + 28 * 3.4 + 2 * 14.0 + 2 * 3.0),
    (2, "tree", "ll", 6.8 + 2 * (7 * 0.6 + 5.0)),
    (2, "nvls-tree", "simple", 25.0 + 2 * 20.9),
])
def test_each_algorithms_small_size_latency_pinned_by_hand(nodes, algo, proto, latency_us):
    from simcomm.nccl.execution import LAUNCH_PER_GPU_S

    prep = _ops(hopper_box(8, nodes=nodes), "allreduce", 64.0, nccl_algo=algo, nccl_proto=proto)
    assert prep.latency[0] == pytest.approx(latency_us * 1e-6 + LAUNCH_PER_GPU_S, rel=1e-12)


@pytest.mark.parametrize(("algo", "want_us"), [
    # Tree/LL: baseLat 6.8 + 2 x (7 NVLink hops x 0.6 + 1 network level x 5.0) = 25.2; the proxy: one channel,
    # one send a step (NCCL's own), nothing ahead of it; one launch 1.825
    ("tree", 25.2 + 1.825),
    # Ring/LL: 6.6 + 28 steps inside nodes x max(0.6, netOverhead 1.0) + 2 network steps x 2.7 = 40.0
    ("ring", 40.0 + 1.825),
    # NVLS-Tree: NVLink 25 + 2 x log2(2) x 20.9 = 66.8, NCCL's table price for its fixed channels; no proxy term
    ("nvls-tree", 66.8 + 1.825),
])
def test_an_8_byte_all_reduce_costs_its_steps_by_hand(algo, want_us):
    # 2 x 8 H100: 8 B leaves nothing for bandwidth (< 0.02 us on any algorithm), so the time is the execution
    # model's latency terms alone, added as above
    topo = hopper_box(8, nodes=2)
    prepared = _ops(topo, "allreduce", 8.0, nccl_algo=algo)
    assert prepared.closed_form * 1e6 == pytest.approx(want_us, abs=0.02)
    assert (prepared.label.split()[1].split("/")[0].lower().replace("nvlstree", "nvls-tree")) == algo


def test_nvls_and_collnet_small_calls_cost_ncclss_table_by_hand():
    # NVLS on one 8 x H100 node: the NVLink NVLS latency 25 us (its fill and bandwidth < 0.02 us at 8 B) + launch
    one = _ops(hopper_box(8), "allreduce", 8.0, nccl_algo="nvls")
    assert one.closed_form * 1e6 == pytest.approx(25.0 + 1.825, abs=0.02)
    # CollNet Direct over SHARP on 2 x 8: 2 x (1 NVLink hop x 3.7 + 7 x 0.4) + the network's 31 = 44.0, + launch
    topo = hopper_box(8, nodes=2)
    topo.meta["sharp"] = True
    direct = _ops(topo, "allreduce", 8.0, nccl_algo="collnet-direct")
    assert "CollNetDirect" in direct.label
    assert direct.closed_form * 1e6 == pytest.approx(44.0 + 1.825, abs=0.02)
