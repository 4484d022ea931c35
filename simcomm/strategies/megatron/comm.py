"""Which collectives run around one layer: tensor/sequence parallelism (Megatron's ``f``/``g``) and expert parallelism.

A mixin of :class:`~simcomm.strategies.megatron.emitter.Emitter`: :meth:`LayerComm._comm` names, for a
layer of a stage and a point of its pass, the ``(kind, stream, groups, bytes)`` the emitter issues there.
TP (Shoeybi et al. 2019): an all-reduce after attention and the MLP in forward (``g``) and at each sublayer's
input in backward (``f``); with sequence parallelism (Korthikanti et al. 2022) an all-gather before and a
reduce-scatter after instead.  EP (Lepikhin et al. 2020): an all-to-all dispatch before and combine after each
expert layer, forward and backward.  Worked out once per (layer, stage, point): plans ask per micro-batch.
"""

from __future__ import annotations


class LayerComm:
    """The tensor- and expert-parallel communication around each layer (mixin: reads the emitter's state)."""

    def _tp_groups(self, p: int):
        """Tensor-parallel groups of stage p's simulated replicas."""
        return self._cached(("tp", p), lambda: [self.layout.tp_group(p, d) for d in range(self.live)])

    def _ep_groups(self, p: int):
        """Expert-parallel groups of stage p (live replicas hold whole expert-parallel groups)."""
        lay = self.layout
        n = self.live // lay.ep
        return self._cached(("ep", p), lambda: [g for t in range(lay.tp) for g in lay.ep_groups(t, p)[:n]])

    def _comm(self, j: int, p: int, where: str):
        """Communication around layer j: ``where`` in fwd-pre, fwd-post, bwd-pre, bwd-post (in issue order)."""
        return self._cached(("comm", j, p, where), lambda: self._comm_of(j, p, where))

    def _comm_of(self, j: int, p: int, where: str):
        cost, out = self.costs[j], []
        k = cost.kind
        tp_in = tp_out = None
        if self.layout.tp > 1:
            if k in ("attn", "mlp", "moe", "head"):
                tp_in = "allgather" if self.sequence_parallel else "f"
            if k in ("attn", "mlp", "moe", "embed"):
                tp_out = "reduce_scatter" if self.sequence_parallel else "allreduce"
        tp = ("tp", self._tp_groups(p), cost.tp_bytes)
        ep = ("ep", self._ep_groups(p), cost.dispatch_bytes) if k == "moe" and self.layout.ep > 1 else None
        if where == "fwd-pre":
            if tp_in == "allgather":
                out.append(("allgather",) + tp)
            if ep:
                out.append(("alltoall",) + ep)
        elif where == "fwd-post":
            if ep:
                out.append(("alltoall",) + ep)
            if tp_out:
                out.append((tp_out,) + tp)
        elif where == "bwd-pre":  # the conjugate of the forward's output op
            if tp_out == "reduce_scatter":
                out.append(("allgather",) + tp)
            if ep:
                out.append(("alltoall",) + ep)
        else:  # bwd-post: the conjugate of the forward's input op
            if ep:
                out.append(("alltoall",) + ep)
            if tp_in:
                out.append(("allreduce" if tp_in == "f" else "reduce_scatter",) + tp)
        return out
