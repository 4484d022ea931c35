"""Rank placement, model structure, stage split and pipeline schedules of a large-model layout.

Kept apart from the plan emission (the ``megatron`` package) because every piece here is a
pure function of sizes that tests check by hand.  The layout itself (the sizes a user or the search
picks) is :class:`simcomm.llm.layout.Layout`; this module places its ranks:

* :class:`Placement`: ranks ``R = tp·pp·dp`` placed tensor-parallel first
  (consecutive ranks, so a TP group sits inside a node), then pipeline, then data
  parallel: ``rank(t, p, d) = t + tp·(p + pp·d)`` (order ``tp-pp-dp``), or
  Megatron-core's default ``tp-dp-pp``, ``t + tp·(d + dp·p)``; the expert layers
  re-cut each stage's ranks into expert tensor-, expert- and expert-data-parallel
  groups (Megatron-core's MoE parallel folding, :meth:`Layout.ep_groups`).  With
  context parallelism ``dp`` counts the parameter replicas, data × context
  parallel (Megatron-core reduces gradients over DP×CP): replica ``d = c + cp·e``
  is CP rank c of data replica e, placed right outside TP (``tp-cp-pp-dp``:
  ``t + tp·(c + cp·(p + pp·e))``; ``tp-dp-pp`` is then Megatron-core's
  ``tp-cp-dp-pp``), so the CP ring of (t, p, e) is ``cp`` replicas in a row.
* :func:`structure`: a transformer trace read as blocks (layers ``block{i}.attn``,
  ``block{i}.mlp`` or ``block{i}.moe``) with the layers before the first block
  (``embed``) and after the last (``head``).
* :func:`chunks`: the layers of each virtual pipeline stage (consecutive blocks).
* :func:`schedule`: each stage's ordered list of forward and backward tasks for
  GPipe, 1F1B and interleaved 1F1B, as Megatron-LM orders them
  (``megatron/core/pipeline_parallel/schedules.py``).  The bubble is not here: it
  emerges when the engine runs these orders with their data dependencies.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from simcomm.errors import ConfigError

__all__ = ["Placement", "Structure", "structure", "chunks", "schedule", "SCHEDULES", "ORDERS", "layer_kind"]

SCHEDULES = ("gpipe", "1f1b", "interleaved")
ORDERS = ("tp-pp-dp", "tp-dp-pp")
_BLOCK = re.compile(r"^block(\d+)\.(attn|mlp|moe)$")


@dataclass(frozen=True)
class Placement:
    """Parallel sizes and the rank placement (TP innermost, then PP, then DP)."""

    tp: int
    pp: int
    dp: int
    ep: int = 1
    virtual: int = 1
    order: str = "tp-pp-dp"  # or "tp-dp-pp" (Megatron-core's default: replicas inside a pipeline stage)
    cp: int = 1  # context-parallel ranks per data replica; ``dp`` (replicas of the parameters) includes them
    etp: int | None = None  # expert layers' tensor-parallel size (None: tp)

    @property
    def n_ranks(self) -> int:
        return self.tp * self.pp * self.dp

    @property
    def data(self) -> int:
        """Data-parallel replicas proper (each takes its own samples): dp / cp."""
        return self.dp // self.cp

    def rank(self, t: int, p: int, d: int) -> int:
        if self.order == "tp-dp-pp":
            return t + self.tp * (d + self.dp * p)
        c, e = d % self.cp, d // self.cp
        return t + self.tp * (c + self.cp * (p + self.pp * e))

    def stage_ranks(self, p: int) -> list[int]:
        """Every rank of pipeline stage ``p`` (all TP ranks of all replicas), in rank order."""
        return sorted(self.rank(t, p, d) for t in range(self.tp) for d in range(self.dp))

    def tp_group(self, p: int, d: int) -> tuple[int, ...]:
        return tuple(self.rank(t, p, d) for t in range(self.tp))

    def dp_group(self, t: int, p: int) -> tuple[int, ...]:
        return tuple(self.rank(t, p, d) for d in range(self.dp))

    # -- expert layers (Megatron-core's MoE parallel folding) ------------------------------------------------
    # A stage's tp·dp ranks, counted in Megatron-core's dense order (index ``i = t + tp·d``, ``d`` the replica
    # with its context-parallel rank), are re-cut for the expert layers as ``i = x + etp·(e + ep·z)``: expert
    # tensor-parallel rank x, expert-parallel rank e, expert-data-parallel replica z (parallel_state's expert
    # RankGenerator, order "tp-ep-dp-pp" over the same ranks as "tp-cp-dp-pp").  With etp = tp this is the
    # classic layout: each expert-parallel group is ``ep`` consecutive replicas of one tensor-parallel rank.
    @property
    def expert_tp(self) -> int:
        """Expert tensor-parallel size: ``etp``, or the attention's ``tp`` when not given (Megatron-core's default)."""
        return self.etp or self.tp

    def stage_rank(self, p: int, i: int) -> int:
        """The rank at index ``i = t + tp·d`` of stage p (Megatron-core's order of a stage's ranks)."""
        return self.rank(i % self.tp, p, i // self.tp)

    def _expert_groups(self, p: int, stride: int, size: int, count: int, block: int) -> list[tuple[int, ...]]:
        """Groups of ``size`` stage indices ``stride`` apart; ``count`` of them per ``block`` indices."""
        n = self.tp * self.dp
        return [tuple(self.stage_rank(p, b + k + stride * j) for j in range(size))
                for b in range(0, n, block) for k in range(count)]

    def ep_groups(self, p: int) -> list[tuple[int, ...]]:
        """Expert-parallel groups of stage p: for each expert TP rank x and expert replica z, the ``ep`` ranks."""
        etp = self.expert_tp
        return self._expert_groups(p, etp, self.ep, etp, etp * self.ep)

    def etp_groups(self, p: int) -> list[tuple[int, ...]]:
        """Expert tensor-parallel groups of stage p: ``etp`` consecutive stage indices."""
        etp = self.expert_tp
        return self._expert_groups(p, 1, etp, 1, etp)

    def tp_ep_groups(self, p: int) -> list[tuple[int, ...]]:
        """Megatron-core's ``tp_ep_group`` of stage p: ``etp·ep`` consecutive stage indices."""
        size = self.expert_tp * self.ep
        return self._expert_groups(p, 1, size, 1, size)

    def edp_groups(self, p: int) -> list[tuple[int, ...]]:
        """Expert-data-parallel groups of stage p: the ranks holding the same experts' same shard."""
        size = self.expert_tp * self.ep
        return self._expert_groups(p, size, self.tp * self.dp // size, size, self.tp * self.dp)

    def cp_groups(self, t: int, p: int) -> list[tuple[int, ...]]:
        """Context-parallel rings of (t, p): the ``cp`` replicas of each data replica, in ring order."""
        return [tuple(self.rank(t, p, e * self.cp + c) for c in range(self.cp)) for e in range(self.data)]

    def shard_groups(self, t: int, p: int, size: int) -> list[tuple[int, ...]]:
        """HSDP shard groups of (t, p): ``size`` consecutive replicas each (parameters sharded inside)."""
        g = self.dp_group(t, p)
        return [g[i:i + size] for i in range(0, self.dp, size)]

    def replica_groups(self, t: int, p: int, size: int) -> list[tuple[int, ...]]:
        """HSDP replica groups of (t, p): the ranks holding the same shard, one per shard group."""
        g = self.dp_group(t, p)
        return [g[k::size] for k in range(size)]


@dataclass(frozen=True)
class Structure:
    """Layer indices of a transformer trace: before the blocks, each block, after the blocks."""

    pre: tuple[int, ...]
    blocks: tuple[tuple[int, ...], ...]
    post: tuple[int, ...]


def layer_kind(name: str) -> str:
    """``attn``, ``mlp``, ``moe``, ``embed``, ``head`` or ``other`` from a layer's name."""
    m = _BLOCK.match(name)
    if m:
        return m.group(2)
    return name if name in ("embed", "head") else "other"


def structure(names: list[str]) -> Structure | None:
    """Blocks of consecutive ``block{i}.*`` layers in forward order; None if the trace has no blocks."""
    pre: list[int] = []
    blocks: dict[int, list[int]] = {}
    post: list[int] = []
    order: list[int] = []
    for j, name in enumerate(names):
        m = _BLOCK.match(name)
        if m:
            i = int(m.group(1))
            if post or (order and order[-1] != i and i in blocks):
                raise ConfigError(f"trace: layer {name!r} is out of order; blocks must be consecutive "
                                  "block{i}.attn/.mlp/.moe layers between embed and head")
            if i not in blocks:
                order.append(i)
                blocks[i] = []
            blocks[i].append(j)
        elif blocks:
            post.append(j)
        else:
            pre.append(j)
    if not blocks:
        return None
    return Structure(tuple(pre), tuple(tuple(blocks[i]) for i in order), tuple(post))


def chunks(s: Structure, n_virtual: int, counts: tuple[int, ...] | None = None) -> list[tuple[int, ...]]:
    """Layers of each of ``n_virtual`` virtual stages: equal runs of blocks (or ``counts`` blocks each),
    embed first, head last.

    The caller has checked that the blocks divide evenly, or that ``counts`` sum to them.
    """
    if counts is None:
        counts = (len(s.blocks) // n_virtual,) * n_virtual
    starts = [sum(counts[:u]) for u in range(n_virtual + 1)]
    out = []
    for u in range(n_virtual):
        layers = [j for blk in s.blocks[starts[u]:starts[u + 1]] for j in blk]
        if u == 0:
            layers = list(s.pre) + layers
        if u == n_virtual - 1:
            layers += list(s.post)
        out.append(tuple(layers))
    return out


def schedule(kind: str, pp: int, m: int, v: int = 1) -> list[list[tuple[str, int, int]]]:
    """Per stage, the ordered tasks ``(F|B, microbatch, chunk)`` of one iteration.

    * ``gpipe``: every forward, then every backward (Huang et al. 2019).
    * ``1f1b``: stage p runs ``pp - p - 1`` warm-up forwards, then alternates one
      forward and one backward, then drains the remaining backwards (PipeDream-Flush,
      Narayanan et al. 2021).
    * ``interleaved``: Megatron-LM's interleaved 1F1B over ``v`` model chunks per
      rank: virtual micro-batch k is micro-batch ``(k // (pp·v))·pp + k % pp`` of chunk
      ``(k // pp) % v`` (reversed chunks in backward); warm-up ``2(pp - p - 1) + (v - 1)·pp``.
    """
    out = []
    for p in range(pp):
        if kind == "gpipe":
            tasks = [("F", i, 0) for i in range(m)] + [("B", i, 0) for i in range(m)]
        elif kind == "1f1b":
            warm = min(pp - p - 1, m)
            tasks = [("F", i, 0) for i in range(warm)]
            for i in range(m - warm):
                tasks += [("F", warm + i, 0), ("B", i, 0)]
            tasks += [("B", i, 0) for i in range(m - warm, m)]
        else:
            total = m * v

            def task(k: int, forward: bool) -> tuple[str, int, int]:
                group, within = divmod(k, pp * v)
                c = within // pp
                return ("F" if forward else "B", group * pp + within % pp, c if forward else v - 1 - c)

            warm = total if m == pp else min(total, 2 * (pp - p - 1) + (v - 1) * pp)
            tasks = [task(k, True) for k in range(warm)]
            for k in range(total - warm):
                tasks += [task(warm + k, True), task(k, False)]
            tasks += [task(k, False) for k in range(total - warm, total)]
        out.append(tasks)
    return out
