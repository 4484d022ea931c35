"""How a chosen NCCL algorithm executes, beyond the tuning model NCCL uses to choose it.

NCCL's tuning model (:mod:`simcomm.nccl.tuning`) prices every size at the
graph's full bandwidth: it exists to rank algorithms, not to time them.  Three
things NCCL's own code does make real collectives slower than that model at
small and middle sizes, and simcomm applies them when the choice runs
(docs/nccl.md, "Execution"):

* **Fewer channels for small buffers.**  ``ncclTuningGetChannels``
  (``src/tuning/tuning_general.cc``; nccl-source-notes §1.9) starts from the
  communicator's run-time channels and drops one while ``bytes < channels x
  threads x threshold`` (threshold per thread: LL 8 B, times the ranks for Ring,
  LL128 8 B, Simple 64 B; threads 512, 640 for LL128 and Tree).  Fewer channels
  carry proportionally less: the bandwidth scales by ``used / run-time``.
* **Per-slice handshakes** (Ring and Tree).  Every channel moves its share as a pipeline of
  slices (Simple: 2 MiB chunks of two 1 MiB slices for rings, 512 KiB steps
  otherwise; LL 32 KiB; LL128 576 000 B; NVLS 128 KiB; a chunk shrinks to the
  share of one loop when the buffer is smaller, ``calcCollChunking``, §6.3).
  Each slice pays the protocol's step handshake ``h`` (the GPU's flag/fence
  round: the NVLink or PCI per-hop latency of NCCL's own table for that
  algorithm and protocol, also across nodes, where the proxy's eight slots in
  flight hide the network's) on top of its transfer time ``t = s / b``.  The tuning model's latency already
  counts one handshake per step; a link that carries ``K`` slices over ``H``
  steps pays the other ``K - H``, so its bandwidth term ``K t`` becomes
  ``K t + (K - H) h``.  Large buffers use full slices and lose a few per cent;
  megabyte buffers, split into kilobyte slices over many channels, lose more.

* **LL's trips** (:mod:`simcomm.nccl.trips`).  LL moves a step as trips of one 8-byte word per thread
  (``LLGenericOp``, ``src/device/prims_ll.h``), forwarded line by line between GPUs, so a step's first trip
  rides on the hop latency the model counts; across nodes the proxy sends a step only once all its lines are
  written (``sendProxyProgress``, ``src/transport/net.cc``), so nothing is hidden there.  The launched
  threads are NCCL's (a ring's halved for small buffers, to at least 3 warps; a tree's always 640:
  ``topoGetAlgoInfo``) and a channel's later trips run at their rate.  A ring of 8 A100 is flat from 8 B to 32 KiB, as measured.

* **NVLS's and NVLS-Tree's pipeline fill** (:func:`nvls_tree_fill`).  Their
  all-reduce kernels hand each loop of ``channels x heads x chunk`` bytes from
  warp group to warp group (scatter, switch reduction and network send, the
  other node's reduction, network receive and multicast, gather; on one node
  scatter, reduce-and-broadcast, gather), the chunk following
  ``calcCollChunking``; the last group starts once the first loop has crossed
  the others, so ``n`` bytes take as long as ``n + F min(n, loop)`` would.
  ``F`` (:func:`nvls_tree_fill_loops`) is that first trip over one
  steady-state loop, from the bytes each stage moves and NCCL's own rates:
  derived, not fitted.

These enter the flows as a further efficiency factor; the tuning model's
latency is kept as NCCL computes it.  Where NCCL stages a transfer through host
memory (SHM without peer-to-peer, a network without GPUDirect RDMA), a GPU
sending and receiving at once is held to ``HOST_BIDIR_SHARE`` of its PCIe port
each way (NVIDIA/nccl#384), which :func:`host_bidirectional_stretch` turns into
a stretch of the whole pattern.

* **The proxy serves a step's channels in turn** (:func:`proxy_wait_us`; Ring and Tree across nodes).
  A network step of a channel is handed to the NIC by a CPU proxy thread, one per GPU, which runs every
  active operation's progress function in turn (``progressOps``, ``src/proxy.cc``), and a send's or a
  receive's progress walks its channels one after another (``sendProxyProgress``/``recvProxyProgress``,
  ``src/transport/net.cc``: ``for (s = 0; s < args->nsubs; s++)``, one sub per channel).  Which of them
  a step waits for depends on the protocol.  Simple: the receiving GPU waits for the tail the proxy
  writes once the receive has completed (and, with GPUDirect RDMA, been flushed: ``ncclNetIflush``), so
  a proxy whose NIC carries ``c`` of the call's channels serves ``2c`` operations (a send and a receive
  each) per network step, and the last of them waits for the other ``2c - 1``.  LL and LL128: the
  receiving GPU polls the flags of the lines the NIC writes into its buffer (``readLL``,
  ``src/device/prims_ll.h``; LL128's flag word per line, ``prims_ll128.h``), and ``recvProxyProgress``
  posts its receives as soon as the operation starts, up to NCCL_STEPS ahead (it returns before testing
  any completion while it still posts: ``if (args->idle == 0) return``), so no receive is on the
  step's path: only the ``c`` sends are (``sendProxyProgress`` posts one ``isend`` per ready sub in
  turn), and the last waits for the other ``c - 1``.  Each costs NCCL's own host overhead of a network
  step (``netOverhead``, "network post overhead": 1 us on Intel hosts, 2 us on AMD, three times that
  for Simple, as NCCL's ring latency counts it; ``src/graph/tuning.cc``); NCCL's table prices one
  channel's step, its own post included.  The channels spread over ``min(channels, NICs, GPUs per
  node)`` proxies.  Small buffers launch
  few channels, so the wait grows with the buffer until every channel runs.  NVLS-Tree and CollNet are
  left as NCCL's table prices them: their network latencies (20.9 and 30-31 us per hop) are NCCL's
  figures for their fixed channel counts, and CollNet's proxy hands groups of channels to the SHARP
  plugin (``COLLNET_GROUP_NSUBS``); adding the wait to NVLS-Tree moved its >= 1 MB rows away from the
  measurements (docs/accuracy.md).

A further cost is the kernel launch, the same for every algorithm, so NCCL's
model leaves it out.  One host thread launches the collective's kernel on each
GPU it drives, one after another (nccl-tests' ``-g``: a group call over its
GPUs), so a call costs ``LAUNCH_PER_GPU_S`` per GPU of the thread
(:func:`launch_s`); training frameworks run one process per GPU.  It is the
one calibrated number of the NCCL model, fitted on the 8 B all-reduce of
``benchmarks/nccl/runs/autodl-2080ti-2gpu-pcie-allreduce`` (one thread driving
two GPUs, ``-g 2``, where NCCL's model gives 8.60 us and the run measured
12.25 us: 3.65 us for two launches); that run is held out of every reported
score (docs/accuracy.md, "GPU collectives"; HELD_OUT_RUNS).
"""

from __future__ import annotations

import math

import numpy as np

from simcomm.nccl.channels import tree_depth
from simcomm.nccl.layout import GroupLayout, nvlink_bw
from simcomm.nccl.trips import launched_threads, ll_trip_share, threshold
from simcomm.nccl.tuning import BASE_LAT, HW_LAT, NET_OVERHEAD, ModelTime, graphs, nvls_heads, runtime_channels

KiB, MiB = 1024, 1 << 20

__all__ = ["channels_used", "slice_bytes", "execution_efficiency", "NVLS_CHANNELS", "LAUNCH_PER_GPU_S", "launch_s",
           "CALIBRATION_RUN", "HELD_OUT_RUNS",
           "nvls_loop_bytes", "nvls_tree_loop_bytes", "nvls_tree_fill_loops", "nvls_tree_head_nic_bw", "nvls_tree_fill",
           "HOST_BIDIR_SHARE", "HOST_BIDIR_SHARE_BY_KIND", "host_bidir_share", "host_staged",
           "host_bidirectional_stretch", "P2P_LL_THRESHOLD", "p2p_channels", "p2p_channels_per_peer", "p2p_batches",
           "p2p_message_latency_us", "proxy_wait_us", "network_steps"]

#: kernel launch per GPU a host thread drives, per NCCL call: 3.65 us over the 2 GPUs of CALIBRATION_RUN (above)
LAUNCH_PER_GPU_S = 3.65e-6 / 2
CALIBRATION_RUN = "autodl-2080ti-2gpu-pcie-allreduce"

#: runs a calibrated number was fitted on: shown, never counted (NVLS-Tree's fill, once fitted on
#: gcp-a4-b200-2x8-roce-allreduce, is now derived from the kernel's stages: :func:`nvls_tree_fill_loops`)
HELD_OUT_RUNS = (CALIBRATION_RUN,)
#: NCCL_NVLS_CHUNKSIZE's default (src/init.cc, v2.20+): NVLS-Tree's largest chunk
NVLS_TREE_CHUNK = 128 * KiB


#: Host memory in the middle of a transfer.  NCCL stages a transfer through pinned host memory in two cases:
#:
#: * its SHM transport between GPUs of one machine without peer-to-peer (``src/transport/shm.cc``, v2.16-2.19:
#:   NCCL_SHM_USE_CUDA_MEMCPY=0 by default, so the sending kernel writes into the receiver's host buffer,
#:   NCCL_SHM_LOCALITY=2, and the receiving kernel reads it back over PCIe);
#: * its network transport when GPUDirect RDMA is off (``ncclTopoCheckGdr``, ``src/graph/paths.cc``: off when the
#:   network plugin lacks NCCL_PTR_CUDA, as NCCL's socket transport always does, ``src/transport/net_socket.cc``,
#:   and aws-ofi-nccl does when libfabric's provider cannot register GPU memory, ``src/nccl_ofi_net.c``
#:   ``support_gdr = false``); ``src/transport/net.cc`` then places the proxy's buffers in host memory, the
#:   sending kernel writes them and the receiving kernel reads them.
#:
#: A GPU that sends and receives at once (ring all-reduce/all-gather, all-to-all) then moves host-memory traffic
#: both ways on its PCIe port.  NVIDIA/nccl#384, maintainer's numbers on two PCIe Gen3 GPUs through SHM:
#: all-reduce busbw 3.9 GB/s where broadcast (one way) reaches 10.31 GB/s; "some components (in particular some
#: CPUs) do not handle bidirectional traffic well".  So each direction of such a GPU gets at most this share of
#: its port's one-way rate.  A public number, not fitted here (issue #384's own runs are not in
#: benchmarks/nccl/runs).
HOST_BIDIR_SHARE = 3.9 / 10.31
#: The same measurement's other bidirectional collectives, as stated (NCCL 2.4.8, NCCL_MAX_NCHANNELS=1,
#: NCCL_P2P_DISABLE=1): all-gather and reduce-scatter 3.17 GB/s busbw each, against the same 10.31 one way.
#: All-to-all, which #384 did not measure, keeps all-reduce's share.
HOST_BIDIR_SHARE_BY_KIND = {"allgather": 3.17 / 10.31, "reduce_scatter": 3.17 / 10.31}


def host_bidir_share(kind: str) -> float:
    """The share of its port a GPU sending and receiving through host memory gets each way in collective
    ``kind``: #384's figure for that collective (:data:`HOST_BIDIR_SHARE_BY_KIND`), else its all-reduce's."""
    return HOST_BIDIR_SHARE_BY_KIND.get(kind, HOST_BIDIR_SHARE)


def host_staged(topology, a: int, b: int) -> bool:
    """Whether NCCL moves ``a -> b`` (global ranks) through host memory: SHM without P2P, or a network without GDR.

    ``topology.meta``: ``p2p`` False (the ``pcie-host`` fabric) for GPUs of one machine; ``gdr`` False, or
    the ``nccl-socket`` stack (NCCL's TCP transport has host pointers only), for GPUs of different machines.
    """
    meta = topology.meta
    if topology.machine_of(a) == topology.machine_of(b):
        return meta.get("p2p", True) is False
    return meta.get("gdr", True) is False or meta.get("stack") == "nccl-socket"


def any_host_staging(topology) -> bool:
    """Whether some pair of GPUs could move through host memory here (:func:`host_staged`)."""
    meta = topology.meta
    return meta.get("p2p", True) is False or meta.get("gdr", True) is False or meta.get("stack") == "nccl-socket"


def host_bidirectional_stretch(topology, group: np.ndarray, src: np.ndarray, dst: np.ndarray, moved: np.ndarray,
                               payload: np.ndarray | None = None, share: float | None = None) -> float:
    """How much longer (>= 1) host-memory staging makes this pattern than its busiest link does.

    For every GPU that both sends and receives through host memory (:func:`host_staged`), each direction may
    carry at most ``share`` (default ``HOST_BIDIR_SHARE``; :func:`host_bidir_share` per collective) of its PCIe
    port's rate (the first link of its outgoing routes); the
    pattern is pipelined, so the whole collective runs at the pace of its slowest such GPU.  Returned: that
    GPU's time over the busiest link's time (1 when no GPU is bidirectional through host memory or the cap
    does not bind).

    ``moved`` are the bytes the flows carry (after NCCL's efficiencies: fewer channels, handshakes), which set
    the busiest link's time; ``payload`` (default ``moved``) the bytes that really cross each GPU's port, which
    the cap limits: a small buffer on few channels is slow for want of concurrency, not of port bandwidth.
    """
    meta = topology.meta
    shm, net = meta.get("p2p", True) is False, meta.get("gdr", True) is False or meta.get("stack") == "nccl-socket"
    if not len(moved) or not any_host_staging(topology):
        return 1.0
    payload = moved if payload is None else payload
    gsrc, gdst = group[src], group[dst]
    machine = np.array([-1 if (m := topology.machine_of(int(r))) is None else m for r in group], dtype=np.int64)
    same = machine[src] == machine[dst]
    staged = np.where(same, shm, net)
    if not staged.any():
        return 1.0
    route_len, links = topology.routes(gsrc, gdst)
    load = np.bincount(links, weights=np.repeat(moved, route_len), minlength=len(topology.capacity))
    used = load > 0
    if not used.any():  # zero-byte messages: nothing crosses host memory
        return 1.0
    busiest = float((load[used] / topology.capacity[used]).max())
    starts = np.concatenate(([0], np.cumsum(route_len)[:-1]))
    n = len(group)
    out_b = np.bincount(src[staged], weights=payload[staged], minlength=n)
    in_b = np.bincount(dst[staged], weights=payload[staged], minlength=n)
    # a GPU's port: the first link of its outgoing routes (its incoming routes end on the same link's other way)
    port = np.zeros(n)
    port[src[staged]] = topology.capacity[links[starts[staged]]]
    both = (out_b > 0) & (in_b > 0)
    if not both.any() or busiest <= 0:
        return 1.0
    share = HOST_BIDIR_SHARE if share is None else share
    slowest = float((np.maximum(out_b, in_b)[both] / (share * port[both])).max())
    return max(1.0, slowest / busiest)


def network_steps(algo: str, kind: str, layout: GroupLayout) -> int:
    """Network hops one chunk crosses in turn: a ring's node boundaries, a tree's levels up and down.

    Ring all-reduce crosses each of the ``nodes - 1`` boundaries of its ring twice (reduce-scatter, then
    all-gather), the other ring collectives once; Tree all-reduce goes up and down ``floor(log2 nodes)``
    levels, the depth NCCL's model counts (``src/graph/tuning.cc``).
    """
    nodes = layout.n_nodes
    if nodes < 2:
        return 0
    if algo == "ring":
        return 2 * (nodes - 1) if kind == "allreduce" else nodes - 1
    if algo == "tree":
        return 2 * int(math.log2(nodes))
    return 0


def proxy_wait_us(mt: ModelTime, kind: str, layout: GroupLayout, nbytes: float) -> float:
    """Microseconds a call's network steps wait for proxy threads serving each channel's operations in turn.

    Per network step ``(2c - 1) x netOverhead`` for Simple (the step's sends and receives) and ``(c - 1) x
    netOverhead`` for LL and LL128 (its sends only: their receives are posted ahead and the GPU polls the
    lines' flags), where ``c`` is the channels one proxy serves: the call's channels (:func:`channels_used`)
    over ``min(channels, NICs per node, GPUs per node)`` proxies, rounded up (module docstring).  Ring and
    Tree only; 0 on one node.
    """
    steps = network_steps(mt.algo, kind, layout)
    if steps == 0 or mt.algo not in ("ring", "tree"):
        return 0.0
    used, _ = channels_used(mt.algo, mt.proto, kind, layout, nbytes)
    proxies = max(1, min(used, layout.nics_per_node, layout.ppn))
    per_proxy = math.ceil(used / proxies)
    overhead = NET_OVERHEAD.get(layout.cpu, 1.0) * (3.0 if mt.proto == "simple" else 1.0)
    ahead = 2 * per_proxy - 1 if mt.proto == "simple" else per_proxy - 1
    return steps * ahead * overhead


def launch_s(gpus_per_thread: int = 1) -> float:
    """Seconds one NCCL call spends launching its kernels from a thread that drives ``gpus_per_thread`` GPUs."""
    return LAUNCH_PER_GPU_S * gpus_per_thread


# ---- grouped point-to-point (all-to-all, send/recv, gather, scatter) ---------------------------------------
#: NCCL_P2P_LL_THRESHOLD's default (src/enqueue.cc): a message goes LL up to this many bytes per channel
P2P_LL_THRESHOLD = 16384
#: NCCL_P2P_PER_CHANNEL_NET_BW's default, GB/s (src/graph/paths.cc): a network peer gets one channel per this
P2P_PER_CHANNEL_NET_BW = 14.0
#: NCCL_MAX_DEV_WORK_P2P_PER_BATCH (src/include/device.h): peers whose work shares one channel's batch
P2P_PER_BATCH = 8


def _pow2_up(n: int) -> int:
    return 1 << max(0, math.ceil(math.log2(max(1, n))))


def p2p_channels_per_peer(layout: GroupLayout) -> int:
    """``comm->p2pnChannelsPerPeer``: the most channels one message is split over (nChannelsMax).

    ``ncclTopoGetNchannels`` (src/graph/paths.cc): an NVLink peer 2 x max(1, path bw / one link's),
    a PCIe peer 2, a network peer max(NICs, ceil(NIC bw / 14 GB/s)); the least over peers, rounded up
    to a power of two.  ``ncclTopoComputeP2pChannels``: at most ``p2pnChannels`` (the run-time channels
    rounded up to a power of two); across nodes halved while ``perPeer x ceil(ranks / 8)`` exceeds them,
    so every peer of a rank fits one batch round of the channels.
    """
    p2p = p2p_channels(layout)
    counts = []
    if layout.ppn > 1:
        if layout.intra in ("nvswitch", "nvlink"):
            counts.append(2 * max(1, int(layout.intra_bw / nvlink_bw(layout.arch) + 1e-9)))
        else:
            counts.append(2)
    if layout.n_nodes > 1:
        counts.append(max(1, math.ceil(layout.nic_bw / P2P_PER_CHANNEL_NET_BW - 1e-9)))
    per_peer = _pow2_up(min(counts)) if counts else 1
    if layout.n_nodes > 1:
        while per_peer * math.ceil(layout.n_ranks / P2P_PER_BATCH) > p2p and per_peer > 1:
            per_peer //= 2
    return min(per_peer, p2p)


def p2p_channels(layout: GroupLayout) -> int:
    """``comm->p2pnChannels``: the run-time channels rounded up to a power of two (at most 64).

    ``ncclTopoComputeP2pChannels`` (src/graph/paths.cc); its further cap by the kernel-argument space
    (``ncclDevMaxChannelsForArgsBytes``) is not modelled.
    """
    return _pow2_up(min(64, runtime_channels(layout, graphs(layout)["ring"])))


def p2p_batches(layout: GroupLayout) -> int:
    """Batches a channel runs one after another when every rank exchanges a small message with every other.

    ``scheduleP2pTasksToPlan`` (src/enqueue.cc) walks ``nRanks`` rounds (one send and one receive
    peer each); ``ncclP2pChannelBaseForRound`` (src/include/channel.h) gives the rounds of one group of
    up to 8 local offsets one channel base across nodes (``ceil(ranks / L) x ceil(L / 8)`` bases for
    groups of ``L`` local ranks), and each round its own base on one node; ``addWorkBatchToPlan``
    puts up to 8 works of distinct rounds in one batch; the kernel runs a channel's batches in turn
    and a batch's works at once (src/device/sendrecv.h: the block's warps are split between them).
    A small message takes one channel, so the bases share the ``p2pnChannels`` channels.
    """
    p, c = layout.n_ranks, p2p_channels(layout)
    if layout.n_nodes > 1:
        local = min(layout.ppn, P2P_PER_BATCH)
        bases = math.ceil(p / local) * math.ceil(local / P2P_PER_BATCH)
        return max(1, math.ceil(bases / c))
    return max(1, math.ceil(math.ceil(p / c) / P2P_PER_BATCH))


def p2p_message_latency_us(layout: GroupLayout, across_nodes: bool, nbytes: float) -> tuple[str, float]:
    """(protocol, microseconds) of one point-to-point message: NCCL's choice and its own table's price.

    ``addP2pToPlan`` (src/enqueue.cc) runs LL when the message is at most ``nChannelsMax x 16 KiB`` and both
    connections hold LL buffers, else Simple.  A network connection of point-to-point operations uses the
    proxy's shared buffers, which carry Simple only (src/transport/net.cc, send/recvProxyConnect; LL only
    with NCCL_ALLOC_P2P_NET_LL_BUFFERS=1, default 0, src/init.cc), so a message between nodes always runs
    Simple.  NCCL has no latency model for point-to-point; simcomm prices a message as NCCL's model prices
    one ring step of that protocol over that hop: ``baseLat + hwLat`` (src/graph/tuning.cc).
    """
    if across_nodes:
        proto, hop = "simple", "net"
    else:
        proto = "ll" if nbytes <= p2p_channels_per_peer(layout) * P2P_LL_THRESHOLD else "simple"
        hop = "nvlink" if layout.intra in ("nvswitch", "nvlink") else "pci"
    i = {"ll": 0, "simple": 2}[proto]
    return proto, BASE_LAT["ring"][i] + HW_LAT[hop]["ring"][i]
#: data bytes one protocol step carries per connection (buffer / NCCL_STEPS, device.h; §6.1)
STEP_BYTES = {"ll": 32 * KiB, "ll128": 576_000, "simple": 512 * KiB}
#: NVLS run-time channels: 16 on Hopper, 24 (one node) or 32 (several) on Blackwell (§2.6)
NVLS_CHANNELS = {90: (16, 16), 100: (24, 32)}
NVLS_CHUNK = 128 * KiB


#: NCCL's PCI_BW (src/graph/topo.h, GB/s): a ring whose intra-node bandwidth is at most this is PCIe-bound.
PCI_BW = 12.0


def _threads(algo: str, proto: str, layout: GroupLayout) -> int:
    """``comm->maxThreads[algo][proto]``: the threads per channel NCCL's channel loop counts.

    ncclTopoTuneModel (src/graph/tuning.cc, NCCL 2.19-2.30): LL 512 (NCCL_LL_MAX_NTHREADS), LL128 640
    (NCCL_LL128_MAX_NTHREADS), Simple 512 (NCCL_SIMPLE_MAX_NTHREADS), except a ring whose search
    found at most PCI_BW in all (bwIntra x nChannels) gets 256.  topoGetAlgoInfo (src/enqueue.cc)
    shrinks the channels against these counts and adds the Simple sync warps only afterwards.
    """
    if proto == "ll":
        return 512
    if proto == "ll128":
        return 640
    if algo == "ring":
        ring = graphs(layout)["ring"]
        return 256 if ring.bw_intra * ring.n_ch <= PCI_BW + 1e-9 else 512
    return 512


def _full_channels(algo: str, layout: GroupLayout) -> int:
    if algo in ("nvls", "nvls-tree"):
        row = NVLS_CHANNELS[100 if layout.arch >= 100 else 90]
        return row[1 if layout.n_nodes > 1 else 0]
    return runtime_channels(layout, graphs(layout)["ring"])


def channels_used(algo: str, proto: str, kind: str, layout: GroupLayout, nbytes: float) -> tuple[int, int]:
    """(channels NCCL launches for this buffer, channels it would launch for a large one)."""
    full = _full_channels(algo, layout)
    if algo in ("nvls", "nvls-tree", "collnet-direct", "collnet-chain"):
        return full, full
    per_channel = _threads(algo, proto, layout) * threshold(algo, proto, layout.n_ranks)
    nc = full
    while nc >= 2 and nbytes < nc * per_channel:
        nc -= 1
    return nc, full


def slice_bytes(algo: str, proto: str, kind: str, layout: GroupLayout, nbytes: float, channels: int) -> float:
    """Bytes one pipeline slice carries on one channel (calcCollChunking, §6.2-6.3)."""
    share = nbytes / max(1, channels)
    step = STEP_BYTES[proto]
    if algo == "ring" and kind in ("allreduce", "allgather", "reduce_scatter"):
        chunk_steps, slice_steps = (4, 2) if proto == "simple" else (1, 1)
        chunk = min(step * chunk_steps, share / layout.n_ranks)
        return chunk * slice_steps / chunk_steps
    if algo in ("nvls", "nvls-tree"):
        return min(NVLS_CHUNK, share / max(1, layout.ppn))
    return min(step, share)


def nvls_tree_loop_bytes(layout: GroupLayout, nbytes: float) -> float:
    """Bytes of the buffer one NVLS-Tree loop covers: channels x heads x chunk (``src/enqueue.cc``).

    ``calcCollChunking`` (NCCL 2.20-2.27): the chunk starts at NCCL_NVLS_CHUNKSIZE (128 KiB), at most 64 KiB
    from 4 nodes on (NCCL_NVLS_TREE_MAX_CHUNKSIZE's default), and with ``ops = channels x heads`` halves to
    64 KiB while ``bytes < 4 x ops x chunk`` and to 32 KiB while ``bytes < ops x chunk``; a loop is
    ``ops x chunk`` (the all-reduce kernel, ``src/device/all_reduce.h``, strides its grid by it).
    """
    ops = _full_channels("nvls-tree", layout) * nvls_heads(layout)
    chunk = NVLS_TREE_CHUNK if layout.n_nodes < 4 else min(NVLS_TREE_CHUNK, 64 * KiB)
    if nbytes < 4 * ops * chunk and chunk > 64 * KiB:
        chunk = 64 * KiB
    if nbytes < ops * chunk and chunk > 32 * KiB:
        chunk = 32 * KiB
    return float(ops * chunk)


def nvls_loop_bytes(layout: GroupLayout, nbytes: float) -> float:
    """Bytes of the buffer one NVLS all-reduce loop covers: channels x heads x chunk (``src/enqueue.cc``).

    ``calcCollChunking``'s NVLS branch (2.20-2.28): the chunk starts at NCCL_NVLS_CHUNKSIZE (128 KiB) and, with
    ``ops = channels x heads``, drops to 64 KiB while ``bytes < 64 x ops x chunk``, then to 32 KiB while
    ``bytes < 8 x ops x chunk`` and to 16 KiB while ``bytes < 2 x ops x chunk`` (each test with the chunk the
    previous one left).  8 x H100 (16 channels x 8 heads): 16 MiB loops from 1 GiB on, 8 MiB from 64 MiB.
    """
    ops = _full_channels("nvls", layout) * nvls_heads(layout)
    chunk = NVLS_CHUNK
    if nbytes < 64 * ops * chunk and chunk > 64 * KiB:
        chunk = 64 * KiB
    if nbytes < 8 * ops * chunk and chunk > 32 * KiB:
        chunk = 32 * KiB
    if nbytes < 2 * ops * chunk and chunk > 16 * KiB:
        chunk = 16 * KiB
    return float(ops * chunk)


def nvls_tree_head_nic_bw(layout: GroupLayout) -> float:
    """GB/s of the NIC an NVLS head sends its chunks on: its path to the NIC, or its share of a NIC it shares."""
    wired = layout.nic >= 0
    if not wired.any():
        return layout.gpu_nic_bw
    # distinct NICs per node over the node's members (vectorised: 16 384-rank groups)
    pairs = np.unique(np.stack([layout.node_of[wired], layout.nic[wired]]), axis=1)
    nics = np.bincount(pairs[0], minlength=layout.n_nodes)
    members = np.bincount(layout.node_of, minlength=layout.n_nodes)
    has = nics > 0
    return float(min(layout.gpu_nic_bw, (layout.nic_bw * nics[has] / members[has]).min()))


def nvls_tree_fill_loops(layout: GroupLayout, mt: ModelTime) -> float:
    """F: the loops by which the first loop's trip through NVLS-Tree's stages exceeds one steady-state loop.

    ``src/device/all_reduce.h`` (NVLS_TREE, Simple) runs every loop through a chain of warp groups, each one
    prims step per loop (so a stage starts on a loop only when the previous one has finished it): scatter (each
    GPU writes ``heads x chunk`` per channel to the heads over NVLink: the whole loop), each head's reduce
    (multimem reduce of its ``chunk``: ``loop / heads`` in on NVLink) and send up the network tree, at every tree
    level a reduce on the way up and a broadcast on the way down (``loop / heads`` on NVLink each, the root's
    reduce-and-broadcast counted once: ``2 depth + 1`` of them) with a network hop between levels (``loop /
    heads`` through the head's NIC, ``2 depth`` hops), and gather (the whole loop in on NVLink).  The first loop
    crosses them all in turn; afterwards one loop leaves per ``loop / algBw`` (the model's bandwidth).  So

        F = algBw x [(2 + (2 depth + 1) / heads) / bwNVLink + 2 depth / (heads x bwNIC)] - 1

    with NCCL's own rates (``layout.intra_bw``, the head's NIC) and depth the levels of the trees the kernel runs
    (``connectNvls``, ``src/graph/connect.cc``: each channel takes one of ``ncclGetDtree``'s two trees over the
    nodes, ``c % 2``; :func:`~simcomm.nccl.channels.tree_depth`): ``floor(log2 nodes)``, the depth NCCL's model
    counts, on a power of two, one more on 3, 5-7, 9-15, 17-31 ... nodes.  Nothing fitted.  In loops: 2 x 8 H100
    with 400 Gb/s NICs 1.86, 2 x 8 B200 2.48.
    Single-node NVLS (``mt.algo == "nvls"``) runs the same chain without the network (scatter, one
    reduce-and-broadcast group, gather): depth 0, ``F = algBw (2 + 1/heads) / bwNVLink - 1`` (8 x H100: 0.56).
    """
    if mt.alg_bw <= 0 or layout.intra_bw <= 0 or (mt.algo == "nvls") != (layout.n_nodes == 1):
        return 0.0  # NVLS across nodes (with SHARP) has another chain: not modelled
    heads = nvls_heads(layout)
    depth = tree_depth(layout.n_nodes)  # the deepest leaf's chain: every channel's loop must cross it
    nic = nvls_tree_head_nic_bw(layout)
    net = 2 * depth / (heads * nic) if nic > 0 else 0.0
    path = (2.0 + (2 * depth + 1) / heads) / layout.intra_bw + net
    return max(0.0, mt.alg_bw * path - 1.0)


def nvls_tree_fill(layout: GroupLayout, nbytes: float, loops: float, loop_bytes=None) -> float:
    """Share of NVLS-Tree's bandwidth left after its pipeline fill (<= 1).

    Each channel streams the buffer loop by loop through a chain of stages (:func:`nvls_tree_fill_loops`),
    each handing a loop to the next; the last stage starts only when the first loop has crossed the others.
    The bandwidth term of ``n`` bytes becomes that of ``n + F min(n, loop)`` bytes, F = ``loops`` (a partial
    loop fills with what it has).
    """
    if nbytes <= 0 or loops <= 0:
        return 1.0
    loop = (loop_bytes or nvls_tree_loop_bytes)(layout, nbytes)
    return nbytes / (nbytes + loops * min(nbytes, loop))


def execution_efficiency(mt: ModelTime, kind: str, layout: GroupLayout, nbytes: float) -> float:
    """Share of the model's bandwidth this buffer achieves: channels launched x slice pipeline x LL trips (<= 1)."""
    if mt.algo == "p2p" or nbytes <= 0:
        return 1.0
    used, full = channels_used(mt.algo, mt.proto, kind, layout, nbytes)
    if mt.algo == "nvls-tree":
        return (used / full) * nvls_tree_fill(layout, nbytes, nvls_tree_fill_loops(layout, mt))
    if mt.algo == "nvls" and kind == "allreduce" and layout.n_nodes == 1:
        return (used / full) * nvls_tree_fill(layout, nbytes, nvls_tree_fill_loops(layout, mt), nvls_loop_bytes)
    if mt.algo not in ("ring", "tree"):
        return used / full  # NVLS, CollNet, PAT: the table's latency is the whole operation's, not a step's
    s = slice_bytes(mt.algo, mt.proto, kind, layout, nbytes, used)
    # The handshake is the GPU's own per-slice work (copy, fence, flag), on its NVLink or PCIe side even
    # when the next hop is the network: with 8 slots per connection the proxy keeps the NIC busy meanwhile.
    hop = "nvlink" if layout.intra in ("nvswitch", "nvlink") else "pci"
    handshake = HW_LAT[hop][mt.algo][{"ll": 0, "ll128": 1, "simple": 2}[mt.proto]] * 1e-6
    per_channel = mt.bus_bw * 1e9 / full  # bytes/s one channel's links carry at the model's rate
    p = layout.n_ranks
    if mt.algo == "ring":
        share = {"allreduce": 2.0 * (p - 1) / p, "allgather": (p - 1) / p, "reduce_scatter": (p - 1) / p}.get(kind, 1.0)
        steps = {"allreduce": 2 * (p - 1), "allgather": p - 1, "reduce_scatter": p - 1}.get(kind, p - 1)
    else:
        share, steps = 1.0, 1
    slices = share * nbytes / used / s if s > 0 else 0.0  # K: slices one link of a channel carries
    move = s / per_channel if per_channel > 0 else 0.0
    extra = max(0.0, slices - steps) * handshake  # (K - H) h
    pipe = slices * move / (slices * move + extra) if slices * move > 0 else 1.0
    if mt.proto == "ll":  # a step's first trip rides on its hop latency, on GPU-to-GPU hops (simcomm.nccl.trips)
        hidden = (steps - network_steps("ring", kind, layout) if mt.algo == "ring" else int(layout.n_nodes == 1))
        most = _threads(mt.algo, mt.proto, layout)
        threads = launched_threads(mt.algo, most, used, threshold(mt.algo, mt.proto, p), nbytes)
        pipe /= ll_trip_share(share * nbytes / used, hidden, s, threads, max(most, threads))
        # ... but never past NCCL's own bandwidth: the model's busBw is every channel's at full threads, the
        # most LL moves (docs/nccl.md); hidden trips take the per-channel time off, not the GPU's throughput
        return min(1.0, (used / full) * pipe)
    return (used / full) * pipe
