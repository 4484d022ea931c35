"""The NCCL algorithm contract: which collectives an algorithm runs, where it can run, and its flows.

NCCL runs a collective as one kernel that streams the buffer in chunks
through every channel at once (``src/device/*``), so unlike the MPI textbook
algorithms there are no bulk-synchronous steps: in steady state every link of
the pattern carries data at the same time.  simcomm therefore models an NCCL
algorithm as *one* step whose transfers are the pattern's links, each carrying
the bytes that cross it over the whole operation; the step's transfers all
start after the tuning model's latency (:mod:`simcomm.nccl.tuning`) and share
the fabric max-min fairly with everything else.  On a fabric with no other
traffic the step ends at ``latency + max over links (bytes on the link / link
rate)``, the pipelined closed form, which is exact because every transfer of
a pattern carries the same bytes.

Each algorithm is one module with a subclass of :class:`NcclAlgorithm`
registered in :data:`NCCL_ALGORITHMS` under NCCL's name in lower case.
Reductions happen in the kernel that moves the data, so no separate
reduction time (γ) is charged.
"""

from __future__ import annotations

from itertools import chain
from typing import ClassVar

import numpy as np

from simcomm.nccl.layout import GroupLayout
from simcomm.registry import Registry

__all__ = ["NcclAlgorithm", "NCCL_ALGORITHMS", "register", "Flows"]

#: (src member, dst member, bytes) of one pipelined step, as parallel arrays
Flows = tuple[np.ndarray, np.ndarray, np.ndarray]


class NcclAlgorithm:
    """Base class of every NCCL algorithm module."""

    name: ClassVar[str] = ""         # simcomm spelling: ring, tree, nvls, nvls-tree, ...
    nccl: ClassVar[str] = ""         # NCCL's spelling in NCCL_ALGO and its logs: Ring, Tree, NVLS, ...
    summary: ClassVar[str] = ""
    reference: ClassVar[str] = ""
    collectives: ClassVar[tuple[str, ...]] = ()

    def missing(self, kind: str, layout: GroupLayout) -> str | None:
        """Why this algorithm cannot run ``kind`` on ``layout`` (None: it can)."""
        if kind not in self.collectives:
            return f"NCCL's {self.nccl} does not implement {kind} (it runs {', '.join(self.collectives)})"
        return None

    def flows(self, kind: str, layout: GroupLayout, nbytes: float, root: int) -> Flows:
        """The pattern's transfers over the whole operation (member indices, bytes)."""
        raise NotImplementedError


NCCL_ALGORITHMS: Registry[NcclAlgorithm] = Registry("NCCL algorithm")


def register(cls: type[NcclAlgorithm]) -> type[NcclAlgorithm]:
    NCCL_ALGORITHMS.add(cls.name, cls(), summary=cls.summary, reference=cls.reference)
    return cls


def pack(pairs: list[tuple[int, int]], nbytes: float | list[float]) -> Flows:
    """Parallel arrays from (src, dst) pairs and one byte count (or one per pair)."""
    flat = np.fromiter(chain.from_iterable(pairs), dtype=np.int64, count=2 * len(pairs))  # src, dst, src, ...
    src, dst = flat[0::2].copy(), flat[1::2].copy()
    nb = np.broadcast_to(np.asarray(nbytes, dtype=float), (len(pairs),)).copy()
    return src, dst, nb
