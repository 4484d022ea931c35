"""Pareto plot of ``simcomm plan --png``: best step time against GPU count.

Points are layouts ``simcomm plan`` found: simulated ones as filled circles,
estimate-only ones as hollow triangles (the legend says which).  The Pareto
front of the simulated points (no simulated point with fewer GPUs is as fast)
is joined by a line; points off it are drawn pale.  Each point is labelled
with its layout.
"""

from __future__ import annotations

from pathlib import Path

from simcomm.report.png import save_png

__all__ = ["plot_pareto", "pareto_front"]


def pareto_front(points: list[dict]) -> list[dict]:
    """Points (``gpus``, ``step_s``) that no point with fewer or as many GPUs beats on step time, by GPUs."""
    front, best = [], float("inf")
    for p in sorted(points, key=lambda p: (p["gpus"], p["step_s"])):
        if p["step_s"] < best:
            front.append(p)
            best = p["step_s"]
    return front


def plot_pareto(points: list[dict], path: str | Path, title: str = "") -> Path:
    """Write the plot of ``points`` (dicts with gpus, step_s, priced, layout) to ``path`` (PNG), atomically."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    front = pareto_front([p for p in points if p["priced"] != "estimate"])
    on = {id(p) for p in front}
    fig, ax = plt.subplots(figsize=(8, 5))
    for p in points:
        sim = p["priced"] != "estimate"
        ax.plot([p["gpus"]], [p["step_s"]], marker="o" if sim else "^", markersize=8,
                color="tab:blue" if sim else "tab:orange", markerfacecolor="tab:blue" if sim else "white",
                alpha=1.0 if id(p) in on or not sim else 0.4, linestyle="")
        ax.annotate(p["layout"], (p["gpus"], p["step_s"]), textcoords="offset points", xytext=(5, 5), fontsize=7)
    ax.plot([p["gpus"] for p in front], [p["step_s"] for p in front], color="tab:blue", linewidth=1.5,
            label="Pareto front (simulated)")
    ax.plot([], [], marker="o", color="tab:blue", linestyle="", label="simulated")
    ax.plot([], [], marker="^", color="tab:orange", markerfacecolor="white", linestyle="",
            label="estimate only (not simulated)")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set_xlabel("GPUs (log scale)")
    ax.set_ylabel("step time, s (log scale)")
    ax.set_title(title or "fastest layout per GPU count", fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return save_png(fig, path)
