"""Open MPI's trees and its segmented (pipelined) tree broadcast and reduce.

Open MPI's ``coll/base`` runs broadcast and reduce over a tree built in
``coll_base_topo.c`` and pipelines the message in segments of ``S`` bytes
(``ompi_coll_base_bcast_intra_generic`` / ``ompi_coll_base_reduce_generic``).
Trees here are parent arrays on relative ranks (``parent[root] = -1``):

* :func:`chain_parents` – ``build_chain`` with fanout 1 (the "pipeline");
* :func:`kary_parents` – ``build_tree``: level-order k-ary tree, children of
  ``v`` on level ``L`` are ``v + j·k^L`` (j = 1..k);
* :func:`in_order_bintree_parents` – ``build_in_order_bintree``, rooted at
  ``p - 1``;
* :func:`kmtree_parents` – ``build_kmtree``: ``v``'s parent clears its lowest
  non-zero base-``radix`` digit;
* :func:`in_order_bmtree_parents` – ``build_in_order_bmtree``: ``v - lowbit(v)``.

Segments: ``k = max(1, ⌈n/S⌉)`` segments, ``k - 1`` full ones of ``s = S``
bytes and a last one of ``r = n - (k-1)·S`` (``S = 0``, or ``n ≤ S``, is one
segment of ``n``), as ``COLL_BASE_COMPUTED_SEGCOUNT`` does.

Broadcast: a node forwards segment ``j`` to *all* its children at once
(``isend`` to each child, then ``waitall``), so with the root sending segment
``j`` in step ``j``, a sender at depth ``d`` sends segment ``j`` in step
``j + d``.  Every step moves at most one segment per edge, so with tree
depth ``D``::

    T = (k + D - 2)·(α + s·β) + (α + r·β)

Reduce: data flows up as early as it exists – a node of height ``h`` (leaves
0) sends segment ``j`` to its parent in step ``j + h``; the parent reduces
what arrives in a step.  The steady state (every node busy with a full
segment) is one step repeated; fill and drain are at most ``2H - 1`` steps for
a root of height ``H``, so schedules stay short for any ``k``.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from simcomm.collectives._trees import depths
from simcomm.collectives.base import CostTerms, Step

__all__ = ["segments", "chain_parents", "kary_parents", "in_order_bintree_parents", "kmtree_parents",
           "in_order_bmtree_parents", "max_nonzero_digits", "heights", "tree_bcast_steps",
           "tree_bcast_cost", "tree_reduce_steps", "tree_reduce_cost"]


def segments(n: float, seg: int) -> tuple[int, float, float]:
    """``(k, s, r)``: segment count, full segment size and last segment size in bytes."""
    if seg <= 0 or n <= seg:
        return 1, n, n
    k = math.ceil(n / seg)
    return k, float(seg), n - (k - 1) * seg


# --- trees (coll_base_topo.c) -------------------------------------------------

@lru_cache(maxsize=64)
def chain_parents(p: int) -> np.ndarray:
    """A single chain 0 -> 1 -> ... -> p-1 (``build_chain`` with fanout 1)."""
    par = np.arange(-1, p - 1, dtype=np.int64)
    par.flags.writeable = False
    return par


@lru_cache(maxsize=64)
def kary_parents(p: int, k: int = 2) -> np.ndarray:
    """``build_tree(k)``: level-order tree; level L holds ranks [(k^L-1)/(k-1), (k^(L+1)-1)/(k-1))."""
    par = np.full(p, -1, dtype=np.int64)
    first, width = 0, 1  # first rank and size of the current level
    while first < p:
        v = np.arange(first, min(first + width, p), dtype=np.int64)
        for j in range(1, k + 1):
            child = v + j * width
            ok = child < p
            par[child[ok]] = v[ok]
        first, width = first + width, width * k
    par.flags.writeable = False
    return par


@lru_cache(maxsize=64)
def in_order_bintree_parents(p: int) -> np.ndarray:
    """``build_in_order_bintree``: root ``p - 1``; the loop below follows the C code rank by rank."""
    par = np.full(p, -1, dtype=np.int64)
    for rank in range(p):
        size, myrank, parent, delta, prev = p, rank, p - 1, 0, -1
        while True:
            rightsize = size >> 1
            lchild = rchild = -1
            if size - 1 > 0:
                lchild = parent - 1
                if lchild > 0:
                    rchild = rightsize - 1
            if myrank == parent:
                break
            if myrank > rchild:  # left subtree: shift ranks down past the right subtree
                if myrank == lchild:
                    prev = parent + delta
                size -= rightsize + 1
                delta += rightsize
                myrank -= rightsize
                parent = size - 1
            else:  # right subtree keeps rank numbering
                if myrank == rchild:
                    prev = parent + delta
                size = rightsize
                parent = rchild
        par[rank] = prev
    par.flags.writeable = False
    return par


@lru_cache(maxsize=64)
def kmtree_parents(p: int, radix: int) -> np.ndarray:
    """``build_kmtree``: a rank's parent clears its lowest non-zero base-``radix`` digit."""
    v = np.arange(p, dtype=np.int64)
    par = np.full(p, -1, dtype=np.int64)
    mask = 1
    while mask < p:
        hit = (par < 0) & (v % (radix * mask) != 0)
        par[hit] = v[hit] // (radix * mask) * (radix * mask)
        mask *= radix
    par[0] = -1
    par.flags.writeable = False
    return par


@lru_cache(maxsize=64)
def in_order_bmtree_parents(p: int) -> np.ndarray:
    """``build_in_order_bmtree`` (binomial reduce/gather): parent is ``v - lowbit(v)``."""
    v = np.arange(p, dtype=np.int64)
    par = v - (v & -v)
    par[0] = -1
    par.flags.writeable = False
    return par


def max_nonzero_digits(p: int, radix: int) -> int:
    """Largest number of non-zero base-``radix`` digits of any integer in ``[0, p)`` (k-nomial depth)."""
    if p <= 1:
        return 0
    digits, x = [], p - 1
    while x:
        x, d = divmod(x, radix)
        digits.append(d)
    best = sum(d > 0 for d in digits)
    # lower digit i of p-1 by one and set every digit below it to radix-1
    for i, d in enumerate(digits):
        if d:
            above = sum(e > 0 for e in digits[i + 1:])
            best = max(best, above + (d - 1 > 0) + i)
    return best


def heights(parent: np.ndarray) -> np.ndarray:
    """Height of every node (leaves 0), found level by level from the deepest."""
    dep = depths(parent)
    h = np.zeros(len(parent), dtype=np.int64)
    for d in range(int(dep.max()), 0, -1):
        v = np.flatnonzero(dep == d)
        np.maximum.at(h, parent[v], h[v] + 1)
    return h


# --- segmented broadcast down a tree ------------------------------------------

def _step_blocks(last: int, k: int):
    """Yield ``(t, repeat)``: individual steps, with the steady run ``last..k-2`` as one repeated step."""
    t = 0
    while t <= k + last - 1:
        if last <= t <= k - 2:
            yield t, k - 1 - t
            t = k - 1
        else:
            yield t, 1
            t += 1


def tree_bcast_steps(parent: np.ndarray, n: float, seg: int) -> list[Step]:
    """Pipelined broadcast from the root of ``parent``: senders at depth d forward segment t - d."""
    k, s, r = segments(n, seg)
    child = np.flatnonzero(parent >= 0)
    src = parent[child]
    sdep = depths(parent)[src]  # depth of the sender
    last = int(sdep.max())  # deepest sender depth = D - 1
    out = []
    for t, rep in _step_blocks(last, k):
        j = t - sdep
        on = (j >= 0) & (j <= k - 1)
        nb = np.where(j[on] == k - 1, r, s)
        out.append(Step.make(src[on], child[on], nb, repeat=rep))
    return out


def tree_bcast_cost(depth: int, n: float, seg: int, a: float, b: float) -> CostTerms:
    """``(k + D - 2)(α + sβ) + α + rβ`` for a tree of depth ``D``."""
    k, s, r = segments(n, seg)
    return CostTerms((k + depth - 1) * a, ((k + depth - 2) * s + r) * b, 0.0)


# --- segmented reduce up a tree -----------------------------------------------

def tree_reduce_steps(parent: np.ndarray, n: float, seg: int) -> list[Step]:
    """Pipelined reduce to the root of ``parent``: a node of height h sends segment t - h."""
    k, s, r = segments(n, seg)
    src = np.flatnonzero(parent >= 0)
    dst = parent[src]
    h = heights(parent)[src]
    out = []
    for t, rep in _step_blocks(int(h.max()), k):
        j = t - h
        on = (j >= 0) & (j <= k - 1)
        nb = np.where(j[on] == k - 1, r, s)
        out.append(Step.make(src[on], dst[on], nb, nb, repeat=rep))
    return out


def tree_reduce_cost(parent: np.ndarray, n: float, seg: int, a: float, b: float, g: float) -> CostTerms:
    """Step by step ``α + max_u(β·max_in + γ·Σ_in)`` over receivers u (steady run counted once, repeated).

    A chain (every node one child) has the closed form
    ``(k + p - 3)(α + s(β+γ)) + α + r(β+γ)``; other trees are read off level by level.
    """
    k, s, r = segments(n, seg)
    src = np.flatnonzero(parent >= 0)
    dst = parent[src]
    h = heights(parent)[src]
    p = len(parent)
    if np.bincount(dst, minlength=p).max() == 1 and len(src) == p - 1 and int(h.max()) == p - 2:
        return CostTerms((k + p - 2) * a, ((k + p - 3) * s + r) * b, ((k + p - 3) * s + r) * g)
    lat = bw = red = 0.0
    for t, rep in _step_blocks(int(h.max()), k):
        j = t - h
        on = (j >= 0) & (j <= k - 1)
        nb = np.where(j[on] == k - 1, r, s)
        d = dst[on]
        big = np.zeros(p)
        np.maximum.at(big, d, nb)
        tot = np.bincount(d, weights=nb, minlength=p)
        u = int(np.argmax(big * b + tot * g))
        lat += rep * a
        bw += rep * float(big[u]) * b
        red += rep * float(tot[u]) * g
    return CostTerms(lat, bw, red)
