"""One rank of a real data-parallel training run: ``python benchmarks/accuracy/e2e_worker.py ...``.

Started by ``launch_e2e`` (e2e.py beside this file) inside an emulated
cluster.  Every rank builds the same zoo model (seeded), trains on one fixed
random batch (no data loading: the trace has none either) with plain SGD and
the loss of trace capture (mean of squared outputs), and times each
iteration with ``time.perf_counter`` (CLOCK_MONOTONIC, one clock for every
namespace on the machine, so ends of different ranks compare directly).

Strategies, each written with torch.distributed primitives only:

* ``allreduce``: forward, backward, then ONE all-reduce of the flattened
  gradients (plain after-backward, no DDP overlap; the model is one 25 MB
  bucket), average, step;
* ``node-based``: every iteration an all-reduce of the gradients inside the
  host's group only; at iterations K', 2K', ... of an epoch and at its last
  iteration, after that, an all-reduce of the *parameters* over all ranks
  (averaged), then the step (seed 000 Alg. 2);
* ``ps``: e2e_ps.py (the last rank is the server; a push per tensor as
  backward produces it, a pull per tensor the next forward waits for, as
  simcomm's ``ps`` runs TensorFlow's and BytePS's schedule; until 2026-11-28
  one flat push after backward and a blocking pull);
* ``sgp``: at the start of iteration t rank r posts a receive from r - 2^e
  and a send of its parameters plus the push-sum weight to r + 2^e (e
  cycling over 0..floor(log2(R-1))), in that order (see ``_sgp``), runs
  forward and backward, waits for both,
  steps, then mixes: x <- (x + x_recv)/2;
* ``dpsgd``, ``crossover-sgd``, ``hierarchical-crossover-sgd``: e2e_gossip.py;
* ``gtopk``, ``gs-sgd``: e2e_sparse.py (their kernels' per-element rates are
  measured before training, beside the compute probe);
* ``ps-layer-drop``: e2e_psdrop.py (the last rank is the server, as ``ps``);
* ``pcnn``: e2e_pcnn.py (seed 003's authors' code: a communication thread per
  rank running all-to-alls and all-gathers FIFO behind the compute).

Before training, a compute probe runs forward+backward+step without any
communication on every worker at the same time (after a barrier): the
compute time under the same co-location as training, which is what the
prediction needs as compute (see docs/accuracy.md).  It runs again after a
*stream probe*: the same compute while every worker sends 1 MiB to the next
worker and receives 1 MiB from the previous one; the slowdown per byte moved
is the host CPU cost of communication (``cpu_per_byte``).
"""

from __future__ import annotations

import argparse
import math
import time

from e2e_gossip import GOSSIP, Gossip
from e2e_pcnn import PCNN, Pcnn
from e2e_ps import PS, ParameterServer
from e2e_psdrop import PSDROP, LayerDrop
from e2e_sparse import SPARSE, Sparse

from simcomm.calibrate.bench import init_group
from simcomm.calibrate.worker import exit_now, run_and_save

STRATEGIES = ("allreduce", "node-based", "ps", "sgp", *GOSSIP, *SPARSE, *PSDROP, *PCNN)
#: strategies whose last rank is a parameter server on a host of its own
SERVED = ("ps", *PSDROP)
#: Bytes each worker sends (and receives) per stream-probe iteration: small enough to
#: finish inside one compute at the emulated rates, so all of it overlaps compute.
STREAM_BYTES = 1 << 20


def is_exchange(i: int, k_prime: int, epoch: int) -> bool:
    """Iteration i (1-based) of node-based exchanges parameters across nodes (seed 000 Alg. 2)."""
    j = (i - 1) % epoch + 1
    return j % k_prime == 0 or j == epoch


def _flat(torch, tensors):
    return torch.cat([t.reshape(-1) for t in tensors])


def _unflat_into(flat, tensors) -> None:
    off = 0
    for t in tensors:
        n = t.numel()
        t.copy_(flat[off:off + n].view_as(t))
        off += n


class Rank:
    """State and one training step of one rank."""

    def __init__(self, a, torch, dist):
        from simcomm.traces.zoo import MODELS, build_model

        self.a, self.torch, self.dist = a, torch, dist
        torch.manual_seed(0)
        self.model = build_model(a.model).train()
        shape = MODELS.get(a.model).input_shape
        self.x = torch.randn((a.batch, *shape), generator=torch.Generator().manual_seed(1 + a.rank))
        self.params = [p for p in self.model.parameters()]
        self.opt = torch.optim.SGD(self.params, lr=1e-3)
        self.world = a.world
        self.workers = a.world - 1 if a.strategy in SERVED else a.world
        self.server = a.world - 1 if a.strategy in SERVED else None
        # host groups for node-based: every rank must create every group, in the same order
        self.host_group = None
        if a.strategy == "node-based":
            for h in range(a.world // a.per_host):
                g = dist.new_group(list(range(h * a.per_host, (h + 1) * a.per_host)))
                if a.rank // a.per_host == h:
                    self.host_group = g
        self.weight = 1.0  # push-sum weight (SGP)
        self.helper = (Gossip(self, a, torch, dist) if a.strategy in GOSSIP
                       else Sparse(self, a, torch, dist) if a.strategy in SPARSE
                       else LayerDrop(self, a, torch, dist) if a.strategy in PSDROP
                       else ParameterServer(self, a, torch, dist) if a.strategy in PS
                       else Pcnn(self, a, torch, dist) if a.strategy in PCNN else None)
        if self.server is not None and a.rank == self.server:
            for p in self.params:  # the server never runs backward; it steps with received gradients
                p.grad = torch.zeros_like(p)

    def compute(self) -> None:
        self.opt.zero_grad(set_to_none=False)
        self.model(self.x).square().mean().backward()
        self.compute_end = time.perf_counter()  # for the record: where compute ended in this iteration

    def grads(self):
        return [p.grad for p in self.params]

    def step(self, i: int) -> str:
        """Run iteration ``i`` (1-based); returns its kind."""
        a, torch, dist = self.a, self.torch, self.dist
        if a.strategy == "allreduce":
            self.compute()
            flat = _flat(torch, self.grads())
            dist.all_reduce(flat)
            _unflat_into(flat / self.world, self.grads())
            self.opt.step()
            return "every iteration"
        if a.strategy == "node-based":
            self.compute()
            if a.per_host > 1:
                flat = _flat(torch, self.grads())
                dist.all_reduce(flat, group=self.host_group)
                _unflat_into(flat / a.per_host, self.grads())
            if is_exchange(i, a.k_prime, a.epoch):
                with torch.no_grad():
                    flat = _flat(torch, self.params)
                    dist.all_reduce(flat)
                    _unflat_into(flat / self.world, self.params)
                self.opt.step()
                return "exchange"
            self.opt.step()
            return "local"
        if self.helper is not None:
            return self.helper.step(i)
        return self._sgp(i)

    def _sgp(self, i: int) -> str:
        torch, dist = self.torch, self.dist
        n = self.world
        e = (i - 1) % (int(math.floor(math.log2(n - 1))) + 1)
        with torch.no_grad():
            out = torch.cat([_flat(torch, self.params), torch.tensor([self.weight])])
        inbox = torch.empty_like(out)
        # Receive first: gloo sends only after the peer's "recv ready" notice, and a notice
        # posted after this rank's own send waits behind that send's bytes on the pair's one
        # TCP connection; with a symmetric peer (r + 2^e = r - 2^e mod n) the two directions
        # then run one after the other (docs/accuracy.md, "gloo serialises ...").
        reqs = [dist.irecv(inbox, src=(self.a.rank - 2 ** e) % n), dist.isend(out, dst=(self.a.rank + 2 ** e) % n)]
        self.compute()
        for r in reqs:
            r.wait()
        self.opt.step()
        with torch.no_grad():
            mixed = (_flat(torch, self.params) + inbox[:-1]) / 2
            _unflat_into(mixed, self.params)
        self.weight = (self.weight + float(inbox[-1])) / 2
        return f"gossip (peer +2^{e})"


def _probe(me, a) -> list[float]:
    """Forward+backward+step times with no communication (workers only)."""
    out = []
    if me.server is None or a.rank != me.server:
        for k in range(a.probe_warmup + a.probe):
            t0 = time.perf_counter()
            me.compute()
            me.opt.step()
            if k >= a.probe_warmup:
                out.append(time.perf_counter() - t0)
    return out


def _stream_probe(me, a, torch, dist) -> list[float]:
    """The same compute while each worker sends STREAM_BYTES to the next worker and receives as much.

    A microbenchmark of the host CPU cost of communication: its slowdown over
    :func:`_probe`, per byte moved, is the stack's ``cpu_per_byte``.
    """
    out = []
    if me.server is not None and a.rank == me.server:
        return out
    n = me.workers
    send = torch.ones(STREAM_BYTES // 4)
    recv = torch.empty_like(send)
    for k in range(a.probe_warmup + a.probe):
        t0 = time.perf_counter()
        reqs = [dist.isend(send, dst=(a.rank + 1) % n), dist.irecv(recv, src=(a.rank - 1) % n)]
        me.compute()
        me.opt.step()
        t1 = time.perf_counter()
        for r in reqs:
            r.wait()
        if k >= a.probe_warmup:
            out.append(t1 - t0)
    return out


def run(a) -> dict | None:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)  # as in the trace capture: one compute thread per rank
    init_group("gloo", a.master, a.port, a.rank, a.world, a.timeout)
    try:
        me = Rank(a, torch, dist)
        dist.barrier()
        probe = _probe(me, a)
        dist.barrier()
        rates = me.helper.rates() if isinstance(me.helper, Sparse) else {}
        dist.barrier()
        stream = _stream_probe(me, a, torch, dist)
        dist.barrier()
        probe += _probe(me, a)  # before and after: less drift with the neighbours' load
        dist.barrier()
        ends, kinds, computed = [], [], []
        ends.append(time.perf_counter())
        for i in range(1, a.warmup + a.iters + 1):
            me.compute_end = None
            kinds.append(me.step(i))
            ends.append(time.perf_counter())
            computed.append(me.compute_end)
        if isinstance(me.helper, (ParameterServer, Pcnn)):
            me.helper.drain()
        dist.barrier()
        rows = [None] * a.world
        dist.all_gather_object(rows, {"rank": a.rank, "ends": ends, "kinds": kinds, "probe": probe,
                                      "stream_probe": stream, "stream_bytes": 2 * STREAM_BYTES,
                                      "compute_ends": computed, "rates": rates,
                                      "wire": getattr(me.helper, "wire", None)})
    finally:
        dist.destroy_process_group()
    return {"ranks": rows} if a.rank == 0 else None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="simcomm-e2e-worker")
    for name, typ in (("rank", int), ("world", int), ("port", int), ("per-host", int), ("batch", int),
                      ("iters", int), ("warmup", int), ("k-prime", int), ("epoch", int), ("probe", int),
                      ("probe-warmup", int), ("groups", int)):
        ap.add_argument(f"--{name}", type=typ, required=True)
    ap.add_argument("--master", required=True)
    ap.add_argument("--strategy", choices=STRATEGIES, required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--timeout", type=float, default=30.0)
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    return run_and_save(lambda: run(a), a.out)


if __name__ == "__main__":
    exit_now(main())
