"""Shared pieces of the gossip strategies of seed 001 (SGP, D-PSGD, Crossover-SGD).

* peer graphs: SGP's directed exponential graph and the ring of D-PSGD;
* Crossover-SGD's random topology with fair peer selection (Alg. 2);
* model segments (consecutive layers) for segment-wise gossip;
* the options every gossip strategy shares (communication interval, seed) and
  the split of a period into "local" and "gossip" iterations.

Everything is deterministic: random tables come from a numpy Generator seeded
from (seed, iteration, segment), never from a global RNG.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from simcomm.errors import ConfigError
from simcomm.ops import CommPlan, PlanBuilder
from simcomm.strategies.base import NotApplicable
from simcomm.strategies.common import emit_forward_backward

__all__ = ["exp_graph_exponents", "exp_graph_peer", "ring_neighbours", "fair_peer_table", "model_segments",
           "split_segments", "check_interval", "check_int", "gossip_iterations", "push_sum_bytes",
           "DEFAULT_MAX_SEGMENTS"]

#: generic default segment count when layer names reveal no block structure
#: (seed 001 uses 18 for ResNet-50: stem + 16 bottleneck blocks + FC)
DEFAULT_MAX_SEGMENTS = 18


def check_int(field: str, value, low: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ConfigError(f"{field}: {value!r} must be an integer >= {low}")
    return value


def check_interval(value) -> int:
    return check_int("interval", value, 1)


# ---- peer graphs -----------------------------------------------------------

def exp_graph_exponents(n_ranks: int) -> tuple[int, ...]:
    """Exponents i of SGP's directed exponential graph: peers rank + 2^i, 2^i < R.

    SGP's graph manager (facebookresearch/stochastic_gradient_push,
    ``DynamicDirectedExponentialGraph``) uses i = 0..floor(log2(R-1)), one
    peer per iteration, cycling; so the period is floor(log2(R-1)) + 1.
    """
    if n_ranks < 2:
        return ()
    return tuple(range(int(math.floor(math.log2(n_ranks - 1))) + 1))


def exp_graph_peer(rank: int, iteration: int, n_ranks: int) -> int:
    """Out-peer of ``rank`` at ``iteration`` on the directed exponential graph."""
    exps = exp_graph_exponents(n_ranks)
    return (rank + 2 ** exps[iteration % len(exps)]) % n_ranks


def ring_neighbours(rank: int, n_ranks: int) -> tuple[int, ...]:
    """Distinct ring neighbours of ``rank`` (one when R = 2)."""
    return tuple(sorted({(rank - 1) % n_ranks, (rank + 1) % n_ranks} - {rank}))


def push_sum_bytes(dtype_bytes: int) -> int:
    """The push-sum weight travels as one extra element of the model tensor."""
    return dtype_bytes


def fair_peer_table(n_ranks: int, seed: int, iteration: int, segment: int) -> np.ndarray:
    """Destination of each rank for one segment: a derangement (seed 001, Alg. 2).

    Ranks pick in order 0..R-1 from a roulette over the ranks nobody has
    picked yet, excluding themselves; so no rank sends to itself and every
    rank receives exactly one copy.  Alg. 2 can dead-end when the last rank
    finds only itself left; we then swap its pick with a random earlier
    rank's, which keeps both properties.  The table is a pure function of
    (seed, iteration, segment): every rank computes the same one.
    """
    if n_ranks < 2:
        raise NotApplicable("fair peer selection needs at least 2 ranks")
    rng = np.random.default_rng([int(seed), int(iteration), int(segment)])
    u = rng.random(n_ranks + 1)
    pool = list(range(n_ranks))
    pos = list(range(n_ranks))  # pos[x] = index of x in pool, -1 once picked
    dest = np.empty(n_ranks, dtype=np.int64)
    for i in range(n_ranks):
        m = len(pool)
        if pos[i] >= 0:
            if m == 1:  # dead end: only ourselves left
                j = int(u[n_ranks] * i)
                dest[i], dest[j] = dest[j], i
                break
            k = int(u[i] * (m - 1))
            if k >= pos[i]:
                k += 1
        else:
            k = int(u[i] * m)
        pick = pool[k]
        last = pool[-1]
        pool[k] = last
        pos[last] = k
        pool.pop()
        pos[pick] = -1
        dest[i] = pick
    return dest


# ---- segments --------------------------------------------------------------

def _block_key(name: str) -> str | None:
    parts = name.split(".")
    return ".".join(parts[:2]) if len(parts) >= 3 else None


def split_segments(sizes: Sequence[float], n: int) -> list[tuple[int, ...]]:
    """Split indices 0..len-1 into ``n`` contiguous runs of about equal total size."""
    total = float(sum(sizes))
    out: list[tuple[int, ...]] = []
    cur: list[int] = []
    acc = 0.0
    for i, s in enumerate(sizes):
        cur.append(i)
        acc += s
        left_items = len(sizes) - i - 1
        left_segs = n - len(out) - 1
        if left_segs > 0 and (acc >= total * (len(out) + 1) / n or left_items == left_segs):
            out.append(tuple(cur))
            cur = []
    if cur:
        out.append(tuple(cur))
    return out


def model_segments(workload, segments: int) -> tuple[list[tuple[int, ...]], str]:
    """Segments (tuples of layer indices, forward order) and how they were chosen.

    ``segments = 0`` means the default: if layer names carry a block
    structure (``layer1.0.conv1``) one segment per block plus a stem (layers
    before the first block) and a head (layers after the last), which is
    seed 001's "blocks and FC layer" and gives 18 for torchvision's ResNet-50;
    otherwise min(18, layers with parameters) runs of about equal bytes.
    """
    layers = [i for i, layer in enumerate(workload.layers) if layer.grad_bytes > 0]
    if not layers:
        raise NotApplicable("the model has no parameters to gossip")
    if segments > len(layers):
        raise ConfigError(f"segments: {segments} exceeds the model's {len(layers)} layers with parameters")
    if segments == 0:
        keys = [_block_key(workload.layers[i].name) for i in layers]
        if any(k is not None for k in keys):
            out: list[list[int]] = []
            prev = object()
            seen_block = False
            for i, k in zip(layers, keys):
                # stem and head: runs of block-less layers form one segment each
                tag = k if k is not None else ("head" if seen_block else "stem")
                seen_block = seen_block or k is not None
                if tag != prev:
                    out.append([])
                    prev = tag
                out[-1].append(i)
            return [tuple(s) for s in out], "one segment per block plus stem and head (seed 001)"
        segments = min(DEFAULT_MAX_SEGMENTS, len(layers))
        how = f"{segments} segments of about equal bytes (no block names in the trace)"
    else:
        how = f"{segments} segments of about equal bytes"
    runs = split_segments([workload.layers[i].grad_bytes for i in layers], segments)
    return [tuple(layers[j] for j in run) for run in runs], how


# ---- periods ---------------------------------------------------------------

def gossip_iterations(w, topology, interval: int, gossip: Callable[[int], CommPlan]) -> list:
    """[(weight, plan)] for one communication interval: I-1 local steps, 1 gossip step.

    Local steps accumulate gradients only (seed 001 accumulates 42 steps to
    emulate a large batch); the gossip step also updates and exchanges.
    """
    out = []
    if interval > 1:
        b = PlanBuilder(w.n_ranks)
        for r in range(w.n_ranks):
            emit_forward_backward(b, w, r, buckets=(tuple(w.ready_order),))
        out.append((float(interval - 1), b.build(kind="local (accumulate)")))
    out.append((1.0, gossip(0)))
    return out
