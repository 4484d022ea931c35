"""``allreduce``: the data-parallel baseline of every seed paper (AllReduce-SGD).

Pattern: after (or overlapped with) backward, every gradient bucket is
all-reduced over all R ranks, then the optimizer steps.

* ``overlap=none``: all buckets are reduced after backward ends.
* ``overlap=backward`` (wait-free backprop, PyTorch DDP / Horovod): bucket i
  is sent as soon as its last gradient is ready, so communication hides
  behind the rest of backward.
* ``overlap=backward+forward`` (seed 003): each bucket's update runs as soon
  as its reduction lands and the next iteration's forward of those layers
  waits only for them, so communication also hides behind the next forward.
  The plan then holds two iterations and ``info.period`` measures one
  steady-state iteration between the two backward ends.

Closed form with one bucket, no overlap, ring algorithm:
``T = t_fwd + t_bwd + 2(R-1)α + 2(R-1)/R·|θ|β + (R-1)/R·|θ|γ + t_update``.
"""

from __future__ import annotations

from dataclasses import dataclass

from simcomm.errors import ConfigError
from simcomm.ops import PlanBuilder
from simcomm.strategies._fold import fold_plan
from simcomm.strategies.base import Strategy, register
from simcomm.strategies.common import OVERLAPS, check_algorithm, check_choice, emit_backward, emit_forward_backward, emit_update


@dataclass(frozen=True)
class AllreduceParams:
    """Options of ``allreduce``."""

    algorithm: str = "auto"
    bucket_mb: float | None = None  # None: the workload's buckets (--bucket-mb)
    overlap: str = "backward"

    def __post_init__(self):
        check_choice("overlap", self.overlap, OVERLAPS)
        check_algorithm("algorithm", "allreduce", self.algorithm)
        if self.bucket_mb is not None and not self.bucket_mb >= 0:
            raise ConfigError(f"bucket-mb: {self.bucket_mb!r} must be >= 0 (0 = one bucket after backward)")

    @property
    def assumed(self) -> tuple[str, ...]:
        out = []
        if self.overlap == "backward":
            out.append("overlap backward (wait-free backprop, as PyTorch DDP / Horovod)")
        return tuple(out)


def emit_bucketed_allreduce(b: PlanBuilder, w, ranks, overlap: str, algorithm: str,
                            kind_label: str = "allreduce") -> dict:
    """One iteration of bucketed all-reduce over ``ranks``; returns op ids by role.

    Used by ``allreduce`` and by strategies whose gradient step is an
    all-reduce over a subgroup (node-based's intranode step).
    """
    its = {r: emit_forward_backward(b, w, r) for r in ranks}
    comm = []
    for i in range(len(w.buckets)):
        after = [its[r].bucket_ready[i] if overlap != "none" else its[r].backward_end for r in ranks]
        comm.append(b.collective("allreduce", ranks, w.bucket_bytes(i), algorithm=algorithm, after=after,
                                 label=f"{kind_label}[{i}]"))
    return {"its": its, "comm": comm}


@register
class Allreduce(Strategy):
    """AllReduce-SGD with bucketing and three overlap modes (see module docstring)."""

    name = "allreduce"
    summary = "all-reduce every gradient bucket over all ranks (AllReduce-SGD)"
    reference = ("baseline of seeds 000-004; Sergeev & Del Balso 2018 (Horovod); "
                 "Li et al. 2020 (PyTorch DDP)")
    Params = AllreduceParams

    def describe(self) -> str:
        p = self.params
        bucket = ("the workload's buckets" if p.bucket_mb is None else "one buffer after backward"
                  if p.bucket_mb == 0 else f"{p.bucket_mb:g} MB buckets")
        return f"allreduce (overlap {p.overlap}, {bucket}, algorithm {p.algorithm})"

    def _workload(self, w):
        return w.rebucketed(self.params.bucket_mb) if self.params.bucket_mb is not None else w

    def plan(self, workload, topology):
        w = self._workload(workload)
        return fold_plan(w, topology.n_ranks, lambda b: self._emit(b, w))

    def _emit(self, b: PlanBuilder, w):
        p = self.params
        ranks = tuple(range(w.n_ranks))
        if p.overlap != "backward+forward":
            ops = emit_bucketed_allreduce(b, w, ranks, p.overlap, p.algorithm)
            for r in ranks:
                emit_update(b, w, r, after=ops["comm"])
            return b.build(kind="every iteration", strategy=self.name)
        return self._two_iterations(b, w, ranks)

    def _two_iterations(self, b: PlanBuilder, w, ranks):
        p = self.params
        n = len(w.buckets)
        its = {r: emit_forward_backward(b, w, r) for r in ranks}
        comm = [b.collective("allreduce", ranks, w.bucket_bytes(i), algorithm=p.algorithm,
                             after=[its[r].bucket_ready[i] for r in ranks], label=f"allreduce[{i}]")
                for i in range(n)]
        frac = [w.bucket_bytes(i) / w.model_bytes if w.model_bytes else 1.0 / n for i in range(n)]
        ends = {}
        for r in ranks:
            s = w.scale(r)
            after = ()
            if w.dataload_s > 0:
                load = b.compute(r, w.dataload_s, label="dataload#2", stream="data" if w.dataload_overlap
                                 else "compute", category="dataload")
                after = () if w.dataload_overlap else (load,)
            # Forward visits layers in order; the first layers' gradients are in the last bucket.
            for i in reversed(range(n)):
                emit_update(b, w, r, after=(comm[i],), fraction=frac[i], label=f"update[{i}]")
                secs = sum(w.layers[j].forward_s for j in w.buckets[i]) * s
                b.compute(r, secs, after=after, label=f"forward#2[{i}]")
                after = ()
            ends[r] = emit_backward(b, w, r, tag="#2")[-1]
        # The tail (iteration 2's reduction and update) overlaps iteration 3 in steady
        # state, so it is not emitted; the period runs between the two backward ends.
        last = max(ranks, key=lambda r: w.scale(r))
        return b.build(kind="every iteration", strategy=self.name,
                       period=(its[last].backward_end, ends[last]), iterations_in_plan=1,
                       period_ranks={r: (its[r].backward_end, ends[r]) for r in ranks})
