"""Data parallelism and ZeRO/FSDP: gradient reduction, ZeRO-3's per-layer gathers, HSDP, tied embeddings, the update.

A mixin of :class:`~simcomm.strategies.megatron.emitter.Emitter`.  ``zero=0``: each gradient bucket is
all-reduced over the replicas once the last micro-batch's backward has produced it (DDP's overlap;
``overlap_grad_reduce=false``: after the whole backward, Megatron-LM's default); ZeRO-1/2 reduce-scatter
instead, update their 1/dp shard and all-gather the parameters; ZeRO-3/FSDP all-gather each layer's
parameters before its forward and again before its backward (one layer ahead) and reduce-scatter its
gradients after its backward, every micro-batch; HSDP (``shard_group``) then all-reduces each gradient
shard across the shard groups.  Expert layers reduce over the replicas holding the same experts.
"""

from __future__ import annotations


class DataParallel:
    """The data-parallel side of the plan (mixin: reads the emitter's state)."""

    def _hsdp_groups(self, p: int):
        """HSDP replica groups of stage p: one rank per shard group holding the same shard (size dp / G)."""
        lay, size = self.layout, self.params.shard_group
        return self._cached(("hsdp", p), lambda: [g for t in range(lay.tp) for g in lay.replica_groups(t, p, size)])

    def _dp_groups(self, p: int, j: int):
        """The groups layer j's gradients are reduced (and ZeRO-3's parameters gathered) over on stage p."""
        lay = self.layout
        if self.params.shard_group is not None:  # HSDP: sharded (gathered, reduce-scattered) within a shard group
            size = self.params.shard_group
            return self._cached(("shard", p), lambda: [g for t in range(lay.tp) for g in lay.shard_groups(t, p, size)])
        if self.costs[j].kind == "moe" and lay.ep > 1:
            return self._cached(("edp", p), lambda: [g for t in range(lay.tp) for g in lay.edp_groups(t, p)])
        return self._cached(("dp", p), lambda: [lay.dp_group(t, p) for t in range(lay.tp)])

    def _gather_params(self, p, layers, k, ranks, wait, label, computes, before):
        """ZeRO-3's all-gather of ``layers[k]``'s parameters: after the compute two layers back (one layer of
        prefetch), the first two after what ran before the pass (``before``: rank -> op id or None)."""
        j = layers[k]
        if k >= 2:
            after = {r: (computes[k - 2][r],) for r in ranks}
        elif k == 1:
            after = {r: (before[r],) if before[r] is not None else () for r in ranks}
        else:
            after = {r: () for r in ranks}
        return self._coll("allgather", self._dp_groups(p, j), self.costs[j].grad_bytes, wait, "ag",
                          f"zero3-allgather {self.workload.layers[j].name} {label}", after=after)

    def _reduce_scatter_grads(self, p, j, ranks, wait, label, computed):
        """ZeRO-3's reduce-scatter of layer j's gradients after its backward (``computed``: rank -> op id);
        with HSDP, each shard then all-reduced across the shard groups."""
        done = {r: (computed[r],) for r in ranks}
        grad, name = self.costs[j].grad_bytes, self.workload.layers[j].name
        rs = self._coll("reduce_scatter", self._dp_groups(p, j), grad, wait, "rs",
                        f"zero3-reduce_scatter {name} {label}", after=done)
        if self.params.shard_group is not None:  # HSDP: the gradient shard all-reduced across shard groups
            self._coll("allreduce", self._hsdp_groups(p), grad / self.params.shard_group, wait, "rs",
                       f"hsdp-allreduce {name} {label}",
                       after={r: (rs[r],) if r in rs else done.get(r, ()) for g in self._hsdp_groups(p) for r in g})

    def _reduce_grads(self, p: int, chunk, at_end: bool = False):
        """DDP-style buckets of this chunk, reduced as soon as their last gradient is ready.

        ``at_end``: after the rank's whole backward instead (no overlap).
        """
        lay = self.layout
        if lay.dp < 2:
            return
        members = set(chunk)
        kind = "allreduce" if self.params.zero == 0 else "reduce_scatter"
        costs = self.costs
        for bucket in self.workload.buckets:
            mine = [j for j in bucket if j in members]
            for part in ([j for j in mine if costs[j].kind != "moe" or lay.ep == 1],
                         [j for j in mine if costs[j].kind == "moe" and lay.ep > 1]):
                if not part:
                    continue
                groups = self._dp_groups(p, part[0])
                nbytes = sum(costs[j].grad_bytes for j in part)
                # the groups cover the stage; only live ranks compute (_coll gives folded members their mirror's)
                after = {r: (self.builder.tail(self._lead(r), "compute") if at_end else
                             max(self.last_backward[(j, r)] for j in part),)
                         for r in self._stage(p)}
                self._coll(kind, groups, nbytes, {}, "dp", f"dp-{kind} stage{p}", after=after)
                self.buckets.setdefault(p, []).append((groups, nbytes))

    def _tied_embeddings(self):
        """Tied input/output embeddings across stages: the first and last stage all-reduce the word-embedding gradient.

        Megatron-LM keeps a copy of the word embeddings on the last stage for the
        output layer and sums the two gradients (its "embedding group") before the
        optimizer step: vocab·h / tp gradients per TP lane.
        """
        lay, w = self.layout, self.workload
        meta = dict(w.trace.meta.get("transformer") or {})
        names = [x.name for x in w.layers]
        if lay.pp < 2 or not meta.get("tied") or "embed" not in names or "head" not in names:
            return
        nbytes = meta.get("vocab", 0) * meta.get("hidden", 0) * w.dtype_bytes / lay.tp
        emb, head = names.index("embed"), names.index("head")
        for d in range(lay.dp):  # folded replicas too: this traffic is on the data-parallel stream
            for t in range(lay.tp):
                live = (lay.rank(t, 0, d % self.live), lay.rank(t, lay.pp - 1, d % self.live))
                g = (lay.rank(t, 0, d), lay.rank(t, lay.pp - 1, d))
                after = {g[0]: (self.last_backward[(emb, live[0])],), g[1]: (self.last_backward[(head, live[1])],)}
                self._coll("allreduce", [g], nbytes, {}, "dp", "embedding-allreduce (tied)", after=after)

    def _update(self):
        """Optimizer step on each rank's (sharded) parameters, then ZeRO-1/2's parameter all-gather."""
        lay, zero = self.layout, self.params.zero
        for s in range(lay.pp):
            ranks = self._stage(s)
            layers = [j for u in range(s, lay.pp * lay.virtual, lay.pp) for j in self.chunks[u]]
            ups = {}
            for r in ranks:
                secs = 0.0
                for j in layers:
                    shard = 1
                    if zero >= 1:
                        shard = len(self._dp_groups(s, j)[0])
                    secs += self.costs[j].update_s / shard
                stream = "rs" if zero == 3 else "dp"
                tail = self.builder.tail(r, stream)
                ups[r] = (self.builder.compute(r, secs * self.workload.scale(r), after=() if tail is None else (tail,),
                                               label="update", category="update"),)
            if zero in (1, 2):
                for groups, nbytes in self.buckets.get(s, []):
                    self._coll("allgather", groups, nbytes, {}, "dp", f"zero{zero}-allgather stage{s}", after=ups)
