"""LL's trips: what a small LL step costs beyond the hop latency NCCL's model already counts.

NCCL's LL kernel (``LLGenericOp``, ``src/device/prims_ll.h``) moves a step in *trips*: on each trip every one
of the block's ``nthreads`` threads loads one 8-byte word (``EltPerLine``), polls the one incoming 16-byte
line of that offset (``readLL``: data and flag in one store), reduces, and stores one line to the next peer
(``storeLL``); ``eltPerTrip = nthreads x EltPerLine``.  The receiver forwards a line as soon as its flag
arrives, so on GPU-to-GPU hops the first trip of a step rides on the hop latency NCCL's table charges per
step (``hwLat``, ``src/graph/tuning.cc``); only the trips after it add time.  NCCL sizes the launch for that:
``topoGetAlgoInfo`` (``src/enqueue.cc``) drops channels while ``bytes < channels x threads x threshold``
(LL: 8 B per thread, times the ranks for a ring: one line per thread per step), then halves a ring's
threads while the same holds and they stay a multiple of 128 (at least 3 warps); a tree always runs
NCCL_MAX_NTHREADS (640).

A network hop does not forward line by line: the sending proxy hands a step to the NIC only once every line
of it carries the step's flag (``sendProxyProgress``, ``src/transport/net.cc``: ``if (f1[0] != flag ||
f2[0] != flag) { ready = 0; break; }``), so a step crossing nodes is stored and forwarded whole, and its
first trip is not hidden.  A ring's steps inside a node are; a tree's chain is only on one node (across
nodes its chunk crosses the network on the way up and down).

What this module gives :mod:`simcomm.nccl.execution`: the threads NCCL launches, and the share of a
channel's bandwidth time left once each hidden step's first trip is taken off.  The trips after the first
run at the channel's rate for its threads (one line per thread per trip: a channel of ``t`` threads carries
``t / T`` of the rate it has with the ``T`` threads NCCL launches for a large buffer).  LL only: LL128 and
Simple synchronise per step (LL128's warp barrier and, through a proxy, its fence and tail; Simple's fence
and flag), which :func:`simcomm.nccl.execution.execution_efficiency` charges as a handshake.
"""

from __future__ import annotations

__all__ = ["LL_WORD", "THREAD_THRESHOLD", "MAX_NTHREADS", "MIN_THREADS", "launched_threads", "ll_trip_share",
           "threshold"]

#: data bytes one thread carries per LL trip: one uint64_t word of an ncclLLFifoLine (src/device/prims_ll.h)
LL_WORD = 8
#: comm->threadThresholds (src/include/comm.h): NCCL_LL_THREAD_THRESHOLD 8 (x ranks for Ring/LL),
#: NCCL_LL128_THREAD_THRESHOLD 8, NCCL_SIMPLE_THREAD_THRESHOLD 64
THREAD_THRESHOLD = {"ll": 8.0, "ll128": 8.0, "simple": 64.0}


def threshold(algo: str, proto: str, n_ranks: int) -> float:
    """Bytes per thread below which ``topoGetAlgoInfo`` trims channels, then threads."""
    return THREAD_THRESHOLD[proto] * (n_ranks if algo == "ring" and proto == "ll" else 1)


#: NCCL_MAX_NTHREADS (src/include/device.h): the threads a Tree kernel always runs
MAX_NTHREADS = 640
#: the fewest threads topoGetAlgoInfo launches: 3 warps
MIN_THREADS = 3 * 32


def launched_threads(algo: str, max_threads: int, channels: int, per_thread: float, nbytes: float) -> int:
    """Threads per channel NCCL launches for Ring or Tree (``topoGetAlgoInfo``, src/enqueue.cc, NCCL 2.19-2.30).

    After trimming the channels: ``while (nBytes < nc * nt * threadThreshold) { if (nt % 128 == 0) nt /= 2;
    else break; }`` (512 -> 256 -> 128 -> 64), then at least 3 warps (``nt/WARP_SIZE < 3 ? 3*WARP_SIZE``), and
    ``if (algorithm == NCCL_ALGO_TREE) nt = NCCL_MAX_NTHREADS`` ("Tree now uses all threads always").
    """
    if algo == "tree":
        return MAX_NTHREADS
    nt = max_threads
    while nt % 128 == 0 and nbytes < channels * nt * per_thread:
        nt //= 2
    return max(nt, MIN_THREADS)


def ll_trip_share(link_bytes: float, hidden_steps: int, slice_bytes: float, threads: int, max_threads: int) -> float:
    """Factor (> 0) on one channel's LL bandwidth time: hidden first trips off, the rest at its threads' rate.

    ``link_bytes``: bytes one link of the channel carries; ``hidden_steps``: its steps whose first trip rides
    on the hop latency (GPU-to-GPU hops of the first loop); ``slice_bytes``: one step's chunk; ``threads``:
    launched (:func:`launched_threads`) out of ``max_threads`` (those of a large buffer).  Returns ``(link - hidden) / link x
    max_threads / threads`` with ``hidden = hidden_steps x min(chunk, threads x 8 B)``; a step that fits one
    trip costs only its latency, so the bandwidth time may reach (almost) nothing.
    """
    if link_bytes <= 0 or threads <= 0:
        return 1.0
    hidden = min(link_bytes, hidden_steps * min(slice_bytes, threads * LL_WORD))
    # floor: the flows keep a trace of their bytes, so a call whose steps all fit one trip still runs them
    return max(1e-6, (link_bytes - hidden) / link_bytes) * max_threads / threads
