"""torch.distributed microbenchmarks run inside each rank (torch imported lazily).

What one run measures, every rank taking part in every collective:

* ping-pong between rank 0 and one rank on the same node (``intra``), one
  on another node under the same switch (``inter``) and, where
  ``$SIMCOMM_LEAF`` tells the switches apart, one under another leaf switch
  (``cross``: its goodput is the leaf-spine trunk's), where such ranks exist;
  one-way time = RTT/2;
* a *stream probe* on the same pair: rank 0 sends ``stream_count`` messages of
  ``stream_bytes`` back to back and the peer answers once; goodput =
  ``(K - 1)·S / (t_K - t_1)`` (the difference cancels latency, the answer and
  TCP's ramp-up), which is what the link sustains for bulk data;
* the ping-pong sweep and the stream probe run in *rounds*: after each round
  rank 0 fits the round's bandwidth, and the class is done once two or more
  rounds agree within ``stable`` (``(max - min) / median``) or after
  ``rounds`` rounds; the record keeps every round's bandwidth and whether it
  settled, and the per-size time is the median over rounds of each round's
  best repeat;
* the host probe: every rank at once adds and copies 16 MiB buffers, the rates a
  CPU collective reduces and copies at (``host``; :mod:`simcomm.runtimes.host`);
* ``allreduce`` (sum, float32), ``allgather`` (``nbytes`` = gathered total),
  ``broadcast`` from rank 0;
* parameter-server ``ps_push`` (every other rank sends ``nbytes`` to rank 0 at
  once: an incast) and ``ps_pull`` (rank 0 sends ``nbytes`` to every other).

Each case runs ``warmup`` times untimed, then ``repeats`` times, each after a
barrier; a repeat's time is the slowest rank's, and the case's time is the
median repeat (robust to one descheduled process on a busy machine).
A rank's node is ``$SIMCOMM_NODE`` if set (the emulator sets it), else the
host name.
"""

from __future__ import annotations

import os
import socket
import statistics
import time
from dataclasses import asdict, dataclass, field

from simcomm.calibrate.fit import CalibrationError

__all__ = ["BenchSpec", "init_group", "run_benchmarks", "node_name", "COLLECTIVE_CASES"]

COLLECTIVE_CASES = ("allreduce", "allgather", "broadcast", "ps_push", "ps_pull")


@dataclass(frozen=True)
class BenchSpec:
    """What to measure: sizes in bytes, repeats, and which collective cases."""

    p2p_sizes: tuple[int, ...] = (1024, 4096, 16384, 65536, 262144, 1048576, 4194304)
    coll_sizes: tuple[int, ...] = (1048576, 4194304)
    repeats: int = 5
    warmup: int = 1
    collectives: tuple[str, ...] = COLLECTIVE_CASES
    meta: dict = field(default_factory=dict)
    #: most rounds of the ping-pong sweep (+ stream probe) per class; at least 2 are run when > 1
    rounds: int = 4
    #: rounds agree when their fitted bandwidths' (max - min) / median is at most this
    stable: float = 0.03
    stream_bytes: int = 1048576
    stream_count: int = 4
    #: measure the host's reduction and copy rates (CPU collectives' cost, simcomm.runtimes.host)
    host_probe: bool = True

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict) -> BenchSpec:
        return cls(tuple(d["p2p_sizes"]), tuple(d["coll_sizes"]), int(d["repeats"]), int(d["warmup"]),
                   tuple(d["collectives"]), dict(d.get("meta", {})), int(d.get("rounds", 1)),
                   float(d.get("stable", 0.03)), int(d.get("stream_bytes", 1048576)),
                   int(d.get("stream_count", 4)), bool(d.get("host_probe", True)))


def node_name() -> str:
    return os.environ.get("SIMCOMM_NODE") or socket.gethostname()


def init_group(backend: str, master_addr: str, port: int, rank: int, world: int, timeout_s: float) -> None:
    """Join the process group; an unreachable master is one :class:`CalibrationError` line."""
    import datetime

    import torch.distributed as dist

    try:
        store = dist.TCPStore(master_addr, port, world, is_master=(rank == 0),
                              timeout=datetime.timedelta(seconds=timeout_s), wait_for_workers=True)
        dist.init_process_group(backend, store=store, rank=rank, world_size=world,
                                timeout=datetime.timedelta(seconds=max(timeout_s, 60.0)))
    except (RuntimeError, OSError, ValueError) as exc:  # DistStoreError/DistNetworkError are RuntimeErrors
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CalibrationError(
            f"rank {rank}: could not reach the other ranks at {master_addr}:{port} within {timeout_s:g} s "
            f"({first[:160]}); check MASTER_ADDR/MASTER_PORT and that every rank can connect") from None


def _timed(op, repeats: int, warmup: int) -> list[float]:
    import torch
    import torch.distributed as dist

    for _ in range(warmup):
        op()
    out = []
    for _ in range(repeats):
        dist.barrier()
        t0 = time.perf_counter()
        op()
        out.append(time.perf_counter() - t0)
    t = torch.tensor(out, dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)  # a repeat lasts until its slowest rank is done
    return [float(x) for x in t]


def _pingpong(peer: int, nbytes: int, spec: BenchSpec) -> list[float]:
    import torch
    import torch.distributed as dist

    rank = dist.get_rank()
    buf = torch.zeros(max(1, nbytes // 4), dtype=torch.float32)

    def op():
        if rank == 0:
            dist.send(buf, peer)
            dist.recv(buf, peer)
        elif rank == peer:
            dist.recv(buf, 0)
            dist.send(buf, 0)

    # small messages are cheap but jittery (idle CPUs wake slowly in VMs): more repeats
    small = nbytes <= 65536
    reps, warm = (max(spec.repeats, 15), max(spec.warmup, 3)) if small else (spec.repeats, spec.warmup)
    return [t / 2.0 for t in _timed(op, reps, warm)]


def _stream(peer: int, spec: BenchSpec) -> dict:
    """Bulk goodput rank 0 -> peer: ``(K - 1)·S / (t_K - t_1)``, best of ``repeats`` each."""
    import torch
    import torch.distributed as dist

    rank = dist.get_rank()
    size, count = int(spec.stream_bytes), max(2, int(spec.stream_count))
    buf = torch.zeros(max(1, size // 4), dtype=torch.float32)
    inbox = torch.zeros_like(buf)
    ack = torch.zeros(1, dtype=torch.float32)

    def burst(k: int):
        def op():
            if rank == 0:
                for q in [dist.isend(buf, peer) for _ in range(k)]:
                    q.wait()
                dist.recv(ack, peer)
            elif rank == peer:
                for _ in range(k):
                    dist.recv(inbox, 0)
                dist.send(ack, 0)
        return op

    reps = max(3, min(spec.repeats, 5))
    t1 = min(_timed(burst(1), reps, 1))
    tk = min(_timed(burst(count), reps, 0))
    nbytes = (count - 1) * buf.numel() * 4
    return {"bytes": buf.numel() * 4, "count": count, "t1": t1, "tk": tk,
            "goodput_Bps": nbytes / (tk - t1) if tk > t1 else None}


def _round_bandwidth(sizes: list, times: list) -> float | None:
    """The bandwidth one round's sweep fits to, or None where it does not fit (rank 0 only)."""
    from simcomm.calibrate.fit import fit_alpha_beta

    try:
        return fit_alpha_beta(sizes, times, name="round").bandwidth
    except CalibrationError:
        return None


def _p2p_class(peer: int, spec: BenchSpec) -> dict:
    """Rounds of the ping-pong sweep and stream probe until the fitted bandwidth settles."""
    import torch.distributed as dist

    from simcomm.calibrate.fit import spread

    rank = dist.get_rank()
    rounds, bws, streams = [], [], []
    most = max(1, int(spec.rounds))
    stable = False
    for k in range(most):
        best, medians, samples = [], [], []
        for n in spec.p2p_sizes:
            s = _pingpong(peer, int(n), spec)
            # the fit uses the best repeat (NetPIPE's convention): slower repeats add OS wake-up
            # delays (≈1.5 ms on an idle VM) that belong to the host, not to the link
            best.append(min(s))
            medians.append(statistics.median(s))
            samples.append(s)
        streams.append(_stream(peer, spec))
        rounds.append((best, medians, samples))
        bws.append(_round_bandwidth([int(n) for n in spec.p2p_sizes], best) if rank == 0 else None)
        ok = [b for b in bws if b is not None]
        stable = len(ok) >= 2 and spread(ok) <= spec.stable
        flag = [stable or k + 1 == most or most == 1]
        dist.broadcast_object_list(flag, src=0)  # every rank leaves the loop together
        if flag[0]:
            break
    sizes = [int(n) for n in spec.p2p_sizes]
    times = [statistics.median(r[0][i] for r in rounds) for i in range(len(sizes))]
    medians = [statistics.median(r[1][i] for r in rounds) for i in range(len(sizes))]
    goods = [s["goodput_Bps"] for s in streams if s["goodput_Bps"]]
    ok = [b for b in bws if b is not None]
    return {"ranks": [0, peer], "sizes": sizes, "times": times, "medians": medians,
            "samples": [[x for r in rounds for x in r[2][i]] for i in range(len(sizes))],
            "rounds": {"bandwidths_Bps": bws, "spread": spread(ok) if ok else None,
                       "stable": bool(stable), "limit": spec.stable, "max_rounds": most},
            "stream": {"goodput_Bps": statistics.median(goods) if goods else None, "probes": streams}}


def _collective(kind: str, nbytes: int, spec: BenchSpec) -> list[float]:
    import torch
    import torch.distributed as dist

    rank, world = dist.get_rank(), dist.get_world_size()
    elems = max(world, nbytes // 4) // world * world  # a whole float32 block per rank
    if kind == "allreduce":
        buf = torch.ones(elems, dtype=torch.float32)
        op = lambda: dist.all_reduce(buf)  # noqa: E731
    elif kind == "allgather":
        part = torch.ones(max(1, elems // world), dtype=torch.float32)
        outs = [torch.empty_like(part) for _ in range(world)]
        op = lambda: dist.all_gather(outs, part)  # noqa: E731
    elif kind == "broadcast":
        buf = torch.ones(elems, dtype=torch.float32)
        op = lambda: dist.broadcast(buf, 0)  # noqa: E731
    elif kind in ("ps_push", "ps_pull"):
        bufs = [torch.ones(elems, dtype=torch.float32) for _ in range(world)]
        push = kind == "ps_push"

        def op():
            if rank == 0:
                reqs = [(dist.irecv if push else dist.isend)(bufs[r], r) for r in range(1, world)]
                for q in reqs:
                    q.wait()
            else:
                (dist.send if push else dist.recv)(bufs[rank], 0)
    else:
        raise CalibrationError(f"collective case {kind!r} is not one of {', '.join(COLLECTIVE_CASES)}")
    return _timed(op, spec.repeats, spec.warmup)


def _host_probe(nbytes: int = 16 << 20, repeats: int = 5) -> dict:
    """What this host's CPU does for a CPU collective, every rank probing at once (simcomm.runtimes.host).

    ``reduce``: one thread's ``a += b`` over two float32 buffers of ``nbytes``
    (gloo's ``sum``: two reads and a write per element), bytes of ``a`` per second;
    ``copy``: ``a.copy_(b)`` (the memory copy a TCP send or receive makes).  Every
    rank runs it at the same time after a barrier, so ranks sharing a host's cores
    and memory are in the number; the best of ``repeats`` per rank, then the
    median over ranks (rank 0 keeps it).  Buffers of 16 MiB leave the caches.
    """
    import torch
    import torch.distributed as dist

    a = torch.ones(max(1, nbytes // 4), dtype=torch.float32)
    b = torch.ones_like(a)
    size = a.numel() * 4

    def best(op) -> float:
        op()  # warm the pages
        times = []
        for _ in range(repeats):
            dist.barrier()
            t0 = time.perf_counter()
            op()
            times.append(time.perf_counter() - t0)
        return size / max(min(times), 1e-9)

    rates = torch.tensor([best(lambda: a.add_(b)), best(lambda: a.copy_(b))], dtype=torch.float64)
    world = dist.get_world_size()
    every = [torch.zeros_like(rates) for _ in range(world)]
    dist.all_gather(every, rates)
    return {"bytes": size, "repeats": repeats, "ranks_at_once": world,
            "reduce_Bps": statistics.median(float(r[0]) for r in every),
            "copy_Bps": statistics.median(float(r[1]) for r in every),
            "per_rank": [[float(x) for x in r] for r in every]}


def _pairs(nodes: list[str], leaves: list | None = None) -> dict[str, int]:
    """Peers of rank 0 for the intra-node, inter-node and (if leaves are known) cross-leaf ping-pong."""
    out = {}
    leaves = leaves or [None] * len(nodes)
    same = [r for r in range(1, len(nodes)) if nodes[r] == nodes[0]]
    other = [r for r in range(1, len(nodes)) if nodes[r] != nodes[0] and leaves[r] == leaves[0]]
    cross = [r for r in range(1, len(nodes)) if leaves[r] != leaves[0]]
    if same:
        out["intra"] = same[0]
    if other:
        out["inter"] = other[0]
    if cross:
        out["cross"] = cross[0]
    return out


def run_benchmarks(spec: BenchSpec) -> dict | None:
    """Run every case in an initialised group; rank 0 returns the record, others ``None``."""
    import torch.distributed as dist

    rank, world = dist.get_rank(), dist.get_world_size()
    nodes: list = [None] * world
    dist.all_gather_object(nodes, node_name())
    leaves: list = [None] * world  # $SIMCOMM_LEAF: the switch a node hangs off, where known (emulator)
    dist.all_gather_object(leaves, os.environ.get("SIMCOMM_LEAF"))
    rec: dict = {"version": 1, "backend": dist.get_backend(), "world": world, "nodes": nodes,
                 "spec": spec.to_json(), "p2p": {}, "collectives": []}
    for cls, peer in _pairs(nodes, leaves).items():
        rec["p2p"][cls] = _p2p_class(peer, spec)
    if spec.host_probe:
        rec["host"] = _host_probe()
    if world >= 2:
        for kind in spec.collectives:
            for n in spec.coll_sizes:
                s = _collective(kind, int(n), spec)
                rec["collectives"].append({"kind": kind, "ranks": world, "nbytes": int(n),
                                           "time": statistics.median(s), "samples": s})
    dist.barrier()
    return rec if rank == 0 else None
