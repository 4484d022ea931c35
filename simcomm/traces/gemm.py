"""The time of one GEMM from its shape: tensor-core tiles, waves over the SMs, and a memory floor.

A GEMM ``C (m x n) = A (m x k) · B (k x n)`` on a GPU runs as a grid of output tiles, each computed
by one thread block on one streaming multiprocessor (SM).  Two quantisations follow from that, and
one floor:

* **tile quantisation**: a tile computes all ``tm x tn`` outputs even where the matrix ends, so
  ``ceil(m / tm) · ceil(n / tn)`` tiles do the work of ``m · n`` outputs;
* **wave quantisation**: the tiles run in waves of one tile per SM; the last wave may be partly
  empty and still takes a whole tile's time, so the kernel takes ``ceil(tiles / SMs)`` tile times;
* **memory floor**: the kernel cannot be faster than reading A and B and writing C once from HBM
  (thin GEMMs: a small ``k`` or a small ``n``).

::

    t_tile   = 2 · tm · tn · k / (P · e_c / SMs · r(tm, tn))
    t_tensor = min over tiles (tm, tn) of ceil(ceil(m/tm) · ceil(n/tn) / SMs) · t_tile
    t_memory = ((m·k + k·n) · in_bytes + m·n · out_bytes) / (W · e_m)
    t        = max(t_tensor, t_memory)

with ``P`` the tensor-core peak of the input dtype, ``W`` the HBM bandwidth and ``e_c``/``e_m`` the
device's efficiency factors (:mod:`simcomm.traces.devices`: one compute factor per device, calibrated
on one row).  The tiles (:data:`TILES`) are the tensor-core tiles cuBLAS and CUTLASS pick from on
Ampere and Hopper: 128x256 and 256x128 for big GEMMs (e.g. cuBLAS's
``sm90_xmma_gemm_..._tilesize128x256x64`` kernels), 128x128, and the smaller 64-wide tiles that fill the
SMs when a GEMM has few tiles.  A smaller tile reuses each operand it loads fewer times, so its rate
``r`` is taken proportional to its reuse ``tm·tn / (tm + tn)`` up to a 128x128 tile's (a 64x64 tile runs
at half rate): an assumption, not a fit.  The cheapest tile is taken, as a library heuristic would.
Split-K and stream-K (which cuBLAS may use for GEMMs with a long ``k`` and few tiles) are not
modelled: there the model is pessimistic by at most the last wave's idle share.  A device with no
SM count (a CPU) gets the plain ``2 m n k / (P e_c)`` with the same floor.

A **grouped GEMM** (``groups`` GEMMs of one shape in one kernel: the experts of a mixture-of-experts layer as
Megatron-core runs them with ``--moe-grouped-gemm``, Transformer Engine's ``GroupedLinear`` in ``TEGroupedMLP``
or the CUTLASS ``grouped_gemm`` kernels of ``GroupedMLP``, megatron/core/transformer/moe/experts.py) is one grid
of every group's tiles: ``groups · ceil(m/tm) · ceil(n/tn)`` tiles in waves over the SMs, and a floor that
reads every group's operands (each expert's own weight matrix) once.  ``groups = 1`` is the plain GEMM.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

__all__ = ["TILES", "GemmDevice", "gemm_seconds", "tensor_seconds", "tile_rate", "tile_waves", "tile_efficiency"]

#: (rows, columns) of the output tiles considered, largest first
TILES = ((128, 256), (256, 128), (128, 128), (128, 64), (64, 128), (64, 64))
#: operand reuse of a 128x128 tile, tm·tn / (tm + tn): tiles with at least this much run at the full rate
_FULL_REUSE = 64.0


def tile_rate(tile: tuple[int, int]) -> float:
    """A tile's share of the SM's tensor rate: its operand reuse over a 128x128 tile's, at most 1."""
    return min(1.0, tile[0] * tile[1] / (tile[0] + tile[1]) / _FULL_REUSE)


@dataclass(frozen=True)
class GemmDevice:
    """What prices a GEMM on one device in one input dtype."""

    peak: float  # FLOP/s of the tensor cores for the input dtype
    sms: int  # streaming multiprocessors; 0: no tiles (a CPU)
    compute_eff: float  # the device's calibrated fraction of the peak
    mem_bw: float  # HBM bytes/s
    memory_eff: float  # fraction of the bandwidth streaming kernels reach


def tile_waves(m: float, n: int, sms: int, tile: tuple[int, int], groups: int = 1) -> int:
    """Waves of one tile per SM that ``groups`` ``m x n`` outputs take with ``tile`` (one grid)."""
    tiles = groups * math.ceil(m / tile[0]) * math.ceil(n / tile[1])
    return math.ceil(tiles / sms)


def tensor_seconds(m: float, n: int, k: int, dev: GemmDevice, groups: int = 1) -> float:
    """Tensor-core time: the best tile's waves times one tile's time (the plain FLOP time without SMs)."""
    rate = dev.peak * dev.compute_eff
    if dev.sms <= 0:
        return 2.0 * groups * m * n * k / rate
    per_sm = rate / dev.sms
    return min(tile_waves(m, n, dev.sms, t, groups) * 2.0 * t[0] * t[1] * k / (per_sm * tile_rate(t)) for t in TILES)


def tile_efficiency(m: int, n: int, sms: int) -> float:
    """Useful share of the tensor-core time: ``m n`` over the best tile's ``waves · SMs · tm · tn / r``."""
    return min(1.0, max(m * n * tile_rate(t) / (tile_waves(m, n, sms, t) * sms * t[0] * t[1]) for t in TILES))


@functools.lru_cache(maxsize=1 << 16)
def gemm_seconds(m: float, n: int, k: int, dev: GemmDevice, in_bytes: float = 2.0, out_bytes: float = 2.0,
                 groups: int = 1) -> float:
    """Seconds of one ``(m x k) · (k x n)`` GEMM (``groups`` of them in one grouped GEMM): the larger of its
    tensor-core and HBM times.  ``m`` may be a fractional mean (an expert's routed rows): tiles round it up.

    Cached: a pure function of its arguments, asked for the same few shapes by every layer of tens of
    thousands of layouts (``simcomm plan``)."""
    if min(m, n, k, groups) <= 0:
        return 0.0
    memory = groups * ((m * k + k * n) * in_bytes + m * n * out_bytes) / (dev.mem_bw * dev.memory_eff)
    return max(tensor_seconds(m, n, k, dev, groups), memory)
