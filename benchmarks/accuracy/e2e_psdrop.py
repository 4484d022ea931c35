"""Seed 004's parameter server with layer dropping as one rank of the emulated suite runs it.

Imported by e2e_worker.py.  simcomm's ``ps-layer-drop`` (seed 004, Sec. 4-5,
Alg. 1) as its docstring states it, written with gloo point-to-point messages:

* every worker keeps a per-layer accumulator of its gradients; every
  ``threshold_every`` iterations (the first one included) it sorts the layers
  by representative value (mean |accumulator|) ascending and adds their sizes
  until the dropped count passes R x total: the threshold is the value of the
  last layer added;
* per tensor, one message to the server: the accumulated gradient when its
  layer's value reaches the threshold (then the accumulator restarts), else
  the one-element list ``[0]`` (Eqs. 1-2);
* the server restores every ``[0]`` to zeros, averages, steps, and sends back
  per tensor the updated value of every layer that *any* worker pushed and
  ``[0]`` for the others (Sec. 4.2); workers copy the updated tensors in;
* before the first iteration the server sends every worker its whole model
  (Sec. 4.1), so the workers start from the server's parameters;
* the worker pushes after its backward has ended and blocks on the whole
  reply before its next forward (Sec. 4.1), which simcomm's ``push
  after-backward`` models.

One deviation, said in docs/accuracy.md: TF's messages carry their shapes, a
gloo receive needs its size first, so each direction starts with one small
message of per-layer flags (L int32) telling the receiver which tensors are
placeholders.
"""

from __future__ import annotations

PSDROP = ("ps-layer-drop",)
DROP_RATIO, THRESHOLD_EVERY = 0.9, 100  # simcomm's defaults


def layer_of(model) -> list[int]:
    """Index of each parameter's layer (its module), in parameter order."""
    names, out = {}, []
    for name, _ in model.named_parameters():
        out.append(names.setdefault(name.rsplit(".", 1)[0], len(names)))
    return out


def threshold(values: list[float], sizes: list[int], ratio: float) -> float:
    """Alg. 1: add layers by value ascending; the first whose size takes the dropped count above
    ratio x total (line 8: ``numDrop > total number of gradients x R``) gives the threshold; none: -1."""
    total, dropped = float(sum(sizes)), 0.0
    for v, n in sorted(zip(values, sizes, strict=True)):
        dropped += n
        if dropped > ratio * total:
            return v
    return -1.0


class LayerDrop:
    """One rank's state for ``ps-layer-drop``; ``me`` is the worker's Rank (server = last rank)."""

    def __init__(self, me, a, torch, dist):
        self.me, self.a, self.torch, self.dist = me, a, torch, dist
        self.layer = layer_of(me.model)
        self.n_layers = max(self.layer) + 1
        self.sizes = [0] * self.n_layers
        for p, lay in zip(me.params, self.layer, strict=True):
            self.sizes[lay] += p.numel()
        self.accum = [torch.zeros_like(p) for p in me.params]
        self.thr = -1.0
        #: per iteration, the fraction of elements this worker pushed and pulled (for the record)
        self.wire: dict[str, list[float]] = {"pushed": [], "pulled": []}

    def step(self, i: int) -> str:
        if i == 1:
            self._initial()
        return self._server() if self.a.rank == self.me.server else self._worker(i)

    def _initial(self) -> None:
        """Sec. 4.1: "When distributed deep learning is started, the worker receives initialized model
        parameters from the parameter server" (every layer, none a placeholder): the workers start from the
        server's model, not from the one their compute probes stepped.  Before iteration 1 (a warm-up)."""
        torch, dist, me = self.torch, self.dist, self.me
        with torch.no_grad():
            if self.a.rank == me.server:
                reqs = [dist.isend(p.reshape(-1).clone(), dst=w) for p in me.params for w in range(me.workers)]
                for q in reqs:
                    q.wait()
                return
            for p in me.params:
                buf = torch.empty(p.numel())
                dist.recv(buf, src=me.server)
                p.copy_(buf.view_as(p))

    def _flags(self, sent: list[bool]):
        return self.torch.tensor([int(s) for s in sent], dtype=self.torch.int32)

    def _worker(self, i: int) -> str:
        torch, dist, me = self.torch, self.dist, self.me
        me.compute()
        for acc, g in zip(self.accum, me.grads(), strict=True):
            acc.add_(g)
        l1 = [0.0] * self.n_layers
        for acc, lay in zip(self.accum, self.layer, strict=True):
            l1[lay] += float(acc.abs().sum())
        value = [l1[k] / self.sizes[k] for k in range(self.n_layers)]
        if (i - 1) % THRESHOLD_EVERY == 0:
            self.thr = threshold(value, self.sizes, DROP_RATIO)
        sent = [v >= self.thr for v in value]
        total = sum(self.sizes)
        self.wire["pushed"].append(sum(n for n, s in zip(self.sizes, sent, strict=True) if s) / total)
        server = me.server
        reqs = [dist.isend(self._flags(sent), dst=server)]
        for acc, lay in zip(self.accum, self.layer, strict=True):
            reqs.append(dist.isend(acc.reshape(-1).clone() if sent[lay] else torch.zeros(1), dst=server))
        for q in reqs:
            q.wait()
        for acc, lay in zip(self.accum, self.layer, strict=True):
            if sent[lay]:
                acc.zero_()
        union = torch.empty(self.n_layers, dtype=torch.int32)
        dist.recv(union, src=server)
        self.wire["pulled"].append(sum(n for n, u in zip(self.sizes, union.tolist(), strict=True) if u) / total)
        with torch.no_grad():
            for p, lay in zip(me.params, self.layer, strict=True):
                buf = torch.empty(p.numel()) if union[lay] else torch.empty(1)
                dist.recv(buf, src=server)
                if union[lay]:
                    p.copy_(buf.view_as(p))
        return "every iteration"

    def _server(self) -> str:
        torch, dist, me = self.torch, self.dist, self.me
        workers = me.workers
        flags = [torch.empty(self.n_layers, dtype=torch.int32) for _ in range(workers)]
        for q in [dist.irecv(flags[w], src=w) for w in range(workers)]:
            q.wait()
        bufs = [[torch.empty(p.numel()) if flags[w][lay] else torch.empty(1)
                 for p, lay in zip(me.params, self.layer, strict=True)] for w in range(workers)]
        for q in [dist.irecv(bufs[w][t], src=w) for w in range(workers) for t in range(len(me.params))]:
            q.wait()
        union = [any(bool(flags[w][k]) for w in range(workers)) for k in range(self.n_layers)]
        for t, (p, lay) in enumerate(zip(me.params, self.layer, strict=True)):
            got = [bufs[w][t] for w in range(workers) if flags[w][lay]]
            p.grad.copy_((sum(got) / workers).view_as(p) if got else torch.zeros_like(p))
        me.opt.step()
        reqs = [dist.isend(self._flags(union), dst=w) for w in range(workers)]
        with torch.no_grad():
            for p, lay in zip(me.params, self.layer, strict=True):
                out = p.reshape(-1).clone() if union[lay] else torch.zeros(1)
                reqs += [dist.isend(out, dst=w) for w in range(workers)]
        for q in reqs:
            q.wait()
        return "server"
