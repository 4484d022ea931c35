"""Identical ranks folded: a plan that emits one rank's compute for every rank that provably does the same.

Data-parallel seed strategies give every rank the same forward, backward, compression and update; when the
ranks meet only in collectives (all-reduce, all-gather, all-to-all of ``allreduce``, ``gaussian-k``,
``topka``, ``ok-topk``, ``pcnn`` ...), rank r's compute starts and ends exactly when rank 0's does.  A plan at
16 384 GPUs then holds 16 384 copies of one compute chain, and the engine drives each as its own stream (a
quarter of ``gaussian-k``'s run at 16 384 GPUs went to those events).  :class:`FoldingBuilder` emits rank
0's computes only: every other rank's compute is *checked* to be a copy of rank 0's (same seconds, label,
stream, category and the very same dependencies, op ids included) and, when it is, the builder returns rank
0's op id instead of adding an op.  The folded ranks keep every collective they are members of, and wait in
them for rank 0's ops, which end at the instant theirs would have ended.  This is megatron's replica fold
(docs/engine.md "Replica and lane folding") for plans whose ranks are all alike, with the proof made by the
builder, op by op:

* a compute is folded only when its dependencies are the mirror's compute's, so by induction on the plan
  every folded compute would have started and ended when its mirror does;
* the communication is untouched (every collective keeps all its members and bytes, priced with every flow),
  so the network sees what it saw;
* a compute that is not a copy (a merge after a message of its own, a straggler's scale, an update waiting for
  its own node's all-reduce) is emitted as the rank's own, and so is every later compute of that rank: its
  folded ops end when its own would have, so it goes on from the same instants; such ranks join the plan's
  measured ranks (the critical rank is the most computing one, and a rank that only copies rank 0 computes no
  more than rank 0);
* messages of folded ranks are kept as they are, waiting for their mirror's ops.

What the fold cannot see is outside the plan: per-iteration compute jitter (drawn per rank after planning)
and the host CPU cost of communication (``comm_cpu``: charged per rank by the bytes its flows move, which
tree algorithms make unequal).  The pipeline therefore folds only when neither is on
(``Workload.fold_ranks``, set by :func:`simcomm.pipeline.run.simulate`).  The scenario key ``fold_ranks``
(``--fold-ranks``) says when: ``auto`` from :data:`FOLD_RANKS` training ranks up, ``on`` at any size, ``off``
never (every rank planned and simulated: the reference); ``--json`` names each kind's fold
(``engine.rank_fold``: the setting, whether it folded, ``meta["folded_ranks"]`` and ``meta["folded_computes"]``).
``tests/strategies/test_fold.py`` compares folded and full plans bit for bit, and ``benchmarks/check_hashes.py``
checks folded scenarios (2 048 ranks, and every seed strategy forced ``on`` at 16) against their fold-off twins.

:func:`pattern_ranks` is the other, approximate fold: the ranks that a shift pattern of messages (``sgp``'s
blocking iterations) is simulated on, chosen from a routed load analysis of the whole pattern; its bound is
measured, not proven (docs/engine.md "Identical ranks folded"), and the strategy prints an ``assumed:`` line.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from simcomm.ops import CommPlan, PlanBuilder, _with_prev

__all__ = ["FOLD_RANKS", "FoldingBuilder", "builder_for", "fold_plan", "folds"]

#: the pipeline folds plans of at least this many training ranks (below, full plans are cheap to run, and the
#: stored check hashes and golden outputs keep their op counts).  256, not the 2 048 it was: ``ps`` and
#: ``ps-layer-drop`` at 256-1 024 workers ran ~80 000-330 000 messages each on the direct loop and ``sgp``
#: every rank's messages, 61 of the 18-strategy compare's 125 CPU seconds at 32-128 nodes (20 with folds from
#: 256, docs/engine.md "Identical ranks folded"); the worker fold stays within 1e-12 there, the pattern fold 1e-4
FOLD_RANKS = 256


def folds(workload) -> bool:
    """Whether plans of ``workload`` may fold identical ranks (the pipeline's decision, see the module)."""
    # unequal compute scales: every rank would compute on its own after its first op (nothing gained)
    return (bool(getattr(workload, "fold_ranks", False)) and not workload.compute_jitter and workload.n_ranks > 1
            and len(set(workload.compute_scale)) <= 1)


class FoldingBuilder(PlanBuilder):
    """A :class:`PlanBuilder` whose training ranks 1 … ``n_train - 1`` compute through rank 0 (their mirror).

    ``compute`` on a folded rank returns the id of the mirror's matching compute (the k-th on the same stream)
    when it is a copy (same seconds, label, category and dependencies); otherwise the rank computes on its own
    from then on.  Ranks from ``n_train`` on (parameter servers) are never folded.  ``build`` names rank 0 and
    the ranks that computed on their own as the plan's measured ranks and records in ``meta`` how many computes
    were folded (``folded_computes``) and how many ranks had at least one folded (``folded_ranks``).
    """

    def __init__(self, n_ranks: int, n_train: int):
        super().__init__(n_ranks)
        self.n_train = n_train
        self._mirror_ops: dict[str, list[int]] = {}  # stream -> rank 0's compute ids, in order
        self._seen: dict[tuple[int, str], int] = {}  # (folded rank, stream) -> computes asked so far
        self._own: set[int] = set()  # ranks that stopped copying rank 0: every later compute of theirs is emitted
        self.folded = 0

    def compute(self, rank: int, seconds: float, *, after: Iterable[int] = (), label: str = "",
                stream: str = "compute", category: str = "compute") -> int:
        if rank == 0 or rank >= self.n_train or rank in self._own:
            oid = PlanBuilder.compute(self, rank, seconds, after=after, label=label, stream=stream,
                                      category=category)
            if rank == 0:
                self._mirror_ops.setdefault(stream, []).append(oid)
            return oid
        key = (rank, stream)
        seen, tail = self._seen, self._tail
        k = seen.get(key, 0)
        mine = self._mirror_ops.get(stream, ())
        if k < len(mine):
            mid = mine[k]
            op = self._ops[mid]
            # the deps a copy would have (_with_prev's), its usual case inlined: no ``after``, so the stream's
            # previous op alone (~10^5 calls at 16 384 ranks)
            if type(after) is tuple and not after:
                prev = tail.get(key)
                deps: tuple[int, ...] = () if prev is None else (prev,)
            else:
                after = after if type(after) is tuple or type(after) is list else tuple(after)
                deps = _with_prev(after, tail.get(key))
            if (op.deps == deps and op.seconds == float(seconds) and op.label == label
                    and op.category == category):
                seen[key] = k + 1
                tail[key] = mid
                self.folded += 1
                return mid
        # Not a copy: the rank computes on its own from here (its folded ops end when its own would have).
        self._own.add(rank)
        return PlanBuilder.compute(self, rank, seconds, after=after, label=label, stream=stream, category=category)

    def computes(self, ranks, seconds, *, after=(), label: str = "", stream: str = "compute",
                 category: str = "compute") -> list[int]:
        """:meth:`compute` for each of ``ranks`` in turn, the same checks inlined (a gossip plan averages 16 384
        ranks per segment)."""
        after = tuple(after) if not isinstance(after, (tuple, list)) else after
        own, seen, tail, ops, n_train = self._own, self._seen, self._tail, self._ops, self.n_train
        mine = self._mirror_ops.get(stream, ())
        out = []
        # the last copy found (mirror op, the stream's previous op, seconds): a rank with the same three is a copy
        # too (label, category and ``after`` are the call's), without checking the mirror's op again
        last_mid, last_prev, last_x = -1, None, None
        for rank, x in zip(ranks, seconds, strict=True):
            if rank == 0 or rank >= n_train or rank in own:
                out.append(self.compute(rank, x, after=after, label=label, stream=stream, category=category))
                mine = self._mirror_ops.get(stream, ())  # (rank 0 may have added its op)
                continue
            key = (rank, stream)
            k = seen.get(key, 0)
            if k < len(mine):
                mid = mine[k]
                prev = tail.get(key)
                if (mid == last_mid and prev == last_prev and x == last_x) or (
                        (op := ops[mid]).seconds == float(x) and op.deps == _with_prev(after, prev)
                        and op.label == label and op.category == category):
                    last_mid, last_prev, last_x = mid, prev, x
                    seen[key] = k + 1
                    tail[key] = mid
                    self.folded += 1
                    out.append(mid)
                    continue
            own.add(rank)
            out.append(PlanBuilder.compute(self, rank, x, after=after, label=label, stream=stream, category=category))
        return out

    def build(self, **kw) -> CommPlan:
        if self.folded:
            kw.setdefault("measured_ranks", (0, *sorted(self._own)))
            kw["folded_computes"] = self.folded
            kw["folded_ranks"] = len({rank for rank, _ in self._seen})  # ranks with a compute of rank 0's
        return super().build(**kw)


def fold_plan(workload, n_ranks: int, emit: Callable[[PlanBuilder], CommPlan]) -> CommPlan:
    """``emit(builder)``'s plan, built by :func:`builder_for` (``n_ranks``: training ranks plus any servers)."""
    return emit(builder_for(workload, n_ranks))


# ---- approximate: a shift pattern of messages simulated on a few ranks ---------------------------------------

#: ranks a pattern fold seeds its simulated set with: the first this many, and up to this many of the ranks whose
#: messages get the smallest equal share of their routes' links
PATTERN_SEEDS = 64


def pattern_ranks(topology, offset: int, n: int):
    """The ranks a fold of the shift pattern ``r -> (r + offset) mod n`` simulates, and each rank's route class.

    Every rank's message is routed at once (:meth:`Topology.routes`) and given the equal share of its most
    loaded link (capacity / messages crossing it): a static estimate of where the pattern is slowest.  The
    simulated set holds the first :data:`PATTERN_SEEDS` ranks, up to as many of the ranks with the smallest
    share (the makespan is theirs), and every rank whose message shares a link with one of theirs (their
    contention).  Route classes (an array over all ranks) group messages that cross the same number of links
    of each family, so that the simulated ones can stand for all in the bytes per link family.
    """
    import numpy as np

    src = np.arange(n, dtype=np.int64)
    lens, links = topology.routes(src, (src + offset) % n)
    owner = np.repeat(src, lens)
    cap = topology.capacity
    crossing = np.bincount(links, minlength=len(cap))
    starts = np.concatenate(([0], np.cumsum(lens)[:-1]))
    share = np.minimum.reduceat(cap[links] / crossing[links], starts)
    worst = np.nonzero(share <= share.min() * (1 + 1e-9))[0][:PATTERN_SEEDS]
    seed = np.zeros(n, dtype=bool)
    seed[:PATTERN_SEEDS] = True
    seed[worst] = True
    touched = np.zeros(len(cap), dtype=bool)
    touched[links[seed[owner]]] = True
    live = seed.copy()
    live[owner[touched[links]]] = True
    # each crossed link's family, from the link classes in use (a few) rather than per link (131 264 at 16 384 GPUs)
    names, code = topology.link_class_codes
    fams = [topology.links[name].family for name in names]
    index = {f: i for i, f in enumerate(sorted(set(fams)))}
    family = np.array([index[f] for f in fams], dtype=np.int64)[code[links]]
    counts = np.bincount(owner * len(index) + family, minlength=n * len(index)).reshape(n, len(index))
    key = np.zeros(n, dtype=np.int64)  # each rank's counts per family as one number (routes are short)
    for f in range(len(index)):
        key = key * (int(counts.max()) + 1) + counts[:, f]
    _, klass = np.unique(key, return_inverse=True)
    return np.nonzero(live)[0], klass.reshape(-1)


def builder_for(workload, n_ranks: int) -> PlanBuilder:
    """A :class:`FoldingBuilder` when :func:`folds`, else a plain :class:`PlanBuilder` (``n_ranks``: with servers)."""
    return FoldingBuilder(n_ranks, workload.n_ranks) if folds(workload) else PlanBuilder(n_ranks)
