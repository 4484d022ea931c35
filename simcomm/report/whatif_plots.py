"""What-if report figures (matplotlib, Agg), returned as PNG bytes in one house style.

* ``time``: iteration time against the x axis, one line (colour) per
  strategy, one panel per value of the first facet axis, line styles for a
  second; below it, scaling efficiency when x is the node count;
* ``breakdown``: at the largest x, per configuration, a stacked bar of the
  iteration (compute, data loading, compression, exposed communication)
  and beside it a hatched bar of hidden communication (it overlaps compute,
  so stacking it would overstate the iteration);
* ``utilisation``: mean utilisation per link family at the largest x;
* ``topology``: the cluster drawing of :mod:`simcomm.report.topology_plot`.
"""

from __future__ import annotations

import io
import tempfile
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from simcomm.whatif.summary import (
    facet_keys,
    facet_label,
    ok_rows,
    scaling_table,
    x_axis,
)

__all__ = ["STYLE", "figures"]

STYLE = {"font.size": 9, "axes.titlesize": 10, "axes.labelsize": 9, "legend.fontsize": 8, "axes.grid": True,
         "grid.alpha": 0.3, "figure.dpi": 100, "axes.spines.top": False, "axes.spines.right": False}
_LINESTYLES = ("-", "--", ":", "-.")
_PARTS = (("compute_s", "compute", "tab:blue"), ("dataload_s", "data loading", "tab:gray"),
          ("compression_s", "compression", "tab:purple"), ("comm_exposed_s", "exposed comm", "tab:red"))


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None}, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def _colors(strategies):
    cmap = plt.get_cmap("tab10")
    return {s: cmap(i % 10) for i, s in enumerate(strategies)}


def _values(sweep, key):
    return next((list(v) for k, v in sweep.get("axes", []) if k == key), [None])


def _time_figure(sweep, rows) -> bytes:
    x, keys = x_axis(sweep), facet_keys(sweep)
    ok = ok_rows(rows)
    panel_key = keys[0] if keys else None
    style_key = keys[1] if len(keys) > 1 else None
    panels = _values(sweep, panel_key) if panel_key else [None]
    styles = _values(sweep, style_key) if style_key else [None]
    strategies = list(dict.fromkeys(r.get("strategy") for r in rows))
    col = _colors(strategies)
    eff = x == "nodes"
    fig, axes = plt.subplots(2 if eff else 1, len(panels), figsize=(max(6.0, 4.2 * len(panels)), 7 if eff else 4),
                             squeeze=False, sharey=False)  # each panel its own y: an upgrade stays visible
    table = scaling_table(sweep, rows) if eff else {}
    for j, pv in enumerate(panels):
        ax = axes[0][j]
        for s in strategies:
            for k, sv in enumerate(styles):
                pts = sorted((r.get(x), r["iteration_s"] * 1e3) for r in ok if r.get("strategy") == s
                             and (panel_key is None or r.get(panel_key) == pv)
                             and (style_key is None or r.get(style_key) == sv))
                if not pts:
                    continue
                label = s + (f", {style_key}={sv}" if style_key else "")
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", ms=4, color=col[s],
                        ls=_LINESTYLES[k % 4], label=label)
                if eff:
                    fl = facet_label({panel_key: pv, style_key: sv}, [q for q in (panel_key, style_key) if q])
                    e = table.get((s, fl), [])
                    axes[1][j].plot([p[0] for p in e], [p[2] * 100 for p in e], marker="o", ms=4, color=col[s],
                                    ls=_LINESTYLES[k % 4], label=label)
        ax.set_title(f"{panel_key} = {pv}" if panel_key else "iteration time")
        ax.set_ylabel("iteration time (ms)")
        for a in (axes[0][j], axes[1][j]) if eff else (ax,):
            a.set_xlabel(x + (" (log scale)" if eff else ""))
            if eff:
                a.set_xscale("log", base=2)
                a.set_xticks(sorted({r.get(x) for r in ok}), [str(v) for v in sorted({r.get(x) for r in ok})])
        if eff:
            axes[1][j].set_ylabel("scaling efficiency (%)")
            axes[1][j].axhline(90, color="black", lw=0.6, ls=":")
    handles, labels = axes[0][0].get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="upper center", ncol=min(4, len(labels)), bbox_to_anchor=(0.5, 1.0))
    fig.tight_layout(rect=(0, 0, 1, 0.93))
    return _png(fig)


def _at_top(sweep, rows):
    x = x_axis(sweep)
    ok = ok_rows(rows)
    if not ok:
        return x, None, []
    top = max(r.get(x) for r in ok) if x != "strategy" else None
    return x, top, [r for r in ok if top is None or r.get(x) == top]


def _config_labels(sweep, sel):
    keys = facet_keys(sweep)
    return [f"{r.get('strategy')}" + (f"\n{facet_label(r, keys)}" if keys else "") for r in sel]


def _breakdown_figure(sweep, rows) -> bytes:
    x, top, sel = _at_top(sweep, rows)
    fig, ax = plt.subplots(figsize=(max(6.0, 0.9 * len(sel) + 2), 4.5))
    pos = list(range(len(sel)))
    bottom = [0.0] * len(sel)
    for key, label, color in _PARTS:
        vals = [(r.get(key) or 0.0) * 1e3 for r in sel]
        ax.bar([p - 0.18 for p in pos], vals, width=0.36, bottom=bottom, color=color, label=label)
        bottom = [b + v for b, v in zip(bottom, vals, strict=False)]
    ax.bar([p + 0.2 for p in pos], [(r.get("comm_hidden_s") or 0.0) * 1e3 for r in sel], width=0.2,
           color="white", edgecolor="tab:red", hatch="///", label="hidden comm (overlaps compute)")
    ax.set_xticks(pos, _config_labels(sweep, sel), rotation=45, ha="right", fontsize=7)
    ax.set_ylabel("time per iteration (ms)")
    ax.set_title(f"where the time goes at {x} = {top}" if top is not None else "where the time goes")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    return _png(fig)


def _util_figure(sweep, rows) -> bytes:
    x, top, sel = _at_top(sweep, rows)
    fams = sorted({k[5:] for r in sel for k in r if k.startswith("util_")})
    fig, ax = plt.subplots(figsize=(max(6.0, 0.9 * len(sel) + 2), 4.5))
    w = 0.8 / max(1, len(fams))
    for i, fam in enumerate(fams):
        ax.bar([p - 0.4 + w * (i + 0.5) for p in range(len(sel))], [(r.get(f"util_{fam}") or 0.0) * 100 for r in sel],
               width=w, label=fam)
    ax.set_xticks(range(len(sel)), _config_labels(sweep, sel), rotation=45, ha="right", fontsize=7)
    ax.set_ylabel("mean link utilisation (% of capacity)")
    ax.set_title(f"per-link-family utilisation at {x} = {top}" if top is not None else "per-link-family utilisation")
    if fams:  # a sweep whose every point failed has no family to name (matplotlib would warn on stderr)
        ax.legend(title="link family", loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    return _png(fig)


def _topology_png(sweep, rows) -> bytes | None:
    """Draw the cluster of the first OK row at the smallest node count (readable), or None."""
    from simcomm.pipeline import build_cluster
    from simcomm.report.topology_plot import draw_topology
    from simcomm.whatif.params import check_point, to_scenario
    from simcomm.whatif.results import input_columns

    ok = sorted(ok_rows(rows), key=lambda r: r.get("nodes") or 0)
    if not ok:
        return None
    inputs = {k: ok[0][k] for k in input_columns(sweep) if k in ok[0]}
    scn = to_scenario(check_point(inputs))
    topo = build_cluster(scn, scn.nodes)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "topology.png"
        draw_topology(topo, path)
        return path.read_bytes()


def figures(sweep: dict, rows: list[dict]) -> dict[str, bytes]:
    """Every report figure as PNG bytes, keyed by name, in report order."""
    with plt.rc_context(STYLE):
        out = {"time": _time_figure(sweep, rows), "breakdown": _breakdown_figure(sweep, rows),
               "utilisation": _util_figure(sweep, rows)}
        topo = _topology_png(sweep, rows)
    if topo is not None:
        out["topology"] = topo
    return out
