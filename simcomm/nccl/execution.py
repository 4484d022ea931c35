"""How a chosen NCCL algorithm executes, beyond the tuning model NCCL uses to choose it.

NCCL's tuning model (:mod:`simcomm.nccl.tuning`) prices every size at the
graph's full bandwidth: it exists to rank algorithms, not to time them.  Two
things NCCL's own code does make real collectives slower than that model at
small and middle sizes, and simcomm applies both when the choice runs
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

Both enter the flows as a further efficiency factor; the tuning model's
latency is kept as NCCL computes it.

A third cost is the kernel launch, the same for every algorithm, so NCCL's
model leaves it out.  One host thread launches the collective's kernel on each
GPU it drives, one after another (nccl-tests' ``-g``: a group call over its
GPUs), so a call costs ``LAUNCH_PER_GPU_S`` per GPU of the thread
(:func:`launch_s`); training frameworks run one process per GPU.  It is the
one calibrated number of the NCCL model, fitted on the 8 B all-reduce of
``benchmarks/nccl/runs/autodl-2080ti-2gpu-pcie-allreduce`` (one thread driving
two GPUs, ``-g 2``, where NCCL's model gives 8.60 us and the run measured
12.25 us: 3.65 us for two launches); that run is held out of every reported
score (docs/accuracy.md, "GPU collectives").
"""

from __future__ import annotations


from simcomm.nccl.layout import GroupLayout
from simcomm.nccl.tuning import HW_LAT, ModelTime, graphs, runtime_channels

__all__ = ["channels_used", "slice_bytes", "execution_efficiency", "NVLS_CHANNELS", "LAUNCH_PER_GPU_S", "launch_s",
           "CALIBRATION_RUN"]

#: kernel launch per GPU a host thread drives, per NCCL call: 3.65 us over the 2 GPUs of CALIBRATION_RUN (above)
LAUNCH_PER_GPU_S = 3.65e-6 / 2
CALIBRATION_RUN = "autodl-2080ti-2gpu-pcie-allreduce"

KiB, MiB = 1024, 1 << 20


def launch_s(gpus_per_thread: int = 1) -> float:
    """Seconds one NCCL call spends launching its kernels from a thread that drives ``gpus_per_thread`` GPUs."""
    return LAUNCH_PER_GPU_S * gpus_per_thread
#: data bytes one protocol step carries per connection (buffer / NCCL_STEPS, device.h; §6.1)
STEP_BYTES = {"ll": 32 * KiB, "ll128": 576_000, "simple": 512 * KiB}
#: NVLS run-time channels: 16 on Hopper, 24 (one node) or 32 (several) on Blackwell (§2.6)
NVLS_CHANNELS = {90: (16, 16), 100: (24, 32)}
NVLS_CHUNK = 128 * KiB


def _threads(algo: str, proto: str) -> int:
    if algo in ("tree", "pat") or proto == "ll128":
        return 640
    return 512 + (32 if proto == "simple" and algo == "ring" else 0)


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
    threshold = {"ll": 8.0 * (layout.n_ranks if algo == "ring" else 1), "ll128": 8.0, "simple": 64.0}[proto]
    per_channel = _threads(algo, proto) * threshold
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


def execution_efficiency(mt: ModelTime, kind: str, layout: GroupLayout, nbytes: float) -> float:
    """Share of the model's bandwidth this buffer achieves: channels launched x slice pipeline (<= 1)."""
    if mt.algo == "p2p" or nbytes <= 0:
        return 1.0
    used, full = channels_used(mt.algo, mt.proto, kind, layout, nbytes)
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
    return (used / full) * pipe
