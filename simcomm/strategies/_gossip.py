"""Shared pieces of the gossip strategies of seed 001 (SGP, D-PSGD, Crossover-SGD).

* peer graphs: SGP's directed exponential graph (reference code), the
  graphs seed 001's own code uses for SGP (1 peer at 2^i on AWS, 2 peers at
  j·3^i on NEURON) and the ring of D-PSGD;
* Crossover-SGD's random topology with fair peer selection (Alg. 2 and the
  code's ``select_layer``);
* model segments (consecutive layers) for segment-wise gossip, and the one
  emitter that runs a gossip step segment by segment in the three ways seed
  001's code and paper do (``blocking``, ``serial``, ``overlap``);
* the options every gossip strategy shares (communication interval, seed) and
  the split of a period into "local" and "gossip" iterations.

Everything is deterministic: random tables come from a numpy Generator seeded
from (seed, iteration, segment), never from a global RNG.  Author-code
citations (``imagenet_test.py:N``, ``aws:N`` = ``220606_aws/imagenet_test.py``)
follow /work/shared/reference/seed-code-facts.md §A.2.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from simcomm.errors import ConfigError
from simcomm.ops import CommPlan, PlanBuilder
from simcomm.strategies._fold import fold_plan
from simcomm.strategies.base import NotApplicable
from simcomm.strategies.common import emit_forward_backward

__all__ = ["exp_graph_exponents", "exp_graph_peer", "ring_neighbours", "floor_log", "aws_exp_offsets",
           "base3_offsets", "select_sources", "fair_peer_table", "model_segments", "segment_bytes",
           "split_segments", "check_interval", "check_int", "gossip_iterations", "push_sum_bytes",
           "emit_segment_gossip", "DEFAULT_MAX_SEGMENTS"]

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


def floor_log(n: int, base: int) -> int:
    """floor(log_base(n)) for n >= 1, in exact integer arithmetic.

    The seed code computes ``int(math.log(n, base))``, which rounds down one
    too far for some exact powers (``math.log(243, 3)`` is 4.999...); the
    exact value is what the code means.
    """
    k = 0
    while base ** (k + 1) <= n:
        k += 1
    return k


def aws_exp_offsets(n_ranks: int) -> tuple[int, ...]:
    """Out-peer offsets of SGP in seed 001's AWS timing code: 2^i for i = 0..floor(log2 R)-1.

    aws:311-318 builds ``send_to = rank + 2^(i mod log2 R)`` for
    ``i in range(int(log2 R))`` and uses entry ``t mod len`` at iteration t;
    the in-peer is rank - 2^i.  For a power of two this is the directed
    exponential graph of SGP's graph manager; otherwise it has one exponent
    fewer when floor(log2(R-1)) = floor(log2 R).
    """
    if n_ranks < 2:
        return ()
    return tuple(2 ** i for i in range(floor_log(n_ranks, 2)))


def base3_offsets(n_ranks: int, iteration: int, peers: int = 2) -> tuple[int, ...]:
    """Out-peer offsets of SGP in seed 001's NEURON training code: j·3^i for j = 1..peers.

    imagenet_test.py:742-760: ``i = iter mod (floor(log3(R-1)) + 1)`` and
    peer j at distance j·(peers+1)^i (peers = 2, base 3).
    """
    if n_ranks < 2:
        return ()
    base = peers + 1
    i = iteration % (floor_log(n_ranks - 1, base) + 1)
    return tuple(j * base ** i for j in range(1, peers + 1))


def push_sum_bytes(dtype_bytes: int) -> int:
    """The push-sum weight travels as one extra element of the model tensor."""
    return dtype_bytes


def select_sources(n_ranks: int, seed: int, iteration: int, segment: int) -> np.ndarray:
    """Seed 001's ``select_layer``: ``sel[i]`` is the rank that rank i receives from.

    The code (imagenet_test.py:728-740; aws:651-663) walks sources i = 0..G-1
    over a roulette whose diagonal is 0 and whose columns already chosen are
    zeroed and renormalised, i.e. a uniform pick among the ranks nobody has
    chosen yet, never i itself; at i = G-2, if G-1 is still unchosen it is
    forced (otherwise G-1 could be left with only itself).  The result is a
    derangement.  The code draws from one numpy RandomState(6) that every rank
    advances in step; we draw from a generator seeded with (seed, iteration,
    segment) instead, so a table is a pure function of those three (same
    procedure and distribution, a different random stream).
    """
    if n_ranks < 2:
        raise NotApplicable("fair peer selection needs at least 2 ranks")
    rng = np.random.default_rng([int(seed), int(iteration), int(segment)])
    u = rng.random(n_ranks)
    # at step i the pool holds n_ranks - i ranks: both picks a step may make, for every step at once (a float
    # times an integer, truncated: the floats and ints of int(u[i] * len(pool)) one step at a time)
    size = np.arange(n_ranks, 0, -1, dtype=np.int64)
    without_self = (u * (size - 1)).astype(np.int64).tolist()  # uniform over the pool without i itself
    any_left = (u * size).astype(np.int64).tolist()  # uniform over the pool
    pool = list(range(n_ranks))  # ranks nobody has chosen yet
    pos = list(range(n_ranks))  # pos[x] = index of x in pool, -1 once chosen
    sel = [0] * n_ranks
    for i in range(n_ranks):
        if i == n_ranks - 2 and pos[n_ranks - 1] >= 0:
            k = pos[n_ranks - 1]  # the forced choice of select_layer
        elif pos[i] >= 0:  # uniform over the pool without i itself
            k = without_self[i]
            if k >= pos[i]:
                k += 1
        else:
            k = any_left[i]
        pick = pool[k]
        last = pool[-1]
        pool[k] = last
        pos[last] = k
        pool.pop()
        pos[pick] = -1
        sel[i] = pick
    return np.array(sel, dtype=np.int64)


def fair_peer_table(n_ranks: int, seed: int, iteration: int, segment: int) -> np.ndarray:
    """Destination of each rank for one segment (seed 001, Alg. 2): ``dest[r]`` = where r sends.

    Rank r receives from ``sel[r]`` and sends to ``sel.index(r)``
    (imagenet_test.py:309-314, 872-874), so the destination table is the
    inverse of :func:`select_sources`: a derangement in which every rank
    sends one copy and receives one.
    """
    sel = select_sources(n_ranks, seed, iteration, segment)
    dest = np.empty(n_ranks, dtype=np.int64)
    dest[sel] = np.arange(n_ranks)
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
            for i, k in zip(layers, keys, strict=False):
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


def segment_bytes(workload, segments: int) -> tuple[list[float], str]:
    """Bytes of each segment (wire dtype) and how the segments were chosen."""
    segs, how = model_segments(workload, segments)
    return [float(sum(workload.layers[i].grad_bytes for i in s)) for s in segs], how


# ---- segment-wise exchange -----------------------------------------------------

#: a barrier is a one-element all-reduce: torch.distributed's NCCL barrier all-reduces a 1-element
#: tensor; an MPI barrier carries nothing, which 4 bytes does not measurably change
BARRIER_BYTES = 4.0

#: how the segments of one gossip step run (see emit_segment_gossip)
SEGMENT_MODES = ("serial", "blocking", "overlap")


def emit_segment_gossip(b: PlanBuilder, members: Sequence[int], ready: dict, seg_bytes: Sequence[float],
                        rounds: Callable[[int], Sequence[dict]], *, mode: str, gamma,
                        pair_allreduce: bool = False, average: str = "segment",
                        barrier_ranks: Sequence[int] | None = None, after_segment=None,
                        avg_stream: str = "compute", tag: str = "") -> dict[int, list[int]]:
    """Emit one gossip step, segment by segment; returns rank -> op ids that end it.

    ``rounds(s)`` lists the exchange rounds of segment s, each a dict
    {rank: destinations}; a rank receives from whoever names it.
    ``ready[r]`` is the op after which rank r may start (None: at once).

    * ``blocking`` (seed 001's AWS timing code): a rank runs its rounds one
      after another, each a send in a thread and a blocking receive
      (aws:665-707, 796-831): the next round starts once its own sends and
      receives are done; nobody waits for anybody else.
    * ``serial`` (seed 001's training code): the same plus a barrier over
      ``barrier_ranks`` (default ``members``) after every round
      (imagenet_test.py:762-797, 840-857).
    * ``overlap`` (seed 001 Alg. 1): every segment is posted at once on its
      own stream and waited for together; averaging after the last.

    ``pair_allreduce`` (the AWS code): when a rank's only destination sends
    only to it (a 2-cycle), the pair runs one 2-rank all-reduce of the segment
    instead of two messages (same bytes).  ``average`` is ``segment`` (a
    γ-priced pass over the received bytes after each segment) or ``end`` (one
    pass after the last).  ``after_segment(s, gate)`` may add ops after each
    segment (the hierarchical variant's broadcast) and returns the new gate.
    """
    members = tuple(members)
    gammas = {r: gamma(r) for r in members}
    gate = {r: ([ready[r]] if ready.get(r) is not None else []) for r in members}
    posted = {r: [] for r in members}  # overlap mode: every op the final averaging waits for
    total = dict.fromkeys(members, 0.0)
    transfer = b.transfer
    for s, nbytes in enumerate(seg_bytes):
        recv = dict.fromkeys(members, 0.0)
        prefix = f"{tag}segment {s} "
        for k, rnd in enumerate(rounds(s)):
            # each rank's ops of this round (blocking and overlap read them; serial's barrier waits for ``made``)
            done: dict[int, list[int]] = {r: [] for r in members} if mode != "serial" else {}
            made: list[int] = []  # the ops of this round, in id order (each once)
            paired: set[int] = set()
            base = f"seg{s}" + (f".{k}" if k else "") if mode == "overlap" else "comm"
            for r in members:
                dests = tuple(rnd.get(r, ()))
                for j, d in enumerate(dests):
                    if d == r:
                        continue  # a message to oneself is a local copy
                    stream = base + (f"-{j}" if j else "")
                    if pair_allreduce and len(dests) == 1 and tuple(rnd.get(d, ())) == (r,):
                        if r in paired:
                            continue
                        paired.update((r, d))
                        op = b.collective("allreduce", (min(r, d), max(r, d)), nbytes, after=gate[r] + gate[d],
                                          label=f"{prefix}{min(r, d)}<->{max(r, d)}", stream=stream)
                        recv[r] += nbytes
                    else:
                        op = transfer(r, d, nbytes, after=gate[r], label=f"{prefix}{r}->{d}", stream=stream)
                    if done:
                        done[r].append(op)
                        done[d].append(op)
                    made.append(op)
                    recv[d] += nbytes
            if mode == "overlap":
                for r in members:
                    posted[r] += done[r]
            elif mode == "serial":
                ids = made  # (sorted and distinct: every op of the round, as made)
                bar = b.collective("allreduce", tuple(barrier_ranks or members), BARRIER_BYTES, after=ids,
                                   label=f"{tag}barrier {s}.{k}")
                gate = {r: [bar] for r in members}
            else:
                gate = {r: done[r] or gate[r] for r in members}
        for r in members:
            total[r] += recv[r]
        if mode != "overlap":
            if average == "segment":
                label = f"{tag}average segment {s}"
                gate = {r: [b.compute(r, gammas[r] * recv[r], after=gate[r], label=label, stream=avg_stream,
                                      category="update")] for r in members}
            if after_segment is not None:
                gate = after_segment(s, gate)
    if mode == "overlap" or average == "end":
        gate = {r: [b.compute(r, gammas[r] * total[r], after=gate[r] + posted[r], label=f"{tag}average segments",
                              stream=avg_stream, category="update")] for r in members}
        if mode == "overlap" and after_segment is not None:
            for s in range(len(seg_bytes)):
                gate = after_segment(s, gate)
    return gate


# ---- periods ---------------------------------------------------------------

def gossip_iterations(w, topology, interval: int, gossip: Callable[[int], CommPlan]) -> list:
    """[(weight, plan)] for one communication interval: I-1 local steps, 1 gossip step.

    Local steps accumulate gradients only (seed 001 accumulates 42 steps to
    emulate a large batch); the gossip step also updates and exchanges.
    """
    out = []
    if interval > 1:
        def local(b: PlanBuilder) -> CommPlan:
            for r in range(w.n_ranks):
                emit_forward_backward(b, w, r, buckets=(tuple(w.ready_order),))
            return b.build(kind="local (accumulate)")

        out.append((float(interval - 1), fold_plan(w, w.n_ranks, local)))
    out.append((1.0, gossip(0)))
    return out
