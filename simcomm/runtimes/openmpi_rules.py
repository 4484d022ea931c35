"""``auto`` as Open MPI does: ``coll/tuned``'s fixed decision rules (the tables :mod:`simcomm.runtimes.mpi` reads).

Source: ``ompi/mca/coll/tuned/coll_tuned_decision_fixed.c``.  Version 4.1
(``rules="openmpi"``) has the table-driven rules that came with 4.1.0
(ompi-collectives-tuning measurements, PRs #7730/#7952, with the #8186/#8198
and #8209/#8224 fixes); version 3.1 (``rules="openmpi-3.1"``) has the older
hand-fitted rules of the 3.x line.  Only the commutative branches are
modelled: simcomm's reductions are sums.  Not modelled either: ``coll/han``,
the default for multi-node communicators from 5.0 on, and rules files or
forced algorithms (``coll_tuned_use_dynamic_rules``).

What is compared with the thresholds (Open MPI's ``total_dsize``), in
simcomm's size conventions (:mod:`simcomm.collectives.base`), ``n`` bytes:

* allreduce, broadcast, reduce, reduce_scatter: ``n`` (4.1 and 3.1);
* allgather, alltoall, gather, scatter: the per-rank block ``n/p`` in 4.1;
  3.1 used ``n`` for allgather and ``n/p`` for the others.

Element counts (fallbacks, 3.1's ``count`` tests) assume 4-byte elements, as
:mod:`simcomm.runtimes.mpi` does for MPICH.

Open MPI 4.1 passes segment size 0 and fanout 0 to every algorithm
(``*_intra_do_this(..., alg, 0, 0)``), so nothing is segmented: "chain" and
"pipeline" are one unsegmented chain (``build_chain`` forces fanout 0 to 1),
"segmented_ring" is the plain ring.  3.1 passes the segment sizes shown.

Open MPI 4.1 table (first matching row, then the first size bound ``<``;
``else`` is the last algorithm; K = 1024 B)::

    allreduce (n)
      p < 4      <8 ring; <4K recursive_doubling; <8K ring; <16K recursive_doubling; <64K ring; <256K segmented_ring; else rabenseifner
      p < 8      <16 ring; <8K recursive_doubling; else rabenseifner
      p < 16     <8K recursive_doubling; else rabenseifner
      p < 32     <64 segmented_ring; <4K recursive_doubling; else rabenseifner
      p < 64     <128 segmented_ring; else rabenseifner
      p < 128    <256K recursive_doubling; else rabenseifner
      p < 256    <128K nonoverlapping; <256K recursive_doubling; else rabenseifner
      p < 512    <4K nonoverlapping; else rabenseifner
      p < 2048   <2K nonoverlapping; <16K recursive_doubling; else rabenseifner
      p < 4096   <2K nonoverlapping; <4K segmented_ring; <16K recursive_doubling; else rabenseifner
      else       <2K nonoverlapping; <16K segmented_ring; <32K recursive_doubling; else rabenseifner
    broadcast (n)
      p < 4      <32 pipeline; <256 binary_tree; <512 pipeline; <1K knomial; <32K basic_linear; <128K binary_tree; <256K chain; <512K basic_linear; <1M binomial; else binary_tree
      p < 8      <64 binary_tree; <128 binomial; <2K binary_tree; <8K binomial; <1M basic_linear; else chain
      p < 16     <8 knomial; <64 binary_tree; <4K knomial; <16K binary_tree; <32K binomial; else basic_linear
      p < 32     <4K knomial; <1M binomial; else scatter_allgather
      p < 64     <2K binomial; else knomial
      p < 128    knomial
      p < 256    <2 binomial; <16K binary_tree; <32K basic_linear; <64K binary_tree; else knomial
      p < 1024   <16K knomial; <32K split_binary_tree; else knomial
      p < 2048   <512K knomial; else scatter_allgather
      p < 4096   <256K knomial; else scatter_allgather
      else       <8K knomial; <16K binary_tree; <256K knomial; else scatter_allgather
    reduce (n)
      p < 4      <8 rabenseifner; <16 binary; <32 pipeline; <256K linear; <512K pipeline; <1M chain; else pipeline
      p < 8      <4K binary; <64K chain; <256K binomial; <512K linear; <1M binomial; else linear
      p < 16     <8K binary; else binomial
      p < 32     <4K binary; else binomial
      p < 256    binomial
      p < 512    <8K binomial; <16K in_order_binary; else binomial
      p < 2048   binomial
      p < 4096   <512 binomial; <1K in_order_binary; <8K binomial; <16K in_order_binary; else binomial
      else       <16 binomial; <32 in_order_binary; <1K binomial; <2K in_order_binary; <8K binomial; <16K in_order_binary; else binomial
    reduce_scatter (n)
      p < 4      <64K ring; <128K butterfly; else ring
      p < 8      <8 nonoverlapping; <256K recursive_halving; else ring
      p < 32     <256K recursive_halving; else ring
      p < 64     <64 nonoverlapping; <2K recursive_halving; <512K butterfly; else ring
      p < 128    <256 nonoverlapping; <512 recursive_halving; <2K butterfly; <4K recursive_halving; else butterfly
      p < 256    <256 nonoverlapping; <512 recursive_halving; else butterfly
      p < 512    <256 nonoverlapping; <1K recursive_halving; else butterfly
      p < 1024   <512 nonoverlapping; <2K recursive_halving; <8K butterfly; <16K recursive_halving; else butterfly
      p < 2048   <512 nonoverlapping; <4K recursive_halving; <16K butterfly; <32K recursive_halving; else butterfly
      p < 4096   <512 nonoverlapping; <4K recursive_halving; else butterfly
      else       <1K nonoverlapping; <8K recursive_halving; else butterfly
    allgather (n/p)
      p < 3      two_proc
      p < 32     recursive_doubling
      p < 64     <1K recursive_doubling; <64K neighbor; else ring
      p < 128    <512 recursive_doubling; <64K neighbor; else ring
      p < 256    <512 recursive_doubling; <128K neighbor; <512K ring; <1M neighbor; else ring
      p < 512    <32 recursive_doubling; <128 bruck; <1K recursive_doubling; <128K neighbor; <512K ring; <1M neighbor; else ring
      p < 1024   <64 recursive_doubling; <256 bruck; <2K recursive_doubling; else neighbor
      p < 2048   <4 recursive_doubling; <8 bruck; <16 recursive_doubling; <32 bruck; <256 recursive_doubling; <512 bruck; <4K recursive_doubling; else neighbor
      p < 4096   <32 bruck; <128 recursive_doubling; <512 bruck; <4K recursive_doubling; else neighbor
      else       <2 recursive_doubling; <8 bruck; <16 recursive_doubling; <512 bruck; <4K recursive_doubling; else neighbor
    alltoall (n/p)
      p < 3      <2 pairwise; <4 two_proc; <16 pairwise; <64 two_proc; <256 pairwise; <4K two_proc; <32K pairwise; <256K linear_sync; <1M two_proc; else pairwise
      p < 8      <8K linear_sync; <16K linear; <64K linear_sync; <512K linear; <1M pairwise; else linear
      p < 16     <256K linear_sync; else linear
      p < 32     <4 linear_sync; <512 modified_bruck; <8K linear_sync; <32K linear; <256K linear_sync; <512K linear; else linear_sync
      p < 64     <512 modified_bruck; <512K linear; else linear_sync
      p < 128    <1K modified_bruck; <2K linear; <4K linear_sync; <256K linear; else pairwise
      p < 256    <1K modified_bruck; <2K linear_sync; <256K linear; else pairwise
      p < 512    <1K modified_bruck; <8K linear_sync; <32K linear; else pairwise
      p < 1024   <512 modified_bruck; <8K linear_sync; <16K linear; <128K linear_sync; <256K linear; else pairwise
      p < 2048   <512 modified_bruck; <1K linear_sync; <2K linear; <16K linear_sync; <256K linear; else linear_sync
      p < 4096   <1K modified_bruck; <4K linear_sync; <8K linear; <128K linear_sync; else linear
      else       <2K modified_bruck; <8K linear_sync; <16K linear; <32K linear_sync; <64K linear; else linear_sync
    gather (n/p)
      p < 4      <2 linear_sync; <4 basic_linear; <32K binomial; <64K basic_linear; <128K binomial; else linear_sync
      p < 8      <1K binomial; <8K basic_linear; <32K binomial; <256K basic_linear; else linear_sync
      p < 256    binomial
      p < 512    <2K binomial; <8K basic_linear; else binomial
      else       binomial
    scatter (n/p)
      p < 4      <2 linear_nb; <128K basic_linear; <256K linear_nb; else basic_linear
      p < 8      <2K binomial; <4K basic_linear; <8K binomial; <32K basic_linear; <1M linear_nb; else basic_linear
      p < 16     <16K binomial; <1M linear_nb; else basic_linear
      p < 32     <16K binomial; <32K basic_linear; else linear_nb
      p < 64     <512 binomial; <8K linear_nb; <16K binomial; else linear_nb
      else       <512 binomial; else linear_nb

Open MPI 3.1 rules (count = n/4; segment sizes in brackets)::

    allreduce       n < 10000: recursive_doubling; count > p and p·1M >= n: ring;
                    count > p: segmented_ring [1M]; else nonoverlapping
    broadcast       n < 2048 or count <= 1: binomial; n < 370728: split_binary_tree [1K];
                    p < 1.6134e-6·n + 2.1102: pipeline [128K]; p < 13: split_binary_tree [8K];
                    p < 2.3679e-6·n + 1.1787: pipeline [64K]; p < 3.2118e-6·n + 8.7936: pipeline [16K];
                    else pipeline [8K]
    reduce          p < 8 and n < 512: linear; (p < 8 and n < 20480) or n < 2048 or count <= 1: binomial;
                    p > 0.6016/1024·n + 1.3496: binomial [1K]; p > 0.0410/1024·n + 9.7128: pipeline [1K];
                    p > 0.0422/1024·n + 1.1614: binary [32K]; p > 0.0033/1024·n + 1.6761: pipeline [32K];
                    else pipeline [64K]
    reduce_scatter  n <= 12K or (n <= 256K and p = 2^k) or p >= 0.0012·n + 8: recursive_halving; else ring
    allgather       p = 2: two_proc; n < 50000: recursive_doubling (p = 2^k) or bruck;
                    else ring (odd p) or neighbor (even p)
    alltoall        p = 2: two_proc; n/p < 200 and p > 12: modified_bruck; n/p < 3000: linear; else pairwise
    gather          n/p > 92160: linear_sync [32K]; n/p > 6000: linear_sync [1K];
                    p > 60 or (p > 10 and n/p < 1024): binomial; else basic_linear
    scatter         p > 10 and n/p < 300: binomial; else basic_linear

How each Open MPI algorithm maps to simcomm's catalogue, with the fallbacks
Open MPI's implementations take on their own (:func:`decide` reports them)::

    allreduce    basic_linear -> linear; nonoverlapping -> nonoverlapping-<reduce>+<broadcast>, the
                 parts being Open MPI's own reduce and broadcast choices for the same p and n;
                 recursive_doubling -> recursive-doubling;
                 ring -> ring, or recursive-doubling if count < p;
                 segmented_ring -> segmented-ring [1M], or ring (S = 0 or n < p·S, then as ring);
                 rabenseifner -> rabenseifner-ompi, or linear if count < p'
    broadcast    basic_linear -> linear; chain, pipeline -> chain [0] / pipeline-<S>k;
                 split_binary_tree -> split-binary-tree(-<S>k); binary_tree -> binary-tree;
                 binomial -> gloo (Open MPI's binomial tree, children sent at once, is gloo's);
                 knomial -> knomial (radix 4);
                 scatter_allgather -> scatter-recursive-doubling-ompi, or linear if count < p
    reduce       linear -> linear; chain, pipeline -> chain / pipeline-<S>k; binary -> binary-tree(-32k);
                 binomial -> binomial [0] / binomial-1k; in_order_binary -> in-order-binary;
                 rabenseifner -> linear if count < p' (always, where 4.1 picks it), else rabenseifner
    reduce_scatter  nonoverlapping -> nonoverlapping-<reduce>+linear (coll/basic's linear scatterv);
                 recursive_halving -> recursive-halving;
                 ring -> ring; butterfly -> butterfly
    allgather    two_proc -> ring; recursive_doubling -> recursive-doubling, or bruck if p != 2^k;
                 bruck -> bruck; ring -> ring; neighbor -> neighbor-exchange, or ring if p is odd
    alltoall     linear, linear_sync (max_requests 0) -> linear; pairwise, two_proc -> pairwise;
                 modified_bruck -> bruck
    gather       basic_linear -> linear; binomial -> binomial; linear_sync -> linear-sync(-<S>k)
    scatter      basic_linear -> linear; binomial -> binomial; linear_nb -> linear-nb
"""

from __future__ import annotations

from dataclasses import dataclass

from simcomm.collectives.base import COLLECTIVES
from simcomm.errors import UnknownNameError

__all__ = ["VERSIONS", "TABLES", "Decision", "decide", "select", "rule_rows"]

VERSIONS = ("4.1", "3.1")
ELEMENT_BYTES = 4
K = 1024

# Open MPI 4.1 fixed rules, commutative branch: per collective, rows of
# (communicator-size bound or None for "else", ((size bound, algorithm), ...), algorithm otherwise).
TABLES: dict[str, tuple] = {
    "allreduce": (
        (4, ((8, "ring"), (4 * K, "recursive_doubling"), (8 * K, "ring"), (16 * K, "recursive_doubling"),
             (64 * K, "ring"), (256 * K, "segmented_ring")), "rabenseifner"),
        (8, ((16, "ring"), (8 * K, "recursive_doubling")), "rabenseifner"),
        (16, ((8 * K, "recursive_doubling"),), "rabenseifner"),
        (32, ((64, "segmented_ring"), (4 * K, "recursive_doubling")), "rabenseifner"),
        (64, ((128, "segmented_ring"),), "rabenseifner"),
        (128, ((256 * K, "recursive_doubling"),), "rabenseifner"),
        (256, ((128 * K, "nonoverlapping"), (256 * K, "recursive_doubling")), "rabenseifner"),
        (512, ((4 * K, "nonoverlapping"),), "rabenseifner"),
        (2048, ((2 * K, "nonoverlapping"), (16 * K, "recursive_doubling")), "rabenseifner"),
        (4096, ((2 * K, "nonoverlapping"), (4 * K, "segmented_ring"), (16 * K, "recursive_doubling")),
         "rabenseifner"),
        (None, ((2 * K, "nonoverlapping"), (16 * K, "segmented_ring"), (32 * K, "recursive_doubling")),
         "rabenseifner"),
    ),
    "broadcast": (
        (4, ((32, "pipeline"), (256, "binary_tree"), (512, "pipeline"), (1 * K, "knomial"),
             (32 * K, "basic_linear"), (128 * K, "binary_tree"), (256 * K, "chain"), (512 * K, "basic_linear"),
             (1024 * K, "binomial")), "binary_tree"),
        (8, ((64, "binary_tree"), (128, "binomial"), (2 * K, "binary_tree"), (8 * K, "binomial"),
             (1024 * K, "basic_linear")), "chain"),
        (16, ((8, "knomial"), (64, "binary_tree"), (4 * K, "knomial"), (16 * K, "binary_tree"),
              (32 * K, "binomial")), "basic_linear"),
        (32, ((4 * K, "knomial"), (1024 * K, "binomial")), "scatter_allgather"),
        (64, ((2 * K, "binomial"),), "knomial"),
        (128, (), "knomial"),
        (256, ((2, "binomial"), (16 * K, "binary_tree"), (32 * K, "basic_linear"), (64 * K, "binary_tree")),
         "knomial"),
        (1024, ((16 * K, "knomial"), (32 * K, "split_binary_tree")), "knomial"),
        (2048, ((512 * K, "knomial"),), "scatter_allgather"),
        (4096, ((256 * K, "knomial"),), "scatter_allgather"),
        (None, ((8 * K, "knomial"), (16 * K, "binary_tree"), (256 * K, "knomial")), "scatter_allgather"),
    ),
    "reduce": (
        (4, ((8, "rabenseifner"), (16, "binary"), (32, "pipeline"), (256 * K, "linear"), (512 * K, "pipeline"),
             (1024 * K, "chain")), "pipeline"),
        (8, ((4 * K, "binary"), (64 * K, "chain"), (256 * K, "binomial"), (512 * K, "linear"),
             (1024 * K, "binomial")), "linear"),
        (16, ((8 * K, "binary"),), "binomial"),
        (32, ((4 * K, "binary"),), "binomial"),
        (256, (), "binomial"),
        (512, ((8 * K, "binomial"), (16 * K, "in_order_binary")), "binomial"),
        (2048, (), "binomial"),
        (4096, ((512, "binomial"), (1 * K, "in_order_binary"), (8 * K, "binomial"), (16 * K, "in_order_binary")),
         "binomial"),
        (None, ((16, "binomial"), (32, "in_order_binary"), (1 * K, "binomial"), (2 * K, "in_order_binary"),
                (8 * K, "binomial"), (16 * K, "in_order_binary")), "binomial"),
    ),
    "reduce_scatter": (
        (4, ((64 * K, "ring"), (128 * K, "butterfly")), "ring"),
        (8, ((8, "nonoverlapping"), (256 * K, "recursive_halving")), "ring"),
        (32, ((256 * K, "recursive_halving"),), "ring"),
        (64, ((64, "nonoverlapping"), (2 * K, "recursive_halving"), (512 * K, "butterfly")), "ring"),
        (128, ((256, "nonoverlapping"), (512, "recursive_halving"), (2 * K, "butterfly"),
               (4 * K, "recursive_halving")), "butterfly"),
        (256, ((256, "nonoverlapping"), (512, "recursive_halving")), "butterfly"),
        (512, ((256, "nonoverlapping"), (1 * K, "recursive_halving")), "butterfly"),
        (1024, ((512, "nonoverlapping"), (2 * K, "recursive_halving"), (8 * K, "butterfly"),
                (16 * K, "recursive_halving")), "butterfly"),
        (2048, ((512, "nonoverlapping"), (4 * K, "recursive_halving"), (16 * K, "butterfly"),
                (32 * K, "recursive_halving")), "butterfly"),
        (4096, ((512, "nonoverlapping"), (4 * K, "recursive_halving")), "butterfly"),
        (None, ((1 * K, "nonoverlapping"), (8 * K, "recursive_halving")), "butterfly"),
    ),
    "allgather": (
        (3, (), "two_proc"),  # Open MPI tests communicator_size == 2
        (32, (), "recursive_doubling"),
        (64, ((1 * K, "recursive_doubling"), (64 * K, "neighbor")), "ring"),
        (128, ((512, "recursive_doubling"), (64 * K, "neighbor")), "ring"),
        (256, ((512, "recursive_doubling"), (128 * K, "neighbor"), (512 * K, "ring"), (1024 * K, "neighbor")),
         "ring"),
        (512, ((32, "recursive_doubling"), (128, "bruck"), (1 * K, "recursive_doubling"), (128 * K, "neighbor"),
               (512 * K, "ring"), (1024 * K, "neighbor")), "ring"),
        (1024, ((64, "recursive_doubling"), (256, "bruck"), (2 * K, "recursive_doubling")), "neighbor"),
        (2048, ((4, "recursive_doubling"), (8, "bruck"), (16, "recursive_doubling"), (32, "bruck"),
                (256, "recursive_doubling"), (512, "bruck"), (4 * K, "recursive_doubling")), "neighbor"),
        (4096, ((32, "bruck"), (128, "recursive_doubling"), (512, "bruck"), (4 * K, "recursive_doubling")),
         "neighbor"),
        (None, ((2, "recursive_doubling"), (8, "bruck"), (16, "recursive_doubling"), (512, "bruck"),
                (4 * K, "recursive_doubling")), "neighbor"),
    ),
    "alltoall": (
        (3, ((2, "pairwise"), (4, "two_proc"), (16, "pairwise"), (64, "two_proc"), (256, "pairwise"),
             (4 * K, "two_proc"), (32 * K, "pairwise"), (256 * K, "linear_sync"), (1024 * K, "two_proc")),
         "pairwise"),
        (8, ((8 * K, "linear_sync"), (16 * K, "linear"), (64 * K, "linear_sync"), (512 * K, "linear"),
             (1024 * K, "pairwise")), "linear"),
        (16, ((256 * K, "linear_sync"),), "linear"),
        (32, ((4, "linear_sync"), (512, "modified_bruck"), (8 * K, "linear_sync"), (32 * K, "linear"),
              (256 * K, "linear_sync"), (512 * K, "linear")), "linear_sync"),
        (64, ((512, "modified_bruck"), (512 * K, "linear")), "linear_sync"),
        (128, ((1 * K, "modified_bruck"), (2 * K, "linear"), (4 * K, "linear_sync"), (256 * K, "linear")),
         "pairwise"),
        (256, ((1 * K, "modified_bruck"), (2 * K, "linear_sync"), (256 * K, "linear")), "pairwise"),
        (512, ((1 * K, "modified_bruck"), (8 * K, "linear_sync"), (32 * K, "linear")), "pairwise"),
        (1024, ((512, "modified_bruck"), (8 * K, "linear_sync"), (16 * K, "linear"), (128 * K, "linear_sync"),
                (256 * K, "linear")), "pairwise"),
        (2048, ((512, "modified_bruck"), (1 * K, "linear_sync"), (2 * K, "linear"), (16 * K, "linear_sync"),
                (256 * K, "linear")), "linear_sync"),
        (4096, ((1 * K, "modified_bruck"), (4 * K, "linear_sync"), (8 * K, "linear"), (128 * K, "linear_sync")),
         "linear"),
        (None, ((2 * K, "modified_bruck"), (8 * K, "linear_sync"), (16 * K, "linear"), (32 * K, "linear_sync"),
                (64 * K, "linear")), "linear_sync"),
    ),
    "gather": (
        (4, ((2, "linear_sync"), (4, "basic_linear"), (32 * K, "binomial"), (64 * K, "basic_linear"),
             (128 * K, "binomial")), "linear_sync"),
        (8, ((1 * K, "binomial"), (8 * K, "basic_linear"), (32 * K, "binomial"), (256 * K, "basic_linear")),
         "linear_sync"),
        (256, (), "binomial"),
        (512, ((2 * K, "binomial"), (8 * K, "basic_linear")), "binomial"),
        (None, (), "binomial"),
    ),
    "scatter": (
        (4, ((2, "linear_nb"), (128 * K, "basic_linear"), (256 * K, "linear_nb")), "basic_linear"),
        (8, ((2 * K, "binomial"), (4 * K, "basic_linear"), (8 * K, "binomial"), (32 * K, "basic_linear"),
             (1024 * K, "linear_nb")), "basic_linear"),
        (16, ((16 * K, "binomial"), (1024 * K, "linear_nb")), "basic_linear"),
        (32, ((16 * K, "binomial"), (32 * K, "basic_linear")), "linear_nb"),
        (64, ((512, "binomial"), (8 * K, "linear_nb"), (16 * K, "binomial")), "linear_nb"),
        (None, ((512, "binomial"),), "linear_nb"),
    ),
}

#: 4.1 compares the per-rank block for these collectives, the whole buffer for the others
PER_RANK = {"allgather", "alltoall", "gather", "scatter"}


@dataclass(frozen=True)
class Decision:
    """One Open MPI choice and the simcomm algorithm that prices it."""

    collective: str
    #: Open MPI's algorithm name (the ``coll_tuned_<collective>_algorithm`` enum value)
    ompi: str
    #: segment size in bytes Open MPI passes (0 = unsegmented)
    segment: int
    #: the registered simcomm algorithm (``<collective>/<algorithm>``)
    algorithm: str
    #: a fallback Open MPI's implementation takes on its own, if any
    note: str = ""


def _size(x: int) -> str:
    if x >= K * K and x % (K * K) == 0:
        return f"{x // (K * K)}M"
    return f"{x // K}K" if x >= K and x % K == 0 else str(x)


def rule_rows(collective: str) -> list[str]:
    """The 4.1 table of ``collective`` as the docstring prints it (tests keep the two in step)."""
    rows = []
    for bound, cuts, last in TABLES[collective]:
        head = f"p < {bound}" if bound is not None else "else"
        body = "; ".join(f"<{_size(c)} {alg}" for c, alg in cuts)
        body = f"{body}; else {last}" if cuts else last
        rows.append(f"{head:<10} {body}")
    return rows


def _table41(collective: str, p: int, nbytes: float) -> tuple[str, int]:
    x = nbytes / p if collective in PER_RANK else nbytes
    for bound, cuts, last in TABLES[collective]:
        if bound is None or p < bound:
            return next((alg for c, alg in cuts if x < c), last), 0
    raise AssertionError("the last row has no bound")


def _rules31(collective: str, p: int, n: float) -> tuple[str, int]:
    """Open MPI 3.1's hand-fitted rules, branch by branch as in the C file."""
    count = n / ELEMENT_BYTES
    if collective == "allreduce":
        if n < 10000:
            return "recursive_doubling", 0
        if count > p:
            return ("ring", 0) if p * (1 << 20) >= n else ("segmented_ring", 1 << 20)
        return "nonoverlapping", 0
    if collective == "broadcast":
        if n < 2048 or count <= 1:
            return "binomial", 0
        if n < 370728:
            return "split_binary_tree", 1 * K
        if p < 1.6134e-6 * n + 2.1102:
            return "pipeline", 128 * K
        if p < 13:
            return "split_binary_tree", 8 * K
        if p < 2.3679e-6 * n + 1.1787:
            return "pipeline", 64 * K
        if p < 3.2118e-6 * n + 8.7936:
            return "pipeline", 16 * K
        return "pipeline", 8 * K
    if collective == "reduce":
        if p < 8 and n < 512:
            return "linear", 0
        if (p < 8 and n < 20480) or n < 2048 or count <= 1:
            return "binomial", 0
        if p > 0.6016 / 1024 * n + 1.3496:
            return "binomial", 1 * K
        if p > 0.0410 / 1024 * n + 9.7128:
            return "pipeline", 1 * K
        if p > 0.0422 / 1024 * n + 1.1614:
            return "binary", 32 * K
        if p > 0.0033 / 1024 * n + 1.6761:
            return "pipeline", 32 * K
        return "pipeline", 64 * K
    if collective == "reduce_scatter":
        pow2 = 1 << (p - 1).bit_length()  # opal_next_poweroftwo_inclusive
        if n <= 12 * K or (n <= 256 * K and pow2 == p) or p >= 0.0012 * n + 8:
            return "recursive_halving", 0
        return "ring", 0
    if collective == "allgather":
        if p == 2:
            return "two_proc", 0
        if n < 50000:
            return ("recursive_doubling" if p & (p - 1) == 0 else "bruck"), 0
        return ("ring" if p % 2 else "neighbor"), 0
    block = n / p
    if collective == "alltoall":
        if p == 2:
            return "two_proc", 0
        if block < 200 and p > 12:
            return "modified_bruck", 0
        return ("linear", 0) if block < 3000 else ("pairwise", 0)
    if collective == "gather":
        if block > 92160:
            return "linear_sync", 32 * K
        if block > 6000:
            return "linear_sync", 1 * K
        if p > 60 or (p > 10 and block < 1024):
            return "binomial", 0
        return "basic_linear", 0
    if collective == "scatter":
        return ("binomial", 0) if p > 10 and block < 300 else ("basic_linear", 0)
    raise AssertionError(collective)


def _seg_name(base: str, seg: int) -> str:
    return base if seg == 0 else f"{base}-{seg // K}k"


def _map(collective: str, ompi: str, seg: int, p: int, n: float, version: str) -> tuple[str, str]:
    """``(simcomm algorithm, note)`` for Open MPI's ``ompi`` algorithm, with its own fallbacks."""
    count = n / ELEMENT_BYTES
    pof2 = 1 << (max(p, 1).bit_length() - 1)
    if collective == "allreduce":
        if ompi == "segmented_ring":
            if seg and n >= p * seg:
                return "segmented-ring", ""
            why = "segmented_ring runs the plain ring (count < p·segcount)"
            if count < p:
                return "recursive-doubling", why + "; ring falls back to recursive_doubling (count < p)"
            return "ring", why
        if ompi == "ring":
            return ("recursive-doubling", "ring falls back to recursive_doubling (count < p)") if count < p \
                else ("ring", "")
        if ompi == "rabenseifner":
            return ("linear", "rabenseifner falls back to basic_linear (count < p')") if count < pof2 \
                else ("rabenseifner-ompi", "")
        if ompi == "nonoverlapping":  # the communicator's own reduce and bcast, by the same rules
            return f"nonoverlapping-{select('reduce', p, n, version)}+{select('broadcast', p, n, version)}", ""
        return {"basic_linear": "linear", "recursive_doubling": "recursive-doubling"}[ompi], ""
    if collective == "broadcast":
        if ompi == "scatter_allgather":
            return ("linear", "scatter_allgather falls back to basic_linear (count < p)") if count < p \
                else ("scatter-recursive-doubling-ompi", "")
        if ompi in ("chain", "pipeline"):
            return ("chain", "") if seg == 0 else (f"pipeline-{seg // K}k", "")
        return {"basic_linear": "linear", "split_binary_tree": _seg_name("split-binary-tree", seg),
                "binary_tree": "binary-tree", "binomial": "gloo", "knomial": "knomial"}[ompi], ""
    if collective == "reduce":
        if ompi == "rabenseifner":
            return ("linear", "rabenseifner falls back to basic_linear (count < p')") if count < pof2 or pof2 < 2 \
                else ("rabenseifner", "")
        if ompi in ("chain", "pipeline"):
            return ("chain", "") if seg == 0 else (f"pipeline-{seg // K}k", "")
        return {"linear": "linear", "binary": _seg_name("binary-tree", seg), "binomial": _seg_name("binomial", seg),
                "in_order_binary": "in-order-binary"}[ompi], ""
    if collective == "reduce_scatter":
        if ompi == "nonoverlapping":  # the communicator's reduce, then coll/basic's linear scatterv
            return f"nonoverlapping-{select('reduce', p, n, version)}+linear", ""
        return ompi.replace("_", "-"), ""
    if collective == "allgather":
        if ompi == "recursive_doubling" and p & (p - 1):
            return "bruck", "recursive_doubling falls back to bruck (p not a power of two)"
        if ompi == "neighbor" and p % 2:
            return "ring", "neighbor exchange falls back to ring (odd p)"
        return {"two_proc": "ring", "recursive_doubling": "recursive-doubling", "bruck": "bruck", "ring": "ring",
                "neighbor": "neighbor-exchange"}[ompi], ""
    if collective == "alltoall":
        return {"linear": "linear", "linear_sync": "linear", "pairwise": "pairwise", "two_proc": "pairwise",
                "modified_bruck": "bruck"}[ompi], ""
    if collective == "gather":
        return {"basic_linear": "linear", "binomial": "binomial",
                "linear_sync": _seg_name("linear-sync", seg)}[ompi], ""
    return {"basic_linear": "linear", "binomial": "binomial", "linear_nb": "linear-nb"}[ompi], ""


def decide(collective: str, p: int, nbytes: float, version: str = "4.1") -> Decision:
    """Open MPI's fixed-rule choice for ``collective`` on ``p`` ranks and ``nbytes`` (simcomm sizes)."""
    if collective not in COLLECTIVES:
        raise UnknownNameError("collective", collective, COLLECTIVES)
    if version not in VERSIONS:
        raise UnknownNameError("Open MPI rules version", version, VERSIONS)
    p = max(int(p), 1)
    if collective == "p2p":
        return Decision(collective, "send", 0, "direct")
    ompi, seg = _table41(collective, p, nbytes) if version == "4.1" else _rules31(collective, p, nbytes)
    name, note = _map(collective, ompi, seg, p, nbytes, version)
    return Decision(collective, ompi, seg, name, note)


def select(collective: str, p: int, nbytes: float, version: str = "4.1") -> str:
    """The simcomm algorithm name that prices Open MPI's choice."""
    return decide(collective, p, nbytes, version).algorithm
