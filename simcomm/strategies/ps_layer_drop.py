"""``ps-layer-drop``: parameter server with layer dropping, seed 004 (Sec. 4-5, Alg. 1).

Pattern: as ``ps`` (per-tensor push, server update, per-tensor pull), but
pushed only after the whole backward (``push``, below), and each worker
keeps a per-layer accumulator and pushes a layer only when its
representative value (mean |accum|) reaches a threshold; a dropped layer is
sent as the one-element list ``[0]`` and stays accumulated (Eqs. 1-2).  The
threshold is recomputed every ``threshold_every`` iterations so that a
fraction R (``drop_ratio``) of gradient elements is dropped: sort layers by
representative value ascending and add their sizes until the dropped count
passes R × total; the threshold is the value of the last layer added (Alg. 1).

The server restores every ``[0]`` to zeros, updates, and sends back as
``[0]`` each layer that *no* worker sent this iteration (Sec. 4.2: "replacing
the un-updated layer with the list [0]"): every worker pulls the **union**
of the layers any worker pushed.  With f_l the fraction of iterations a
worker sends layer l, the union is sent a fraction

* ``union shared`` (default): f_l.  All workers drop the same layers in an
  iteration: a layer's mean |g| is nearly equal across the workers of a
  synchronous PS, and all thresholds restart at the same iteration;
* ``union independent``: 1 − Π_w (1 − f_l,w), each worker's choice an
  independent draw (the pessimistic bound; 1 − 0.9^4 = 0.34 for 4 workers and R = 0.9).

Schedule (``push``).  ``after-backward`` (default), as seed 004's worker
runs (Sec. 4.1): it "computes gradients ... After computing the gradients,
the worker performs the following tasks to compress the data": adds them to
its accumulators, compares each layer with the threshold, builds the list
with ``[0]`` for the dropped layers and sends it; it then receives the whole
parameter list, replaces the ``[0]`` layers with its old values, "After
that, the worker computes gradients".  So no push starts before the worker's
backward ends, and its next forward waits for every pulled tensor.  The
paper's framework says the same: TensorFlow 1.13 graphs run by a session
with OpenMPI 3.0.0 messages between them (Sec. 6.1), a Python list with
``[0]`` entries, which exists only once the session has returned every
gradient; and Table 1's worker compute, PS compute and communication add up
to its total in all four rows (0.388 + 0.073 + 3.457 = 3.918), phases one
after the other.  The server side is ``ps``'s (per tensor: its W pushes in,
update, pull out, ``pull`` option), the only one under which Table 1's
no-drop 1 Gb/s communication (3.457 s for 4 x 102.2 MB each way) fits
under GbE's line rate.  ``as-ready`` pushes each tensor as backward
produces it and lets a layer's forward wait only for its own tensors, as
``ps`` does (not seed 004's schedule; for comparison).

Bytes per tensor of n bytes: push ``f·n + (1 − f)·placeholder``, pull
``u·n + (1 − u)·placeholder`` (u the union fraction); every tensor is still
one message each way, so per-message costs stay.  With per-iteration
gradient L1 norms in the trace, f_l is replayed from them (accumulator L1
taken as the sum of L1 norms since the last send, an upper bound on |Σ g|);
without them f_l = 1 − R for every layer (documented fallback).

Overheads (seed 004 Table 1): worker compute +5 % (0.388 → 0.408 s), server
compute +15 % at 1 Gb/s (0.073 → 0.085 s); +3.6 % and +23 % at 56 Gb/s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from simcomm.errors import ConfigError
from simcomm.strategies.base import register
from simcomm.strategies.common import check_choice
from simcomm.strategies.ps import ParameterServer, PSParams

__all__ = ["LayerDropParams", "LayerDrop", "threshold", "sent_fractions", "union_fraction", "UNIONS", "PUSHES"]

UNIONS = ("shared", "independent")
PUSHES = ("after-backward", "as-ready")


def threshold(values: list[float], sizes: list[float], ratio: float) -> float:
    """Seed 004 Alg. 1: the representative value at which ``ratio`` of elements are dropped (-1: none)."""
    total = sum(sizes)
    dropped = 0.0
    for v, n in sorted(zip(values, sizes, strict=False)):
        dropped += n
        if dropped > total * ratio:
            return v
    return -1.0


def sent_fractions(l1: list[tuple[float, ...]], params: list[int], ratio: float, every: int) -> list[float]:
    """Fraction of iterations each layer is pushed, replaying the accumulators over the L1 history."""
    live = [i for i, p in enumerate(params) if p > 0]
    n_iter = min((len(l1[i]) for i in live), default=0)  # layers without parameters carry no history
    if n_iter == 0:
        return [0.0] * len(params)
    accum = [0.0] * len(params)
    sent = [0] * len(params)
    thr = -1.0
    for t in range(n_iter):
        if t % every == 0:
            thr = threshold([l1[i][t] / params[i] for i in live], [float(params[i]) for i in live], ratio)
        for i in live:
            accum[i] += l1[i][t]
            if thr < 0 or accum[i] / params[i] >= thr:
                sent[i] += 1
                accum[i] = 0.0
    return [sent[i] / n_iter if params[i] > 0 else 0.0 for i in range(len(params))]


def union_fraction(fractions: list[float], mode: str) -> float:
    """Fraction of iterations at least one worker sends a layer, from each worker's own fraction."""
    if not fractions:
        return 0.0
    if mode == "shared":
        return max(fractions)
    return 1.0 - math.prod(1.0 - f for f in fractions)


@dataclass(frozen=True)
class LayerDropParams(PSParams):
    """Options of ``ps-layer-drop`` (those of ``ps`` plus dropping)."""

    drop_ratio: float = 0.9
    threshold_every: int = 100
    union: str = "shared"
    worker_overhead: float = 0.05
    server_overhead: float = 0.15
    placeholder_bytes: float = 4.0
    push: str = "after-backward"

    def __post_init__(self):
        super().__post_init__()
        if not 0.0 <= self.drop_ratio < 1.0:
            raise ConfigError(f"drop-ratio: {self.drop_ratio!r} must be in [0, 1)")
        if isinstance(self.threshold_every, bool) or not isinstance(self.threshold_every, int) \
                or self.threshold_every < 1:
            raise ConfigError(f"threshold-every: {self.threshold_every!r} must be a positive integer")
        check_choice("union", self.union, UNIONS)
        check_choice("push", self.push, PUSHES)
        for name in ("worker_overhead", "server_overhead", "placeholder_bytes"):
            if not getattr(self, name) >= 0:
                raise ConfigError(f"{name.replace('_', '-')}: {getattr(self, name)!r} must be >= 0")

    @property
    def per_tensor_pull_note(self) -> str:
        if self.push == "as-ready":
            return super().per_tensor_pull_note
        # the forward waits for the whole list (the push line says so)
        return ("a tensor is pulled as soon as its server has updated it (the only server schedule under which "
                "seed 004's no-drop 1 Gb/s communication fits under line rate)")

    @property
    def assumed(self) -> tuple[str, ...]:
        out = list(super().assumed)
        if self.drop_ratio == 0.9:
            out.append("drop ratio R = 0.9 (seed 004 does not state R): workers push ~10 % of gradient elements, a "
                       "90 % cut in pushed bytes; the paper's 95 % cut of communication time at 1 Gb/s would need "
                       "R ~ 0.95 if time scaled with bytes")
        if self.union == "shared":
            out.append("workers drop the same layers in an iteration, so the union the server returns is one "
                       "worker's set (union independent: 1 - prod(1 - f))")
        if self.push == "after-backward":
            out.append("push after-backward: each worker sends its compressed list once its backward has ended and "
                       "its next forward waits for the whole parameter list (seed 004 Sec. 4.1; push as-ready: "
                       "each tensor as backward produces it, as ps)")
        if self.worker_overhead == 0.05 and self.server_overhead == 0.15:
            out.append("overheads: worker compute +5 %, server compute +15 % (seed 004 Table 1, 1 Gb/s)")
        return tuple(out)


@register
class LayerDrop(ParameterServer):
    """Parameter server that skips layers whose accumulated gradient is below a threshold."""

    name = "ps-layer-drop"
    summary = "parameter server sending only layers whose accumulated mean |gradient| passes a threshold"
    reference = "seed 004: Jeong et al. (Electronics 2021), Sec. 4-5, Alg. 1"
    Params = LayerDropParams
    paper_baseline = ("ps", (), "seed 004 compares against the same parameter server without dropping "
                      "(Table 1)")

    def fractions(self, workload) -> tuple[list[float], str]:
        """Per layer, the fraction of iterations one worker sends it, and where that came from."""
        p = self.params
        layers = workload.layers
        if layers and all(layer.grad_l1 for layer in layers if layer.params > 0):
            l1 = [layer.grad_l1 if layer.params > 0 else (0.0,) for layer in layers]
            return sent_fractions(l1, [layer.params for layer in layers], p.drop_ratio, p.threshold_every), "grad_l1"
        return [1.0 - p.drop_ratio if layer.params > 0 else 0.0 for layer in layers], "ratio"

    def tensor_bytes(self, workload, tens) -> tuple[list[float], list[float]]:
        """A layer's decision applies to all its tensors; pulls carry the union over workers."""
        f, _ = self.fractions(workload)
        ph = self.params.placeholder_bytes
        W = workload.n_ranks
        push, pull = [], []
        for t in tens:
            fl = f[t.layer]
            u = union_fraction([fl] * W, self.params.union)
            push.append(fl * t.nbytes + (1.0 - fl) * ph)
            pull.append(u * t.nbytes + (1.0 - u) * ph)
        return push, pull

    def push_ready(self, it) -> tuple[int, ...]:
        """``after-backward``: every push waits for the end of the worker's backward (seed 004 Sec. 4.1)."""
        if self.params.push == "as-ready":
            return super().push_ready(it)
        return (it.backward_end,) * len(it.bucket_ready)

    def _next_iteration(self, b, w, r: int, groups, fwd, got) -> int:  # type: ignore[override]
        """``after-backward``: the first forward layer waits for every pulled tensor (the whole list)."""
        if self.params.push == "after-backward" and fwd:
            every = tuple(i for _, _, owned in fwd for i in owned)
            fwd = [(fwd[0][0], fwd[0][1], every)] + [(secs, label, ()) for secs, label, _ in fwd[1:]]
        return super()._next_iteration(b, w, r, groups, fwd, got)

    def worker_workload(self, workload):
        k = 1.0 + self.params.worker_overhead
        return replace(workload, compute_scale=tuple(workload.scale(r) * k for r in range(workload.n_ranks)))

    def server_seconds(self, workload, nbytes: float) -> float:
        return super().server_seconds(workload, nbytes) * (1.0 + self.params.server_overhead)

    def plan(self, workload, topology):
        plan = super().plan(workload, topology)
        _, source = self.fractions(workload)
        push, pull = self.wire_bytes(workload)
        note = ("sent fractions replayed from the trace's per-layer gradient L1 norms" if source == "grad_l1"
                else "trace has no gradient L1 norms: every layer sent a fraction 1 - R of iterations")
        plan = replace(plan, info=plan.info.with_assumed(
            note, f"per worker: pushes {push / 1e6:.4g} MB, pulls {pull / 1e6:.4g} MB (the union over "
                  f"{workload.n_ranks} workers, union {self.params.union}) of {workload.model_bytes / 1e6:.4g} MB"))
        plan.meta["push_bytes"] = push
        plan.meta["pull_bytes"] = pull
        return plan
