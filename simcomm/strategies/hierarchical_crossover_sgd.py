"""``hierarchical-crossover-sgd``: Crossover-SGD among group roots (seed 001, Sec. 3.3, Fig. 7).

Pattern (seed-code-facts §A.2 "Hierarchical", §C4): ranks form groups of
consecutive ranks (``groups=G``: group size R/G, root = first rank, as the
code builds them, imagenet_test.py:252-261; ``groups=0``: one group per
physical node).

1. ``reduce=after-backward`` (default; the authors' code): once backward
   is done, one ``reduce`` of the flat fp32 gradient (|θ| bytes) to the root
   (imagenet_test.py:388-395).  The AWS timing code reduces the parameters
   after the roots' step instead (aws:742-795): same bytes, same critical
   path.  ``reduce=overlap`` reduces bucket by bucket as backward produces
   them (the overlap the paper's Sec. 3.3 argues for).
2. Only the roots run the optimizer step.
3. The roots run Crossover-SGD among the G groups (``mode`` as in
   ``crossover-sgd``: serial with barriers over all ranks in the training
   code, blocking with 2-cycles as pair all-reduces in the AWS timing code,
   or Alg. 1's overlap), averaging each segment.
4. The root broadcasts the averaged parameters to its group:
   ``broadcast=segment`` (default; training code, each segment right after
   its exchange, imagenet_test.py:811-838) or ``broadcast=model`` (the AWS
   timing code: the whole model once, aws:785-795).

With ``broadcast=model`` the plan also carries the AWS code's two group
barriers (``crossover()``, aws:742-795: ``dist.barrier(groups[mygroup])``
before the reduce and again before the broadcast, a one-element all-reduce
under NCCL); the training code's barrier is the one over all ranks after
every segment's exchange (``mode=serial``).

Closed form (contention free, group size L, G groups, broadcast=model):
``T = t_fwd + t_bwd + T_reduce(L, |θ|) + t_upd + T_crossover(G) + T_bcast(L, |θ|)``.
"""

from __future__ import annotations

from dataclasses import dataclass

from simcomm.errors import ConfigError
from simcomm.strategies._fold import builder_for
from simcomm.strategies._gossip import BARRIER_BYTES, check_int, gossip_iterations, segment_bytes
from simcomm.strategies.base import NotApplicable, Strategy, register
from simcomm.strategies.common import check_choice, emit_forward_backward, emit_update, machine_groups
from simcomm.strategies.crossover_sgd import CrossoverParams, emit_crossover

REDUCES = ("after-backward", "overlap")
BROADCASTS = ("segment", "model")


@dataclass(frozen=True)
class HierarchicalCrossoverParams(CrossoverParams):
    """Options of ``hierarchical-crossover-sgd``: Crossover's plus ``groups``, ``reduce``, ``broadcast``."""

    groups: int = 0  # 0 = one group per physical node
    reduce: str = "after-backward"  # the authors' code
    broadcast: str = "segment"  # training code; "model" = AWS timing code

    def __post_init__(self):
        super().__post_init__()
        check_int("groups", self.groups, 0)
        check_choice("reduce", self.reduce, REDUCES)
        check_choice("broadcast", self.broadcast, BROADCASTS)
        if self.overlap != "none":
            # Its roots' gossip sits between the group reduce and broadcast of one iteration.
            raise ConfigError(f"overlap: {self.overlap!r} is not supported by hierarchical-crossover-sgd; "
                              "valid choices: none")

    @property
    def assumed(self) -> tuple[str, ...]:
        # overlap=compute does not exist here, so Crossover's line offering it is left out
        out = [x for x in super().assumed if not x.startswith("exchange not overlapped")]
        if self.groups == 0:
            out.append("groups: one per physical node, root = lowest rank (groups=G: G blocks of consecutive "
                       "ranks, as seed 001's code)")
        if self.reduce == "after-backward":
            out.append("reduce after-backward: one reduce of the flat gradient to the root once backward is done "
                       "(authors' code; reduce=overlap reduces bucket by bucket during backward)")
        if self.broadcast == "segment":
            out.append("broadcast segment: the root broadcasts each segment after its exchange (training code; "
                       "broadcast=model is the AWS timing code's one broadcast of the whole model)")
        elif self.reduce == "after-backward":
            out.append("broadcast model: the AWS timing code's group barriers before the reduce and before the "
                       "broadcast (aws:742-795)")
        out.append("group reduce and broadcast with the stack's algorithm choice")
        return tuple(out)


def rank_groups(topology, n: int, groups: int) -> list[tuple[int, ...]]:
    if groups == 0:
        return machine_groups(topology, n)
    if groups > n or n % groups:
        raise ConfigError(f"groups: {groups} does not divide the {n} ranks into equal groups")
    size = n // groups
    return [tuple(range(g * size, (g + 1) * size)) for g in range(groups)]


@register
class HierarchicalCrossoverSGD(Strategy):
    """Reduce in groups, Crossover-SGD among roots, broadcast in groups."""

    name = "hierarchical-crossover-sgd"
    summary = "reduce to group roots, Crossover-SGD among roots, broadcast back"
    reference = "Yeo et al., Crossover-SGD, Concurrency Computat. Pract. Exper. 2022 (seed 001), Sec. 3.3"
    Params = HierarchicalCrossoverParams
    paper_baseline = ("allreduce", (("bucket_mb", 0.0), ("overlap", "none")),
                      "seed 001's AllReduce-SGD: one all-reduce of all gradients after backward")

    def plan(self, workload, topology):
        w, p = workload, self.params
        n = w.n_ranks
        groups = rank_groups(topology, n, p.groups)
        if len(groups) < 2:
            raise NotApplicable("hierarchical-crossover-sgd needs at least 2 groups")
        seg_bytes, how = segment_bytes(w, p.segments)
        b = builder_for(w, n)
        overlap = p.reduce == "overlap"
        aws = p.broadcast == "model" and not overlap  # the AWS timing code's group barriers (aws:742-795)
        its = {r: emit_forward_backward(b, w, r, buckets=None if overlap else (tuple(w.ready_order),))
               for r in range(n)}
        ready = {}
        for grp in groups:
            root = grp[0]
            red = []
            if len(grp) > 1:
                if overlap:
                    red = [b.collective("reduce", grp, w.bucket_bytes(i), root=0,
                                        after=[its[r].bucket_ready[i] for r in grp], label=f"group reduce[{i}]")
                           for i in range(len(w.buckets))]
                else:
                    gate = [its[r].backward_end for r in grp]
                    if aws:
                        gate = [b.collective("allreduce", grp, BARRIER_BYTES, after=gate, label="group barrier")]
                    red = [b.collective("reduce", grp, w.model_bytes, root=0, after=gate, label="group reduce")]
            ready[root] = emit_update(b, w, root, after=red)
        roots = [g[0] for g in groups]
        group_of = {g[0]: g for g in groups}

        def broadcast_segment(s, gate):
            for root, grp in group_of.items():
                if len(grp) > 1:
                    gate[root] = [b.collective("broadcast", grp, seg_bytes[s], root=0, after=gate[root],
                                               label=f"group broadcast {s}")]
            return gate

        done = emit_crossover(b, roots, ready, seg_bytes, p.mode, p.seed, 0, topology.gamma,
                              average="segment", barrier_ranks=tuple(range(n)),
                              after_segment=broadcast_segment if p.broadcast == "segment" else None)
        if p.broadcast == "model":
            for root, grp in group_of.items():
                if len(grp) > 1:
                    bar = b.collective("allreduce", grp, BARRIER_BYTES, after=done[root], label="group barrier")
                    b.collective("broadcast", grp, w.model_bytes, root=0, after=[bar], label="group broadcast")
        return b.build(kind=f"gossip among {len(groups)} groups", groups=len(groups), segments=len(seg_bytes),
                       assumed=(f"segments: {how}",))

    def iterations(self, workload, topology) -> list:
        return gossip_iterations(workload, topology, self.params.interval,
                                 lambda _: self.plan(workload, topology))
