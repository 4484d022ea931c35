"""A synchronous parameter server as TensorFlow and BytePS run one, for the emulated suite (e2e_worker.py).

simcomm's ``ps`` (its docstring; seed 004, seed-code-facts C10): one message
per tensor and direction.  A worker pushes each gradient as backward produces
it (a post-accumulate-grad hook, the TF Send / BytePS ``push`` from the
backward callback) and posts the tensor's pull; the next forward of a layer
waits only for that layer's pulled tensors (a forward pre-hook).  The server
(the last rank) takes a tensor's W gradients, averages, steps it (plain SGD,
the workers' learning rate) and sends it back to every worker at once.
Messages carry the tensor's index as their tag, so arrival order does not
matter.  Workers run no optimizer.  Hooks act only inside training
iterations, never in the compute probes.
"""

from __future__ import annotations

PS = ("ps",)
LR = 1e-3  # the workers' SGD learning rate (e2e_worker.Rank)


class ParameterServer:
    """One rank's state for ``ps``; ``me`` is the worker's Rank (server = last rank)."""

    def __init__(self, me, a, torch, dist):
        self.me, self.a, self.torch, self.dist = me, a, torch, dist
        self.active = False
        self.sends: list = []
        self.pulls: dict[int, tuple] = {}
        if a.rank == me.server:
            return
        index = {id(p): i for i, p in enumerate(me.params)}
        for i, p in enumerate(me.params):
            p.register_post_accumulate_grad_hook(lambda q, i=i: self._push(i, q))
        for module in me.model.modules():
            own = [index[id(p)] for p in module.parameters(recurse=False)]
            if own:
                module.register_forward_pre_hook(lambda _m, _x, own=own: self._pull(own))

    def _push(self, i: int, p) -> None:
        if self.active:
            self.sends.append(self.dist.isend(p.grad.detach().reshape(-1).clone(), dst=self.me.server, tag=i))

    def _pull(self, own: list[int]) -> None:
        for i in own:
            if i in self.pulls:
                req, buf = self.pulls.pop(i)
                req.wait()
                with self.torch.no_grad():
                    self.me.params[i].copy_(buf.view_as(self.me.params[i]))

    def step(self, i: int) -> str:
        return self._server() if self.a.rank == self.me.server else self._worker()

    def _worker(self) -> str:
        self.active = True
        try:
            self.me.compute()  # forward waits per layer for last iteration's pulls; backward pushes
        finally:
            self.active = False
        for q in self.sends:
            q.wait()
        self.sends = []
        for i, p in enumerate(self.me.params):
            buf = self.torch.empty(p.numel())
            self.pulls[i] = (self.dist.irecv(buf, src=self.me.server, tag=i), buf)
        return "every iteration"

    def _server(self) -> str:
        torch, dist, me = self.torch, self.dist, self.me
        w = me.workers
        bufs = {i: [torch.empty(p.numel()) for _ in range(w)] for i, p in enumerate(me.params)}
        reqs = {i: [dist.irecv(bufs[i][k], src=k, tag=i) for k in range(w)] for i in bufs}
        sends = []
        for i in reversed(range(len(me.params))):  # backward produces the last tensors first
            for q in reqs[i]:
                q.wait()
            p = me.params[i]
            with torch.no_grad():
                p.sub_(LR * (sum(bufs[i]) / w).view_as(p))
                out = p.reshape(-1).clone()
            sends += [dist.isend(out, dst=k, tag=i) for k in range(w)]
        for q in sends:
            q.wait()
        return "server"

    def drain(self) -> None:
        """Wait for the last iteration's pulls (before the closing barrier)."""
        for req, _ in self.pulls.values():
            req.wait()
        self.pulls = {}
