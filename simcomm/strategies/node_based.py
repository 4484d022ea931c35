"""``node-based``: node-based communication, seed 000 (Alg. 2), as the authors' code runs it.

Pattern (seed-code-facts A.1, C2):

* every iteration, gradients are all-reduced (averaged) only *inside* each
  node (g_group, R_m ranks, intranode links; Open MPI's vader shared memory
  in the code); with R_m = 1 there is no communication at all;
* on exchange iterations the *parameters* (|θ| bytes) are all-reduced over
  all R ranks (G_group), crossing the internode network, and every replica
  takes the average before its update (Alg. 2 lines 11-13).

When the intranode all-reduce runs (``overlap``):

* ``none`` (default): after the whole backward, one flat buffer, no overlap.
  This is what the code runs: the algorithm lives in a ColossalAI fork, and
  upstream ColossalAI's data-parallel gradient handler waits for backward,
  flattens all gradients into one buffer and runs one ``all_reduce``
  (hpcaitech/ColossalAI ``engine/gradient_handler/utils.py``,
  ``bucket_allreduce``; seed-code-facts A.1 "Baseline all-reduce").
* ``backward``: per DDP bucket as soon as its gradients are ready (PyTorch
  DDP style).  Not what seed 000's code does; kept as an option.

Which iterations exchange (``exchange-rule``), with K = ⌈N/(R·B)⌉ iterations
per epoch:

* ``alg2`` (default): a global parameter average when i mod K' = 0 or i = K
  (seed-code-facts A.1, "Simulator rule": Alg. 2's ``if i == K'`` read with
  the text's "every K' iterations plus the final one", S0:L182-190), i.e.
  X = ⌈K/K'⌉ per epoch;
* ``footnote``: X = 1 + ⌊K/K'⌋ when K' < K, 1 when K' ≥ K (seed 000
  footnote 1, which states it as a *maximum*; never more than K).

The two differ by one exchange when K' divides K (K = 100, K' = 50: 2 vs 3).

``k-prime``: default 50 (seed 000 Sec. IV-B for ImageNet and RNNs; the
launcher passes ``--sharingiter 50`` for ImageNet).  ``-1`` is the code's
automatic rule ``--sharingiter -1``: K' = ⌈50000/(B·R)⌉ (CIFAR/main.py:127,
139-141; IMAGENET/main.py:138-140 reuses CIFAR's 50 000), which equals K on
CIFAR, i.e. one global average per epoch.

Per-epoch evaluation (``eval-s``, ``eval-samples``): seed 000's code
evaluates after every epoch (``trainer.fit(..., test_interval=1)``,
CIFAR/main.py:96-104).  The paper gives no time, so the default is 0.  When
set, the epoch's last iteration (always an exchange) is its own kind,
``exchange+eval``, with one compute op per rank after the update of
``eval-s`` seconds plus ``⌈eval-samples/(R·B)⌉`` forward passes at the
training batch (ColossalAI's ``get_dataloader`` shards the test set over the
data-parallel ranks); the mean gains (eval time)/K.

The strategy returns up to three kinds of iteration: ``local`` (weight K − X),
``exchange`` (X, or X − 1 with evaluation) and ``exchange+eval`` (1); the mean
iteration time is their weighted mean and the epoch time K times that.

Closed form (ring, no overlap): T_local = t_c + 2(R_m-1)α_i + 2(R_m-1)/R_m·|θ|β_i,
T_exchange = T_local + 2(R-1)α + 2(R-1)/R·|θ|β over the slowest link,
T_exchange+eval = T_exchange + E.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from simcomm.errors import ConfigError
from simcomm.ops import PlanBuilder
from simcomm.strategies._fold import fold_plan
from simcomm.strategies.base import Strategy, register
from simcomm.strategies.common import check_algorithm, check_choice, emit_forward_backward, emit_update, machine_groups

#: exchange rules: Alg. 2 as the seed-code-facts simulator rule reads it, and footnote 1's count
EXCHANGE_RULES = ("alg2", "footnote")
#: the code's automatic K' (--sharingiter -1) divides this constant (CIFAR's training-set size)
AUTO_K_PRIME_SAMPLES = 50_000


def exchanges_per_epoch(k: int, k_prime: int, rule: str = "alg2") -> int:
    """Internode parameter exchanges in an epoch of ``k`` iterations.

    ``alg2``: iterations i = 1..K with i mod K' = 0 or i = K, i.e. ⌈K/K'⌉.
    ``footnote``: 1 + ⌊K/K'⌋ when K' < K, else 1 (seed 000 footnote 1), capped at K.
    """
    check_choice("exchange-rule", rule, EXCHANGE_RULES)
    if rule == "footnote":
        return 1 if k_prime >= k else min(k, 1 + k // k_prime)
    return -(-k // k_prime)


def auto_k_prime(batch: int, n_ranks: int) -> int:
    """The code's ``--sharingiter -1``: ⌈50000/(B·R)⌉ (CIFAR/main.py:139-141)."""
    return max(1, -(-AUTO_K_PRIME_SAMPLES // (batch * n_ranks)))


@dataclass(frozen=True)
class NodeBasedParams:
    """Options of ``node-based``."""

    k_prime: int = 50
    exchange_rule: str = "alg2"
    overlap: str = "none"
    algorithm: str = "auto"  # internode parameter all-reduce
    intra_algorithm: str = "auto"  # intranode gradient all-reduce
    eval_s: float = 0.0  # seconds of evaluation/checkpointing once per epoch
    eval_samples: int = 0  # validation images evaluated once per epoch (forward passes)

    def __post_init__(self):
        if isinstance(self.k_prime, bool) or not isinstance(self.k_prime, int) or not (
                self.k_prime > 0 or self.k_prime == -1):
            raise ConfigError(f"k-prime: {self.k_prime!r} must be a positive integer (iterations between "
                              "internode exchanges) or -1 (the code's automatic K' = ceil(50000/(B R)))")
        check_choice("exchange-rule", self.exchange_rule, EXCHANGE_RULES)
        check_choice("overlap", self.overlap, ("none", "backward"))
        check_algorithm("algorithm", "allreduce", self.algorithm)
        check_algorithm("intra-algorithm", "allreduce", self.intra_algorithm)
        if isinstance(self.eval_s, bool) or not isinstance(self.eval_s, (int, float)) or not (
                math.isfinite(self.eval_s) and self.eval_s >= 0):
            raise ConfigError(f"eval-s: {self.eval_s!r} must be a non-negative number of seconds per epoch")
        if isinstance(self.eval_samples, bool) or not isinstance(self.eval_samples, int) or self.eval_samples < 0:
            raise ConfigError(f"eval-samples: {self.eval_samples!r} must be a non-negative integer (validation "
                              "images per epoch)")

    @property
    def evaluates(self) -> bool:
        return self.eval_s > 0 or self.eval_samples > 0

    @property
    def assumed(self) -> tuple[str, ...]:
        out = []
        if self.k_prime == 50:
            out.append("K' = 50 (seed 000 Sec. IV-B for ImageNet and RNNs; the launcher's --sharingiter 50); "
                       "-1 = the code's automatic K' (= K on CIFAR)")
        if self.exchange_rule == "alg2":
            out.append("exchange rule alg2: global parameter average when i mod K' = 0 or i = K (seed-code-facts "
                       "simulator rule for Alg. 2); footnote 1's 1 + floor(K/K') is exchange-rule=footnote")
        if self.overlap == "none":
            out.append("intranode gradient all-reduce after backward, one flat buffer, no overlap (ColossalAI's "
                       "data-parallel gradient handler, which seed 000's code builds on)")
        else:
            out.append("intranode gradient all-reduce overlapped with backward, bucketed (PyTorch-DDP style; "
                       "seed 000's ColossalAI code does not overlap)")
        if not self.evaluates:
            out.append("per-epoch evaluation 0 s (seed 000's code evaluates every epoch, test_interval=1; the "
                       "paper gives no time: set eval-s / eval-samples)")
        return tuple(out)


@register
class NodeBased(Strategy):
    """Intranode gradient all-reduce every iteration; internode parameter all-reduce every K' iterations."""

    name = "node-based"
    summary = "intranode gradient all-reduce each iteration, internode parameter all-reduce every K' iterations"
    reference = "seed 000: Moreno-Alvarez et al., IEEE TNNLS 2023, Alg. 2"
    Params = NodeBasedParams
    paper_baseline = ("allreduce", (("bucket_mb", 0.0), ("overlap", "none")),
                      "seed 000's baseline (ColossalAI's data-parallel gradient handler) all-reduces one flat "
                      "fp32 buffer after backward")

    def k_prime(self, workload) -> int:
        """K' for this workload (resolves the automatic -1)."""
        p = self.params
        return auto_k_prime(workload.batch, workload.n_ranks) if p.k_prime == -1 else p.k_prime

    def eval_seconds(self, workload, rank: int = 0) -> float:
        """Per-epoch evaluation on ``rank``: eval-s plus ⌈eval-samples/(R·B)⌉ forward passes."""
        p = self.params
        passes = -(-p.eval_samples // workload.global_batch) if p.eval_samples else 0
        return p.eval_s + passes * workload.forward_s * workload.scale(rank)

    def plan(self, workload, topology, *, exchange: bool = False, evaluate: bool = False):
        p = self.params
        w = workload
        machines = machine_groups(topology, w.n_ranks)

        def emit(b: PlanBuilder):
            its = {r: emit_forward_backward(b, w, r) for r in range(w.n_ranks)}
            grads: dict[int, list[int]] = {r: [] for r in range(w.n_ranks)}
            for m in machines:
                if len(m) < 2:
                    continue  # a single replica per node: g_group is empty, no traffic
                if p.overlap == "none":
                    # ColossalAI's handler: one flat buffer of every gradient once backward has finished
                    op = b.collective("allreduce", m, w.model_bytes, algorithm=p.intra_algorithm,
                                      after=[its[r].backward_end for r in m], label="intra-grad-allreduce")
                    for r in m:
                        grads[r].append(op)
                    continue
                for i in range(len(w.buckets)):
                    op = b.collective("allreduce", m, w.bucket_bytes(i), algorithm=p.intra_algorithm,
                                      after=[its[r].bucket_ready[i] for r in m], label=f"intra-grad-allreduce[{i}]")
                    for r in m:
                        grads[r].append(op)
            after_all = [x for r in range(w.n_ranks) for x in (grads[r] or [its[r].backward_end])]
            if exchange and w.n_ranks > 1:
                # Alg. 2 averages θ over G_group before this iteration's update.
                op = b.collective("allreduce", tuple(range(w.n_ranks)), w.model_bytes, algorithm=p.algorithm,
                                  after=after_all, label="inter-param-allreduce")
                upd = {r: emit_update(b, w, r, after=(op,)) for r in range(w.n_ranks)}
            else:
                upd = {r: emit_update(b, w, r, after=grads[r]) for r in range(w.n_ranks)}
            if evaluate:
                for r in range(w.n_ranks):
                    b.compute(r, self.eval_seconds(w, r), after=(upd[r],), label="epoch evaluation", category="eval")
            kind = "exchange+eval" if evaluate else "exchange" if exchange else "local"
            return b.build(kind=kind, strategy=self.name)

        # a local iteration's update waits for its own node's all-reduce: from there each rank computes on its own
        return fold_plan(w, topology.n_ranks, emit)

    def iterations(self, workload, topology) -> list:
        p = self.params
        kp = self.k_prime(workload)
        k = workload.iterations_per_epoch
        notes = []
        if k is None:  # unknown dataset: one period of K' iterations stands for the epoch
            k = kp
            notes.append(f"dataset size unknown: an epoch taken as K' = {kp} iterations")
        x = exchanges_per_epoch(k, kp, p.exchange_rule)
        rule = ("i mod K' = 0 or i = K" if p.exchange_rule == "alg2" else "1 + floor(K/K') if K' < K, else 1")
        notes.append(f"node-based: K = {k} iterations per epoch, K' = {kp}"
                     + (" (automatic, ceil(50000/(B R)))" if p.k_prime == -1 else "")
                     + f", {x} internode exchange(s) per epoch (rule {p.exchange_rule}: {rule})")
        out = []
        if k - x > 0:
            out.append((float(k - x), self.plan(workload, topology, exchange=False)))
        if p.evaluates:
            e = self.eval_seconds(workload)
            notes.append(f"per-epoch evaluation {e * 1e3:.4g} ms on the epoch's last iteration (eval-s "
                         f"{p.eval_s:g} s + {p.eval_samples} validation samples), adds {e / k * 1e3:.4g} ms to "
                         "the mean iteration")
            if x > 1:
                out.append((float(x - 1), self.plan(workload, topology, exchange=True)))
            out.append((1.0, self.plan(workload, topology, exchange=True, evaluate=True)))
        else:
            out.append((float(x), self.plan(workload, topology, exchange=True)))
        return [(w, replace(plan, info=replace(plan.info, assumed=tuple(notes)))) for w, plan in out]
