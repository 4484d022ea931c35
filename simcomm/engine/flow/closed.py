"""Steps priced alone by their closed form ``latency + max over links (bytes / capacity)`` (``closed_steps``).

:func:`closed_period` finds it on a routed step when every link carries transfers of one size (the proof is in
docs/engine.md, "Steps of one size per link"); :func:`counted_step` finds it on a step of blocks of pairs
(:class:`~simcomm.collectives.pairs.PairsStep`, NCCL's PXN all-to-all) from each link's count of pairs,
without routing a pair (docs/engine.md, "Link loads counted by classes"), and :class:`Unrouted` stands for
such a step in the pricer until traffic makes it run as flows (:func:`count_bytes` counts its bytes per family
and per link from the same counts).
"""

from __future__ import annotations

import numpy as np

from simcomm.collectives.pairs import add_block_link_bytes, block_family_bytes, block_loads
from simcomm.engine.schedule import RoutedStep

__all__ = ["closed_period", "counted_step", "Unrouted", "routed_now", "count_bytes"]

#: a step is priced by its closed form only if its transfers have at most this many distinct sizes (each size's
#: links are marked in turn to check that no link carries two)
_CLOSED_SIZES = 8
#: transfers per pass when a large step's link loads are summed (bounds the per-entry temporaries: an
#: all-to-all over 16 384 GPUs crosses 3 x 10^8 links in all)
_CHUNK = 1 << 21


def closed_period(routed: RoutedStep, capacity: np.ndarray) -> tuple[float, np.ndarray] | None:
    """``(latency + max over links (bytes / capacity), bytes per link)`` when that is the fluid model's answer
    for ``routed`` alone, else None.

    It is when every transfer waits the same latency, nothing is reduced and every link carries transfers of
    one size.  Proof (docs/engine.md, "Steps of one size per link"): no schedule moves a link's bytes faster
    than its capacity, so the step lasts at least that long; and a max-min fair rate is never below
    ``capacity / transfers`` on some link of the transfer's route (its bottleneck link is full, and no
    transfer there is faster), a bound that only grows as transfers finish; so a transfer of ``s`` bytes ends
    by ``max over its links (s x transfers / capacity)``, which is that link's bytes over its capacity when all
    its transfers carry ``s``.  The fluid core computes the same value to rounding (1e-12).
    """
    if not len(routed) or len(routed.red_ranks):
        return None
    lat, nb, lens, links = routed.latency, routed.nbytes, routed.route_len, routed.links
    if not ((lat == lat[0]).all() and nb.min() > 0):
        return None
    which = np.full(len(nb), -1, dtype=np.int8)  # each transfer's size, as an index (few sizes: no sort)
    n_sizes = 0
    while (free := np.flatnonzero(which < 0)).size:
        if n_sizes == _CLOSED_SIZES:
            return None
        which[free[nb[free] == nb[free[0]]]] = n_sizes
        n_sizes += 1
    n_links = len(capacity)
    marks = np.zeros((n_sizes, n_links), dtype=bool) if n_sizes > 1 else None
    load = np.zeros(n_links)
    ends = np.cumsum(lens)
    e0 = 0
    for c0 in range(0, len(nb), _CHUNK):
        c1 = min(c0 + _CHUNK, len(nb))
        e1 = int(ends[c1 - 1])
        part = links[e0:e1]
        if marks is not None:
            kind = np.repeat(which[c0:c1], lens[c0:c1])
            for k in range(n_sizes):
                marks[k, part[kind == k]] = True
        load += np.bincount(part, weights=np.repeat(nb[c0:c1], lens[c0:c1]), minlength=n_links)
        e0 = e1
    if marks is not None and (marks.sum(axis=0) > 1).any():
        return None
    used = load > 0
    busiest = float((load[used] / capacity[used]).max()) if used.any() else 0.0
    return float(lat[0]) + busiest, load


class Unrouted:
    """A step priced by its closed form from counts of its pairs per link: routed only if it must run as flows
    (traffic interrupted its reservation)."""

    def __init__(self, make, repeat: int, blocks=None, counts: list | None = None):
        self._make, self.repeat = make, repeat
        self.blocks, self.counts = blocks, counts  # what byte counts per link need instead of routes
        self._routed: RoutedStep | None = None

    def get(self) -> RoutedStep:
        if self._routed is None:
            self._routed = self._make()
        return self._routed


def routed_now(step) -> RoutedStep:
    return step.get() if isinstance(step, Unrouted) else step


def count_bytes(ctx, step, repeats: int, weight: float | None) -> None:
    """``ctx.count_bytes`` of ``step`` (a routed step, or an :class:`Unrouted` one counted from its blocks: the
    same bytes per family and per link, bit for bit, :mod:`simcomm.collectives.pairs`)."""
    if not isinstance(step, Unrouted) or step.counts is None:
        ctx.count_bytes(routed_now(step), repeats, weight)
        return
    if ctx.link_bytes and len(ctx.families):
        times = repeats if weight is None else repeats * weight
        ctx.family_bytes += times * block_family_bytes(step.blocks, step.counts, ctx.family_of_link,
                                                       len(ctx.families))
        if ctx.per_link is not None:
            add_block_link_bytes(ctx.per_link, step.blocks, step.counts, repeats)


def counted_step(topology, group: np.ndarray, step, latency: float | None,
                 capacity: np.ndarray) -> tuple[float, np.ndarray, list] | None:
    """:func:`closed_period` of a step of blocks of pairs from its pair counts, or None when it is no such step,
    its latency is not one for all (NCCL's is), a size is zero or a link carries two sizes.

    The loads are the routed step's, bit for bit (:func:`~simcomm.collectives.pairs.block_loads`), so the
    closed form, the held links (those with bytes) and the bytes per family are :func:`closed_period`'s.
    """
    blocks = getattr(step, "blocks", None)
    if blocks is None or latency is None or min(blocks.sizes) <= 0:
        return None
    counts = [topology.pair_counts(group[rows]) for rows in blocks.rows]
    loads = block_loads(blocks, counts)
    if loads is None:
        return None
    used = loads > 0
    return float(latency) + (float((loads[used] / capacity[used]).max()) if used.any() else 0.0), loads, counts
