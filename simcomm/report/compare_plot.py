"""Plot of ``simcomm compare``: iteration time and speedup against nodes, and a stacked breakdown.

Left: mean iteration time vs nodes, one line per strategy (log y); with many
strategies the five fastest at the largest node count and the baseline are bold
and listed first in the legend (marked *), the rest pale.  The breakdown bars are
sorted fastest first.  Middle:
speedup against ``allreduce`` vs nodes.  Right: stacked bars of the breakdown
(compute, data loading, compression, exposed communication) at the largest
node count.  Not-applicable points are simply absent from the lines.
"""

from __future__ import annotations

from pathlib import Path

from simcomm.report.png import save_png

__all__ = ["plot_compare"]

#: strategies drawn bold when many are compared: the fastest at the largest node count
HIGHLIGHT = 5
_PARTS = (("compute", "compute"), ("dataload", "data loading"), ("compression", "compression"),
          ("server", "server (PS update)"), ("comm_exposed", "comm exposed"))


def plot_compare(results, path: str | Path) -> Path:
    """Write the comparison figure for ``results`` (a list of Result) to ``path`` (PNG), atomically."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from matplotlib.ticker import FuncFormatter, ScalarFormatter

    ok = [r for r in results if not r.not_applicable]
    names = list(dict.fromkeys(r.strategy for r in results))
    top_nodes = max((r.nodes for r in ok), default=0)
    at_top = sorted((r.mean_s, r.strategy) for r in ok if r.nodes == top_nodes)
    # With many strategies, the fastest few (and the baseline) are drawn bold and named at the line's
    # end; the others stay visible but thin and pale, so the lines a reader compares stand out.
    bold = {name for _, name in at_top[:HIGHLIGHT]} | {r.strategy for r in ok if r.speedup == 1.0}
    if len(names) <= HIGHLIGHT + 1:
        bold = set(names)
    fig, (ax1, ax2, ax3) = plt.subplots(1, 3, figsize=(17, 5.5))
    # Up to 17 strategies: 20 distinct colours, and markers/dashes cycle on a different period so
    # no two lines look alike.
    colours = plt.get_cmap("tab20").colors
    markers, dashes = "os^vDP*Xph<>", ("-", "--", ":", "-.")
    for i, name in enumerate(names):
        pts = sorted((r.nodes, r.mean_s, r.speedup) for r in ok if r.strategy == name)
        if not pts:
            continue
        xs = [p[0] for p in pts]
        strong = name in bold
        style = {"color": colours[i % 20], "marker": markers[i % len(markers)],
                 "linestyle": dashes[i % len(dashes)], "label": name, "linewidth": 2.2 if strong else 1.0,
                 "alpha": 1.0 if strong else 0.5, "markersize": 6 if strong else 3, "zorder": 3 if strong else 1}
        ys = [p[1] * 1e3 for p in pts]
        ax1.plot(xs, ys, **style)
        ax2.plot(xs, [p[2] if p[2] is not None else float("nan") for p in pts], **style)

    for ax, label in ((ax1, "mean iteration time (ms)"), (ax2, "speedup vs allreduce (x)")):
        ax.set_xlabel("nodes (log scale)")
        ax.set_ylabel(label)
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.grid(True, alpha=0.3)
    ax1.set_yscale("log")
    ax1.yaxis.set_major_formatter(ScalarFormatter())
    ax1.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax1.set_title("iteration time")
    ax2.set_title("speedup against allreduce")
    # The legend sits below the line plots so it never hides a line.
    handles, labels = ax1.get_legend_handles_labels()
    # the highlighted strategies first (fastest first), then the rest in their given order
    rank = {name: i for i, (_, name) in enumerate(at_top)}
    order = sorted(range(len(labels)), key=lambda j: (labels[j] not in bold, rank.get(labels[j], 0), j))
    handles, labels = [handles[j] for j in order], [labels[j] + (" *" if labels[j] in bold and
                                                                  len(names) > HIGHLIGHT + 1 else "")
                                                     for j in order]
    fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), 9) or 1, fontsize=8,
               bbox_to_anchor=(0.36, 0.0), frameon=False)
    if ok:
        top = max(r.nodes for r in ok)
        last = sorted((r for r in ok if r.nodes == top), key=lambda r: r.mean_s)  # fastest first
        bottom = [0.0] * len(last)
        for attr, label in _PARTS:
            vals = [getattr(r.breakdown, attr) for r in last]
            ax3.bar(range(len(last)), vals, bottom=bottom, label=label)
            bottom = [b + v for b, v in zip(bottom, vals)]
        ax3.set_xticks(range(len(last)), [r.strategy for r in last], rotation=60, ha="right", fontsize=7)
        ax3.set_ylabel("seconds per iteration")
        ax3.set_title(f"where the time goes at {top} nodes (fastest first)")
        ax3.legend(fontsize=8)
    fig.tight_layout(rect=(0, 0.12, 1, 1))
    return save_png(fig, path)
