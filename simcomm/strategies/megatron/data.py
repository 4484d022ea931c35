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

    def _dp_groups(self, p: int, j: int | None):
        """The groups layer j's gradients are reduced (and ZeRO-3's parameters gathered) over on stage p
        (``j`` None: a dense layer's; an MoE layer's whole shard under ZeRO-3)."""
        lay = self.layout
        if self.params.shard_group is not None:  # HSDP: sharded (gathered, reduce-scattered) within a shard group
            size = self.params.shard_group
            return self._cached(("shard", p), lambda: [g for t in range(lay.tp) for g in lay.shard_groups(t, p, size)])
        if j is not None and self.costs[j].kind == "moe" and self._experts_apart:
            return self._cached(("edp", p), lambda: lay.edp_groups(p))
        return self._cached(("dp", p), lambda: [lay.dp_group(t, p) for t in range(lay.tp)])

    @property
    def _experts_apart(self) -> bool:
        """The routed experts' gradients go over other groups than the dense ones (ep > 1 or etp != tp)."""
        return self.layout.ep > 1 or self.layout.expert_tp != self.layout.tp

    # -- ZeRO-3 / FSDP: gather units, prefetch, live limit, reshard, reduce-scatter buckets ---------------------
    def _units(self, p: int, layers, forward: bool):
        """ZeRO-3's gather units of a pass over ``layers`` (in execution order), as the framework forms them.

        Each unit: (name, pieces) with pieces ``(layer, compute share, parameter share)``; ``block`` joins
        consecutive layers of one transformer block (FSDP's wrapped module) that share their data-parallel
        groups; ``module`` splits an attention layer into its QKV (with the core) and output projections and
        an MLP into its matrices (DeepSpeed's leaf modules; only without tensor and context parallelism,
        whose communication surrounds the whole layer).  Backward visits a layer's modules in reverse; under
        full recomputation in forward order, each module's recomputation and backward together (the real
        order recomputes all of a layer's modules before their backwards: the same work, gathered alike).
        """
        unit = self.zero.unit
        out: list = []
        for j in layers:
            name = self.workload.layers[j].name
            pieces = self._module_pieces(j) if unit == "module" else [(j, 1.0, 1.0)]
            if len(pieces) > 1:
                if not forward and self.params.recompute != "full":
                    pieces = pieces[::-1]
                out += [(f"{name}.{i}" if forward or self.params.recompute == "full" else
                         f"{name}.{len(pieces) - 1 - i}", [piece]) for i, piece in enumerate(pieces)]
                continue
            block = name.split(".", 1)[0] if unit == "block" and name.startswith("block") and "." in name else None
            if block is not None and out and out[-1][0] == block and \
                    self._dp_groups(p, out[-1][1][0][0]) is self._dp_groups(p, j):
                out[-1][1].append(pieces[0])
                continue
            out.append((block or name, pieces))
        return out

    def _module_pieces(self, j):
        """Layer j as DeepSpeed's leaf modules: (layer, compute share, parameter share) each."""
        cost, meta = self.costs[j], dict(self.workload.trace.meta.get("transformer") or {})
        if self.layout.cp > 1 or self.layout.tp > 1 or not meta.get("hidden") or cost.kind not in ("attn", "mlp"):
            return [(j, 1.0, 1.0)]
        if cost.kind == "mlp":
            n = 3 if meta.get("mlp") == "swiglu" else 2
            return [(j, 1.0 / n, 1.0 / n)] * n
        from simcomm.llm.compute import attention_shares, seq_hidden

        heads = int(meta.get("heads") or 1)
        hidden = int(meta["hidden"])
        kv = int(meta.get("kv_heads") or heads) * (hidden / heads)
        qkv_params = hidden + 2 * kv  # per hidden row: Q, K and V against the output projection's h
        fq, fc, fo = attention_shares(*seq_hidden(self.workload.layers[j], meta), meta)
        return [(j, fq + fc, qkv_params / (qkv_params + hidden)), (j, fo, hidden / (qkv_params + hidden))]

    def _regathered(self, unit) -> bool:
        """Whether ``unit`` is all-gathered again for backward (the reshard-after-forward policy).  The root module
        of FSDP2 and torchtitan is the embedding and the head; ``not-last`` also keeps the model's last block."""
        policy = self.zero.reshard
        if policy in ("all", "none"):
            return policy == "all"
        name, pieces = unit
        kind = self.costs[pieces[0][0]].kind
        if kind in ("embed", "head"):
            return False
        if policy == "not-last" and kind in ("attn", "mlp", "moe"):
            blocks = int(dict(self.workload.trace.meta.get("transformer") or {}).get("layers") or 0)
            return name.split(".", 1)[0] != f"block{blocks - 1}"
        return True

    def _gate(self, u: int, params) -> int:
        """The unit whose compute must have finished before unit u's gather starts (-1: what ran before the
        pass; below -1: nothing).  ``prefetch`` units ahead, or (DeepSpeed) issued by the fetch of the
        earliest unit v whose following units up to u hold fewer than ``prefetch_params`` parameters (that
        fetch comes when unit v - 1 has finished); and not while ``max_live_params`` gathered parameters of the
        units before u are still live (the frameworks test the live count before adding the next)."""
        bucket = self.zero.prefetch_params
        if bucket:
            v, ahead = u - 1, 0.0
            while v >= 1 and ahead + params[v] < bucket:
                ahead += params[v]
                v -= 1
            gate = v - 1
        else:
            gate = u - 1 - self.zero.prefetch
        limit = self.zero.max_live_params
        if limit:
            live = 0.0
            for v in range(u - 1, max(gate, -1), -1):
                live += params[v]
                if live >= limit:
                    return v  # unit v must be released before u is gathered
        return gate

    def _sharded_pass(self, p, layers, ranks, wait, forward: bool, label: str):
        """A forward or backward pass under ZeRO-3: each unit's all-gather (``_gate``), its compute, and in
        backward its gradients' reduce-scatter (per unit, or in buckets of ``reduce_bucket_params``)."""
        units = self._units(p, layers, forward)
        costs, names = self.costs, self.workload.layers
        params = [sum(costs[j].grad_bytes * share for j, _, share in pieces) / self.workload.dtype_bytes
                  for _, pieces in units]
        gathered = [forward or self._regathered(unit) for unit in units]
        before = {r: self.builder.tail(self._lead(r), "compute") for r in ranks}
        ends: list[dict] = []
        gathers: dict[int, dict] = {}
        issued = 0
        computes: dict[int, dict] = {}
        bucket: list[int] = []  # units whose gradients wait in the reduce bucket (backward)
        for k, (name, pieces) in enumerate(units):
            while issued < len(units) and (issued <= k or self._gate(issued, params) < k):
                if gathered[issued]:
                    gathers[issued] = self._gather_unit(p, units[issued], self._gate(issued, params),
                                                        ends, before, ranks, label)
                issued += 1
            ag = gathers.get(k)
            for j, share, _ in pieces:
                part = name if len(pieces) == 1 and name != names[j].name else None
                if not forward and self.params.recompute == "full":
                    self._layer(j, p, ranks, wait, "R", label, ag, share=share, part=part)
                ids = self._layer(j, p, ranks, wait, "F" if forward else "B", label, ag, share=share, part=part)
                computes[j] = ids
            ends.append(ids)
            if not forward:
                bucket = self._bucket_grads(p, units, bucket, k, params, ends, ranks, label)
        if not forward and bucket:
            self._reduce_scatter_grads(p, units, bucket, ends[-1], ranks, label)
        return [computes[j] for j in layers]

    def _gather_unit(self, p, unit, gate: int, ends, before, ranks, label):
        """The all-gather of one unit's parameters, after the compute of unit ``gate`` (``_gate``)."""
        name, pieces = unit
        if gate >= 0:
            after = {r: (ends[gate][r],) for r in ranks}
        elif gate == -1:
            after = {r: (before[r],) if before[r] is not None else () for r in ranks}
        else:
            after = {r: () for r in ranks}
        nbytes = sum(self.costs[j].grad_bytes * share for j, _, share in pieces)
        return self._coll("allgather", self._dp_groups(p, pieces[0][0]), nbytes, {}, "ag",
                          f"zero3-allgather {name} {label}", after=after)

    def _bucket_grads(self, p, units, bucket, k, params, ends, ranks, label):
        """Unit k's gradients into the reduce bucket; a full bucket (or every unit, without buckets) reduced."""
        cap = self.zero.reduce_bucket_params
        if not cap:
            self._reduce_scatter_grads(p, units, [k], ends[k], ranks, label)
            return []
        first = units[k][1][0][0]
        if bucket and (sum(params[u] for u in bucket) + params[k] > cap or
                       self._dp_groups(p, units[bucket[0]][1][0][0]) is not self._dp_groups(p, first)):
            # DeepSpeed reduces the bucket when the next gradient would overflow it (that gradient is ready)
            self._reduce_scatter_grads(p, units, bucket, ends[k], ranks, label)
            bucket = []
        return bucket + [k]

    def _reduce_scatter_grads(self, p, units, members, computed, ranks, label):
        """ZeRO-3's reduce-scatter of ``members``' gradients (unit indices) after ``computed`` (rank -> op id);
        with HSDP, each shard then all-reduced across the shard groups."""
        done = {r: (computed[r],) for r in ranks}
        pieces = [piece for u in members for piece in units[u][1]]
        grad = sum(self.costs[j].grad_bytes * share for j, _, share in pieces)
        name = "+".join(units[u][0] for u in members)
        stream = "compute" if self.zero.zero3_reduce_stream == "compute" else "rs"
        rs = self._coll("reduce_scatter", self._dp_groups(p, pieces[0][0]), grad, {}, stream,
                        f"zero3-reduce_scatter {name} {label}", after=done)
        if self.params.shard_group is not None:  # HSDP: the gradient shard all-reduced across shard groups
            self._coll("allreduce", self._hsdp_groups(p), grad / self.params.shard_group, {}, "rs",
                       f"hsdp-allreduce {name} {label}",
                       after={r: (rs[r],) if r in rs else done.get(r, ()) for g in self._hsdp_groups(p) for r in g})

    def _bucket_parts(self, p: int, chunk):
        """The gradient buckets of a chunk's layers on stage p: each workload bucket restricted to the chunk and
        split into its dense and expert parts (their groups differ), in gradient-ready order: (layers, groups,
        bytes).  An MoE layer's router and shared experts reduce with the dense layers, its routed experts over
        the expert-data-parallel group (Megatron-core's expert_data_parallel_group) when that differs from dp."""
        costs, apart = self.costs, self._experts_apart
        members = set(chunk)
        for bucket in self.workload.buckets:
            mine = [j for j in bucket if j in members]
            moe = [j for j in mine if costs[j].kind == "moe"] if apart else []
            dense = sum(costs[j].grad_bytes - (costs[j].expert_grad_bytes if apart else 0.0) for j in mine)
            for part, nbytes, groups in ((mine, dense, None), (moe, sum(costs[j].expert_grad_bytes for j in moe),
                                                               moe[:1])):
                if part and nbytes > 0:
                    yield part, self._dp_groups(p, groups[0] if groups else None), nbytes

    def _reduce_grads(self, p: int, chunk, at_end: bool = False):
        """DDP-style buckets of this chunk, reduced as soon as their last gradient is ready.

        ``at_end``: after the rank's whole backward instead (no overlap).  On the data-parallel stream, or
        on the compute stream when the framework serialises its reductions (DeepSpeed's overlap_comm=false).
        """
        lay = self.layout
        if lay.dp < 2:
            return
        kind = "allreduce" if self.params.zero == 0 else "reduce_scatter"
        stream = "compute" if self.zero.reduce_stream == "compute" else "dp"
        for part, groups, nbytes in self._bucket_parts(p, chunk):
            # the groups cover the stage; only live ranks compute (_coll gives folded members their mirror's)
            after = {r: (self.builder.tail(self._lead(r), "compute") if at_end else
                         max(self.last_backward[(j, r)] for j in part),)
                     for r in self._stage(p)}
            self._coll(kind, groups, nbytes, {}, stream, f"dp-{kind} stage{p}", after=after)
            self.buckets.setdefault(p, []).append((groups, nbytes))

    def _gather_params_ahead(self):
        """Megatron-core's overlap_param_gather (zero 1-2): the parameters the last step updated are
        all-gathered bucket by bucket during this forward, in forward order on the data-parallel stream;
        a layer's first forward waits for its bucket's gather (the next bucket's is already under way)."""
        lay = self.layout
        if lay.dp < 2:
            return
        for s in range(lay.pp):
            for u in range(s, lay.pp * lay.virtual, lay.pp):
                # an MoE layer's expert part is issued before its dense part on the same stream: the layer waits
                # for the later (param_gathers keeps the last)
                for part, groups, nbytes in reversed(list(self._bucket_parts(s, self.chunks[u]))):
                    ids = self._coll("allgather", groups, nbytes, {}, "dp",
                                     f"zero{self.params.zero}-allgather stage{s} (overlap_param_gather)",
                                     after={r: () for r in self._stage(s)})
                    for j in part:
                        self.param_gathers[(s, j)] = ids

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
            # ZeRO shards a layer's state over its data-parallel group, an MoE layer's routed experts over theirs
            # (ZeRO-3: the whole MoE layer over the expert-data-parallel group, as it is gathered)
            dense = len(self._dp_groups(s, None)[0]) if zero >= 1 else 1
            secs = 0.0
            for j in layers:
                cost = self.costs[j]
                own = len(self._dp_groups(s, j)[0]) if zero >= 1 else 1
                if zero == 3 or cost.expert_update_s == 0.0 or not self._experts_apart:
                    secs += cost.update_s / own
                else:
                    secs += (cost.update_s - cost.expert_update_s) / dense + cost.expert_update_s / own
            for r in ranks:
                stream = "rs" if zero == 3 else "dp"
                tail = self.builder.tail(r, stream)
                ups[r] = (self.builder.compute(r, secs * self.workload.scale(r), after=() if tail is None else (tail,),
                                               label="update", category="update"),)
            if zero in (1, 2) and not self.zero.overlap_param_gather:
                for groups, nbytes in self.buckets.get(s, []):
                    self._coll("allgather", groups, nbytes, {}, "dp", f"zero{zero}-allgather stage{s}", after=ups)
