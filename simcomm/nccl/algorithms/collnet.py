"""NCCL CollNet (Direct and Chain): the network switches reduce (SHARP), all-reduce across nodes.

Inside a node the GPUs reduce-scatter and later all-gather their buffer
(``2(L-1)/L n`` through each GPU port); each GPU sends its 1/L shard through
its own NIC to the switch, which reduces across nodes and returns the result
(``n/L`` each way per NIC instead of a ring's ``2(N-1)/N n/L``).  The NIC load
is modelled as a shift of ``n/L`` along each rail; real aggregation happens in
the switch tree, so core links are approximated.  Direct and Chain differ in
how the node's GPUs reach the NIC (all directly, or along a chain) and in
NCCL's latency model.  ``src/device/all_reduce.h`` (COLLNET_*),
``src/transport/coll_net.cc``; needs the NCCL-RDMA-SHARP plug-in and SHARP switches.
"""

from __future__ import annotations

from simcomm.nccl.base import NcclAlgorithm, pack, register


class _CollNet(NcclAlgorithm):
    collectives = ("allreduce",)

    def missing(self, kind, layout):
        why = super().missing(kind, layout)
        if why:
            return why
        if not layout.collnet:
            return (f"{self.nccl} needs in-network reduction (SHARP switches and NCCL's CollNet plug-in); this "
                    f"cluster declares none (topology meta sharp = false)")
        if layout.n_nodes < 2:
            return f"{self.nccl} reduces across nodes; a single node has no network to reduce in"
        if not layout.uniform:
            return f"{self.nccl} needs the same number of GPUs on every node"
        return None

    def flows(self, kind, layout, nbytes, root):
        L, N = layout.ppn, layout.n_nodes
        pairs, size = [], []
        if L > 1:
            for node in layout.nodes:
                pairs += [(node[i], node[(i + 1) % L]) for i in range(L)]
                size += [2.0 * (L - 1) / L * nbytes] * L
        for k in range(N):
            for j in range(L):
                pairs.append((layout.nodes[k][j], layout.nodes[(k + 1) % N][j]))
                size.append(nbytes / L)
        return pack(pairs, size)


@register
class CollNetDirect(_CollNet):
    name = "collnet-direct"
    nccl = "CollNetDirect"
    summary = "SHARP in-network all-reduce; every GPU of a node talks to the NICs directly"
    reference = "NVIDIA/nccl src/transport/coll_net.cc, src/device/all_reduce.h (COLLNET_DIRECT)"


@register
class CollNetChain(_CollNet):
    name = "collnet-chain"
    nccl = "CollNetChain"
    summary = "SHARP in-network all-reduce reached along a chain of the node's GPUs"
    reference = "NVIDIA/nccl src/transport/coll_net.cc, src/device/all_reduce.h (COLLNET_CHAIN)"
