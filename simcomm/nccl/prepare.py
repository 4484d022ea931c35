"""A Collective op on the ``nccl`` stack -> what the engine runs (:class:`~simcomm.collectives.runtime.Prepared`).

1. Lay the group out on the topology (:func:`~simcomm.nccl.layout.group_layout`).
2. Choose the algorithm and protocol: NCCL's tuning model over the algorithms
   that can run this collective here (:func:`~simcomm.nccl.tuning.select`),
   narrowed by ``nccl_algo``/``nccl_proto`` (NCCL_ALGO/NCCL_PROTO); an op that
   names an NCCL algorithm forces it.  Forcing one the fabric lacks (NVLS
   without an NVSwitch, CollNet without SHARP) is a one-line error.
3. Build its flows as one pipelined step whose transfers wait the model's
   latency and carry ``bytes / efficiency`` (:mod:`simcomm.nccl.tuning`).
4. Its closed form: ``latency + max over links (bytes on the link / rate)``,
   which the flow engine reproduces exactly when nothing else shares the links.

Ops naming an MPI textbook algorithm (``rabenseifner``, ``binomial`` ...) are
left to the catalogue (returns None): NCCL cannot run them, but a user may ask
what they would cost on this fabric.
"""

from __future__ import annotations

import numpy as np

from simcomm.collectives.base import Step
from simcomm.collectives.pairs import PairBlocks, PairsStep, block_loads
from simcomm.collectives.runtime import Prepared
from simcomm.errors import ConfigError
from simcomm.nccl.base import NCCL_ALGORITHMS
from simcomm.nccl.execution import (
    any_host_staging,
    execution_efficiency,
    host_bidir_share,
    host_bidirectional_stretch,
    launch_s,
    p2p_batches,
    p2p_message_latency_us,
    proxy_wait_us,
)
from simcomm.nccl.fabric import fabric_extra_us, fabric_latency_us
from simcomm.nccl.layout import group_layout
from simcomm.nccl.tuning import ALGOS as TUNED
from simcomm.nccl.tuning import protocols_enabled, select

__all__ = ["prepare_nccl", "choose", "TUNED"]
#: collectives NCCL runs as grouped point-to-point operations, not through the tuning model
P2P_KINDS = ("alltoall", "gather", "scatter", "p2p")


def choose(kind: str, layout, nbytes: float, forced: str | None, proto: str | None):
    """(algorithm name, ModelTime or None) NCCL would run for ``kind`` on ``layout``.

    ``forced`` and ``proto`` are NCCL_ALGO- and NCCL_PROTO-like: one name or a
    comma-separated list of the ones enabled.  An algorithm named alone that the
    fabric cannot run is an error naming what is missing.
    """
    if kind in P2P_KINDS:
        return "p2p", None
    if forced is not None:
        names = tuple(forced.split(","))
        algos = tuple(a for a in names if NCCL_ALGORITHMS.get(a).missing(kind, layout) is None)
        if not algos:
            why = NCCL_ALGORITHMS.get(names[0]).missing(kind, layout)
            raise ConfigError(f"nccl_algo: {forced} cannot run here: {why}")
    else:
        algos = tuple(a for a in TUNED if NCCL_ALGORITHMS.get(a).missing(kind, layout) is None)
    protos = None
    if proto is not None:
        protos = tuple(proto.split(","))
        ok = tuple(a for a in algos if set(protos) & set(protocols_enabled(a, layout) + (("simple",) if a in (
            "ring", "tree") else ())) or (a not in ("ring", "tree") and "simple" in protos))
        if not ok:
            raise ConfigError(f"nccl_proto: {proto} cannot run {kind} here with {', '.join(algos)}; LL and LL128 "
                              f"exist for ring and tree only (LL128 only with NVLink on Volta or later)")
        algos = ok
    best = select(kind, layout, nbytes, algos, protos)
    return best.algo, best


def prepare_nccl(op, topology, runtime) -> Prepared | None:
    """The NCCL schedule of ``op``, or None when the op names an MPI textbook algorithm."""
    import simcomm.nccl.algorithms  # noqa: F401  (registers the catalogue)

    asked = op.algorithm
    if asked != "auto" and asked not in NCCL_ALGORITHMS:
        return None
    p = len(op.ranks)
    if p < 2:
        return Prepared(None, 1, (), closed_form=0.0, label="NCCL (one rank: nothing to move)",
                        key=f"{op.kind}/nccl-none")
    layout = group_layout(topology, op.ranks)
    forced = asked if asked != "auto" else runtime.nccl_algo
    if forced is not None and op.kind in P2P_KINDS:
        forced = None  # NCCL_ALGO does not apply to point-to-point collectives
    # NCCL_ALGO names only algorithms this collective does not have (Tree for all-gather): NCCL's choice
    if forced is not None and asked == "auto" and not any(op.kind in NCCL_ALGORITHMS.get(a).collectives
                                                          for a in forced.split(",")):
        forced = None
    algo, mt = choose(op.kind, layout, op.nbytes, forced, runtime.nccl_proto)
    group = np.asarray(op.ranks, dtype=np.int64)
    blocks = getattr(NCCL_ALGORITHMS.get(algo), "blocks", None)
    blocks = blocks(op.kind, layout, op.nbytes) if blocks is not None and not any_host_staging(topology) else None
    if blocks is not None and sum(blocks.counts()) >= runtime.pair_blocks_from:
        # PXN's all-to-all: two blocks of pairs, each link counted, no pair built or routed (from the runtime's
        # pair_blocks_from transfers: below, routing the pairs costs less)
        done = _prepare_blocks(op, topology, runtime, layout, group, blocks, algo)
        if done is not None:
            return done
    src, dst, nb = NCCL_ALGORITHMS.get(algo).flows(op.kind, layout, op.nbytes, op.root)
    payload = nb
    if mt is not None:
        # NCCL's model may rate a protocol or pattern above what its own graph rates allow
        # (NVLS-Tree's doubled network share on 2 nodes): never let the flows beat the links.
        # Then what NCCL's execution loses at this size: channels it does not launch, slice handshakes.
        nb = nb / (min(1.0, mt.efficiency) * execution_efficiency(mt, op.kind, layout, op.nbytes))
        # NCCL's model prices one channel's network step; the proxy serves the call's channels in turn; and its
        # table's network steps are InfiniBand's: a slower fabric adds its own latency to each (simcomm.nccl.fabric)
        latency = (mt.latency_us + proxy_wait_us(mt, op.kind, layout, op.nbytes)
                   + fabric_latency_us(mt.algo, op.kind, layout)) * 1e-6
        label = f"NCCL {NCCL_ALGORITHMS.get(algo).nccl}/{_proto_name(mt.proto)}"
    else:
        latency = 0.0  # grouped p2p: the slowest message's protocol step (below), once the messages are known
        label = "NCCL P2P" + (" (PXN)" if layout.pxn else "")
    # a zero-byte collective does nothing, but zero-byte sends and receives still run and synchronise (NCCL's
    # ncclEnqueueCheck hands Send/Recv to the p2p path before its count-0 return; NVIDIA/nccl#345: "Zero-size
    # messages are supported"): the call still pays its launch and a protocol step
    keep = (nb > 0) | (mt is None)
    # staged through host memory (SHM without P2P, a network without GDR): a GPU writing and reading it at once
    # is slower than its port (execution.HOST_BIDIR_SHARE)
    if not keep.all():  # (an all-to-all keeps every message: its pattern's arrays are used as they are)
        src, dst, nb, payload = src[keep], dst[keep], nb[keep], payload[keep]
    nb = nb * host_bidirectional_stretch(topology, group, src, dst, nb, payload, host_bidir_share(op.kind))
    step = Step.make(src, dst, nb)
    if not len(step):  # a zero-byte NCCL collective returns at once (ncclAllReduce with count 0)
        return Prepared(None, 1, (), closed_form=0.0, label=label, key=f"{op.kind}/nccl-{algo}")
    if mt is None:
        # grouped p2p: one kernel whose channels each run their batches in turn, a batch's peers at once
        # (docs/nccl.md): the call lasts as long as its slowest message, priced as NCCL's model prices one
        # step of the protocol NCCL runs it with, once per batch a channel runs
        # (a message's price grows with its size, LL to Simple, and a network step costs the most: price the
        # largest message of each kind once, not each of an all-to-all's p^2 messages)
        across = layout.node_of[src] != layout.node_of[dst]
        sizes = payload
        # (each kind priced only when some message is of it: an all-to-all over ranks on different nodes, an
        # expert-parallel group strided across nodes, has no in-node message at all)
        latency = _p2p_latency(op, layout, across.any(), float(sizes[~across].max()) if (~across).any() else None)
    # the kernel launches NCCL's model leaves out (the same for every algorithm)
    latency += launch_s(runtime.gpus_per_thread)
    closed = _closed_form(step, topology, group, latency)
    return Prepared(None, 1, (step,), (latency,), closed, label, key=f"{op.kind}/nccl-{algo}")


def _p2p_latency(op, layout, across: bool, in_node: float | None) -> float:
    """Grouped p2p: the slowest message's protocol step, once per batch a channel runs (see prepare_nccl)."""
    slowest = max(([p2p_message_latency_us(layout, True, 0.0)[1] + fabric_extra_us(layout)] if across else [])
                  + ([p2p_message_latency_us(layout, False, in_node)[1]] if in_node is not None else []))
    return 1e-6 * slowest * (p2p_batches(layout) if op.kind == "alltoall" else 1)


def _prepare_blocks(op, topology, runtime, layout, group: np.ndarray, blocks: PairBlocks, algo: str) -> Prepared | None:
    """:func:`prepare_nccl` of a PXN all-to-all kept as its blocks (in-node relays, rail messages): the same
    step, latency and closed form as the flows would give, bit for bit, with each link's bytes from
    :meth:`~simcomm.topologies.base.Topology.pair_counts`; None when a link carries both sizes."""
    loads = block_loads(blocks, [topology.pair_counts(group[rows]) for rows in blocks.rows])
    if loads is None:
        return None
    # (relays stay in their node, rail messages cross nodes; no host staging here, so no stretch)
    latency = _p2p_latency(op, layout, True, float(blocks.sizes[0])) + launch_s(runtime.gpus_per_thread)
    closed = latency + _busiest(loads, topology.capacity)
    label = "NCCL P2P" + (" (PXN)" if layout.pxn else "")
    return Prepared(None, 1, (PairsStep(blocks),), (latency,), closed, label, key=f"{op.kind}/nccl-{algo}")


def _proto_name(proto: str) -> str:
    return {"ll": "LL", "ll128": "LL128", "simple": "Simple"}[proto]


def _closed_form(step: Step, topology, group: np.ndarray, latency: float) -> float:
    """``latency`` + the busiest link's bytes over its rate."""
    route_len, links = topology.routes(group[step.src], group[step.dst])
    weights = np.repeat(step.nbytes.astype(float), route_len)
    if len(links) * 4 < len(topology.capacity):  # a small group on a large fabric: only the links it crosses
        ids, slot = np.unique(links, return_inverse=True)
        load, capacity = np.bincount(slot, weights=weights, minlength=len(ids)), topology.capacity[ids]
    else:  # (each link's bytes added in the same order either way: the same floats)
        load, capacity = np.bincount(links, weights=weights, minlength=len(topology.capacity)), topology.capacity
    return latency + _busiest(load, capacity)


def _busiest(load: np.ndarray, capacity: np.ndarray) -> float:
    """The busiest link's bytes over its rate (0 when nothing moves)."""
    used = load > 0
    return float((load[used] / capacity[used]).max()) if used.any() else 0.0
