"""NCCL's binary trees (``ncclGetBtree`` / ``ncclGetDtree`` in src/graph/trees.cc).

Rank ``r > 0`` with lowest set bit ``b`` hangs under ``(r ^ b) | 2b``, or under
``r ^ b`` when that is out of range; rank 0 is the root and has one child.
This is an in-order tree in which every odd rank is a leaf.  The second tree
of the double binary tree is the first one relabelled: mirrored
(``r -> p-1-r``) for even ``p``, shifted (``r -> r+1 mod p``) for odd ``p``,
so most leaves of one tree are interior nodes of the other.
"""

from __future__ import annotations

import numpy as np

from simcomm.collectives.base import Step

__all__ = ["btree_parents", "depths", "tree_edges", "tree_steps", "reduce_fan_in"]


def btree_parents(p: int) -> np.ndarray:
    """Parent of every rank (−1 for the root, rank 0)."""
    r = np.arange(p, dtype=np.int64)
    bit = r & -r
    up = (r ^ bit) | (bit << 1)
    up = np.where(up >= p, r ^ bit, up)
    up[0] = -1
    return up


def depths(parent: np.ndarray) -> np.ndarray:
    """Depth of every node (root 0), by pointer jumping along parents."""
    d = np.zeros(len(parent), dtype=np.int64)
    cur = parent.copy()
    while (cur >= 0).any():
        live = cur >= 0
        d += live
        cur = np.where(live, parent[np.maximum(cur, 0)], -1)
    return d


def tree_edges(p: int, double: bool) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """``(child, parent, depth_of_child)`` arrays for one tree, or for both trees."""
    par = btree_parents(p)
    dep = depths(par)
    c = np.arange(1, p, dtype=np.int64)
    trees = [(c, par[c], dep[c])]
    if double:
        f = (np.arange(p) + 1) % p if p % 2 else p - 1 - np.arange(p)
        trees.append((f[c], f[par[c]], dep[c]))
    return trees


def tree_steps(p: int, n_per_tree: float, double: bool) -> list[Step]:
    """Reduce up every tree level by level (deepest first), then broadcast down."""
    trees = tree_edges(p, double)
    depth = int(trees[0][2].max())
    up, down = [], []
    for d in range(depth, 0, -1):
        ch = np.concatenate([t[0][t[2] == d] for t in trees])
        pa = np.concatenate([t[1][t[2] == d] for t in trees])
        up.append(Step.make(ch, pa, n_per_tree, n_per_tree))
        down.insert(0, Step.make(pa, ch, n_per_tree))
    return up + down


def reduce_fan_in(p: int, double: bool) -> tuple[int, list[int]]:
    """Tree depth and, per reduce round (deepest first), the most children one rank reduces."""
    trees = tree_edges(p, double)
    depth = int(trees[0][2].max())
    fan = []
    for d in range(depth, 0, -1):
        pa = np.concatenate([t[1][t[2] == d] for t in trees])
        fan.append(int(np.bincount(pa).max()))
    return depth, fan
