"""NCCL channels as flows: rings over every rail, chains inside nodes, the double binary tree.

A *channel* is one ring (or tree) that carries a 1/C share of the buffer.
NCCL's topology search (``src/graph/search.cc``) gives each channel its own
NIC, so a ring enters and leaves every node on one rail; when the GPU that
ends a node's part of the ring is not wired to that rail's NIC, NCCL hands the
data over NVLink to the GPU that is (PXN, "proxy across NVLink", NCCL >= 2.12,
``src/graph/paths.cc``).  simcomm models channel ``c`` as:

* entering every node at the first GPU (in the node's ring order) wired to
  the node's NIC ``c mod nics``, walking the node's intranode cycle in the
  direction that ends on a GPU of the same NIC when there is one;
* an internode hop from that GPU to the next node's entry GPU, through the
  channel's NIC on both sides (rail-aligned);
* a PXN hop (exit GPU -> the entry GPU of its own node) before the internode
  hop when the exit GPU is on another NIC and NVLink joins them (or, without
  peer-to-peer, host memory: the exit GPU's data reaches the rail's NIC only
  through it); on a PCIe machine with peer-to-peer the exit GPU sends over its
  own PCIe port, PXN needing NVLink (``src/graph/paths.cc``).

Single-node rings follow each ring order the node offers (:func:`simcomm.nccl.layout.intra_cycles`):
one on a switch, where every GPU's port then carries one flow each way, which
is all a ring can use; several on an NVLink mesh, one per cycle and direction.

Trees (``src/graph/trees.cc``): over nodes, NCCL's binary tree rooted at node
0 (a node's parent flips its lowest set bit up one place), and a second tree
that mirrors it (even node count) or shifts it by one (odd), so a node that
is a leaf in one tree is interior in the other; channels alternate between
the two.  Inside a node a tree is a chain in ring order from the GPU wired to
the channel's NIC.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from simcomm.nccl.layout import GroupLayout

__all__ = ["Ring", "rings", "chain", "btree_parents", "dtree_parents", "tree_edges", "tree_depth"]


@dataclass(frozen=True)
class Ring:
    """One channel's ring: member order (cyclic) and its hops, with PXN hand-offs split out.

    ``hops[k]`` are the (src, dst) member pairs that carry what ``order[k]``
    sends to ``order[k+1]``: one pair, or two (the PXN hop, then the rail hop).
    """

    order: tuple[int, ...]
    hops: tuple[tuple[tuple[int, int], ...], ...]


def _entry(layout: GroupLayout, node: tuple[int, ...], c: int) -> int:
    """Position in ``node`` of the first member wired to NIC ``c`` (mod the node's NICs); 0 if none."""
    locals_ = [int(layout.nic_local[m]) for m in node]
    nics = max(locals_) + 1 if max(locals_) >= 0 else 0
    if nics == 0:
        return 0
    want = c % nics
    return next((i for i, x in enumerate(locals_) if x == want), 0)


def _node_path(layout: GroupLayout, node: tuple[int, ...], c: int) -> tuple[int, ...]:
    """The node's members as channel ``c`` visits them: from its entry GPU, ending on its NIC if possible."""
    k = _entry(layout, node, c)
    fwd = node[k:] + node[:k]
    if len(fwd) > 2:
        back = (fwd[0],) + tuple(reversed(fwd[1:]))
        nic = layout.nic_local[fwd[0]]
        if layout.nic_local[fwd[-1]] != nic and layout.nic_local[back[-1]] == nic:
            return back
    return fwd


def rings(layout: GroupLayout) -> list[Ring]:
    """One ring per rail used (multi-node), or each ring order NCCL finds in the node (single node)."""
    if layout.n_nodes == 1:
        out = []
        for order in (layout.cycles[0] if layout.cycles else (layout.nodes[0],)):
            hops = tuple(((order[i], order[(i + 1) % len(order)]),) for i in range(len(order)))
            out.append(Ring(order, hops))
        return out
    out = []
    for c in range(max(1, layout.nics_per_node)):
        paths = [_node_path(layout, node, c) for node in layout.nodes]
        order = tuple(m for p in paths for m in p)
        hops = []
        for j, path in enumerate(paths):
            hops += [((path[i], path[i + 1]),) for i in range(len(path) - 1)]
            nxt = paths[(j + 1) % len(paths)][0]
            exit_, entry = path[-1], path[0]
            # PXN: hand over NVLink, then the rail. Without peer-to-peer the exit GPU reaches the rail's NIC only
            # through host memory, which the hand-off through host memory stands for.
            handoff = layout.pxn or layout.host_staged
            if exit_ != entry and layout.nic_local[exit_] != layout.nic_local[entry] and handoff:
                hops.append(((exit_, entry), (entry, nxt)))
            else:
                hops.append(((exit_, nxt),))
        out.append(Ring(order, tuple(hops)))
    return out


def chain(layout: GroupLayout, node: tuple[int, ...], c: int) -> tuple[int, ...]:
    """Channel ``c``'s chain inside one node, head (wired to the channel's NIC) first."""
    if len(node) == 1:  # a node of one member is its own chain (what _node_path gives it, without the look-ups)
        return node
    return _node_path(layout, node, c)


def btree_parents(n: int) -> list[int]:
    """Parent of each of ``n`` tree nodes in NCCL's binary tree (root 0, whose parent is -1).

    For k > 0 with lowest set bit b, the parent is (k with b cleared) with bit
    2b set, or k with b cleared when that is out of range (trees.cc,
    ``ncclGetBtree``); every node has at most two children and node 0 one.
    """
    out = [-1] * n
    for k in range(1, n):
        b = k & -k
        up = (k ^ b) | (b << 1)
        out[k] = up if up < n else k ^ b
    return out


def dtree_parents(n: int) -> tuple[list[int], list[int]]:
    """NCCL's two complementary trees: the binary tree, and its mirror (n even) or shift (n odd)."""
    first = btree_parents(n)
    if n % 2:
        second = [-1] * n
        for k in range(n):  # node k plays (k - 1) mod n of the first tree
            p = first[(k - 1) % n]
            second[k] = -1 if p < 0 else (p + 1) % n
    else:
        second = [-1 if first[n - 1 - k] < 0 else n - 1 - first[n - 1 - k] for k in range(n)]
    return first, second


def tree_edges(parents: list[int]) -> list[tuple[int, int]]:
    """(child, parent) pairs of a parent array."""
    return [(k, p) for k, p in enumerate(parents) if p >= 0]


@lru_cache(maxsize=256)
def tree_depth(n: int) -> int:
    """Levels from the root to the deepest leaf of NCCL's trees over ``n`` nodes (0 for one node).

    ``ncclGetDtree`` (src/graph/trees.cc) builds the binary tree of :func:`btree_parents` and a second tree that
    is the first relabelled (mirrored or shifted, :func:`dtree_parents`), so both have the first one's depth.
    It is ``floor(log2 n)``, the depth NCCL's tuning model counts (``log2i(nNodes)``), only when ``n`` is a power
    of two: 3 nodes hang node 1 under node 2 under the root (depth 2), 20 nodes reach node 15 through 16, 8, 12
    and 14 (depth 5, not 4).
    """
    from simcomm.collectives._trees import btree_parents as parents
    from simcomm.collectives._trees import depths

    return int(depths(parents(n)).max()) if n > 1 else 0

