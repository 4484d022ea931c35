"""Context parallelism around each attention layer: ring attention and Ulysses' (or Megatron-core's a2a) all-to-alls.

A mixin of :class:`~simcomm.strategies.megatron.emitter.Emitter`, called by its ``_layer`` for attention
layers when ``cp > 1``; the layer's tensor-parallel communication is emitted around these by ``_layer``
(docs/layouts.md, "Context parallelism" and "Ulysses context parallelism").
"""

from __future__ import annotations


class ContextParallel:
    """Ring (TransformerEngine's p2p ring) and all-to-all (DeepSpeed-Ulysses, Megatron-core a2a) attention."""

    def _cp_groups(self, p: int):
        """Context-parallel rings of stage p's simulated replicas."""
        lay = self.layout
        return self._cached(("cp", p), lambda: [g for t in range(lay.tp) for g in lay.cp_groups(t, p)
                                                if max(g) in set(self._stage(p))])

    def _ring(self, p, wait, fwd: bool, secs: float, label: str, ag=None):
        """Ring attention over each context-parallel group (TransformerEngine's p2p ring, Megatron-core CP).

        The attention runs in ``cp`` equal pieces, piece k on the K/V block that arrived at step k; the
        send of the next block overlaps piece k.  Forward: ``cp - 1`` steps of the K/V block.  Backward:
        K/V passed around again (only its own chunk was kept) and the partial dK/dV of each block travels
        with the ring towards its owner: ``cp - 1`` steps of K/V and ``cp - 1`` of dK/dV, the last of them
        after the last piece (exposed).  Returns each rank's last piece; ``wait`` then also holds the last
        dK/dV arrival.  The layer's TP communication is emitted around this by ``_layer``.
        """
        if self.fold_lanes:
            return self._folded_ring(p, wait, fwd, secs, label, ag)
        n = self.layout.cp
        kv = self.kv_bytes  # the same block for every attention layer
        ids = {}
        for g in self._cp_groups(p):
            nxt = {g[i]: g[(i + 1) % n] for i in range(n)}
            cur = {r: wait[r] + ([ag[r]] if ag and r in ag else []) for r in g}
            arrived: dict = {}  # rank -> the K/V transfer it computes on next
            sent: dict = {}  # rank -> its previous K/V send (one buffer in flight per direction)
            grad_in: dict = {}  # rank -> the dK/dV partial it adds to before passing on
            for k in range(n):
                step = {}
                if k < n - 1:
                    for r in g:
                        deps = (cur[r] if k == 0 else [arrived[r]]) + ([sent[r]] if r in sent else [])
                        tid = self.builder.transfer(r, nxt[r], kv, after=deps, stream="cp",
                                                    label=f"cp-kv step{k + 1} {label}")
                        self.counts["transfer"] += 1
                        sent[r], step[nxt[r]] = tid, tid
                for r in g:
                    deps = cur[r] + ([arrived[r]] if k > 0 else [])
                    cur[r] = [self.builder.compute(r, secs / n * self.workload.scale(r), after=deps,
                                                   label=f"{label} piece{k}")]
                    ids[r] = cur[r][0]
                if not fwd and k > 0:
                    new_in = {}
                    for r in g:
                        deps = cur[r] + ([grad_in[r]] if r in grad_in else [])
                        tid = self.builder.transfer(r, nxt[r], kv, after=deps, stream="cp",
                                                    label=f"cp-dkv step{k} {label}")
                        self.counts["transfer"] += 1
                        new_in[nxt[r]] = tid
                    grad_in = new_in
                arrived = step
            for r in g:
                wait[r] = cur[r] + ([grad_in[r]] if r in grad_in else [])
        return ids

    def _folded_ring(self, p, wait, fwd: bool, secs: float, label: str, ag=None):
        """:meth:`_ring` with the stage's ranks folded (the emitter's ``fold_lanes``): every rank of every ring
        computes alike, so the stage's first rank computes the pieces for all, and its send to its ring neighbour
        stands for every rank's send of that step (each over its own link; the others' bytes are counted by the
        plan's ``cp`` traffic weight).  Piece k waits for that send, as each rank's piece waits for the block its
        predecessor sent at the same instant.  The pieces start once every rank's input has arrived."""
        lay, builder = self.layout, self.builder
        n, kv = lay.cp, self.kv_bytes
        ranks = self._stage(p)
        first, neighbour = self._cached(("ring-pair", p), lambda: lay.cp_groups(0, p)[0][:2])
        cur = list(dict.fromkeys(x for r in ranks for x in wait[r] + ([ag[r]] if ag and r in ag else [])))
        arrived = sent = grad_in = None
        secs_piece = secs / n * self.workload.scale(first)
        for k in range(n):
            step = None
            if k < n - 1:
                deps = (cur if k == 0 else [arrived]) + ([sent] if sent is not None else [])
                sent = step = builder.transfer(first, neighbour, kv, after=deps, stream="cp",
                                               label=f"cp-kv step{k + 1} {label}")
                self.counts["transfer"] += 1
            cur = [builder.compute(first, secs_piece, after=cur + ([arrived] if k > 0 else []),
                                   label=f"{label} piece{k}")]
            if not fwd and k > 0:
                grad_in = builder.transfer(first, neighbour, kv, after=cur + ([grad_in] if grad_in is not None else []),
                                           stream="cp", label=f"cp-dkv step{k} {label}")
                self.counts["transfer"] += 1
            arrived = step
        done = cur + ([grad_in] if grad_in is not None else [])
        ids = {}
        for r in ranks:
            wait[r] = list(done)
            ids[r] = cur[0]
        return ids

    def _ulysses(self, j, p, wait, fwd: bool, label: str, ag=None):
        """All-to-all context parallelism over each CP group (DeepSpeed-Ulysses; Megatron-core's ``a2a``).

        Forward: QKV projection on the rank's s/cp tokens; all-to-alls of Q, K and V (one each, as
        DeepSpeed's ``DistributedAttention`` and TransformerEngine's ``flash_attn_a2a_communicate`` issue
        them) into head-sharded, full-sequence tensors; the attention core, which needs the whole sequence
        and so waits for them; one all-to-all of its output back to sequence-sharded; the output
        projection.  Backward mirrors it: the output projection's backward, the all-to-all of the output
        gradient (``a2a``: of the saved output too, TransformerEngine keeps it sequence-sharded), the core's
        backward, the all-to-alls of dQ, dK, dV, the QKV projection's backward.  Returns each rank's last
        compute; the layer's TP communication is emitted around this by ``_layer``.
        """
        qkv, core, out = self.costs[j].ulysses_times[0 if fwd else 1]
        q, kv = self.ulysses_q_bytes, self.ulysses_kv_bytes
        if fwd:
            steps = [("qkv", qkv), (("q", q), ("k", kv), ("v", kv)), ("core", core), (("o", q),), ("out", out)]
        else:
            first = (("o", q), ("do", q)) if self.params.cp_kind == "a2a" else (("do", q),)
            steps = [("out", out), first, ("core", core), (("dq", q), ("dk", kv), ("dv", kv)), ("qkv", qkv)]
        groups = self._cp_groups(p)
        ranks = [r for g in groups for r in g]
        ids: dict = {}
        for i, step in enumerate(steps):
            if isinstance(step[0], tuple):  # all-to-alls, one after another on the CP communicator
                for what, nbytes in step:
                    self._coll("alltoall", groups, nbytes, wait, "cp", f"cp-alltoall {what} {label}")
                continue
            what, secs = step
            for r in ranks:
                deps = wait[r] + ([ag[r]] if i == 0 and ag and r in ag else [])
                ids[r] = self.builder.compute(r, secs * self.workload.scale(r), after=deps, label=f"{label} {what}")
                wait[r] = [ids[r]]
        return ids
