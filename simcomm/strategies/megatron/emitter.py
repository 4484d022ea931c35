"""The emitter's core: one iteration's plan of ``megatron``, task by task over the pipeline schedule.

State is per-rank ``wait`` lists (what the next op on a rank must wait for).  :class:`Emitter` holds the
state, the cached rank groups, the collective helper, one layer, one forward or backward pass, one
pipeline task and the plan; the communication around a layer (:mod:`.comm`), context parallelism
(:mod:`.context`) and data parallelism / ZeRO (:mod:`.data`) are mixins reading the same state.
"""

from __future__ import annotations

from simcomm.llm.compute import kv_block_bytes, layer_costs, moe_priced, ulysses_bytes
from simcomm.llm.placement import Placement, chunks, schedule
from simcomm.ops import PlanBuilder
from simcomm.precision import DTYPE_BYTES
from simcomm.strategies.megatron.comm import LayerComm
from simcomm.strategies.megatron.context import ContextParallel
from simcomm.strategies.megatron.data import DataParallel
from simcomm.strategies.megatron.moe import moe_costs
from simcomm.strategies.megatron.params import MegatronParams
from simcomm.strategies.megatron.sizing import BatchSizes, layout_of, live_replicas, virtual_stage_layers
from simcomm.strategies.megatron.zero import resolve_schedule


class Emitter(LayerComm, ContextParallel, DataParallel):
    """Builds one iteration's plan (:meth:`plan`)."""

    def __init__(self, p: MegatronParams, lay: Placement, s, sizes: BatchSizes, w, n_ranks: int,
                 rings_alike: bool = False, replicas_apart: bool = True):
        # the data-parallel schedule: the framework's defaults under the user's options (zero.py)
        self.zero = resolve_schedule(p, lay.dp, w.dtype_bytes)
        if self.zero.grad_bucket_bytes is not None:
            w = w.rebucketed(self.zero.grad_bucket_bytes / 1e6)
        self.params, self.layout, self.workload, self.sizes = p, lay, w, sizes
        self.builder = PlanBuilder(n_ranks)
        # replicas simulated in full (the rest: only in the data-parallel collectives)
        self.live = live_replicas(p, lay, w, sizes.microbatches)
        self.replicas_apart = replicas_apart  # symmetry.replicas_apart: the fold's premise, said when it fails
        # With the replicas folded, the tensor-parallel ranks of a group also compute alike: one compute per
        # group, on its first rank, started once every rank's input is there (the group's next collective
        # waits for all of them anyway, and equal computes end max(ready) + t either way)
        # The same holds for the live replicas of a stage that expert parallelism keeps (every MoE layer's
        # dispatch and combine span them all) and for a ring attention's ranks (each computes its pieces on a
        # K/V block that arrives over a link like its neighbour's): one compute per stage, on its first rank
        # when every hop of every ring crosses links of the same classes (symmetry.rings_alike: a ring that leaves
        # its node on some hops only is paced by those; Ulysses' all-to-alls are emitted per rank: no lane fold)
        self.fold_lanes = (self.live < lay.dp and (lay.tp > 1 or self.live > 1)
                           and (lay.cp == 1 or (p.cp_kind == "ring" and rings_alike)))
        # and, folded so, a stage's lanes send their activations alike (each to the same lane of the next stage,
        # over its own NIC): one send stands for all
        self.fold_sends = self.fold_lanes and self.live > 1
        self.chunks = (chunks(s, lay.pp * lay.virtual, virtual_stage_layers(p, len(s.blocks))) if s is not None
                       else [tuple(range(len(w.layers)))])
        meta = dict(w.trace.meta.get("transformer") or {})
        mb, tp, cp = sizes.microbatch, lay.tp, lay.cp
        act = DTYPE_BYTES.get(w.trace.dtype, 4)
        self.kv_bytes = kv_block_bytes(meta, mb, tp, cp, act)  # the ring's K/V block, the same for every layer
        self.sequence_parallel = p.sequence_parallel and tp > 1
        ulysses = cp > 1 and p.cp_kind != "ring" and s is not None
        self.ulysses_q_bytes, self.ulysses_kv_bytes = ulysses_bytes(meta, mb, tp, cp, act) if ulysses else (0.0, 0.0)
        self.moe = (moe_costs(p, lay, meta, mb, act, moe_priced(w.trace)) if any(x.name.endswith(".moe") for x in w.layers)
                    else None)
        # and, with ring attention in a dense model, one ring rank's tensor-parallel collectives stand for the
        # other ring ranks' (alike groups on their own GPUs; weighted in the link traffic): comm.py _tp_groups
        self.fold_rings = self.fold_sends and lay.cp > 1 and self.moe is None
        self.costs = layer_costs(w, layout_of(p, lay, sizes), ulysses, self.moe)  # what the estimate reads
        self.ready: dict = {}  # (F or B, micro-batch, virtual stage) -> (t, d) -> what the next stage waits for
        self.last_backward: dict = {}  # (layer, rank) -> op id of that rank's final backward of the layer
        self.buckets: dict[int, list] = {}  # stage -> [(groups, nbytes)] its gradients were reduced in
        self.counts = {"allreduce": 0, "reduce_scatter": 0, "allgather": 0, "alltoall": 0, "transfer": 0}
        self._cache: dict = {}
        self.param_gathers: dict = {}  # (stage, layer) -> rank -> overlap_param_gather's all-gather (zero 1-2)

    # -- groups (cached: plans of millions of ops ask for them per layer per micro-batch) ------------------
    def _cached(self, key, make):
        cache = self._cache
        if key not in cache:
            cache[key] = make()
        return cache[key]

    def _lead(self, r: int) -> int:
        """The rank that computes for ``r``: the first of its tensor-parallel group when lanes are folded."""
        if not self.fold_lanes:
            return r
        lay = self.layout
        lead = self._cached("lead", lambda: {lay.rank(t, q, d): lay.rank(0, q, 0 if self.live > 1 else d)
                                             for t in range(lay.tp) for q in range(lay.pp) for d in range(lay.dp)})
        return lead[r]

    def _lanes(self, ranks) -> list[tuple[int, list[int]]]:
        """``ranks`` grouped by the rank that computes for them (:meth:`_lead`), in first-seen order."""
        groups: dict[int, list[int]] = {}
        for r in ranks:
            groups.setdefault(self._lead(r), []).append(r)
        return list(groups.items())

    @property
    def _mirror(self) -> dict[int, int]:
        """Each folded replica's rank -> the live rank it stands for: same (t, p), replica ``d mod live``."""
        lay, live = self.layout, self.live
        return self._cached("mirror", lambda: {} if live == lay.dp else {
            lay.rank(t, p, d): lay.rank(t, p, d % live)
            for t in range(lay.tp) for p in range(lay.pp) for d in range(live, lay.dp)})

    def _stage(self, p: int) -> list[int]:
        """The live ranks of pipeline stage ``p`` (every TP rank of every simulated replica), in rank order."""
        lay = self.layout
        return self._cached(("stage", p), lambda: sorted(lay.rank(t, p, d) for t in range(lay.tp)
                                                          for d in range(self.live)))

    def _coll(self, kind, groups, nbytes, wait, stream, label, after=None):
        """One collective per group (size >= 2), after each member's ``wait``; members then wait for it."""
        ids = {}
        for g in groups:
            if len(g) < 2:
                continue
            if after is None:
                deps = [x for r in g for x in wait[r]]
            else:  # a folded replica's member waits for what its live mirror waits for (groups of none live too)
                mirror = self._mirror
                deps = [x for r in g for x in (after.get(r) or after.get(mirror.get(r, r), ()))]
            cid = self.builder.collective(kind, g, nbytes, after=deps, stream=stream, label=label)
            self.counts[kind] += 1
            for r in g:
                ids[r] = cid
                if after is None:
                    wait[r] = [cid]
        return ids

    # -- one layer ---------------------------------------------------------------------------------------
    def _layer(self, j, p, ranks, wait, phase, label, ag=None, share=1.0, part=None):
        """Comm before, compute, comm after one layer on every rank of stage p; returns compute ids by rank.

        ``ag``: rank -> ZeRO-3's all-gather of the layer's parameters, which the compute also waits for.
        ``share``/``part``: only that share of the layer's compute, labelled ``part`` (one of DeepSpeed's
        leaf modules: no tensor or context parallelism, so no communication around it).
        """
        name = self.workload.layers[j].name if part is None else part
        cost = self.costs[j]
        fwd = phase != "B"
        for kind, stream, groups, nbytes in self._comm(j, p, "fwd-pre" if fwd else "bwd-pre"):
            self._coll(kind, groups, nbytes, wait, stream, f"{stream}-{kind} {name} {label}")
        secs = (cost.forward_s if fwd else cost.backward_s) * share
        ids = {}
        builder, scale = self.builder, self.workload.scale
        if self.layout.cp > 1 and cost.kind == "attn" and self.params.cp_kind != "ring":
            ids = self._ulysses(j, p, wait, fwd, f"{phase} {name} {label}", ag)
        elif self.layout.cp > 1 and cost.kind == "attn":  # ring attention: compute in pieces around K/V sends
            ids = self._ring(p, wait, fwd, secs, f"{phase} {name} {label}", ag)
        elif self.fold_lanes:
            # the stage's ranks by lead, worked out once per stage (the same for each of its layers)
            groups = self._cached(("lanes", p, tuple(ranks)), lambda: self._lanes(ranks))
            for lead, members in groups:
                deps = list(dict.fromkeys(x for r in members for x in wait[r] + ([ag[r]] if ag and r in ag else [])))
                cid = builder.compute(lead, secs * scale(lead), after=deps, label=f"{phase} {name} {label}")
                for r in members:
                    ids[r] = cid
                    wait[r] = [cid]
        else:
            for r in ranks:
                deps = wait[r] + ([ag[r]] if ag and r in ag else [])
                ids[r] = builder.compute(r, secs * scale(r), after=deps, label=f"{phase} {name} {label}")
                wait[r] = [ids[r]]
        for kind, stream, groups, nbytes in self._comm(j, p, "fwd-post" if fwd else "bwd-post"):
            self._coll(kind, groups, nbytes, wait, stream, f"{stream}-{kind} {name} {label}")
        return ids

    def _pass(self, p, layers, ranks, wait, forward: bool, label: str):
        """A forward or backward pass over ``layers`` (already in execution order); each layer's compute ids.

        ZeRO-3 passes are the data-parallel mixin's (:meth:`_sharded_pass`); otherwise a forward may wait
        for overlap_param_gather's all-gather of the layer's bucket (its first use this iteration).
        """
        if self.params.zero == 3 and self.layout.dp > 1:
            return self._sharded_pass(p, layers, ranks, wait, forward, label)
        computes: list[dict] = []
        for j in layers:
            if not forward and self.params.recompute == "full":
                self._layer(j, p, ranks, wait, "R", label)
            ag = self.param_gathers.pop((p, j), None) if forward and self.param_gathers else None
            computes.append(self._layer(j, p, ranks, wait, "F" if forward else "B", label, ag))
        return computes

    # -- tasks -------------------------------------------------------------------------------------------
    def _task(self, p: int, task, last_of_chunk: bool):
        """One pipeline task (F or B of a micro-batch on a model chunk) on stage p, then its send on."""
        kind, mb, c = task
        lay, n_u = self.layout, self.layout.pp * self.layout.virtual
        u = c * lay.pp + p
        ranks = self._stage(p)
        coords = self._cached("coords", lambda: [(t, d) for d in range(self.live) for t in range(lay.tp)])
        if kind == "F":
            src = self.ready.get(("F", mb, u - 1), {}) if u > 0 else {}
        else:
            src = self.ready[("B", mb, u + 1)] if u + 1 < n_u else self.ready[("F", mb, u)]
        wait = {lay.rank(t, p, d): list(src.get((t, d), ())) for t, d in coords}
        layers = self.chunks[u] if kind == "F" else tuple(reversed(self.chunks[u]))
        label = f"{kind}{mb}" + (f".{c}" if lay.virtual > 1 else "")
        computes = self._pass(p, layers, ranks, wait, kind == "F", label)
        if kind == "B" and last_of_chunk:
            for k, j in enumerate(layers):
                for r in ranks:
                    self.last_backward[(j, r)] = computes[k][r]
        nxt = u + 1 if kind == "F" else u - 1
        out = {}
        if self.fold_sends and 0 <= nxt < n_u:
            # the stage's lanes send alike over like links (one NIC each): the first lane's send stands for all,
            # after every lane's last op (its traffic is weighted for the rest: _build)
            r, dst = lay.rank(0, p, 0), lay.rank(0, nxt % lay.pp, 0)
            nbytes = self.costs[self.chunks[u][-1] if kind == "F" else self.chunks[u - 1][-1]].activation_bytes
            deps = list(dict.fromkeys(x for q in ranks for x in wait[q]))
            tid = self.builder.transfer(r, dst, nbytes, after=deps, stream="pp",
                                        label=f"pp-{'activation' if kind == 'F' else 'gradient'} {label}")
            self.counts["transfer"] += 1
            coords = []
            out = dict.fromkeys(self._cached("coords", lambda: []), (tid,))
        for t, d in coords:
            r = lay.rank(t, p, d)
            if 0 <= nxt < n_u:
                dst = lay.rank(t, nxt % lay.pp, d)
                nbytes = self.costs[self.chunks[u][-1] if kind == "F" else self.chunks[u - 1][-1]].activation_bytes
                if dst != r:
                    tid = self.builder.transfer(r, dst, nbytes, after=wait[r], stream="pp",
                                                label=f"pp-{'activation' if kind == 'F' else 'gradient'} {label}")
                    self.counts["transfer"] += 1
                    out[(t, d)] = (tid,)
                    continue
            out[(t, d)] = tuple(wait[r])
        self.ready[(kind, mb, u)] = out
        if kind == "B" and last_of_chunk and self.params.zero < 3 and self.zero.overlap_grad_reduce:
            self._reduce_grads(p, self.chunks[u])

    def plan(self):
        """Every stage's tasks in schedule order, then the gradient reductions, tied embeddings and update."""
        lay, p = self.layout, self.params
        orders = schedule(p.schedule, lay.pp, self.sizes.microbatches, lay.virtual)
        if p.zero in (1, 2) and self.zero.overlap_param_gather:
            self._gather_params_ahead()
        last = [{} for _ in range(lay.pp)]  # stage -> chunk -> index of its final backward
        for s, tasks in enumerate(orders):
            for i, (kind, _, c) in enumerate(tasks):
                if kind == "B":
                    last[s][c] = i
        idx = [0] * lay.pp
        n_u = lay.pp * lay.virtual
        remaining = sum(len(t) for t in orders)
        while remaining:
            progress = False
            for s in range(lay.pp):
                while idx[s] < len(orders[s]):
                    kind, mb, c = orders[s][idx[s]]
                    u = c * lay.pp + s
                    need = (("F", mb, u - 1) if u > 0 else None) if kind == "F" else \
                        (("B", mb, u + 1) if u + 1 < n_u else ("F", mb, u))
                    if need is not None and need not in self.ready:
                        break
                    self._task(s, orders[s][idx[s]], kind == "B" and last[s][c] == idx[s])
                    idx[s] += 1
                    remaining -= 1
                    progress = True
            if not progress:  # a schedule whose orders wait on each other: a bug in placement.schedule
                raise RuntimeError(f"pipeline schedule {p.schedule} deadlocks at tasks {idx}")
        if p.zero < 3 and not self.zero.overlap_grad_reduce:
            for s in range(lay.pp):
                for u in reversed(range(s, n_u, lay.pp)):  # the last chunks' gradients are ready first
                    self._reduce_grads(s, self.chunks[u], at_end=True)
        self._tied_embeddings()
        self._update()
        return self._build()

    def _build(self):
        """The plan with its ``assumed`` lines, the layout and, when folded, the simulated ranks and weights."""
        lay, sz = self.layout, self.sizes
        ignored = ("data loading is not modelled by megatron (its time is not in the step)",) \
            if self.workload.dataload_s > 0 else ()
        assumed = ignored + (f"layout tp {lay.tp}" + (f" × cp {lay.cp}" if lay.cp > 1 else "")
                             + f" × pp {lay.pp} × dp {lay.data}"
                             + (f" (ep {lay.ep}" + (f", etp {lay.expert_tp}" if lay.expert_tp != lay.tp else "")
                                + ")" if lay.ep > 1 or lay.expert_tp != lay.tp else "")
                             + f": global batch {sz.global_batch} = micro-batch {sz.microbatch} × {sz.microbatches} "
                             f"micro-batches × dp {lay.data} ({sz.how})",) + self.zero.notes
        if self.moe is not None:
            assumed += self.moe.assumed
        measured = None
        if self.live < lay.dp:
            measured = tuple(sorted({self._lead(r) for s in range(lay.pp) for r in self._stage(s)}))
            which = "replica 0's" if self.live == 1 else \
                f"replicas 0-{self.live - 1}'s (whole expert-parallel groups and context-parallel rings)"
            assumed += (f"data-parallel replicas identical: simulating {which} compute, tensor and pipeline "
                        f"traffic; data-parallel collectives span all {lay.dp} replicas (times from the simulated "
                        f"ranks; link traffic per link class counts their tensor, context, expert and pipeline "
                        f"bytes {lay.dp // self.live} times, once per replica they stand for; the busiest links "
                        "are the simulated ones; --opt replicas=all simulates every replica)",)
            if not self.replicas_apart:
                assumed += ("the folded replicas' tensor, context or pipeline hops would share links with the "
                            "simulated ones' (hops that leave their rail cross a spine; a PCIe switch): the fold does "
                            "not simulate that contention, so the step may be too fast (--opt replicas=all simulates "
                            "it, with such hops routed through the spines, where NCCL's PXN relays a message over "
                            "NVLink to the destination's rail)",)
            if self.fold_lanes and self.live > 1:
                why = "the context-parallel rings they form pass alike K/V blocks" if lay.cp > 1 else \
                    "the expert-parallel groups they form exchange tokens in every MoE layer"
                ring = (", one ring-attention send per ring step (the first rank's to its ring neighbour, "
                        "which every rank's pieces wait for)"
                        + (" and the first ring rank's tensor-parallel collectives only" if self.fold_rings else "")
                        ) if lay.cp > 1 else ""
                assumed += (f"a stage's {lay.tp * self.live} simulated ranks identical ({why}): one compute per "
                            "stage, started when every rank's input has arrived, one pipeline send per stage "
                            f"boundary (the first rank's, after every rank's last op){ring}; the others' alike "
                            "sends and collectives on their own links are counted in the link traffic; the other "
                            "collectives stay per rank (--opt replicas=all simulates every rank)",)
            elif self.fold_lanes:
                assumed += (f"tensor-parallel ranks identical: one compute per group of {lay.tp}, started when "
                            "every rank's input has arrived (their collectives and sends stay per rank)",)
        # the folded replicas' own traffic (theirs is the simulated replicas', on like links of a symmetric fabric)
        weights = {s: lay.dp / self.live for s in ("tp", "cp", "ep", "pp")} if self.live < lay.dp else None
        if self.fold_sends:
            weights["pp"] = float(lay.dp * lay.tp)  # one lane's sends stand for every lane of every replica
            if lay.cp > 1:
                weights["cp"] = float(lay.dp * lay.tp)  # so do its ring-attention sends (context.py _folded_ring)
            if self.fold_rings:
                weights["tp"] = float(lay.dp)  # one ring rank's tensor-parallel groups stand for every replica's
        return self.builder.build(kind="every iteration", assumed=assumed, strategy="megatron",
                                  measured_ranks=measured, samples=sz.global_batch, traffic_weights=weights,
                                  paths={"replica_fold": {"used": self.live < lay.dp, "simulated_replicas": self.live,
                                                          "replicas": lay.dp},
                                         "lane_fold": {"used": self.fold_lanes, "sends": self.fold_sends,
                                                       "rings": bool(self.fold_rings)}},
                                  layout={"tp": lay.tp, "pp": lay.pp, "dp": lay.data, "ep": lay.ep,
                                          "virtual": lay.virtual, "cp": lay.cp},
                                  microbatch=sz.microbatch, microbatches=sz.microbatches,
                                  global_batch=sz.global_batch, collectives=dict(self.counts))
