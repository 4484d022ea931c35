"""Seed 003's PCNN as one rank of the emulated suite runs it (imported by e2e_worker.py).

The authors' code (NU-CUCIS/pcnn, ``src/ffbp_multistep.c`` with overlap on,
``src/comm.c``), written with gloo collectives:

* **One communication thread per rank calling blocking collectives** in the
  order they were posted (comm.c ``pcnn_comm_thread``: a FIFO request queue
  served by one pthread calling blocking MPI); the compute thread posts a
  request and later waits for its flag.
* **Forward**, per layer (``pcnn_ffbp_multistep_feedforward``): wait for the
  layer's parameter all-gather of the previous iteration, then compute; at
  the fully-connected layer, before its forward, post the **all-to-all of its
  input activations** (each rank keeps N'/P of the rows for all K samples).
* **Backward**, top to bottom (``backprop_overlap``): at the FC layer post the
  **all-gather of its errors** (N x K/P per rank) and compute only the errors
  it passes down (no local weight gradient); at each convolution layer
  compute errors and the local weight gradient, then post the **all-to-all of
  that gradient** (D/P x F chunk j to rank j).
* After backward: wait for the last all-to-all (posted last, so FIFO means all
  are done); per convolution layer in forward order sum the P received
  chunks, update that 1/P slice and post the **all-gather of the updated
  parameters**; then the FC layer: wait for its activations and errors,
  compute the N x N'/P partial gradient over all K samples, update the slice
  and post its parameter all-gather.  The all-gathers finish behind the next
  forward, which waits per layer (posted in forward order, Sec. 3-D-1).
* Batch normalisation is trained locally and never communicated
  (``batch_norm.c``, ``pcnn_bn_update``: "our distributed batch normalization
  is not synchronous"); the FC bias is updated in full on every rank from the
  gathered errors.

Deviations, said in docs/accuracy.md: gloo has no all-gather-v, and every
sliced dimension here divides by P (ResNet-20's filter counts 16/32/64, FC
inputs 64, at P = 4), so the authors' ``alltoallv`` / ``allgatherv`` paths
never run; plain SGD (the suite's optimizer) instead of momentum.

The compute time a run records (``compute_end``) excludes the time the
forward spent waiting for all-gathers: it is the training iteration's own
forward + backward, as the suite's in-run compute needs.
"""

from __future__ import annotations

import queue
import threading
import time

PCNN = ("pcnn",)
LR = 1e-3  # the workers' SGD learning rate (e2e_worker.Rank)


class Request:
    """A posted collective: ``wait`` blocks until the communication thread ran it (and re-raises its error)."""

    def __init__(self, job):
        self.job, self.done, self.error = job, threading.Event(), None

    def run(self) -> None:
        try:
            self.job()
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting compute thread
            self.error = exc
        self.done.set()

    def wait(self) -> None:
        self.done.wait()
        if self.error is not None:
            raise RuntimeError(f"pcnn communication thread: {self.error}") from self.error


class CommThread:
    """One Python thread calling blocking collectives of ``dist`` in posting order (comm.c ``pcnn_comm_thread``).

    For a stand-in ``dist`` (the tests'); a training run uses :class:`GlooQueue`: a Python thread shares the
    interpreter's lock with the compute thread, and on an oversubscribed host every hand-over of that lock waits
    for a time slice, a cost the authors' pthread does not have (docs/accuracy.md, "pcnn's worker").
    """

    def __init__(self, dist):
        self.dist = dist
        self.requests: queue.Queue = queue.Queue()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def all_to_all(self, recv, send) -> Request:
        return self.post(lambda: self.dist.all_to_all_single(recv, send))

    def all_gather(self, out, inp) -> Request:
        return self.post(lambda: _gather(self.dist, out, inp))

    def _serve(self) -> None:
        while True:
            req = self.requests.get()
            if req is None:
                return
            req.run()

    def post(self, job) -> Request:
        req = Request(job)
        self.requests.put(req)
        return req

    def close(self) -> None:
        self.requests.put(None)
        self.thread.join()


def _gather(dist, out, inp) -> None:
    gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    gather(out, inp.reshape(-1))


class GlooQueue:
    """A gloo process group of its own with one worker thread: the collectives posted to it run one at a
    time, in posting order, on that C++ thread (``ProcessGroupGloo``'s work queue), as the authors' one
    pthread calls blocking MPI (comm.c ``pcnn_comm_thread``), without a Python thread; ``wait`` on what a
    call returns blocks until it ran (gloo's ``Work.wait``, which releases the interpreter's lock)."""

    def __init__(self, dist, rank: int, world: int):
        import datetime
        import os

        from torch.distributed import PrefixStore, ProcessGroupGloo

        opts = ProcessGroupGloo._Options()
        opts._threads = 1
        opts._timeout = datetime.timedelta(seconds=600)
        iface = os.environ.get("GLOO_SOCKET_IFNAME")  # the emulated host's eth0 (simcomm.calibrate.emulate)
        opts._devices = [ProcessGroupGloo.create_device(interface=iface) if iface
                         else ProcessGroupGloo.create_default_device()]
        store = PrefixStore("pcnn-comm", dist.distributed_c10d._get_default_store())
        self.pg, self.dist = ProcessGroupGloo(store, rank, world, opts), dist

    def all_to_all(self, recv, send):
        return self.pg.alltoall_base(recv, send, [], [], self.dist.AllToAllOptions())

    def all_gather(self, out, inp):
        return self.pg._allgather_base(out, inp.reshape(-1))

    def close(self) -> None:
        """Nothing to stop: every posted collective was waited for (Pcnn.drain)."""


class Pcnn:
    """One rank's state for ``pcnn``; ``me`` is the worker's Rank."""

    def __init__(self, me, a, torch, dist, comm=None):
        self.me, self.a, self.torch, self.dist = me, a, torch, dist
        self.p, self.rank = a.world, a.rank
        # the real torch.distributed: a process group of its own with one gloo thread; a stand-in: a Python thread
        self.comm = comm or (GlooQueue(dist, a.rank, a.world) if hasattr(dist, "distributed_c10d")
                             else CommThread(dist))
        self.active = False
        self.waited = 0.0
        nn = torch.nn
        self.convs = [m for m in me.model.modules() if isinstance(m, nn.Conv2d)]
        fcs = [m for m in me.model.modules() if isinstance(m, nn.Linear)]
        self.fc = fcs[-1] if fcs else None
        shared = {id(m.weight) for m in self.convs} | ({id(self.fc.weight), id(self.fc.bias)} if self.fc else set())
        self.local = [q for q in me.params if id(q) not in shared]  # batch norm: trained locally
        self.gathers: dict[int, tuple] = {}  # module id -> (done, buffer, copy-in)
        self.pending: dict[int, tuple] = {}  # conv index -> (done, received chunks)
        for k, m in enumerate(self.convs):
            if m.bias is not None:  # the suite's models have none; a bias would need its own slice
                raise ValueError(f"pcnn worker: conv {k} has a bias")
            m.weight.register_post_accumulate_grad_hook(lambda w, k=k: self._scatter_gradient(k, w))
        for m in [*self.convs, *([self.fc] if self.fc else [])]:
            m.register_forward_pre_hook(lambda mod, _x: self._wait_params(mod))
        if self.fc is not None:
            self.fc.weight.requires_grad_(False)  # PCNN computes no local N x N' gradient (pattern 1)
            self.fc.bias.requires_grad_(False)
            self.fc.register_forward_pre_hook(lambda _m, x: self._scatter_activations(x[0]))
            self.fc.register_forward_hook(lambda _m, _x, out: self._on_fc_output(out))
        self.acts = self.errs = None

    # -- forward -------------------------------------------------------------------------------------------
    def _wait_params(self, module) -> None:
        entry = self.gathers.pop(id(module), None)
        if entry is None:
            return
        done, buf, copy_in = entry
        t0 = time.perf_counter()
        done.wait()
        self.waited += time.perf_counter() - t0
        with self.torch.no_grad():
            copy_in(buf)

    def _scatter_activations(self, x) -> None:
        if not self.active:
            return
        torch = self.torch
        send = x.detach().reshape(x.shape[0], -1).t().contiguous()  # N' x K/P; chunk j = rows of rank j
        recv = torch.empty_like(send)
        self.acts = (self.comm.all_to_all(recv, send), recv)

    def _on_fc_output(self, out) -> None:
        if self.active and out.requires_grad:
            out.register_hook(self._gather_errors)

    # -- backward ------------------------------------------------------------------------------------------
    def _gather_errors(self, grad) -> None:
        torch = self.torch
        send = grad.detach().contiguous()  # K/P x N
        recv = torch.empty(self.p * send.numel())
        self.errs = (self.comm.all_gather(recv, send), recv)

    def _scatter_gradient(self, k: int, w) -> None:
        if not self.active:
            return
        torch = self.torch
        send = w.grad.detach().reshape(-1).clone()
        recv = torch.empty_like(send)
        self.pending[k] = (self.comm.all_to_all(recv, send), recv)

    # -- one iteration ---------------------------------------------------------------------------------------
    def step(self, i: int) -> str:
        me, torch = self.me, self.torch
        self.waited = 0.0
        self.active = True
        try:
            me.opt.zero_grad(set_to_none=False)
            me.model(me.x).square().mean().backward()
        finally:
            self.active = False
        me.compute_end = time.perf_counter() - self.waited  # forward + backward without the waits
        with torch.no_grad():
            for k in sorted(self.pending):  # all posted; the last one (conv 0) finishes last (FIFO)
                self.pending[k][0].wait()
            for k, m in enumerate(self.convs):
                self._update_conv(k, m)
            for q in self.local:
                if q.grad is not None:
                    q.sub_(LR * q.grad)
            if self.fc is not None:
                self._update_fc()
        self.pending = {}
        return "every iteration"

    def _slice(self, n: int) -> slice:
        size = n // self.p
        return slice(self.rank * size, (self.rank + 1) * size)

    def _post_gather(self, module, mine, copy_in) -> None:
        out = self.torch.empty(self.p * mine.numel())
        self.gathers[id(module)] = (self.comm.all_gather(out, mine), out, copy_in)

    def _update_conv(self, k: int, m) -> None:
        _, recv = self.pending[k]
        flat = m.weight.view(-1)
        own = self._slice(flat.numel())
        total = recv.view(self.p, -1).sum(0)  # the P chunks of this rank's slice (saxpy loop)
        flat[own] -= LR * total / self.p
        self._post_gather(m, flat[own].clone(), lambda buf, w=m.weight: w.copy_(buf.view_as(w)))

    def _update_fc(self) -> None:
        fc, p = self.fc, self.p
        self.acts[0].wait()
        self.errs[0].wait()
        n_out, n_in = fc.weight.shape
        acts = self.acts[1].view(p, n_in // p, -1).permute(1, 0, 2).reshape(n_in // p, -1)  # N'/P x K
        errs = self.errs[1].view(-1, n_out)  # K x N
        own = self._slice(n_in)
        fc.weight[:, own] -= LR * (errs.t() @ acts.t()) / p
        fc.bias -= LR * errs.sum(0) / p
        mine = fc.weight[:, own].contiguous()

        def copy_in(buf, w=fc.weight):
            w.copy_(buf.view(p, n_out, n_in // p).permute(1, 0, 2).reshape(n_out, n_in))

        self._post_gather(fc, mine, copy_in)
        self.acts = self.errs = None

    def drain(self) -> None:
        """Wait for the last iteration's all-gathers (before the closing barrier) and stop the thread."""
        with self.torch.no_grad():
            for m in [*self.convs, *([self.fc] if self.fc else [])]:
                self._wait_params(m)
        self.comm.close()
