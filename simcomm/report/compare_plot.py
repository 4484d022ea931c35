"""Plot of ``simcomm compare``: the ranking a reader looks for, and where the time goes.

With a few strategies (at most ``LINES``) the left panels are lines against nodes (iteration
time, log y; speedup against the baseline).  With more, lines become a tangle of near ties, so
the left panel is a table of cells instead: one row per strategy (fastest at the largest node
count first), one column per node count, each cell the speedup against the baseline with its
iteration time, coloured on a diverging scale centred on 1.0x (green faster, red slower) and
the fastest strategy of each column framed.  Not-applicable cells are grey and say "n/a".
Right: stacked bars of the breakdown (compute, data loading, compression, server, exposed
communication) at the largest node count, fastest first, in the same order as the rows.
"""

from __future__ import annotations

from pathlib import Path

from simcomm.report.png import save_png

__all__ = ["plot_compare", "fastest_by_nodes", "LINES"]

#: the most strategies drawn as lines; more are drawn as the table of cells
LINES = 6
_PARTS = (("compute", "compute"), ("dataload", "data loading"), ("compression", "compression"),
          ("server", "server (PS update)"), ("comm_exposed", "comm exposed"))


def plot_compare(results, path: str | Path) -> Path:
    """Write the comparison figure for ``results`` (a list of Result) to ``path`` (PNG), atomically."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ok = [r for r in results if not r.not_applicable]
    names = list(dict.fromkeys(r.strategy for r in results))
    top_nodes = max((r.nodes for r in ok), default=0)
    at_top = {r.strategy: r.mean_s for r in ok if r.nodes == top_nodes}
    # fastest at the largest node count first; strategies without a point there go last, in given order
    order = sorted(names, key=lambda n: (n not in at_top, at_top.get(n, 0.0), names.index(n)))
    if len(names) <= LINES:
        fig, (ax1, ax2, ax3) = plt.subplots(1, 3, figsize=(17, 5.5))
        _lines(ax1, ax2, ok, order, plt)
        fig.legend(*ax1.get_legend_handles_labels(), loc="lower center", ncol=len(order) or 1, fontsize=8,
                   bbox_to_anchor=(0.36, 0.0), frameon=False)
        rect = (0, 0.08, 1, 1)
    else:
        fig, (ax1, ax3) = plt.subplots(1, 2, figsize=(17, max(5.5, 0.42 * len(names) + 2.0)),
                                       gridspec_kw={"width_ratios": [1.15, 1]})
        _cells(ax1, results, order, fig)
        rect = (0, 0, 1, 1)
    _breakdown(ax3, ok, order, top_nodes)
    fig.tight_layout(rect=rect)
    return save_png(fig, path)


def _baseline_name(ok) -> str:
    """The baseline in words for titles: the strategy whose speedup is exactly 1 at every point, else 'baseline'."""
    ones = {r.strategy for r in ok if r.speedup == 1.0}
    return sorted(ones)[0] if len(ones) == 1 else "baseline"


def _lines(ax1, ax2, ok, order, plt) -> None:
    """Iteration time and speedup against nodes, one line per strategy (few strategies only)."""
    from matplotlib.ticker import FuncFormatter, ScalarFormatter

    colours = plt.get_cmap("tab10").colors
    markers, dashes = "os^vDP", ("-", "--", ":", "-.")
    for i, name in enumerate(order):
        pts = sorted((r.nodes, r.mean_s, r.speedup) for r in ok if r.strategy == name)
        if not pts:
            continue
        xs = [p[0] for p in pts]
        style = {"color": colours[i % 10], "marker": markers[i % len(markers)],
                 "linestyle": dashes[i % len(dashes)], "label": name, "linewidth": 2.0}
        ax1.plot(xs, [p[1] * 1e3 for p in pts], **style)
        ax2.plot(xs, [p[2] if p[2] is not None else float("nan") for p in pts], **style)
    for ax, label in ((ax1, "mean iteration time (ms)"), (ax2, f"speedup vs {_baseline_name(ok)} (x)")):
        ax.set_xlabel("nodes (log scale)")
        ax.set_ylabel(label)
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.grid(True, alpha=0.3)
    ax1.set_yscale("log")
    ax1.yaxis.set_major_formatter(ScalarFormatter())
    ax1.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax1.set_title("iteration time")
    ax2.set_title(f"speedup against {_baseline_name(ok)}")


def _cells(ax, results, order, fig) -> None:
    """The table of cells: speedup (and time) per strategy and node count, coloured around 1.0x."""
    from matplotlib.colors import TwoSlopeNorm

    counts = sorted({r.nodes for r in results})
    by = {(r.strategy, r.nodes): r for r in results}
    speed = [[_speedup(by.get((name, n))) for n in counts] for name in order]
    finite = [v for row in speed for v in row if v == v]
    low, high = min(finite, default=0.5), max(finite, default=1.5)
    # a diverging scale centred on 1.0x; the extent is symmetric in log terms so that 0.5x is as red as 2x is green
    span = max(high, 1.0 / low if low > 0 else 2.0, 1.05)
    norm = TwoSlopeNorm(vmin=1.0 / span, vcenter=1.0, vmax=span)
    image = ax.imshow(speed, cmap="RdYlGn", norm=norm, aspect="auto")
    fastest = fastest_by_nodes(results)
    for i, name in enumerate(order):
        for j, n in enumerate(counts):
            result = by.get((name, n))
            if result is None or result.not_applicable or speed[i][j] != speed[i][j]:
                ax.add_patch(_grey_cell(j, i))
                ax.text(j, i, "n/a", ha="center", va="center", fontsize=8, color="0.35")
                continue
            # dark cells (far from 1.0x either way) get white text so the numbers stay legible
            dark = speed[i][j] < 0.6 or speed[i][j] > 1.8
            ax.text(j, i, f"{speed[i][j]:.2f}x\n{_ms(result.mean_s)}", ha="center", va="center", fontsize=7.5,
                    color="white" if dark else "black", fontweight="bold" if fastest.get(n) == name else "normal")
            if fastest.get(n) == name:
                ax.add_patch(_frame(j, i))
    ax.set_xticks(range(len(counts)), [f"{n} nodes" for n in counts], fontsize=8)
    ax.set_yticks(range(len(order)), order, fontsize=8)
    ax.xaxis.tick_top()
    ax.set_title(f"speedup against {_baseline_name([r for r in results if not r.not_applicable])} "
                 "(fastest per column framed)", fontsize=10)
    fig.colorbar(image, ax=ax, fraction=0.04, pad=0.02, label="speedup (x)")


def fastest_by_nodes(results) -> dict[int, str]:
    """The fastest applicable strategy at each node count (ties broken by name, so the frame is deterministic)."""
    best: dict[int, tuple[float, str]] = {}
    for r in results:
        if not r.not_applicable and (r.nodes not in best or (r.mean_s, r.strategy) < best[r.nodes]):
            best[r.nodes] = (r.mean_s, r.strategy)
    return {n: name for n, (_, name) in sorted(best.items())}


def _speedup(result) -> float:
    if result is None or result.not_applicable or result.speedup is None:
        return float("nan")
    return float(result.speedup)


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.4g} ms" if seconds < 10 else f"{seconds:.4g} s"


def _grey_cell(x: int, y: int):
    from matplotlib.patches import Rectangle

    return Rectangle((x - 0.5, y - 0.5), 1, 1, facecolor="0.88", edgecolor="white")


def _frame(x: int, y: int):
    from matplotlib.patches import Rectangle

    return Rectangle((x - 0.48, y - 0.48), 0.96, 0.96, fill=False, edgecolor="black", linewidth=1.8)


def _breakdown(ax, ok, order, top_nodes: int) -> None:
    """Stacked bars of each strategy's breakdown at the largest node count, fastest first."""
    last = [r for name in order for r in ok if r.strategy == name and r.nodes == top_nodes]
    if not last:
        ax.set_axis_off()
        return
    bottom = [0.0] * len(last)
    for attr, label in _PARTS:
        vals = [getattr(r.breakdown, attr) for r in last]
        ax.bar(range(len(last)), vals, bottom=bottom, label=label)
        bottom = [b + v for b, v in zip(bottom, vals, strict=True)]
    ax.set_xticks(range(len(last)), [r.strategy for r in last], rotation=60, ha="right", fontsize=7)
    ax.set_ylabel("seconds per iteration")
    ax.set_title(f"where the time goes at {top_nodes} nodes (fastest first)")
    ax.legend(fontsize=8)
