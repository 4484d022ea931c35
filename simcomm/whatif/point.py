"""The what-if point function: one flat dict of inputs -> one flat, JSON-able row.

``evaluate(point)`` resolves the point like any scenario (the one vocabulary,
:mod:`simcomm.whatif.params`), runs it once through
:func:`simcomm.pipeline.simulate` (exactly what ``simcomm run`` with the same
keys runs) and flattens the Result: iteration time,
breakdown, bytes and utilisation per link family, speedup against
all-reduce, and a status (``ok`` or ``not-applicable``; a failure is
recorded by the sweep runner as ``failed``).

Utilisation of link family f over one iteration of length T::

    util_f = bytes_f / (T * sum of the capacities of f's directed links)

i.e. the mean busy fraction of that family's links, which dilutes a single hot
link among idle ones; so each row also names its three busiest individual
directed links with their utilisation (bytes / (T x that link's capacity),
``busiest_links``).  Capacities are the transport stack's effective ones.

With a straggler or jitter, ``rank_mean_s`` is the mean over training ranks
of the time each rank finishes its iteration: a synchronous step makes every
rank finish late, a gossip step only the slow rank (see docs/whatif.md).
"""

from __future__ import annotations

import math
from collections import defaultdict

from simcomm.pipeline import simulate
from simcomm.scenario import node_scales
from simcomm.scenario.setup import Resolver
from simcomm.whatif.params import check_point, to_scenario

__all__ = ["evaluate"]


def _f(x) -> float | None:
    return None if x is None else float(x)


def _utilisation(topo, link_bytes: dict, seconds: float) -> dict[str, float]:
    cap: dict[str, float] = defaultdict(float)
    for name in topo.link_names:
        cap[topo.links[name].family] += topo.links[name].bandwidth
    return {fam: float(b / (seconds * cap[fam])) if cap.get(fam) and seconds > 0 else 0.0
            for fam, b in sorted(link_bytes.items())}


def evaluate(point: dict) -> dict:
    """Simulate one what-if point; returns a flat JSON-able row of outputs (inputs are kept by the store)."""
    scn = to_scenario(check_point(point))
    ctx = Resolver(scn)
    res = simulate(scn, ctx=ctx, baseline=True, analytic=False, busiest_links=3)
    raw, eff = ctx.built  # the cluster this point ran on
    nic_family = raw.links[raw.meta["nic_link"]].family if raw.meta.get("nic_link") in raw.links else None
    row = {"status": "not-applicable" if res.not_applicable else "ok", "reason": res.not_applicable,
           "n_ranks": res.n_ranks, "gpus_per_node_used": res.gpus_per_node, "model_used": res.model,
           "batch_used": res.batch, "global_batch": res.global_batch,
           "inter_used": raw.meta.get("nic_link"), "topology_used": raw.meta.get("inter"),
           "node_scales": list(scn.workload.compute_scale or node_scales(scn.workload, scn.nodes)),
           "assumed": list(res.assumed)}
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
                # (with the engine paths each kind's run took: docs/engine.md, "Engine paths")
                "kinds": [{"label": k.label, "weight": float(k.weight), "time_s": float(k.time_s), "engine": k.engine}
                          for k in res.kinds]})
    # layouts that name their parallelisms split the exposed time (Result.exposed_by): tensor, context,
    # expert, pipeline, data communication not hidden behind compute, and waiting (bubble, other ranks)
    for kind, v in res.exposed_by.items():
        row[f"exposed_{kind}_s"] = float(v)
    for fam, b in sorted(res.link_bytes.items()):
        row[f"bytes_{fam}"] = float(b)
        row[f"util_{fam}"] = util[fam]
    if res.rank_mean_s is not None:
        row["rank_mean_s"] = res.rank_mean_s
    # the busiest individual links (a family's mean dilutes one hot uplink among idle ones)
    row["busiest_links"] = [{"link": f"{a} -> {b}", "class": c.split("@")[0], "util": float(u)}
                            for a, b, c, u in res.busiest_links]
    return row
