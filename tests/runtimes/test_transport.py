"""Transports: a symmetric pair exchange under gloo, MPI over TCP and NCCL over sockets, hand-computed.

Every expected number below is worked out by hand from the formulas of
simcomm/runtimes/transport.py's docstring (B = 1 GB/s, α = 1 µs unless said).
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simcomm import engine
from simcomm.engine import EngineOptions
from simcomm.errors import ConfigError
from simcomm.links.base import LinkClass
from simcomm.ops import PlanBuilder
from simcomm.runtimes import get_runtime
from simcomm.runtimes.mpi import MPICH
from simcomm.runtimes.transport import (
    MPICH_CH3_TCP,
    OPEN_MPI_TCP,
    NcclSocketTransport,
    gloo_exchange,
    mpi_tcp_exchange,
    nccl_socket_defaults,
    serialise_send_first,
)
from simcomm.topologies.full_mesh import full_mesh

B, A = 1e9, 1e-6
LINK = LinkClass("test-1g", B, A, "ethernet", "1 GB/s test link", "tests")
MB = 1_000_000


# ---- gloo -----------------------------------------------------------------------------------------------

def test_gloo_symmetric_send_first_is_two_messages_in_turn():
    # 1 MB each way: the first message (1 us + 1 ms), its notice behind it, then the second (1 us + 1 ms)
    assert gloo_exchange(MB, MB, B, A) == pytest.approx(2e-6 + 2e-3, rel=1e-15)
    # posted receive-first both notices leave first: the two directions at once
    assert gloo_exchange(MB, MB, B, A, "recv-first") == pytest.approx(1e-6 + 1e-3, rel=1e-15)
    # one way: the same either posting
    assert gloo_exchange(MB, 0, B, A) == gloo_exchange(MB, 0, B, A, "recv-first") == pytest.approx(1.001e-3)
    # unequal: 1 MB and 0.5 MB in turn
    assert gloo_exchange(MB, MB / 2, B, A) == pytest.approx(2e-6 + 1.5e-3, rel=1e-15)


def _offset_plan(offset: int, n: int = 4, nbytes: float = MB):
    """SGP's exchange on ``n`` ranks: every rank sends ``nbytes`` to r + offset (send-first, one stream each)."""
    b = PlanBuilder(n)
    for r in range(n):
        b.transfer(r, (r + offset) % n, nbytes, label=f"gossip {r}", stream="comm0")
    return b.build()


@pytest.mark.parametrize("fidelity", ["flow", "analytic"])
def test_gloo_offset_two_exchange_costs_twice_offset_one_through_the_engine(fidelity):
    """4 ranks, one link per pair: offset 1 is four one-way messages at once (α + n/B); offset 2 pairs
    0<->2 and 1<->3, which gloo runs in turn: 2(α + n/B)."""
    gloo = get_runtime("gloo")
    topo = full_mesh(4, LINK)
    opts = EngineOptions(runtime=gloo)
    one = engine.simulate(gloo.exchanges(_offset_plan(1)), topo, fidelity=fidelity, options=opts, runtime=MPICH)
    two = engine.simulate(gloo.exchanges(_offset_plan(2)), topo, fidelity=fidelity, options=opts, runtime=MPICH)
    assert one.makespan == pytest.approx(A + MB / B, rel=1e-9)
    assert two.makespan == pytest.approx(2 * (A + MB / B), rel=1e-9)
    # MPI and NCCL carry the two directions at once: offset 2 costs what offset 1 does
    for name in ("openmpi", "nccl", "mpich"):
        rt = get_runtime(name)
        same = engine.simulate(rt.exchanges(_offset_plan(2)), topo, fidelity="flow",
                               options=EngineOptions(runtime=rt))
        assert same.makespan == pytest.approx(A + MB / B, rel=1e-9)


def test_serialise_send_first_pairs_messages_in_posting_order():
    b = PlanBuilder(3)
    a = b.transfer(0, 1, 10.0, stream="s0")
    c = b.transfer(0, 2, 10.0, stream="s1")   # no message back from 2: left alone
    d = b.transfer(1, 0, 10.0, stream="s2")   # matches a
    e = b.transfer(1, 0, 10.0, stream="s3")   # nothing left to match: left alone
    plan = b.build()
    out = serialise_send_first(plan)
    assert out.ops[d].deps == plan.ops[d].deps + (a,)
    assert [out.ops[i].deps for i in (a, c, e)] == [plan.ops[i].deps for i in (a, c, e)]
    assert any("one after the other (1 pair(s)" in line for line in out.info.assumed)
    # a plan with no opposite pair is returned unchanged (same object)
    assert serialise_send_first(_offset_plan(1)) is not None
    lone = _offset_plan(1)
    assert serialise_send_first(lone) is lone


def test_serialise_send_first_keeps_an_existing_dependency():
    b = PlanBuilder(2)
    a = b.transfer(0, 1, 10.0, stream="s0")
    c = b.transfer(1, 0, 10.0, after=[a], stream="s1")  # already waits for a: nothing to add
    plan = b.build()
    assert serialise_send_first(plan) is plan
    assert plan.ops[c].deps == (a,)


def test_gloo_bad_posting_is_one_error():
    with pytest.raises(ConfigError, match="^posting 'both' is not valid; valid choices: send-first, recv-first$"):
        gloo_exchange(1.0, 1.0, B, A, "both")
    with pytest.raises(ConfigError, match="bandwidth"):
        gloo_exchange(1.0, 1.0, 0.0, A)


# ---- MPI over TCP ---------------------------------------------------------------------------------------

def test_mpi_tcp_eager_and_rendezvous():
    # 64 KiB = 65 536 B is eager on Open MPI's btl_tcp: 1 us + 65.536 us, both ways at once
    assert mpi_tcp_exchange(65536, 65536, B, A) == pytest.approx(1e-6 + 65.536e-6, rel=1e-12)
    # one byte more is rendezvous: first fragment, ACK back, the rest: 3 us + 65.537 us
    assert mpi_tcp_exchange(65537, 65537, B, A) == pytest.approx(3e-6 + 65.537e-6, rel=1e-12)
    # MPICH ch3's eager limit is 128 KiB: 100 KB is still eager there
    assert mpi_tcp_exchange(100_000, 100_000, B, A, MPICH_CH3_TCP) == pytest.approx(1e-6 + 100e-6, rel=1e-12)
    assert mpi_tcp_exchange(100_000, 100_000, B, A, OPEN_MPI_TCP) == pytest.approx(3e-6 + 100e-6, rel=1e-12)
    # symmetric costs what one-way does: 1 MB, rendezvous, 3 us + 1 ms
    assert mpi_tcp_exchange(MB, MB, B, A) == mpi_tcp_exchange(MB, 0, B, A) == pytest.approx(3e-6 + 1e-3)


# ---- NCCL over sockets ----------------------------------------------------------------------------------

def test_nccl_socket_defaults_by_vendor():
    aws, gcp, other = (nccl_socket_defaults(v) for v in ("0x1d0f", "0x1ae0", "0x8086"))
    assert (aws.threads, aws.sockets) == (2, 16)
    assert (gcp.threads, gcp.sockets) == (4, 4)
    assert (other.threads, other.sockets) == (0, 0)
    # NCCL_NSOCKS_PERTHREAD=64 with 2 threads is capped at MAX_SOCKETS = 64: 32 per thread
    assert nccl_socket_defaults("0x1d0f", socks_per_thread=64).sockets == 64
    with pytest.raises(ConfigError, match="exceeds NCCL's maximum 16"):
        nccl_socket_defaults("0x1d0f", threads=17)


def test_nccl_socket_chunking():
    aws = nccl_socket_defaults("0x1d0f")
    # 512 KiB over 16 sockets would be 32 KiB tasks; MIN_CHUNKSIZE makes them 64 KiB: 8 tasks
    assert aws.tasks(512 * 1024) == 8
    assert aws.tasks(4 * 1024 * 1024) == 16  # 256 KiB per socket
    assert aws.tasks(1000) == 1
    assert nccl_socket_defaults("0x8086").tasks(512 * 1024) == 1  # the control socket alone


def test_nccl_socket_message_and_exchange_hand_computed():
    # one stream gets 0.1 GB/s, 20 us per request, 512 KiB slots (524 288 B)
    t = NcclSocketTransport(threads=2, socks_per_thread=8, socket_rate=0.1e9, per_message=20e-6)
    # a 512 KiB message: 8 tasks -> min(1 GB/s, 0.8 GB/s) = 0.8 GB/s: 1 us + 20 us + 655.36 us
    assert t.message_time(524288, B, A) == pytest.approx(1e-6 + 20e-6 + 524288 / 0.8e9, rel=1e-12)
    # 1 MiB = two full slots, pipelined: wire 2 × 655.36 us > 2 × 20 us of requests, plus 1 us
    assert t.exchange(2 * 524288, B, A) == pytest.approx(1e-6 + 2 * 655.36e-6, rel=1e-12)
    # without data sockets: one stream at 0.1 GB/s carries everything
    lone = NcclSocketTransport(threads=0, socks_per_thread=1, socket_rate=0.1e9, per_message=20e-6)
    assert lone.exchange(524288, B, A) == pytest.approx(1e-6 + 5242.88e-6, rel=1e-12)
    # tiny messages: the requests dominate the wire (1 us): 10 messages of 100 B -> 10 × 20 us
    tiny = NcclSocketTransport(threads=2, socks_per_thread=8, per_message=20e-6, slot=100)
    assert tiny.exchange(1000, B, A) == pytest.approx(1e-6 + 10 * 20e-6, rel=1e-12)


@given(st.floats(1, 1e9), st.floats(1e6, 1e11), st.floats(0, 1e-3))
def test_exchange_bounds(nbytes, bandwidth, latency):
    """Invariants: send-first gloo costs at least receive-first and at most twice it (plus α);
    MPI's symmetric exchange never costs more than gloo's serialised one."""
    fast = gloo_exchange(nbytes, nbytes, bandwidth, latency, "recv-first")
    slow = gloo_exchange(nbytes, nbytes, bandwidth, latency)
    assert fast <= slow <= 2 * fast + 1e-15
    assert mpi_tcp_exchange(nbytes, nbytes, bandwidth, latency) <= slow + 2 * latency + 1e-15


# ---- gloo's all-gather: send-first half blocks; on 2 ranks one pair ------------------------------------

@pytest.mark.parametrize("fidelity", ["flow", "analytic"])
def test_gloo_allgather_on_two_ranks_runs_the_pair_in_turn(fidelity):
    """2 ranks gather 2 MB (1 MB each): halves of 0.5 MB, rank 1's two then rank 0's, overlapping by one:
    three steps of α + 0.5 ms = 1.503 ms, where the ring's one step of α + 1 ms is 1.001 ms."""
    b = PlanBuilder(2)
    b.collective("allgather", [0, 1], 2 * MB, algorithm="auto")
    gloo = get_runtime("gloo")
    tl = engine.simulate(b.build(), full_mesh(2, LINK), fidelity=fidelity, options=EngineOptions(runtime=gloo))
    assert tl.makespan == pytest.approx(3 * (A + 0.5 * MB / B), rel=1e-9)
    ring = engine.simulate(b.build(), full_mesh(2, LINK), fidelity=fidelity,
                           options=EngineOptions(runtime=get_runtime("mpich")))
    assert ring.makespan == pytest.approx(A + MB / B, rel=1e-9)


def test_gloo_allgather_beyond_two_ranks_is_the_ring():
    from simcomm.collectives.base import ALGORITHMS

    gloo, ring = ALGORITHMS.get("allgather/gloo"), ALGORITHMS.get("allgather/ring")
    for p in (3, 4, 8):
        assert gloo.cost(p, 8 * MB, A, 1 / B).total == ring.cost(p, 8 * MB, A, 1 / B).total
    # p = 2: 3α + 3n/4·β = 3 us + 1.5 ms for n = 2 MB
    assert gloo.cost(2, 2 * MB, A, 1 / B).total == pytest.approx(3e-6 + 1.5e-3, rel=1e-12)


# ---- MPI over TCP through the engine: the rendezvous as the runtime prepares it -----------------------

def _pair_plan(nbytes: float, symmetric: bool):
    b = PlanBuilder(2)
    b.transfer(0, 1, nbytes, label="to 1", stream="s0")
    if symmetric:
        b.transfer(1, 0, nbytes, label="to 0", stream="s1")
    return b.build()


@pytest.mark.parametrize("symmetric", [False, True])
def test_mpi_tcp_pair_exchange_through_the_engine(symmetric):
    """2 ranks on 2 machines, B = 1 GB/s, α = 1 µs: 1 MB is rendezvous (RTS, ACK, data): 3 µs + 1 ms, one way
    or both ways at once; 64 KiB is eager: 1 µs + 65.536 µs; the same without the TCP protocol: 1 µs + 1 ms."""
    rt = get_runtime("openmpi").with_tcp("ob1-tcp")
    topo = full_mesh(2, LINK)
    opts = EngineOptions(runtime=rt)
    big = engine.simulate(rt.exchanges(_pair_plan(MB, symmetric), topo), topo, fidelity="flow", options=opts)
    assert big.makespan == pytest.approx(3e-6 + 1e-3, rel=1e-9)
    assert big.makespan == pytest.approx(mpi_tcp_exchange(MB, MB if symmetric else 0, B, A), rel=1e-9)
    eager = engine.simulate(rt.exchanges(_pair_plan(65536, symmetric), topo), topo, fidelity="flow", options=opts)
    assert eager.makespan == pytest.approx(1e-6 + 65.536e-6, rel=1e-9)
    plain = get_runtime("openmpi")
    same = engine.simulate(plain.exchanges(_pair_plan(MB, symmetric), topo), topo, fidelity="flow",
                           options=EngineOptions(runtime=plain))
    assert same.makespan == pytest.approx(1e-6 + 1e-3, rel=1e-9)


def test_rendezvous_plan_renumbers_and_keeps_the_period():
    from dataclasses import replace as dc_replace

    from simcomm.runtimes.transport import rendezvous_plan

    b = PlanBuilder(2)
    a = b.compute(0, 1e-3)
    t = b.transfer(0, 1, MB, after=[a])
    c = b.compute(1, 1e-3, after=[t])
    plan = b.build()
    plan = dc_replace(plan, info=dc_replace(plan.info, period=(a, c)))
    out = rendezvous_plan(plan, OPEN_MPI_TCP, lambda x, y: True)
    out.validate()
    assert len(out.ops) == 5 and out.info.period == (0, 4)
    rts, ack, data = out.ops[1:4]
    assert (rts.src, rts.dst, rts.nbytes, rts.deps) == (0, 1, 0.0, (0,))
    assert (ack.src, ack.dst, ack.nbytes, ack.deps) == (1, 0, 0.0, (1,))
    assert (data.nbytes, data.deps) == (MB, (2,)) and out.ops[4].deps == (3,)
    assert any("rendezvous" in line for line in out.info.assumed)
    # nothing crosses machines, or nothing is above the eager limit: the same plan
    assert rendezvous_plan(plan, OPEN_MPI_TCP, lambda x, y: False) is plan
    small = PlanBuilder(2)
    small.transfer(0, 1, 65536)
    p = small.build()
    assert rendezvous_plan(p, OPEN_MPI_TCP, lambda x, y: True) is p


@pytest.mark.parametrize("fidelity", ["flow", "analytic"])
def test_mpi_tcp_ring_allreduce_pays_a_handshake_per_step(fidelity):
    """4 ranks on 4 machines, ring all-reduce of 4 MB: 6 steps of 1 MB, each rendezvous: 6 (3α + 1 ms);
    the same ring without the TCP protocol: 6 (α + 1 ms)."""
    topo = full_mesh(4, LINK)
    b = PlanBuilder(4)
    b.collective("allreduce", range(4), 4 * MB, algorithm="ring")
    tcp = get_runtime("openmpi").with_tcp("ob1-tcp")
    got = engine.simulate(b.build(), topo, fidelity=fidelity, options=EngineOptions(runtime=tcp))
    assert got.makespan == pytest.approx(6 * (3e-6 + 1e-3), rel=1e-9)
    plain = engine.simulate(b.build(), topo, fidelity=fidelity, options=EngineOptions(runtime=get_runtime("openmpi")))
    assert plain.makespan == pytest.approx(6 * (1e-6 + 1e-3), rel=1e-9)
    with pytest.raises(ConfigError, match="^tcp protocol 'udp' is not valid; valid choices: ob1-tcp, ch3-tcp$"):
        get_runtime("openmpi").with_tcp("udp")


@pytest.mark.parametrize("symmetric", [False, True])
def test_nccl_socket_pair_exchange_through_the_engine(symmetric):
    """NCCL over sockets carries the two directions of a pair at once (a connection per direction, its own
    sockets): 1 MB one way or each way is α + n/B = 1.001 ms, which is the socket closed form's answer with
    AWS's 2 x 8 sockets, 40 us per request and no per-stream cap (two 512 KiB requests pipelined: their
    80 us of requests hide behind 1 ms of wire)."""
    nccl = get_runtime("nccl")
    topo = full_mesh(2, LINK)
    got = engine.simulate(nccl.exchanges(_pair_plan(MB, symmetric), topo), topo, fidelity="flow",
                          options=EngineOptions(runtime=nccl))
    aws = nccl_socket_defaults("0x1d0f", per_message=40e-6)
    assert got.makespan == pytest.approx(1e-6 + 1e-3, rel=1e-9)
    assert aws.exchange(MB, B, A) == pytest.approx(got.makespan, rel=1e-9)
