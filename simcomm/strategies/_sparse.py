"""Shared pieces of the gradient-compression strategies of seed 002 (and seed 000 Table I).

* the density k/d option and its default;
* per-element compute rates of compression (top-k selection, count-sketch,
  HEAVYMIX queries, threshold estimation, sparse accumulation), overridable
  from the trace's ``meta["compression_rates"]`` or an option;
* the binary reduction tree of gs-SGD's Alg. 1 (pairs at distance 1, 2, 4,
  ...; with an odd number of active ranks the highest one sits the round
  out), used in both directions: ceil(log2 P) rounds up, the same down.

Sizes: a sparse entry is a value plus a 4-byte index, so k entries cost
``k·(dtype + 4)`` bytes, i.e. the papers' "2k" words for fp32.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from simcomm.errors import ConfigError
from simcomm.ops import PlanBuilder

__all__ = ["DEFAULT_DENSITY", "RATES", "SparseParams", "top_k", "rate", "entry_bytes", "tree_rounds",
           "emit_tree_reduce", "emit_tree_broadcast", "INDEX_BYTES"]

#: Seed 002 warms up with densities 0.25, 0.0725, 0.015, 0.004 over the first
#: four epochs and states no other value; we take the last one as the steady state.
DEFAULT_DENSITY = 0.004
INDEX_BYTES = 4

#: seconds per gradient element on a GPU (per element *and row* for sketches; ``merge_cpu`` per
#: merged sparse entry on the host).
#: Order-of-magnitude defaults, documented in docs/strategies-gossip-compression-pcnn.md;
#: a trace can carry measured ones in meta["compression_rates"].
RATES = {
    "topk": 1.0e-9,        # exact top-k selection (radix select), ~25 ms for 25 M elements
    "sketch": 2.0e-11,     # count-sketch insert, per element per row (hash + atomic add)
    "query": 2.0e-11,      # HEAVYMIX estimate, per element per row (+ median)
    "threshold": 5.0e-12,  # mean/std pass and compare (Gaussian-k, Ok-Topk threshold reuse)
    "accumulate": 1.0e-10,  # scatter-add of one received sparse entry
    # gTop-k's per-round merge runs on the host in numpy (hclhkbu/gtopkssgd allreducer.py,
    # gtopk_sparse_allreduce: intersect1d of the indices, then argsort of the 2k merged values);
    # seconds per merged entry, measured 0.10-0.29 us on one AMD EPYC core for k = 1 079 to 58 914
    "merge_cpu": 2.0e-7,
}


def rate(workload, kind: str, override: float | None = None) -> float:
    if override is not None:
        return override
    meta = getattr(workload.trace, "meta", None) or {}
    return float((meta.get("compression_rates") or {}).get(kind, RATES[kind]))


@dataclass(frozen=True)
class SparseParams:
    """Options every compression strategy shares."""

    density: float = DEFAULT_DENSITY
    elem_s: float | None = None  # seconds per element of the main compression kernel

    def __post_init__(self):
        if not (isinstance(self.density, (int, float)) and 0 < self.density <= 1):
            raise ConfigError(f"density: {self.density!r} must be in (0, 1]")
        if self.elem_s is not None and not (isinstance(self.elem_s, (int, float)) and self.elem_s >= 0):
            raise ConfigError(f"elem-s: {self.elem_s!r} must be a non-negative number of seconds")

    @property
    def assumed(self) -> tuple[str, ...]:
        out = []
        if self.density == DEFAULT_DENSITY:
            out.append(f"density {DEFAULT_DENSITY} (last density of seed 002's warm-up schedule)")
        if self.elem_s is None:
            out.append("compression compute from documented per-element GPU rates (or the trace's)")
        out.append(f"sparse entry = value + {INDEX_BYTES}-byte index")
        return tuple(out)


def n_elements(workload) -> int:
    return max(1, int(round(workload.model_bytes / workload.dtype_bytes)))


def top_k(workload, density: float) -> int:
    """k = ceil(density · d), at least 1."""
    return max(1, math.ceil(density * n_elements(workload)))


def entry_bytes(workload) -> int:
    return workload.dtype_bytes + INDEX_BYTES


def tree_rounds(p: int) -> list[list[tuple[int, int]]]:
    """Reduction rounds of gs-SGD's Alg. 1 as (sender, receiver) index pairs.

    Active ranks pair up in order (0,1), (2,3), ...; the second of each pair
    sends to the first; with an odd count the highest rank skips the round.
    ceil(log2 p) rounds end with everything at index 0.
    """
    active = list(range(p))
    rounds = []
    while len(active) > 1:
        rounds.append([(active[j + 1], active[j]) for j in range(0, len(active) - 1, 2)])
        active = active[0::2]
    return rounds


def emit_tree_reduce(b: PlanBuilder, ranks, ready: dict[int, int], nbytes: float, merge_s, label: str) -> int:
    """Reduce toward ranks[0]; ``merge_s(rank)`` seconds to merge one message.

    Returns the op id after which ranks[0] holds the result.
    """
    for i, rnd in enumerate(tree_rounds(len(ranks))):
        for s, d in rnd:
            src, dst = ranks[s], ranks[d]
            t = b.transfer(src, dst, nbytes, after=[ready[src]], label=f"{label} up {i}")
            ready[dst] = b.compute(dst, merge_s(dst), after=[t, ready[dst]], label=f"{label} merge",
                                   category="compression")
    return ready[ranks[0]]


def emit_tree_broadcast(b: PlanBuilder, ranks, root_ready: int, nbytes: float, label: str) -> dict[int, int]:
    """Send the root's result back down the same tree; returns rank -> op id of arrival."""
    have = {ranks[0]: root_ready}
    for i, rnd in enumerate(reversed(tree_rounds(len(ranks)))):
        for s, d in rnd:
            src, dst = ranks[d], ranks[s]
            have[dst] = b.transfer(src, dst, nbytes, after=[have[src]], label=f"{label} down {i}")
    return have


def emit_compute_phase(b: PlanBuilder, w, seconds_of, label: str) -> dict[int, int]:
    """Forward, backward (one gradient-ready point) and a compression op on every rank."""
    from simcomm.strategies.common import emit_forward_backward

    out = {}
    for r in range(w.n_ranks):
        emit_forward_backward(b, w, r, buckets=(tuple(w.ready_order),))
        out[r] = b.compute(r, seconds_of(r), label=label, category="compression")
    return out


def emit_updates(b: PlanBuilder, w, after_of) -> None:
    from simcomm.strategies.common import emit_update

    for r in range(w.n_ranks):
        emit_update(b, w, r, after=after_of(r))
