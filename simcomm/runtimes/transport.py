"""How a stack's transport carries a point-to-point exchange: gloo's pairs, MPI over TCP, NCCL over sockets.

The flow engine gives each direction of a link its own bandwidth, so two
ranks that send to each other at once finish together, as on a full-duplex
wire.  Whether they really do is the transport's business; each model below is
read from the library's code, in closed form (seconds, for one message of
``nbytes`` each way over a path of ``bandwidth`` bytes/s and one-way latency
``latency``), and for gloo also as a plan pass that the engine runs.

gloo (``gloo/transport/tcp/pair.cc``, torch's ProcessGroupGloo)
    One TCP connection per pair of ranks, shared by both directions and every
    message.  ``Pair::send`` of an unbound buffer sends at once only if the
    peer's "recv ready" notice is already there (``shiftRemotePendingRecv``);
    otherwise it waits in ``localPendingSend_``.  ``Pair::recv`` queues a
    ``NOTIFY_RECV_READY`` op on the same connection.  ``Pair::send`` first
    grows ``SO_SNDBUF`` to the message (up to 32 MiB, ``kMaxSendBufferSize``) so
    the whole message is written into the socket at once, and ops leave in
    order (``tx_``).  So when both ranks post ``isend`` before ``irecv`` and one
    posts after the other's notice arrived (ranks reach an exchange at
    different times; any skew above one latency does it), that rank's message
    goes first and its own notice travels behind it: the peer may start only
    when the first message is through.  Send-first: ``2α + (n₁ + n₂)/B``;
    receive-first (both notices leave before any data): ``α + max(n₁, n₂)/B``.

MPI over TCP (Open MPI ``ob1`` + ``btl_tcp``; MPICH ``ch3:nemesis:tcp``)
    Eager up to ``btl_tcp_eager_limit`` (64 KiB, ``btl_tcp_component.c``) or
    ``MPIR_CVAR_CH3_EAGER_MAX_MSG_SIZE`` (128 KiB): the data goes at once,
    both directions together, ``α + n/B``.  Above it, rendezvous: the first
    fragment of eager-limit bytes carries the match header (RNDV), the receiver
    answers with an ACK once its receive is posted, and the rest follows in
    ``btl_tcp_max_send_size`` fragments.  The ACK is a small control message
    that waits behind at most the fragment in flight on the reverse
    direction, which in a symmetric exchange is the peer's own first fragment
    (already sent at time 0, so no wait): ``3α + n/B`` either way, one-way or
    symmetric, as progress is driven by the library for both directions.

NCCL over sockets (``src/transport/net_socket.cc``)
    Every network message (one step of NCCL's pipeline, for Simple one slot of
    ``NCCL_BUFFSIZE / NCCL_STEPS`` = 4 MiB / 8 = 512 KiB) is a request: its size
    goes first on the control socket (``ncclSocketTest``: ``used == 1``), then
    the data in tasks of ``max(64 KiB, ⌈size / nSocks⌉)`` (``MIN_CHUNKSIZE``),
    round-robin over ``nSocks = NCCL_NSOCKS_PERTHREAD × NCCL_SOCKET_NTHREADS``
    sockets served by that many helper threads (``persistentSocketThread``).
    Defaults from ``ncclSocketGetNsockNthread``: AWS ENA (vendor 0x1d0f) 2
    threads × 8 sockets, GCP gVNIC (0x1ae0) 4 × 1, anything else 0 threads:
    the proxy thread itself moves the data on the control socket.  A message of
    ``s`` bytes therefore costs ``α + c_msg + s / min(B, k · b_sock)`` with
    ``k`` the tasks it splits into, ``b_sock`` what one TCP stream gets (a
    cloud caps a single flow: 5 Gb/s on AWS outside a placement group) and
    ``c_msg`` the proxy's per-request cost (size exchange and a thread hand-off
    through a mutex and condition variable).  An exchange of ``n`` bytes is
    ``⌈n / s⌉`` messages, pipelined up to NCCL_STEPS deep, so the per-message
    cost is paid once per message only where it exceeds the message's wire time.
"""

from __future__ import annotations

import math
from collections import defaultdict, deque
from dataclasses import dataclass, replace

from simcomm.collectives.base import Algorithm, CostTerms, Step
from simcomm.errors import ConfigError
from simcomm.ops import CommPlan, Transfer

__all__ = ["gloo_exchange", "mpi_tcp_exchange", "MpiTcpProtocol", "OPEN_MPI_TCP", "MPICH_CH3_TCP",
           "MPI_TCP_PROTOCOLS", "NcclSocketTransport", "nccl_socket_defaults", "serialise_send_first", "POSTINGS",
           "rendezvous_plan", "rendezvous_steps", "WithHandshakes"]

#: how a caller posts the two halves of an exchange on one pair
POSTINGS = ("send-first", "recv-first")


def _check(nbytes: float, bandwidth: float, latency: float) -> None:
    if not (math.isfinite(nbytes) and nbytes >= 0):
        raise ConfigError(f"exchange bytes {nbytes!r} must be a finite number >= 0")
    if not (math.isfinite(bandwidth) and bandwidth > 0):
        raise ConfigError(f"exchange bandwidth {bandwidth!r} must be a positive bandwidth")
    if not (math.isfinite(latency) and latency >= 0):
        raise ConfigError(f"exchange latency {latency!r} must be >= 0 seconds")


def gloo_exchange(sent: float, received: float, bandwidth: float, latency: float,
                  posting: str = "send-first") -> float:
    """Seconds until both messages of a gloo pair exchange have arrived (see the module docstring).

    ``sent``/``received``: bytes each way (0 for a one-way message).  A one-way
    message is ``α + n/B`` whatever the posting.
    """
    for n in (sent, received):
        _check(n, bandwidth, latency)
    if posting not in POSTINGS:
        raise ConfigError(f"posting {posting!r} is not valid; valid choices: {', '.join(POSTINGS)}")
    if not sent or not received:
        return latency + max(sent, received) / bandwidth
    if posting == "recv-first":
        return latency + max(sent, received) / bandwidth
    # the first message, then the notice behind it, then the second message
    return 2 * latency + (sent + received) / bandwidth


@dataclass(frozen=True)
class MpiTcpProtocol:
    """An MPI library's TCP point-to-point protocol: eager limit and rendezvous."""

    name: str
    eager_limit: int
    reference: str


#: Open MPI 4.1 ob1 + btl_tcp: btl_tcp_eager_limit 64 KiB (opal/mca/btl/tcp/btl_tcp_component.c)
OPEN_MPI_TCP = MpiTcpProtocol("Open MPI btl_tcp", 64 * 1024, "opal/mca/btl/tcp/btl_tcp_component.c "
                              "(btl_tcp_eager_limit = 64 KiB); ompi/mca/pml/ob1/pml_ob1_sendreq.c (RNDV + ACK)")
#: MPICH ch3:nemesis:tcp: MPIR_CVAR_CH3_EAGER_MAX_MSG_SIZE 128 KiB (src/mpid/ch3/src/mpid_vc.c)
MPICH_CH3_TCP = MpiTcpProtocol("MPICH ch3:nemesis:tcp", 128 * 1024, "src/mpid/ch3 (MPIR_CVAR_CH3_EAGER_MAX_MSG_SIZE"
                               " = 131072); rendezvous RTS/CTS in ch3u_rndv.c")


def mpi_tcp_exchange(sent: float, received: float, bandwidth: float, latency: float,
                     protocol: MpiTcpProtocol = OPEN_MPI_TCP) -> float:
    """Seconds until both messages of an MPI exchange over TCP have arrived (module docstring).

    Eager (both at most the limit): ``α + max/B``; rendezvous: ``3α + max/B``
    (first fragment, ACK back, the rest), the two directions at once.
    """
    for n in (sent, received):
        _check(n, bandwidth, latency)
    biggest = max(sent, received)
    hops = 1 if biggest <= protocol.eager_limit else 3
    return hops * latency + biggest / bandwidth


@dataclass(frozen=True)
class NcclSocketTransport:
    """NCCL's socket transport: sockets, threads, the slot size and the per-request cost.

    ``socket_rate``: what one TCP stream gets (bytes/s; None: no per-stream cap);
    ``per_message``: the proxy's cost of one request (seconds); ``slot``: bytes
    per network message (Simple: NCCL_BUFFSIZE / NCCL_STEPS).
    """

    threads: int
    socks_per_thread: int
    socket_rate: float | None = None
    per_message: float = 0.0
    slot: int = 4 * 1024 * 1024 // 8

    def __post_init__(self) -> None:
        if self.threads < 0 or self.socks_per_thread < 1:
            raise ConfigError(f"nccl socket: threads {self.threads} must be >= 0 and sockets per thread "
                              f"{self.socks_per_thread} >= 1")
        if self.threads > 16:  # MAX_THREADS; the code clamps and warns, we refuse
            raise ConfigError(f"NCCL_SOCKET_NTHREADS {self.threads} exceeds NCCL's maximum 16")

    @property
    def sockets(self) -> int:
        """nSocks: data sockets (0: the proxy thread uses the control socket); capped at MAX_SOCKETS = 64."""
        if self.threads == 0:
            return 0
        return min(self.socks_per_thread, 64 // self.threads) * self.threads

    def tasks(self, size: float) -> int:
        """How many tasks (sockets) a message of ``size`` bytes splits into."""
        if self.sockets == 0 or size <= 0:
            return 1
        task = max(64 * 1024, math.ceil(size / self.sockets))
        return math.ceil(size / task)

    def message_time(self, size: float, bandwidth: float, latency: float) -> float:
        """One network message: ``α + c_msg + s / min(B, k·b_sock)``."""
        _check(size, bandwidth, latency)
        return latency + self.per_message + size / self._rate(size, bandwidth)

    def _rate(self, size: float, bandwidth: float) -> float:
        """What a message of ``size`` gets: the path, or its tasks' streams if they get less."""
        return bandwidth if self.socket_rate is None else min(bandwidth, self.tasks(size) * self.socket_rate)

    def exchange(self, nbytes: float, bandwidth: float, latency: float) -> float:
        """Seconds for ``nbytes`` one way (or each way at once: the sockets are full duplex).

        ``⌈n / slot⌉`` messages, up to ``steps`` in flight, so one message's
        request cost overlaps the others' data: ``α + max(Σ sᵢ/rateᵢ, count · c_msg)``.
        """
        _check(nbytes, bandwidth, latency)
        if nbytes == 0:
            return latency + self.per_message
        count = math.ceil(nbytes / self.slot)
        last = nbytes - (count - 1) * self.slot
        wire = (count - 1) * self.slot / self._rate(self.slot, bandwidth) + last / self._rate(last, bandwidth)
        return latency + max(wire, count * self.per_message)


def nccl_socket_defaults(vendor: str, socket_rate: float | None = None, per_message: float = 0.0,
                         threads: int | None = None, socks_per_thread: int | None = None) -> NcclSocketTransport:
    """ncclSocketGetNsockNthread's auto-detection by NIC vendor id, overridden by the two variables."""
    auto = {"0x1d0f": (2, 8), "0x1ae0": (4, 1)}.get(vendor.lower(), (0, 1))
    return NcclSocketTransport(auto[0] if threads is None else threads,
                               auto[1] if socks_per_thread is None else socks_per_thread,
                               socket_rate, per_message)


def serialise_send_first(plan: CommPlan) -> CommPlan:
    """gloo's send-first serialisation as a plan: the later of two opposite messages of a pair waits for the first.

    The k-th message a -> b is matched with the k-th b -> a (gloo matches a
    pair's messages in posting order); of the two, the one later in the plan
    gets a dependency on the earlier one, so it starts when that one has
    arrived, as the notice it waits for travels behind it.  Which of two equal
    messages goes first does not change the time.  A plan with no such pair
    is returned as it is.
    """
    waiting: dict[tuple[int, int], deque[int]] = defaultdict(deque)  # unmatched messages, by direction
    extra: dict[int, int] = {}
    for op in plan.ops:
        if not isinstance(op, Transfer):
            continue
        other = waiting[(op.dst, op.src)]
        if not other:
            waiting[(op.src, op.dst)].append(op.id)
            continue
        first = other.popleft()
        if first not in op.deps:
            extra[op.id] = first
    if not extra:
        return plan
    ops = tuple(replace(op, deps=op.deps + (extra[op.id],)) if op.id in extra else op for op in plan.ops)
    line = (f"gloo sends the two messages of a pair exchange one after the other ({len(extra)} pair(s) per plan): "
            "posted send-first on the pair's one TCP connection, the second waits for the first "
            "(gloo/transport/tcp/pair.cc)")
    return CommPlan(plan.n_ranks, ops, meta=plan.meta, info=plan.info.with_assumed(line))


#: MPI TCP protocols by the name a stack gives (:attr:`simcomm.stacks.Stack.tcp_protocol`)
MPI_TCP_PROTOCOLS = {"ob1-tcp": OPEN_MPI_TCP, "ch3-tcp": MPICH_CH3_TCP}


def rendezvous_plan(plan: CommPlan, protocol: MpiTcpProtocol, crosses) -> CommPlan:
    """MPI over TCP's rendezvous as a plan: a message above the eager limit is RTS, ACK, then the data.

    Every transfer of more than ``protocol.eager_limit`` bytes between two
    machines (``crosses(src, dst)``; same-machine messages go through shared
    memory, Open MPI's ``vader``) gets two zero-byte messages before it: the
    request (RTS, the first fragment's match header) on the sender's stream,
    then the receiver's ACK on a stream of its own (the progress engine answers
    at once, whatever the receiver's other sends), and the data waits for the
    ACK: ``3α + n/B`` one way, and a symmetric exchange the same (both run at
    once).  The first fragment's eager bytes travel with the data here (the
    same bytes, the same wire).  Op ids are renumbered; the plan's period and
    per-rank periods follow.  A plan with no such message is returned as it is.
    """
    big = [op.id for op in plan.ops if isinstance(op, Transfer) and op.nbytes > protocol.eager_limit
           and crosses(op.src, op.dst)]
    if not big:
        return plan
    first = set(big)
    new_id: dict[int, int] = {}
    ops: list = []
    for op in plan.ops:
        deps = tuple(new_id[d] for d in op.deps)
        if op.id in first and isinstance(op, Transfer):
            rts = Transfer(len(ops), op.src, op.dst, 0.0, deps, f"{op.label} RTS".strip(), op.stream, op.category)
            ack = Transfer(len(ops) + 1, op.dst, op.src, 0.0, (rts.id,), f"{op.label} ACK".strip(),
                           f"rndv-ack{op.id}", op.category)
            ops += [rts, ack]
            deps = (ack.id,)
        new_id[op.id] = len(ops)
        ops.append(replace(op, id=len(ops), deps=deps))
    info = plan.info
    period = None if info.period is None else (new_id[info.period[0]], new_id[info.period[1]])
    ranks = None if info.period_ranks is None else {r: (new_id[a], new_id[b]) for r, (a, b) in
                                                    info.period_ranks.items()}
    line = (f"{protocol.name}: {len(big)} message(s) above the {protocol.eager_limit // 1024} KiB eager limit "
            f"per plan go by rendezvous (request, ACK, then the data: 3 latencies; {protocol.reference})")
    return CommPlan(plan.n_ranks, tuple(ops), meta=plan.meta,
                    info=replace(info, period=period, period_ranks=ranks).with_assumed(line))


def rendezvous_steps(steps, ranks, topology, protocol: MpiTcpProtocol) -> tuple[tuple, int]:
    """A collective's steps with MPI over TCP's handshakes, and how many rounds pay one.

    Before every step whose messages between machines exceed the eager limit,
    two zero-byte steps: the requests (RTS) of those messages, then the ACKs
    back, each repeated as often as the step (a repeated step is that many
    rounds, each with its own handshake; the rounds run one after another, so
    the handshakes may run first).  Returns the steps and the handshake rounds.
    """
    import numpy as np

    machine = np.array([-1 if (m := topology.machine_of(int(r))) is None else m for r in ranks], dtype=np.int64)
    out: list = []
    rounds = 0
    for s in steps:
        sel = (s.nbytes > protocol.eager_limit) & (machine[s.src] != machine[s.dst])
        if sel.any():
            out.append(Step.make(s.src[sel], s.dst[sel], 0.0, repeat=s.repeat))
            out.append(Step.make(s.dst[sel], s.src[sel], 0.0, repeat=s.repeat))
            rounds += s.repeat
        out.append(s)
    return tuple(out), rounds


class WithHandshakes(Algorithm):
    """A catalogue algorithm whose closed form pays MPI over TCP's rendezvous: two more latencies per round.

    ``rounds``: the handshake rounds :func:`rendezvous_steps` found for this op, each
    costing two one-way latencies (the request and the ACK) at the network's α.
    """

    def __init__(self, inner: Algorithm, rounds: int) -> None:
        self.inner, self.rounds = inner, int(rounds)
        self.collective = inner.collective  # type: ignore[misc]
        self.name = inner.name  # type: ignore[misc]
        self.hierarchical = inner.hierarchical  # type: ignore[misc]
        self.rooted = inner.rooted  # type: ignore[misc]

    @property
    def key(self) -> str:
        return f"{self.inner.key}+rendezvous{self.rounds}"

    def supports(self, p: int, ppn: int = 1) -> bool:
        return self.inner.supports(p, ppn)

    def steps(self, p: int, nbytes: float, root: int = 0, *, ppn: int = 1) -> list[Step]:
        return self.inner.steps(p, nbytes, root, ppn=ppn)

    def cost(self, p: int, nbytes: float, alpha: float, beta: float, gamma: float = 0.0, *,
             ppn: int = 1, alpha_inter: float | None = None, beta_inter: float | None = None) -> CostTerms:
        t = self.inner.cost(p, nbytes, alpha, beta, gamma, ppn=ppn, alpha_inter=alpha_inter, beta_inter=beta_inter)
        hop = alpha if alpha_inter is None else alpha_inter
        return CostTerms(t.latency + 2 * self.rounds * hop, t.bandwidth, t.reduction)
