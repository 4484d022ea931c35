"""NCCL as NCCL runs it: channels over every NIC, pipelined Ring and Tree, NVLS, CollNet, PAT, protocols.

The ``nccl`` transport stacks (``nccl``, ``nccl-socket``) hand every collective
here instead of to the MPI textbook catalogue: :func:`prepare_nccl` lays the
group out on the fabric, picks the algorithm and protocol with NCCL's own
tuning model, and builds the pipelined flows the engine runs with contention.
docs/nccl.md explains the model, its sources and what it was checked against.

* :mod:`~simcomm.nccl.layout`: NVLink domains, NICs, fabric features of a group;
* :mod:`~simcomm.nccl.channels`: rings over rails with PXN, NCCL's double binary tree;
* :mod:`~simcomm.nccl.tuning`: NCCL's latency/bandwidth model and choice;
* :mod:`~simcomm.nccl.algorithms`: one module per algorithm (its flows);
* :mod:`~simcomm.nccl.prepare`: op -> engine schedule and closed form;
* :mod:`~simcomm.nccl.measured`: a user's nccl-tests output read back (``simcomm bench --measured``).
"""

from simcomm.nccl.base import NCCL_ALGORITHMS, NcclAlgorithm
from simcomm.nccl.layout import GroupLayout, group_layout
from simcomm.nccl.prepare import choose, prepare_nccl

__all__ = ["prepare_nccl", "choose", "group_layout", "GroupLayout", "NCCL_ALGORITHMS", "NcclAlgorithm"]
