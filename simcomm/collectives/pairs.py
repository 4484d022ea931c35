"""Steps made of every ordered pair within groups: kept as the groups, counted by link classes.

NCCL's all-to-all under PXN (:mod:`simcomm.nccl.algorithms.p2p`) is two blocks of pairs: every ordered pair
of GPUs inside each node (the relays, one size), then every ordered pair of one rail's GPUs across nodes (the
rail messages, another size).  Over 2 048 nodes x 8 that is 3.4 x 10^7 transfers and 3 x 10^8 link
crossings; what pricing it alone needs is only each link's bytes (docs/engine.md, "Steps of one size per
link"), and a fabric with a regular structure counts the pairs crossing each link from classes of members
(:meth:`simcomm.topologies.base.Topology.pair_counts`) without routing any pair.

* :class:`PairBlocks`: the blocks (rows of group-local members) and each block's transfer size;
* :class:`PairsStep`: a :class:`~simcomm.collectives.base.Step` that holds its blocks and builds its
  per-transfer arrays only when something asks for them (a fluid run of it: traffic interrupted its closed
  form, or link usage is recorded), in the order :func:`all_pairs` gives;
* :func:`repeated_sum`: the bytes ``np.bincount`` adds up on a link crossed ``k`` times by one size, bit for
  bit, in a few dozen float additions instead of ``k``; :func:`block_loads`: every link's bytes from the
  blocks' crossing counts, or None when a link carries two sizes.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from simcomm.collectives.base import Step

__all__ = ["all_pairs", "PairBlocks", "PairsStep", "repeated_sum", "block_loads", "block_family_bytes",
           "add_block_link_bytes"]


def all_pairs(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every ordered pair (a, b), a != b, within each row of ``rows``: row by row, a outer, b inner."""
    rows = np.asarray(rows, dtype=np.int64)
    n_rows, width = rows.shape
    other = ~np.eye(width, dtype=bool)
    src = np.broadcast_to(rows[:, :, None], (n_rows, width, width))[:, other]
    dst = np.broadcast_to(rows[:, None, :], (n_rows, width, width))[:, other]
    return src.ravel(), dst.ravel()


@dataclass(frozen=True, eq=False)
class PairBlocks:
    """Blocks of a step: block ``i`` is every ordered pair within each row of ``rows[i]`` (member indices),
    each pair one transfer of ``sizes[i]`` bytes; the step's transfers are the blocks' in order."""

    rows: tuple[np.ndarray, ...]
    sizes: tuple[float, ...]
    #: ``() -> (src, dst)`` of every transfer when someone keeps them already (NCCL: one pattern per layout,
    #: shared by every size), else None: :meth:`arrays` builds them
    pairs: Callable[[], tuple[np.ndarray, np.ndarray]] | None = None

    def __post_init__(self) -> None:
        if len(self.rows) != len(self.sizes) or any(np.ndim(r) != 2 for r in self.rows):
            raise ValueError("PairBlocks: one size per block, each block a 2-D array of rows")

    def counts(self) -> tuple[int, ...]:
        """Transfers of each block."""
        return tuple(int(r.shape[0] * r.shape[1] * (r.shape[1] - 1)) for r in self.rows)

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(src, dst, nbytes)`` of every transfer, block by block."""
        if self.pairs is not None:
            src, dst = self.pairs()
        else:
            pairs = [all_pairs(r) for r in self.rows]
            src = np.concatenate([p[0] for p in pairs])
            dst = np.concatenate([p[1] for p in pairs])
        nbytes = np.concatenate([np.full(n, float(s)) for n, s in zip(self.counts(), self.sizes, strict=True)])
        return src, dst, nbytes


class PairsStep(Step):
    """A :class:`Step` of :class:`PairBlocks` (no reduction), its arrays built on first use and kept.

    ``len`` and ``repeat`` need no arrays; the engine's closed form of a step of one size per link needs
    only the blocks (:meth:`simcomm.topologies.base.Topology.pair_counts`).
    """

    def __init__(self, blocks: PairBlocks, repeat: int = 1):  # noqa: D107  (Step's fields are built lazily)
        if repeat < 1:
            raise ValueError("repeat must be >= 1")
        object.__setattr__(self, "blocks", blocks)
        object.__setattr__(self, "repeat", int(repeat))
        object.__setattr__(self, "_n", sum(blocks.counts()))

    def __len__(self) -> int:
        return self._n

    def __repr__(self) -> str:  # (the dataclass's repr would build every transfer)
        return f"PairsStep({len(self)} transfers in {len(self.blocks.rows)} blocks, repeat={self.repeat})"

    @cached_property
    def _arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return self.blocks.arrays()

    @property  # type: ignore[override]
    def src(self) -> np.ndarray:
        return self._arrays[0]

    @property  # type: ignore[override]
    def dst(self) -> np.ndarray:
        return self._arrays[1]

    @property  # type: ignore[override]
    def nbytes(self) -> np.ndarray:
        return self._arrays[2]

    @property  # type: ignore[override]
    def reduce(self) -> np.ndarray:
        return np.zeros(self._n)


def _advance(total: float, value: float, times: int) -> float:
    """``total`` (>= 0) plus ``value`` (> 0, finite) added ``times`` times, one float addition at a time.

    Inside one binade ``[2^(e-1), 2^e)`` every sum is rounded to the same grid ``u`` and ``total + value``
    leaves the same remainder on it each time; a tie (remainder ``u/2``) rounds to an even multiple, so once
    one sum inside the binade came from a sum inside it, every further addition adds the same increment.
    Two real additions find it; the sums up to near the binade's top are then ``total + m x increment``
    (exact: multiples of ``u`` below ``2^e``); the additions across the top are real again.
    """
    while times > 0:
        prev, total = total, total + value
        times -= 1
        if total == prev:  # value is below half the grid: no later addition changes anything either
            return total
        e = math.frexp(prev)[1]
        if times == 0 or prev <= 0.0 or math.frexp(total)[1] != e:
            continue
        nxt = total + value  # from a sum made inside the binade: the increment every later one repeats
        times -= 1
        inc, total = nxt - total, nxt
        if times == 0 or math.frexp(total)[1] != e:
            continue
        jump = min(times, int((math.ldexp(1.0, e) - total) // inc) - 2)
        if jump > 0:
            total += jump * inc
            times -= jump
    return total


def repeated_sum(value: float, counts: np.ndarray) -> np.ndarray:
    """For each ``k`` of ``counts``: ``0.0 + value + ... + value`` (``k`` terms, left to right) in float64.

    That is what ``np.bincount(links, weights)`` adds up on a link that ``k`` transfers of ``value`` bytes
    cross, bit for bit (tests/collectives/test_collectives_pairs.py checks both against plain loops).
    """
    counts = np.asarray(counts, dtype=np.int64)
    value = float(value)
    if not (math.isfinite(value) and value > 0.0):  # (sizes are positive; a sign flips every sum alike)
        if value < 0.0 and math.isfinite(value):
            return -repeated_sum(-value, counts)
        return np.array([float(np.sum(np.full(k, value))) if k else 0.0 for k in counts.tolist()])
    uniq, inverse = np.unique(counts, return_inverse=True)
    sums, total, done = np.empty(len(uniq)), 0.0, 0
    for i, k in enumerate(uniq.tolist()):
        total = _advance(total, value, k - done)
        done = k
        sums[i] = total
    return sums[inverse.reshape(-1)]


def block_loads(blocks: PairBlocks, counts: list[np.ndarray]) -> np.ndarray | None:
    """Bytes per link of a step of ``blocks``, given each block's crossings per link (``counts``), or None
    when some link carries two sizes.

    Equal, bit for bit, to ``np.bincount(links, weights=bytes of each crossing)`` over the routed step: a
    link of one size ``s`` crossed ``k`` times sums ``s`` ``k`` times in whatever order (:func:`repeated_sum`).
    """
    sizes = np.array([float(s) for s in blocks.sizes])
    size_of = np.full(len(counts[0]), np.nan)
    for s, c in zip(sizes.tolist(), counts, strict=True):
        on = c > 0
        clash = on & ~np.isnan(size_of) & (size_of != s)
        if clash.any():
            return None
        size_of[on] = s
    total = np.sum(counts, axis=0)
    loads = np.zeros(len(total))
    for s in np.unique(sizes).tolist():
        on = size_of == s
        loads[on] = repeated_sum(s, total[on])
    return loads


def block_family_bytes(blocks: PairBlocks, counts: list[np.ndarray], family_of_link: np.ndarray,
                       n_families: int) -> np.ndarray:
    """Bytes per link family of one run of a step of ``blocks`` (each block's crossings per link: ``counts``),
    bit for bit what :meth:`~simcomm.engine.schedule.RoutedStep.family_bytes` adds up over the routed step.

    That sum goes crossing by crossing in transfer order, so a family's total is block 0's size added once per
    crossing of it in that family, then block 1's, and so on (:func:`_advance`).
    """
    per_block = [np.bincount(family_of_link, weights=c, minlength=n_families) for c in counts]
    out = np.zeros(n_families)
    for f in range(n_families):
        total = 0.0
        for s, crossings in zip(blocks.sizes, per_block, strict=True):
            if crossings[f] and s > 0:  # (zero bytes add nothing)
                total = _advance(total, float(s), int(crossings[f]))
        out[f] = total
    return out


def add_block_link_bytes(per_link: np.ndarray, blocks: PairBlocks, counts: list[np.ndarray], times: int) -> None:
    """``per_link += `` each link's bytes of ``times`` runs of a step of ``blocks``, bit for bit what
    ``np.add.at(per_link, links, times * bytes of each crossing)`` adds over the routed step.

    ``np.add.at`` adds crossing by crossing in transfer order onto what the link held: block 0's ``times x
    size`` once per crossing, then block 1's (:func:`_advance`); links that held the same and are crossed as
    often by each block end alike, so each such class is summed once.
    """
    used = np.flatnonzero(np.sum(counts, axis=0) > 0)
    if not used.size:
        return
    keys = np.stack([per_link[used]] + [c[used].astype(float) for c in counts], axis=1)
    uniq, inverse = np.unique(keys, axis=0, return_inverse=True)
    steps = [times * float(s) for s in blocks.sizes]
    sums = np.empty(len(uniq))
    for i, row in enumerate(uniq.tolist()):
        total = row[0]
        for value, k in zip(steps, row[1:], strict=True):
            if k and value > 0:
                total = _advance(total, value, int(k))
        sums[i] = total
    per_link[used] = sums[inverse.reshape(-1)]
