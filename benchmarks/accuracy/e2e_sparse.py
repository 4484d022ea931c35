"""Seed 002's compressed strategies as one rank of the emulated suite runs them (imported by e2e_worker.py).

Written with torch.distributed (gloo) point-to-point messages, the host merges
in numpy, in the order simcomm's strategy docstrings cite from the authors' code:

* ``gtopk`` (hclhkbu/gtopkssgd ``allreducer.py``, ``gtopk_sparse_allreduce``;
  seed-code-facts C7): local top-k of gradient + residual (``torch.topk``),
  k values + k indices (2k 4-byte words) to the host; ceil(log2 P) tree rounds
  (simcomm's ``tree_rounds``: the second of each pair sends to the first), the
  receiver merges on the host in numpy (``np.intersect1d`` of the indices, the
  common values summed, an argsort keeping the k largest), every rank then
  waits in a barrier; rank 0 broadcasts the global top-k (the code's
  ``comm.Bcast``); each rank intersects its own indices with the global set
  (its entries that did not make it stay in the residual); sparse update.
* ``gs-sgd`` (Dai et al., seed 002 Alg. 1-2): a Count-Sketch of rows x cols
  counters of the gradient (SKETCH_ROWS x SKETCH_COLS, given to simcomm as
  ``sketch_rows``/``sketch_cols``: simcomm's default 42 x 800 for this model
  makes the CPU estimate of every coordinate take seconds per iteration on the
  suite's shared cores, so the suite uses 8 rows of the same width), summed
  up the same binary tree and sent back down it; every rank estimates each
  coordinate as the median over rows (HEAVYMIX's estimate) and keeps the k
  largest; a second round sums the exact values of those k coordinates up and
  down the tree; update.

``rates(me, ...)`` measures the per-element compute of these kernels on this
machine, all workers at once (the same co-location as training), as the
compute probe measures forward and backward: the prediction takes them as the
trace's ``compression_rates`` instead of simcomm's documented GPU defaults.
"""

from __future__ import annotations

import math
import time

import numpy as np

SPARSE = ("gtopk", "gs-sgd")
DENSITY = 0.004  # simcomm's DEFAULT_DENSITY (the last of seed 002's warm-up densities)
SKETCH_ROWS, SKETCH_COLS = 8, 800  # cols: simcomm's default for eps = 0.1; rows cut from 42 (see above)


def merge(v1, i1, v2, i2, k: int):
    """gTop-k's host merge of two sparse sets: common indices summed, the k largest |values| kept."""
    _, a, b = np.intersect1d(i1, i2, assume_unique=True, return_indices=True)
    v1 = v1.copy()
    v1[a] += v2[b]
    keep = np.ones(len(i2), dtype=bool)
    keep[b] = False
    vals, idx = np.concatenate([v1, v2[keep]]), np.concatenate([i1, i2[keep]])
    order = np.argsort(-np.abs(vals), kind="stable")[:k]
    return vals[order], idx[order]


class Sparse:
    """One rank's state for ``gtopk`` and ``gs-sgd``; ``me`` is the worker's Rank."""

    def __init__(self, me, a, torch, dist):
        from simcomm.strategies._sparse import tree_rounds

        self.me, self.a, self.torch, self.dist = me, a, torch, dist
        self.d = sum(p.numel() for p in me.params)
        self.k = max(1, math.ceil(DENSITY * self.d))
        self.rounds = tree_rounds(a.world)
        self.residual = torch.zeros(self.d)
        if a.strategy == "gs-sgd":
            self.rows, self.cols = SKETCH_ROWS, SKETCH_COLS
            gen = torch.Generator().manual_seed(7)  # the same hashes on every rank
            buckets = torch.randint(0, self.cols, (self.rows, self.d), generator=gen)
            self.index = (buckets + torch.arange(self.rows).unsqueeze(1) * self.cols).reshape(-1)
            self.sign = (torch.randint(0, 2, (self.rows, self.d), generator=gen) * 2 - 1).float()

    # ---- kernels (also timed by ``rates``) ----
    def topk(self, g):
        acc = g + self.residual
        idx = self.torch.topk(acc.abs(), self.k, sorted=False).indices
        return acc, idx

    def sketch(self, g):
        sk = self.torch.zeros(self.rows * self.cols)
        sk.index_add_(0, self.index, (self.sign * g).reshape(-1))
        return sk

    def heavy(self, sk):
        est = (sk[self.index].view(self.rows, self.d) * self.sign).median(dim=0).values
        return self.torch.topk(est.abs(), self.k, sorted=False).indices

    def rates(self, reps: int = 5) -> dict:
        """Seconds per element of each kernel (per element and row for sketches), median of ``reps``."""
        torch = self.torch
        g = torch.randn(self.d)

        def timed(fn):
            out = []
            for _ in range(reps):
                t0 = time.perf_counter()
                fn()
                out.append(time.perf_counter() - t0)
            return sorted(out)[len(out) // 2]

        out = {}
        if self.a.strategy == "gtopk":
            acc, idx = self.topk(g)
            v, i = acc[idx].numpy(), idx.numpy().astype(np.int32)
            v2, i2 = np.roll(v, 1), (i + 1).astype(np.int32)
            out["topk"] = timed(lambda: self.topk(g)) / self.d
            out["merge_cpu"] = timed(lambda: merge(v, i, v2, i2, self.k)) / (2 * self.k)
        else:
            sk = self.sketch(g)
            out["sketch"] = timed(lambda: self.sketch(g)) / (self.d * self.rows)
            out["query"] = timed(lambda: self.heavy(sk)) / (self.d * self.rows)
        return out

    # ---- one iteration ----
    def step(self, i: int) -> str:
        self.me.compute()
        g = flat(self.torch, self.me.grads())
        if self.a.strategy == "gtopk":
            vals, idx = self._gtopk(g)
        else:
            vals, idx = self._gs(g)
        upd = self.torch.zeros(self.d)
        upd[idx] = vals / self.a.world
        unflat(upd, self.me.grads())
        self.me.opt.step()
        return "sparse"

    def _pack(self, vals, idx):
        torch = self.torch
        return torch.cat([torch.from_numpy(np.ascontiguousarray(vals, dtype=np.float32)).view(torch.int32),
                          torch.from_numpy(np.ascontiguousarray(idx, dtype=np.int32))])

    def _unpack(self, buf):
        n = buf.numel() // 2
        return buf[:n].view(self.torch.float32).numpy().copy(), buf[n:].numpy().copy()

    def _gtopk(self, g):
        torch, dist, r = self.torch, self.dist, self.a.rank
        acc, idx = self.topk(g)
        vals, ids = acc[idx].numpy(), idx.numpy().astype(np.int32)
        mine = set(ids.tolist())
        for rnd in self.rounds:
            for src, dst in rnd:
                if r == src:
                    dist.send(self._pack(vals, ids), dst=dst)
                elif r == dst:
                    buf = torch.empty(2 * self.k, dtype=torch.int32)
                    dist.recv(buf, src=src)
                    vals, ids = merge(vals, ids, *self._unpack(buf), self.k)
            dist.barrier()  # comm.Barrier() closes every round
        buf = self._pack(vals, ids) if r == 0 else torch.empty(2 * self.k, dtype=torch.int32)
        dist.broadcast(buf, src=0)
        gvals, gids = self._unpack(buf)
        kept = np.intersect1d(np.fromiter(mine, dtype=np.int32), gids, assume_unique=True)
        self.residual = acc.clone()
        self.residual[torch.from_numpy(kept.astype(np.int64))] = 0.0  # sent entries leave the residual
        return torch.from_numpy(gvals), torch.from_numpy(gids.astype(np.int64))

    def _tree_sum(self, buf):
        """Sum ``buf`` up the binary tree to rank 0 and send the sum back down the same tree."""
        dist, r = self.dist, self.a.rank
        for rnd in self.rounds:
            for src, dst in rnd:
                if r == src:
                    dist.send(buf, dst=dst)
                elif r == dst:
                    got = self.torch.empty_like(buf)
                    dist.recv(got, src=src)
                    buf = buf + got
        for rnd in reversed(self.rounds):
            for src, dst in rnd:
                if r == dst:
                    dist.send(buf, dst=src)
                elif r == src:
                    dist.recv(buf, src=dst)
        return buf

    def _gs(self, g):
        sk = self._tree_sum(self.sketch(g))
        idx = self.heavy(sk)
        return self._tree_sum(g[idx].contiguous()), idx


def flat(torch, tensors):
    return torch.cat([t.reshape(-1) for t in tensors])


def unflat(vec, tensors) -> None:
    off = 0
    for t in tensors:
        n = t.numel()
        t.copy_(vec[off:off + n].view_as(t))
        off += n
