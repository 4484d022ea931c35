"""Seed 001's gossip strategies as one rank of the emulated suite runs them (imported by e2e_worker.py).

Each is written with torch.distributed (gloo) primitives only, in the order the
seed authors' code (or, for D-PSGD, Lian et al.'s Alg. 1) runs its messages;
author-code citations follow /work/shared/reference/seed-code-facts.md §A.2
(``imagenet_test.py:N`` is the NEURON training code, the one simcomm's defaults
follow):

* ``dpsgd`` (simcomm ``mode=overlap``, Lian et al. Alg. 1): at the start of the
  iteration post receives from both ring neighbours, then sends of the whole
  model to both; forward and backward; wait; average the three models 1/3
  each; apply the gradient computed at the old model.  Receives are posted
  first (gloo serialises a symmetric exchange posted send-first,
  docs/accuracy.md); no seed code fixes the order.
* ``crossover-sgd`` (simcomm ``mode=serial``, imagenet_test.py:840-857): after
  the step, segment by segment (stem, one per residual block, head: seed 001's
  "blocks and FC layer"), a fresh fair derangement (simcomm's
  ``fair_peer_table``, the code's ``select_layer`` procedure), an ``isend`` to
  the destination, a blocking ``recv`` from the source, the wait, a barrier
  over all ranks, then the 0.5/0.5 average of that segment.  Send first, as
  the code posts it.
* ``hierarchical-crossover-sgd`` (simcomm defaults: ``reduce=after-backward``,
  ``broadcast=segment``, ``mode=serial``; imagenet_test.py:388-395, 811-838):
  groups of consecutive ranks, root = first; after backward one ``reduce`` of
  the flat gradient to the root (divided by the group size); only the root
  steps; per segment the roots run the Crossover exchange above among the G
  groups (barrier over all ranks), the root averages the segment and
  ``broadcast``s it to its group.
"""

from __future__ import annotations

GOSSIP = ("dpsgd", "crossover-sgd", "hierarchical-crossover-sgd")


def flat(torch, tensors):
    return torch.cat([t.reshape(-1) for t in tensors])


def unflat_into(vec, tensors) -> None:
    off = 0
    for t in tensors:
        n = t.numel()
        t.copy_(vec[off:off + n].view_as(t))
        off += n


def _block_key(module: str) -> str | None:
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) >= 3 else None


def segments(model) -> list[list]:
    """Parameters per segment: stem, one per residual block, head (simcomm's ``model_segments`` rule)."""
    out: list[list] = []
    prev, seen_block = object(), False
    for name, p in model.named_parameters():
        key = _block_key(name.rsplit(".", 1)[0])
        tag = key if key is not None else ("head" if seen_block else "stem")
        seen_block = seen_block or key is not None
        if tag != prev:
            out.append([])
            prev = tag
        out[-1].append(p)
    return out


class Gossip:
    """One rank's state for the gossip strategies; ``me`` is the worker's Rank."""

    def __init__(self, me, a, torch, dist):
        self.me, self.a, self.torch, self.dist = me, a, torch, dist
        self.segs = segments(me.model)
        self.groups = max(1, a.groups)
        self.size = a.world // self.groups  # ranks per group (hierarchical)
        self.group = None
        if a.strategy == "hierarchical-crossover-sgd":
            for g in range(self.groups):  # every rank creates every group, in the same order
                pg = dist.new_group(list(range(g * self.size, (g + 1) * self.size)))
                if a.rank // self.size == g:
                    self.group = pg

    def step(self, i: int) -> str:
        s = self.a.strategy
        if s == "dpsgd":
            return self._dpsgd()
        if s == "crossover-sgd":
            self.me.compute()
            self.me.opt.step()
            self._crossover(i, list(range(self.a.world)))
            return "gossip"
        return self._hierarchical(i)

    def _dpsgd(self) -> str:
        torch, dist, me, r, n = self.torch, self.dist, self.me, self.a.rank, self.a.world
        with torch.no_grad():
            out = flat(torch, me.params)
        peers = sorted({(r - 1) % n, (r + 1) % n} - {r})
        inbox = [torch.empty_like(out) for _ in peers]
        reqs = [dist.irecv(buf, src=p) for buf, p in zip(inbox, peers, strict=True)]
        reqs += [dist.isend(out, dst=p) for p in peers]
        me.compute()
        for q in reqs:
            q.wait()
        with torch.no_grad():
            unflat_into((out + sum(inbox)) / (1 + len(peers)), me.params)
        me.opt.step()
        return "gossip"

    def _crossover(self, i: int, members: list[int]) -> None:
        """Segment-wise exchange among ``members`` (this rank is one), barrier over every rank."""
        from simcomm.strategies._gossip import fair_peer_table

        torch, dist = self.torch, self.dist
        me_idx = members.index(self.a.rank)
        for s, params in enumerate(self.segs):
            dest = fair_peer_table(len(members), 0, i, s)
            src = int(list(dest).index(me_idx))
            with torch.no_grad():
                mine = flat(torch, params)
            buf = torch.empty_like(mine)
            req = dist.isend(mine, dst=members[int(dest[me_idx])])  # send first, as the code posts it
            dist.recv(buf, src=members[src])
            req.wait()
            dist.barrier()
            with torch.no_grad():
                unflat_into((mine + buf) / 2, params)

    def _hierarchical(self, i: int) -> str:
        torch, dist, me, a = self.torch, self.dist, self.me, self.a
        root = (a.rank // self.size) * self.size
        roots = list(range(0, a.world, self.size))
        me.compute()
        g = flat(torch, me.grads())
        dist.reduce(g, dst=root, group=self.group)
        if a.rank == root:
            unflat_into(g / self.size, me.grads())
            me.opt.step()
        from simcomm.strategies._gossip import fair_peer_table

        for s, params in enumerate(self.segs):
            with torch.no_grad():
                mine = flat(torch, params)
            if a.rank == root:
                k = roots.index(root)
                dest = fair_peer_table(len(roots), 0, i, s)
                buf = torch.empty_like(mine)
                req = dist.isend(mine, dst=roots[int(dest[k])])
                dist.recv(buf, src=roots[int(list(dest).index(k))])
                req.wait()
            dist.barrier()
            if a.rank == root:
                mine = (mine + buf) / 2
            dist.broadcast(mine, src=root, group=self.group)
            with torch.no_grad():
                unflat_into(mine, params)
        return "gossip"
