"""The what-if point function: one flat dict of inputs -> one flat, JSON-able row.

``evaluate(point)`` builds the Scenario (:mod:`simcomm.whatif.params`), a
cluster with the point's topology overrides, runs it through
:func:`simcomm.pipeline.simulate` and flattens the Result: iteration time,
breakdown, bytes and utilisation per link family, speedup against
all-reduce, and a status (``ok`` or ``not-applicable``; a failure is
recorded by the sweep runner as ``failed``).

Utilisation of link family f over one iteration of length T::

    util_f = bytes_f / (T * sum of the capacities of f's directed links)

i.e. the mean busy fraction of that family's links (the engine reports bytes
per family, not per link, so a single hot link among idle ones is diluted).
Capacities are the transport stack's effective ones.

With a straggler or jitter, ``rank_mean_s`` is the mean over training ranks
of the time each rank finishes its iteration: a synchronous step makes every
rank finish late, a gossip step only the slow rank (see docs/whatif.md).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from simcomm.errors import ConfigError
from simcomm.ops import Collective, Compute, Transfer
from simcomm.pipeline import Context, build_cluster, simulate
from simcomm.whatif.params import Overrides, check_point, to_scenario

__all__ = ["WhatifContext", "build_overridden", "evaluate"]


def _nic_attach(topo) -> str | None:
    g = topo.graph
    for u, v, name in g.edges(data="link"):
        if {g.nodes[u].get("kind"), g.nodes[v].get("kind")} == {"rank", "nic"}:
            return name
    return None


def build_overridden(scn, nodes: int, over: Overrides):
    """The scenario's cluster at ``nodes`` nodes with ``over`` applied to its two-level parameters."""
    base = build_cluster(scn, nodes)
    if not over.any():
        return base
    meta = base.meta
    if meta.get("builder") != "two-level":
        raise ConfigError(f"inter/intra/nic/topology: cluster {scn.cluster!r} is not a two-level preset; "
                          "these overrides need one")
    from simcomm.topologies.two_level import two_level

    inter = over.topology or meta["inter"]
    opts = dict(meta.get("inter_options") or {}) if inter == meta["inter"] else {}
    if over.oversubscription is not None:
        if over.topology is None and meta["inter"] == "switch":
            inter, opts = "fat-tree", {}
        if inter != "fat-tree":
            raise ConfigError(f"oversubscription: applies to topology fat-tree only, not {inter!r}")
        opts["oversubscription"] = over.oversubscription
    gpn = meta["gpus_per_node"]
    return two_level(meta["nodes"], gpn, intra=meta["intra"], intra_link=over.intra or meta["intra_link"],
                     nic_link=over.inter or meta["nic_link"], nics_per_node=over.nics_per_node or meta["nics_per_node"],
                     nic_attach=over.nic or _nic_attach(base) or "pcie4", inter=inter, inter_options=opts,
                     device=meta.get("device"), name=base.name)


@dataclass
class WhatifContext(Context):
    """A pipeline Context whose clusters carry the point's topology overrides."""

    overrides: Overrides = field(default_factory=Overrides)

    def cluster(self, nodes: int, extra: int):
        key = (nodes, extra)
        if key not in self._clusters:
            from simcomm.stacks import apply_stack

            topo = build_overridden(self.scenario, nodes + extra, self.overrides)
            self._clusters[key] = (topo, apply_stack(topo, self.stack()))
        return self._clusters[key]


def _f(x) -> float | None:
    return None if x is None else float(x)


def _utilisation(topo, link_bytes: dict, seconds: float) -> dict[str, float]:
    cap: dict[str, float] = defaultdict(float)
    for name in topo.link_names:
        cap[topo.links[name].family] += topo.links[name].bandwidth
    return {fam: float(b / (seconds * cap[fam])) if cap.get(fam) and seconds > 0 else 0.0
            for fam, b in sorted(link_bytes.items())}


def _rank_mean(scn, ctx: WhatifContext) -> float:
    """Mean over training ranks of each rank's iteration finish time, weighted over iteration kinds."""
    from simcomm import engine
    from simcomm.pipeline import _train_ranks, dataset_size_for
    from simcomm.strategies.base import STRATEGIES, make_params
    from simcomm.workload import build_workload

    cls = STRATEGIES.get(scn.strategy)
    strategy = cls(make_params(cls, scn.options))
    extra = strategy.extra_nodes()
    raw, topo = ctx.cluster(scn.nodes, extra)
    n = _train_ranks(raw, scn.nodes, extra)
    gpn = max(1, n // scn.nodes)
    wl = scn.workload
    scale = tuple(s for s in wl.compute_scale for _ in range(gpn)) if len(wl.compute_scale) == scn.nodes \
        else wl.compute_scale
    strong = wl.scaling == "strong"
    w = build_workload(ctx.trace(), n, batch=None if strong else scn.batch, global_batch=scn.batch if strong else None,
                       scaling=wl.scaling, bucket_mb=wl.bucket_mb, dataload_s=wl.dataload_s,
                       dataload_overlap=wl.dataload_overlap, compute_scale=scale or None,
                       dataset_size=dataset_size_for(scn, ctx.trace(), []))
    total = acc = 0.0
    for weight, plan in strategy.iterations(w, topo):
        tl = engine.simulate(plan, topo, fidelity=scn.fidelity, seed=scn.seed)
        per = plan.meta.get("period_ranks")
        if per:
            fin = [float(tl.end[b] - tl.end[a]) for r, (a, b) in sorted(per.items()) if r < n]
        else:
            f = np.zeros(n)
            for op in plan.ops:
                members = (op.rank,) if isinstance(op, Compute) else (op.src,) if isinstance(op, Transfer) \
                    else op.ranks if isinstance(op, Collective) else ()
                for r in members:
                    if r < n:
                        f[r] = max(f[r], tl.end[op.id])
            fin = list(f)
        acc += weight * float(np.mean(fin))
        total += weight
    return acc / total


def evaluate(point: dict) -> dict:
    """Simulate one what-if point; returns a flat JSON-able row of outputs (inputs are kept by the store)."""
    p = check_point(point)
    scn, over = to_scenario(p)
    ctx = WhatifContext(scn, overrides=over)
    res = simulate(scn, ctx=ctx, baseline=True, analytic=False)
    raw, eff = next(iter(ctx._clusters.values()))  # the one cluster this point built
    nic_family = raw.links[raw.meta["nic_link"]].family if raw.meta.get("nic_link") in raw.links else None
    row = {"status": "not-applicable" if res.not_applicable else "ok", "reason": res.not_applicable,
           "n_ranks": res.n_ranks, "gpus_per_node_used": res.gpus_per_node, "model_used": res.model,
           "batch_used": res.batch, "global_batch": res.global_batch,
           "inter_used": raw.meta.get("nic_link"), "topology_used": raw.meta.get("inter"),
           "node_scales": list(scn.workload.compute_scale), "assumed": list(res.assumed)}
    if res.not_applicable:
        return row
    bd = res.breakdown
    t = float(res.mean_s)
    util = _utilisation(eff, res.link_bytes, t)
    row.update({"iteration_s": t, "compute_s": _f(bd.compute), "dataload_s": _f(bd.dataload),
                "comm_exposed_s": _f(bd.comm_exposed), "comm_hidden_s": _f(bd.comm_hidden),
                "compression_s": _f(bd.compression), "server_s": _f(bd.server),
                "samples_per_s": _f(res.samples_per_s),
                "time_per_sample_s": t / res.global_batch if res.global_batch else math.nan,
                "epoch_s": _f(res.epoch_s), "iterations_per_epoch": res.iterations_per_epoch,
                "speedup": _f(res.speedup), "baseline_s": _f(res.baseline_s),
                "inter_family": nic_family, "inter_util": util.get(nic_family, 0.0) if nic_family else None,
                "kinds": [{"label": k.label, "weight": float(k.weight), "time_s": float(k.time_s)} for k in res.kinds]})
    for fam, b in sorted(res.link_bytes.items()):
        row[f"bytes_{fam}"] = float(b)
        row[f"util_{fam}"] = util[fam]
    if scn.workload.compute_scale:
        row["rank_mean_s"] = _rank_mean(scn, ctx)
    return row
