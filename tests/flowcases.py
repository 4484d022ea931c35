"""Shared builders of engine test cases: random flow sets for the max-min and fluid
tests, random mixed plans, and staggered gossip plans for the engine-against-reference tests.

Not a test module (no ``test_`` prefix); pytest puts ``tests/`` on the path
(``pythonpath`` in pyproject.toml), so test modules import it by name.
"""

import numpy as np
from hypothesis import strategies as st

from simcomm.ops import PlanBuilder

__all__ = ["coo", "fifo_server_plan", "flat", "flow_instances", "gossip_plan", "mixed_plans"]


def coo(routes):
    """Routes (lists of link ids) as the coordinate incidence list ``(flow, link)``."""
    flow = np.concatenate([np.full(len(r), i) for i, r in enumerate(routes)]).astype(np.int64)
    link = np.concatenate([np.asarray(r, dtype=np.int64) for r in routes])
    return flow, link


def flat(routes):
    """Routes as ``(concatenated links, route lengths)``, the fluid core's input."""
    lens = np.array([len(r) for r in routes], dtype=np.int64)
    return np.concatenate([np.asarray(r, dtype=np.int64) for r in routes]), lens


@st.composite
def flow_instances(draw, max_links: int, caps, max_route: int, max_flows: int):
    """``(capacities, routes)``: up to ``max_flows`` flows, each over 1..``max_route``
    distinct links of ``1..max_links`` links whose capacities are drawn from ``caps``."""
    n_links = draw(st.integers(1, max_links))
    capacity = draw(st.lists(caps, min_size=n_links, max_size=n_links))
    routes = draw(st.lists(st.lists(st.integers(0, n_links - 1), min_size=1, max_size=max_route, unique=True),
                           min_size=1, max_size=max_flows))
    return np.array(capacity), routes


@st.composite
def mixed_plans(draw, n_ranks: int, *, sizes=(1e3, 4e3, 1e4), transfer_streams=("pp",),
                kinds=("allreduce", "broadcast", "alltoall"), max_members: int = 5):
    """Up to 40 ops over ``n_ranks`` ranks, each after up to two earlier ones: computes (zero-length
    included), messages on one of ``transfer_streams``, collectives of a fixed "tensor-parallel" group
    on its own stream (so some streams hold collectives alone), and collectives of ``kinds`` over 2 to
    ``max_members`` drawn ranks on the "dp" or "tp" stream; sizes from ``sizes`` or 0..50 kB."""
    b = PlanBuilder(n_ranks)
    ids: list[int] = []
    group = tuple(range(draw(st.integers(2, 6))))
    for _ in range(draw(st.integers(1, 40))):
        after = draw(st.lists(st.sampled_from(ids), max_size=2, unique=True)) if ids else []
        what = draw(st.integers(0, 4))
        size = draw(st.sampled_from(list(sizes)) | st.floats(0.0, 5e4))
        if what == 0:
            secs = draw(st.sampled_from([0.0, 1e-6, 5e-6]) | st.floats(0.0, 2e-5))
            ids.append(b.compute(draw(st.integers(0, n_ranks - 1)), secs, after=after))
        elif what == 1:
            src = draw(st.integers(0, n_ranks - 1))
            dst = draw(st.integers(0, n_ranks - 1).filter(lambda d, src=src: d != src))
            ids.append(b.transfer(src, dst, size, after=after, stream=draw(st.sampled_from(list(transfer_streams)))))
        elif what == 2:
            kind = draw(st.sampled_from(["allreduce", "allgather", "reduce_scatter"]))
            ids.append(b.collective(kind, group, size, after=after, stream="tp"))
        else:
            ranks = draw(st.lists(st.integers(0, n_ranks - 1), min_size=2, max_size=max_members, unique=True))
            kind = draw(st.sampled_from(list(kinds)))
            ids.append(b.collective(kind, ranks, size, after=after, stream=draw(st.sampled_from(["dp", "tp"]))))
    return b.build()


def gossip_plan(n: int, seed: int, *, stagger: float, per_rank: int, sizes, ring_bytes: float | None = None):
    """Each rank computes for up to ``stagger`` s, then sends ``per_rank`` transfers in a chain,
    each to a random other rank with a size drawn from ``sizes`` (crossover-like traffic);
    optionally a ring all-reduce of ``ring_bytes`` over every rank at the end."""
    rng = np.random.default_rng(seed)
    b = PlanBuilder(n)
    for r in range(n):
        prev = b.compute(r, float(rng.uniform(0, stagger)))
        for _ in range(per_rank):
            peer = int((r + rng.integers(1, n)) % n)
            prev = b.transfer(r, peer, float(rng.choice(sizes)), after=[prev])
    if ring_bytes is not None:
        b.collective("allreduce", range(n), ring_bytes, algorithm="ring")
    return b.build()


def fifo_server_plan(n_ranks: int, tensors: int, *, compute: float, nbytes: float, update: float):
    """A parameter server with FIFO queues on rank 0: each worker computes ``compute`` x (t + 1) seconds
    and pushes ``nbytes`` x (t + 1) bytes for tensor t, one message at a time into rank 0; rank 0
    updates each tensor (``update`` seconds) and pulls it back to every worker, one at a time."""
    b = PlanBuilder(n_ranks)
    last_in = None
    ups = []
    for t in range(tensors):
        for r in range(1, n_ranks):
            c = b.compute(r, compute * (t + 1))
            last_in = b.transfer(r, 0, nbytes * (t + 1), after=[c] + ([last_in] if last_in is not None else []),
                                 stream="push")
        ups.append(b.compute(0, update, after=[last_in], stream="server"))
    for t, u in enumerate(ups):
        for r in range(1, n_ranks):
            b.transfer(0, r, nbytes * (t + 1), after=[u], stream="pull")
    return b.build()

