"""NCCL NVLS: the NVSwitch reduces (NVLink SHARP), Hopper and later, one NVLink domain.

For an all-reduce every GPU lets the switch read each of its p chunks
(``multimem.ld_reduce``: n bytes out of its port) and receives its reduced
chunk (n/p in), then writes that chunk once to a multicast address (n/p out)
and receives every chunk back (n in): ``n(1 + 1/p)`` each way through its
port, against ``2(p-1)/p n`` for a ring.  All-gather and reduce-scatter move
n through the port either way, no gain over a ring (NVIDIA/nccl issue 1506).
The load on each port is modelled as a ring-shift of that many bytes, which
puts exactly those bytes on every GPU's uplink and downlink of the
non-blocking switch.  ``src/device/all_reduce.h`` (NVLS), ``src/transport/nvls.cc``.
"""

from __future__ import annotations

from simcomm.nccl.base import NcclAlgorithm, pack, register

#: NCCL_MAX_NVLS_ARITY: the most local ranks an NVLS all-gather or reduce-scatter runs over
NVLS_ARITY = 32


@register
class NVLS(NcclAlgorithm):
    name = "nvls"
    nccl = "NVLS"
    summary = "in-switch reduction and multicast on an NVSwitch (NVLink SHARP), one NVLink domain"
    reference = "NVIDIA/nccl src/transport/nvls.cc, src/device/all_reduce.h; nccl-tests issue 212"
    collectives = ("allreduce", "allgather", "reduce_scatter")

    def missing(self, kind, layout):
        why = super().missing(kind, layout)
        if why:
            return why
        if not layout.nvls:
            return (f"NVLS needs an NVSwitch with NVLink SHARP (Hopper or later); this fabric's GPUs are joined "
                    f"by {layout.intra} (sm{layout.arch})")
        if min(len(node) for node in layout.nodes) <= 2:
            return (f"NVLS needs at least 3 GPUs in each NVLink domain (ncclNvlsInit, src/transport/nvls.cc: "
                    f"no NVLS when the node's GPU count is <= 2); the smallest here has "
                    f"{min(len(node) for node in layout.nodes)}")
        if layout.n_nodes > 1:
            return "NVLS runs inside one NVLink domain; across nodes NCCL uses NVLS-Tree"
        if kind != "allreduce" and layout.ppn > NVLS_ARITY:
            # ncclTuningNvlsModelSim (src/tuning/nvls.cc): only all-reduce runs NVLS over more local ranks
            return (f"NCCL runs NVLS {kind} over at most {NVLS_ARITY} GPUs per node (NCCL_MAX_NVLS_ARITY); this "
                    f"NVLink domain has {layout.ppn}")
        return None

    def flows(self, kind, layout, nbytes, root):
        order = layout.nodes[0]
        p = len(order)
        per_port = nbytes * (1.0 + 1.0 / p) if kind == "allreduce" else nbytes
        return pack([(order[i], order[(i + 1) % p]) for i in range(p)], per_port)
