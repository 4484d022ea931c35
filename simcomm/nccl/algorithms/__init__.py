"""NCCL's algorithms, one module each (they register in :data:`simcomm.nccl.base.NCCL_ALGORITHMS`)."""

from simcomm.nccl.algorithms import collnet, nvls, nvls_tree, p2p, pat, ring, tree  # noqa: F401
from simcomm.nccl.base import NCCL_ALGORITHMS

__all__ = ["NCCL_ALGORITHMS"]
