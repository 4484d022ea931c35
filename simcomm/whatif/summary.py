"""Plain-language findings of a what-if sweep, computed from its rows (pure; no plotting).

Definitions (also in docs/whatif.md):

* x axis: ``nodes`` if varied, else the first numeric axis, else the first axis;
* facets: every other varied axis except ``strategy``;
* time per sample = iteration time / global batch; configurations rank by it;
* scaling efficiency at n nodes = (samples/s at n / n) / (samples/s at n0 / n0),
  n0 the smallest node count of the same strategy and facet; a strategy
  "stops scaling" at the first n where efficiency < :data:`EFFICIENCY` or
  samples/s no longer grows;
* a link family "saturates" when its mean utilisation reaches :data:`SATURATED`.
"""

from __future__ import annotations

from collections import defaultdict
from itertools import pairwise

from simcomm.whatif.results import exposed_columns

__all__ = [
    "answers",
    "assumptions",
    "inputs_table",
    "EFFICIENCY",
    "SATURATED",
    "facet_keys",
    "facet_label",
    "findings",
    "ok_rows",
    "ranked",
    "ranked_table",
    "scaling_table",
    "x_axis",
]

EFFICIENCY = 0.9
SATURATED = 0.8


def ok_rows(rows):
    return [r for r in rows if r.get("status") == "ok" and r.get("iteration_s") is not None]


def x_axis(sweep: dict) -> str:
    axes = [k for k, _ in sweep.get("axes", []) if k != "strategy"]
    if "nodes" in axes:
        return "nodes"
    for k, vals in sweep.get("axes", []):
        if k != "strategy" and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals):
            return k
    return axes[0] if axes else "strategy"


def facet_keys(sweep: dict) -> list[str]:
    x = x_axis(sweep)
    return [k for k, _ in sweep.get("axes", []) if k not in (x, "strategy")]


def facet_label(row: dict, keys) -> str:
    return ", ".join(f"{k}={row.get(k)}" for k in keys) or "all"


def ranked(rows):
    """OK rows, best (lowest time per sample, then iteration time) first."""
    return sorted(ok_rows(rows), key=lambda r: (r["time_per_sample_s"], r["iteration_s"]))


def _ms(s: float) -> str:
    return f"{s * 1e3:.1f} ms"


def scaling_table(sweep: dict, rows) -> dict:
    """{(strategy, facet label): [(x, samples/s, efficiency), ...]} in x order."""
    x, keys = x_axis(sweep), facet_keys(sweep)
    groups = defaultdict(list)
    for r in ok_rows(rows):
        groups[(r.get("strategy"), facet_label(r, keys))].append(r)
    out = {}
    for key, rs in groups.items():
        rs = sorted(rs, key=lambda r: r.get(x))
        base = rs[0]
        n0 = base.get("n_ranks") or 1
        out[key] = [(r.get(x), r["samples_per_s"], (r["samples_per_s"] / (r.get("n_ranks") or 1))
                     / (base["samples_per_s"] / n0)) for r in rs]
    return out


def _scaling_findings(sweep, rows) -> list[str]:
    if x_axis(sweep) != "nodes":
        return []
    out, keep = [], []
    for (strategy, facet), pts in sorted(scaling_table(sweep, rows).items(), key=lambda kv: str(kv[0])):
        if len(pts) < 2:
            continue
        where = f"{strategy}" + (f" ({facet})" if facet != "all" else "")
        stop = next(((n0, n1, e1, s1 <= s0) for (n0, s0, _), (n1, s1, e1) in pairwise(pts)
                     if e1 < EFFICIENCY or s1 <= s0), None)
        if stop is None:
            keep.append((pts[-1][2], where, pts[0][0], pts[-1][0]))
        else:
            why = "samples/s stop growing" if stop[3] else f"scaling efficiency drops to {stop[2]:.0%}"
            out.append(f"{where} stops scaling between {stop[0]} and {stop[1]} nodes: {why}.")
    if keep:
        e, where, lo, hi = min(keep)
        who = "Every strategy" if not out else f"The other {len(keep)} strategy/configuration(s)"
        out.append(f"{who} keeps scaling from {lo} to {hi} nodes with efficiency >= {EFFICIENCY:.0%} "
                   f"(lowest: {where}, {e:.0%} of its per-rank throughput at {lo} nodes).")
    return out


def _saturation(rows) -> list[str]:
    """The busiest individual link across the sweep (the cause), and the busiest family's mean."""
    ok = ok_rows(rows)
    out = []
    hot = max(((link["util"], link, r) for r in ok for link in (r.get("busiest_links") or [])),
              default=None, key=lambda t: t[0])
    if hot is not None:
        u, link, r = hot
        where = f"{r.get('strategy')} at {r.get('nodes')} nodes" + (f" on {r.get('inter_used')}"
                                                                   if r.get("inter_used") else "")
        busy, comm = _busy_s(r, link), _comm_s(r)
        # A link that carries traffic for most of the time communication runs is the bottleneck of that phase,
        # even when it idles through the compute and its share of the whole iteration is small.
        if u >= SATURATED:
            verdict = "it is saturated: adding bandwidth there pays off"
        elif comm > 0 and busy >= SATURATED * comm:
            verdict = (f"it carries traffic {_ms(busy)} of the {_ms(comm)} communication runs, so it is saturated "
                       "while communication runs: adding bandwidth there pays off")
        else:
            verdict = ("no single link is busy for most of the communication time, so exposed communication comes "
                       "from latency, waiting and the order of transfers more than from bandwidth")
        out.append(f"The busiest single link is {link['link']} ({link['class']}), busy {u:.0%} of the iteration "
                   f"for {where}; {verdict}.")
    best = max(((r[k], k[5:], r) for r in ok for k in r if k.startswith("util_") and r[k] is not None),
               default=None, key=lambda t: t[0])
    if best is None:
        return out
    u, fam, r = best
    where = f"{r.get('strategy')} at {r.get('nodes')} nodes" + (f" on {r.get('inter_used')}" if r.get("inter_used")
                                                               else "")
    if u >= SATURATED:
        return out + [f"The {fam} links saturate: {u:.0%} mean utilisation for {where}; adding bandwidth there "
                      "pays off."]
    return out + [f"Busiest link family on average: {fam} at {u:.0%} mean utilisation ({where})."]


def _fmt(v) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def answers(sweep: dict, rows) -> list[str]:
    """The pairwise answer for every varied parameter (all but ``strategy``), one sentence per neighbouring pair.

    Each pair compares the same strategy with every other axis held at a reference
    setting: the largest x value (``nodes`` when varied) and the first value of the
    others.  A change under 0.5 % is "unchanged".  For ``nodes`` the answer is the
    gain in samples/s and the per-rank scaling efficiency.
    """
    ok = ok_rows(rows)
    axes = [(k, list(v)) for k, v in sweep.get("axes", []) if k != "strategy"]
    x = x_axis(sweep)
    strategies = list(dict.fromkeys(r.get("strategy") for r in ok))
    out = []
    for key, values in axes:
        ref = {}
        for k, vals in axes:
            if k != key:
                numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals)
                ref[k] = max(vals) if k == x and numeric else vals[0]
        at = ", ".join(f"{k}={_fmt(v)}" for k, v in ref.items())
        for a, b in pairwise(values):
            parts = []
            for strategy in strategies:
                ra = _find(ok, strategy, {**ref, key: a})
                rb = _find(ok, strategy, {**ref, key: b})
                if ra is None or rb is None:
                    continue
                if key == "nodes" and ra.get("samples_per_s") and ra.get("n_ranks") and rb.get("n_ranks"):
                    gain = rb["samples_per_s"] / ra["samples_per_s"]
                    eff = gain / (rb["n_ranks"] / ra["n_ranks"])
                    parts.append(f"{strategy} {gain:.2f}x the samples/s ({eff:.0%} of linear)")
                    continue
                d = (rb["iteration_s"] - ra["iteration_s"]) / ra["iteration_s"]
                dc = (rb.get("comm_exposed_s") or 0) - (ra.get("comm_exposed_s") or 0)
                if abs(d) < 0.005:
                    parts.append(f"{strategy} unchanged")
                else:
                    grew = _grown_link(ra, rb) if d > 0 else _grown_link(rb, ra)
                    parts.append(f"{strategy} {abs(d):.1%} {'faster' if d < 0 else 'slower'} (exposed communication "
                                 f"{_ms(ra.get('comm_exposed_s') or 0)} -> {_ms(rb.get('comm_exposed_s') or 0)}"
                                 f"{'' if abs(dc) > 1e-9 else ', so the change is compute'}"
                                 f"{f'; {grew}' if grew else ''})")
            if parts:
                out.append(f"{key}={_fmt(b)} instead of {key}={_fmt(a)}: " + "; ".join(parts)
                           + (f" (at {at})" if at else "") + ".")
    return out


def _busy_s(row, link) -> float:
    """Seconds per iteration ``link`` carries traffic at its full rate (its bytes / its capacity)."""
    return float(link["util"]) * float(row["iteration_s"])


def _comm_s(row) -> float:
    return (row.get("comm_exposed_s") or 0.0) + (row.get("comm_hidden_s") or 0.0)


def _grown_link(fast, slow) -> str | None:
    """The bottleneck that grew from ``fast`` to ``slow``: the slow point's busiest link, when its load (seconds at
    full rate per iteration) grew at least 1.5x over the fast point's busiest link and covers at least half of the
    slow point's communication time.  Read from the per-link loads, so a trunk that is busy for the whole
    communication phase is named although it idles through the compute (a low mean utilisation)."""
    hot_slow = max(slow.get("busiest_links") or [], default=None, key=lambda link: link["util"])
    hot_fast = max(fast.get("busiest_links") or [], default=None, key=lambda link: link["util"])
    if hot_slow is None or hot_fast is None:
        return None
    now, before, comm = _busy_s(slow, hot_slow), _busy_s(fast, hot_fast), _comm_s(slow)
    if now < 1.5 * before or comm <= 0 or now < 0.5 * comm:
        return None
    return (f"the bottleneck that grew is {hot_slow['link']} ({hot_slow['class']}), busy {_ms(now)} per iteration "
            f"against {_ms(before)} on the other setting's busiest link ({now / before:.1f}x), "
            f"{min(now / comm, 1.0):.0%} of the {_ms(comm)} that communication runs")


def _find(rows, strategy, setting: dict):
    return next((r for r in rows if r.get("strategy") == strategy
                 and all(r.get(k) == v for k, v in setting.items())), None)


def assumptions(rows) -> list[str]:
    """``assumed`` lines every simulated point shares (each point's own are in results.json)."""
    ok = [r for r in ok_rows(rows) if isinstance(r.get("assumed"), list)]
    if not ok:
        return []
    shared = set(ok[0]["assumed"])
    for r in ok[1:]:
        shared &= set(r["assumed"])
    return [line for line in ok[0]["assumed"] if line in shared]


def inputs_table(sweep: dict) -> list[list[str]]:
    """(parameter, value) rows: the varied axes, then the fixed inputs."""
    out = [[k, ", ".join(str(v) for v in vals) + "  (varied)"] for k, vals in sweep.get("axes", [])]
    varied = {k for k, _ in sweep.get("axes", [])}
    out += [[k, str(v)] for k, v in sweep.get("base", {}).items() if k not in varied and v is not None]
    return out


def _stragglers(rows) -> list[str]:
    ok = ok_rows(rows)
    slow = [r for r in ok if (r.get("straggler_scale") or 1) != 1 or (r.get("jitter") or 0) > 0]
    if not slow:
        return []
    out = []
    for r in slow:
        match = [b for b in ok if (b.get("straggler_scale") or 1) == 1 and not (b.get("jitter") or 0)
                 and all(b.get(k) == r.get(k) for k in r if k not in ("straggler_scale", "jitter")
                         and k in b and not isinstance(r.get(k), (float, list, dict)) and k not in
                         ("status", "reason", "model_used", "inter_used", "topology_used", "inter_family"))]
        if not match:
            continue
        b = match[0]
        dt = r["iteration_s"] - b["iteration_s"]
        dm = (r.get("rank_mean_s") or r["iteration_s"]) - b["iteration_s"]
        out.append(f"{r.get('strategy')} at {r.get('nodes')} nodes with a straggler/jitter: the slowest rank's "
                   f"iteration grows by {_ms(dt)}, the mean rank finishes {_ms(dm)} later.")
    if out:
        out.append("Why: a synchronous all-reduce makes every rank wait for the slowest, so the whole step grows "
                   "by the straggler's extra compute; gossip (SGP) waits only for one peer's message, posted at "
                   "the start of that peer's iteration, so in that iteration only the slow rank is late and the "
                   "others run on. A straggler that stays slow for many iterations still drags its out-peers over the "
                   "following iterations, spreading along the peer graph; transient slowness (jitter) is where "
                   "gossip gains most.")
    return out


def findings(sweep: dict, rows) -> list[str]:
    """Sentences for the report's summary, in a fixed order."""
    out = []
    best = ranked(rows)
    if best:
        b = best[0]
        out.append(f"Best configuration: {b.get('strategy')} at {facet_label(b, [x_axis(sweep), *facet_keys(sweep)])}"
                   f": {_ms(b['iteration_s'])} per iteration, {b['samples_per_s']:,.0f} samples/s.")
    out += answers(sweep, rows)
    out += _saturation(rows)
    out += _scaling_findings(sweep, rows)
    out += _stragglers(rows)
    na = [r for r in rows if r.get("status") == "not-applicable"]
    bad = [r for r in rows if r.get("status") == "failed"]
    if na:
        out.append(f"{len(na)} point(s) not applicable, e.g. {na[0].get('strategy')}: {na[0].get('reason')}.")
    if bad:
        out.append(f"{len(bad)} point(s) failed, e.g. {bad[0].get('strategy')}: {bad[0].get('error')}.")
    return out


def ranked_table(sweep: dict, rows, limit: int = 30) -> tuple[list[str], list[list[str]]]:
    """Header and string cells of the ranked configuration table (best first, at most ``limit``)."""
    keys = ["strategy", x_axis(sweep), *facet_keys(sweep)]
    keys = list(dict.fromkeys(keys))
    top = ranked(rows)[:limit]
    split = exposed_columns(top)  # layouts that split their exposed time by parallelism (megatron)
    head = ["#", *keys, "iteration", "time/sample", "samples/s", "speedup vs allreduce", "exposed comm",
            *(c[len("exposed_"):-2] for c in split), "busiest link"]
    body = []
    for i, r in enumerate(top, 1):
        utils = [(r[k], k[5:]) for k in r if k.startswith("util_") and r[k] is not None]
        u, fam = max(utils) if utils else (0.0, "-")
        body.append([str(i), *(str(r.get(k)) for k in keys), _ms(r["iteration_s"]),
                     f"{r['time_per_sample_s'] * 1e6:.1f} us", f"{r['samples_per_s']:,.0f}",
                     "-" if r.get("speedup") is None else f"{r['speedup']:.3f}x", _ms(r.get("comm_exposed_s") or 0),
                     *("-" if r.get(c) is None else _ms(r[c]) for c in split), f"{fam} {u:.0%}"])
    return head, body
