"""Which collectives run around one layer: tensor/sequence parallelism (Megatron's ``f``/``g``) and expert parallelism.

A mixin of :class:`~simcomm.strategies.megatron.emitter.Emitter`: :meth:`LayerComm._comm` names, for a
layer of a stage and a point of its pass, the ``(kind, stream, groups, bytes)`` the emitter issues there.
TP (Shoeybi et al. 2019): an all-reduce after attention and the MLP in forward (``g``) and at each sublayer's
input in backward (``f``); with sequence parallelism (Korthikanti et al. 2022) an all-gather before and a
reduce-scatter after instead.  EP: Megatron-core's token dispatchers (:mod:`.moe`): all-to-all (with the
token-count exchange and expert tensor parallelism's all-gather/reduce-scatter) or all-gather/reduce-scatter
over the expert groups before and after each MoE layer, forward and backward.  Worked out once per (layer, stage,
point): plans ask per micro-batch.
"""

from __future__ import annotations

from simcomm.strategies.megatron.moe import dispatcher_steps, has_tp_edges


class LayerComm:
    """The tensor- and expert-parallel communication around each layer (mixin: reads the emitter's state)."""

    def _tp_groups(self, p: int):
        """Tensor-parallel groups of stage p's simulated replicas (with a dense model's ring ranks folded, the
        first ring rank's alone: the others run alike collectives on their own GPUs)."""
        live = 1 if self.fold_rings else self.live
        return self._cached(("tp", p), lambda: [self.layout.tp_group(p, d) for d in range(live)])

    def _expert_groups(self, p: int, which: str):
        """Stage p's ``ep``, ``etp`` or ``tp_ep`` groups among the simulated ranks (live replicas hold whole
        expert tensor- and expert-parallel groups: :func:`~simcomm.strategies.megatron.sizing.live_replicas`)."""
        def make():
            live = set(self._stage(p))
            groups = getattr(self.layout, f"{which}_groups")(p)
            return [g for g in groups if g[0] in live]
        return self._cached((which, p), make)

    def _comm(self, j: int, p: int, where: str):
        """Communication around layer j: ``where`` in fwd-pre, fwd-post, bwd-pre, bwd-post (in issue order)."""
        return self._cached(("comm", j, p, where), lambda: self._comm_of(j, p, where))

    def _moe_comm(self, p: int, where: str):
        """The token dispatcher's collectives at ``where`` (:func:`.moe.dispatcher_steps`), in issue order."""
        if self.moe is None:
            return []
        return [(kind, "ep", self._expert_groups(p, which), nbytes)
                for kind, which, nbytes in dispatcher_steps(self.moe, where)]

    def _comm_of(self, j: int, p: int, where: str):
        cost, out = self.costs[j], []
        k = cost.kind
        tp_in = tp_out = None
        # an MoE layer under sequence parallelism has no tensor-parallel edge of its own (the dispatcher takes
        # the s/tp tokens as they are); its shared experts are a tensor-parallel MLP (SharedExpertMLP's gather
        # before and reduce-scatter after).  Without sequence parallelism (refused by Megatron-core) it runs as
        # DeepSpeed-MoE's MOELayer does with tensor-parallel non-experts: each rank keeps 1/tp of the replicated
        # tokens (drop_tokens, free) and all-gathers the output (gather_tokens); backward the same, mirrored
        moe_edge = has_tp_edges(k, self.sequence_parallel, self.moe)
        tp_gather = k == "moe" and self.layout.tp > 1 and not self.sequence_parallel
        if self.layout.tp > 1 and moe_edge:
            if k in ("attn", "mlp", "moe", "head"):
                tp_in = "allgather" if self.sequence_parallel else "f"
            if k in ("attn", "mlp", "moe", "embed"):
                tp_out = "reduce_scatter" if self.sequence_parallel else "allreduce"
        tp = ("tp", self._tp_groups(p), cost.tp_bytes)
        ep = self._moe_comm(p, where) if k == "moe" else []
        if where == "fwd-pre":
            if tp_in == "allgather":
                out.append(("allgather",) + tp)
            out += ep
        elif where == "fwd-post":
            out += ep
            if tp_out:
                out.append((tp_out,) + tp)
            if tp_gather:  # DeepSpeed-MoE's gather_tokens: the 1/tp token slices gathered back for the next layer
                out.append(("allgather",) + tp)
        elif where == "bwd-pre":  # the conjugate of the forward's output op
            if tp_out == "reduce_scatter":
                out.append(("allgather",) + tp)
            out += ep
        else:  # bwd-post: the conjugate of the forward's input op
            out += ep
            if tp_gather:  # the gradient of drop_tokens (the input's slice) is an all-gather
                out.append(("allgather",) + tp)
            if tp_in:
                out.append(("allreduce" if tp_in == "f" else "reduce_scatter",) + tp)
        return out
