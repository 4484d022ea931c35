"""The host work of seed 001's AWS exchange functions: what each method's Python code does around its messages.

:mod:`simcomm.validation.aws_loop` prices what every method and the reference
do alike (the batch drawn on the CPU, the per-tensor norm, clip and LARS
loops).  The three exchange functions of ``220606_aws/imagenet_test.py`` add
host work of their own around the messages the strategies already carry, and
it differs by method, so it moves the gap rows:

* **AllReduce** (the ``allreduce == True`` branch of the timed loop): per
  segment ``flatten_tensors(part_model)`` (the vendored
  ``gossip_module/utils.py``: per tensor ``contiguous().view(-1)``, then one
  ``torch.cat``), ``dist.all_reduce``, ``tensor_flatten / world_size`` (one
  kernel), ``unflatten_tensors`` (per tensor ``narrow`` and ``view_as``) and
  per tensor ``param_model.data = unflat`` (a setter, no kernel).
* **SGP** (``sgp()``): first ``worlds = dist.new_group()``, which every call
  makes and never uses: ``new_group`` ends in a barrier over all ranks
  (pytorch/pytorch#45181, PyTorch 1.7: an NCCL ``barrier()``), since 1.8 the
  store-based one (``_store_based_barrier`` in ``distributed_c10d.py``,
  pytorch/pytorch#49419 and #49930), which polls the TCP store every 10 ms
  (``time.sleep(0.01)``) until every rank has checked in, until 2.1 made it
  wait instead (pytorch/pytorch#98000).  The AWS code (June 2022) needs 1.8
  or later for its NCCL send/recv, as :mod:`aws_loop` assumes; ranks that
  arrive together all find the count short at their first poll, so it costs
  one poll interval (the store's two round trips, ~0.1 ms, not counted).  Then per
  segment: ``flatten_tensors``; a send in a new ``threading.Thread`` (start
  and join), ``torch.zeros_like(...).cuda()`` (one kernel) and the blocking
  ``dist.recv``; or, when both peers are the same rank (offset N/2, one of
  the log2 N offsets), the pair ``all_reduce`` and a division (one kernel);
  ``torch.cuda.synchronize()``; ``unflatten_tensors``; per tensor
  ``p.data.copy_(0.5*(cp.data+p.data))`` (add, mul, copy: three kernels).
* **Crossover-SGD** (flat ``crossover()``): one ``flatten_tensors`` of the
  whole model; per segment a slice, ``torch.zeros_like(...).cuda()``, the
  threaded send and blocking receive, ``torch.cuda.synchronize()`` (a 2-cycle
  runs the pair all-reduce and a division instead of the zeros and the
  thread: about a thread's 67 us less, not counted); then
  ``flatten_tensors(seg_list)`` (one more ``cat`` over the 18 segments),
  ``unflatten_tensors`` and per tensor the same three-kernel average.

Priced as :mod:`aws_loop` prices its loops, nothing fitted: kernels issued
back to back cost their calls (PyTorch's dispatch plus the device's launch)
or their memory traffic at the device's roofline, whichever is longer; a
synchronisation costs one more call; a call that launches nothing costs the
dispatch alone; a thread's start and join cost :data:`THREAD_S`, measured
here.  The work is serial on each rank (one Python thread, the exchange's
own ordering), and every rank does the same, so it adds to the iteration.

Hierarchical Crossover-SGD's own host work is not counted (its rows are
orderings against AllReduce with margins of 50 ms and more).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from simcomm.validation.aws_loop import DISPATCH_S

__all__ = ["ExchangeCost", "exchange_cost", "METHODS", "THREAD_S", "STORE_POLL_S", "AVERAGE"]

#: CPU seconds of ``threading.Thread(target=f, args=(x,)).start()`` then ``.join()`` with a trivial target
#: (Python 3.12, best of 30 x 1000, the development machine's 2.1 GHz core, 2026-11-28: 67.0 us)
THREAD_S = 67.0e-6
#: torch.distributed's store-based barrier (the end of ``new_group``) sleeps this long between polls
STORE_POLL_S = 0.01
#: per parameter tensor, ``p.data.copy_(0.5*(cp.data+p.data))``: (kernels, bytes per fp32 element):
#: add reads two and writes one, mul reads one and writes one, copy_ reads one and writes one
AVERAGE = (3, 28)
#: host calls per tensor that launch nothing: flatten_tensors' contiguous() and view(-1), unflatten_tensors'
#: narrow() and view_as()
FLAT_CALLS = 2
METHODS = ("allreduce", "sgp", "crossover-sgd")


@dataclass(frozen=True)
class ExchangeCost:
    """One method's exchange host work per iteration (seconds) and what it is made of."""

    method: str
    kernels_s: float  # kernels between synchronisations: calls or memory traffic, whichever is longer
    calls_s: float  # host calls that launch nothing, synchronisations and threads
    barrier_s: float  # SGP's new_group store barrier
    kernels: float  # per iteration (SGP: the mean over its offsets)
    syncs: float

    @property
    def total_s(self) -> float:
        return self.kernels_s + self.calls_s + self.barrier_s


def exchange_cost(segments: Sequence[Sequence[int]], device, method: str, nodes: int,
                  dispatch_s: float = DISPATCH_S) -> ExchangeCost:
    """The exchange host work of ``method`` (:data:`METHODS`) at ``nodes`` ranks.

    ``segments``: the element counts of each segment's parameter tensors, in
    model order (ResNet-50's 18 segments of seed 001's ``fine`` chromosome);
    ``device``: a :class:`simcomm.traces.devices.DeviceSpec`.
    """
    if method not in METHODS:
        raise ValueError(f"method: {method!r} is not one of {', '.join(METHODS)}")
    bandwidth = device.mem_bw * device.memory_eff
    call = device.launch_s + dispatch_s

    def launches(k: int, nbytes: float) -> float:
        return max(k * call, nbytes / bandwidth)

    tensors = [n for seg in segments for n in seg]
    flat_calls = FLAT_CALLS * len(tensors) * dispatch_s  # one flatten_tensors' or unflatten_tensors' calls
    average = sum(launches(AVERAGE[0], AVERAGE[1] * n) for n in tensors)
    kernels_s = calls_s = barrier_s = 0.0
    kernels = syncs = 0.0
    if method == "allreduce":
        for seg in segments:  # cat (read and write), divide (read and write)
            kernels_s += launches(2, 16 * sum(seg))
        calls_s = 2 * flat_calls + len(tensors) * dispatch_s  # flatten, unflatten, the .data setters
        kernels = 2 * len(segments)
    elif method == "sgp":
        # the AWS code's offsets 2^i, i < int(log2 N); send and receive peer coincide at 2^i = N/2 only
        offsets = max(1, nodes.bit_length() - 1)
        pair = 1.0 / offsets if nodes & (nodes - 1) == 0 else 0.0
        for seg in segments:
            e = sum(seg)
            # cat (8 B); then zeros_like (4 B) and a thread, or (the pair offset) a division (8 B)
            kernels_s += launches(1, 8 * e) + (1 - pair) * launches(1, 4 * e) + pair * launches(1, 8 * e)
            calls_s += (1 - pair) * (THREAD_S + dispatch_s) + call  # .cuda() no-op; cuda.synchronize
        kernels_s += average
        calls_s += 2 * flat_calls
        barrier_s = STORE_POLL_S
        kernels = 2 * len(segments) + AVERAGE[0] * len(tensors)
        syncs = len(segments)
    else:  # crossover-sgd
        whole = sum(tensors)
        kernels_s = 2 * launches(1, 8 * whole) + sum(launches(1, 4 * sum(seg)) for seg in segments) + average
        # the flatten and unflatten of the model, the second flatten's 18 segments; per segment its slice,
        # the .cuda() no-op, the thread, the synchronisation
        calls_s = (2 * flat_calls + FLAT_CALLS * len(segments) * dispatch_s
                   + len(segments) * (2 * dispatch_s + THREAD_S + call))
        kernels = 2 + len(segments) + AVERAGE[0] * len(tensors)
        syncs = len(segments)
    return ExchangeCost(method, kernels_s, calls_s, barrier_s, kernels, syncs)
