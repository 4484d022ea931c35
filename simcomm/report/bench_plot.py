"""Plot of ``simcomm bench --png``: bus bandwidth against size, the algorithm NCCL runs, and the measurement.

The top panel is busbw (GB/s, log scale) against the size (log scale), one line
through the predicted rows, each point coloured by the (algorithm, protocol)
that ran, with a dotted line where NCCL's choice switches.  With
``--measured`` the measured busbw is drawn over it (black crosses; unsettled
rows hollow), and a bottom panel shows each row's error with a ±10 % band.
"""

from __future__ import annotations

from pathlib import Path

from simcomm.report.png import save_png

__all__ = ["plot_bench", "algorithm_runs", "size_label"]

_UNITS = ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB"))


def size_label(nbytes: float) -> str:
    """``8B``, ``64KiB``, ``1GiB``: nccl-tests sizes as a person reads them (powers of two stay exact)."""
    for unit, name in _UNITS:
        if nbytes >= unit:
            return f"{nbytes / unit:g}{name}"
    return f"{nbytes:g}B"


def algorithm_runs(sizes: list[float], algorithms: list[str]) -> list[tuple[str, float, float]]:
    """Contiguous stretches of one algorithm: ``(algorithm, first size, last size)`` in size order."""
    out: list[tuple[str, float, float]] = []
    for size, algo in sorted(zip(sizes, algorithms, strict=False)):
        if out and out[-1][0] == algo:
            out[-1] = (algo, out[-1][1], size)
        else:
            out.append((algo, size, size))
    return out


def plot_bench(predicted: list[dict], path: str | Path, title: str = "",
               measured: list[dict] | None = None) -> Path:
    """Write the plot to ``path`` (PNG), atomically.

    ``predicted``: dicts with ``size``, ``busbw`` and ``algorithm`` (rows with no prediction left out);
    ``measured``: dicts with ``size``, ``busbw``, ``error`` (None: not compared) and ``unsettled``.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedLocator, FuncFormatter

    pred = sorted((p for p in predicted if p["size"] > 0 and p["busbw"] > 0), key=lambda p: p["size"])
    meas = sorted((m for m in (measured or []) if m["size"] > 0 and m["busbw"] > 0), key=lambda m: m["size"])
    if measured is not None:
        fig, (ax, ax_err) = plt.subplots(2, 1, figsize=(9, 7), sharex=True, gridspec_kw={"height_ratios": [3, 1.3]})
    else:
        fig, ax = plt.subplots(figsize=(9, 5))
        ax_err = None
    ax.plot([p["size"] for p in pred], [p["busbw"] for p in pred], color="0.6", linewidth=1, zorder=1)
    algos = list(dict.fromkeys(p["algorithm"] for p in pred))
    colours = plt.get_cmap("tab10")
    for k, algo in enumerate(algos):
        pts = [p for p in pred if p["algorithm"] == algo]
        ax.plot([p["size"] for p in pts], [p["busbw"] for p in pts], marker="o", linestyle="", markersize=5,
                color=colours(k % 10), label=f"simcomm: {algo}", zorder=2)
    if meas:
        settled = [m for m in meas if not m.get("unsettled")]
        shaky = [m for m in meas if m.get("unsettled")]
        ax.plot([m["size"] for m in meas], [m["busbw"] for m in meas], color="black", linewidth=0.8, alpha=0.6,
                zorder=3)
        ax.plot([m["size"] for m in settled], [m["busbw"] for m in settled], marker="x", linestyle="",
                color="black", markersize=6, label="measured", zorder=4)
        if shaky:
            ax.plot([m["size"] for m in shaky], [m["busbw"] for m in shaky], marker="o", linestyle="",
                    color="black", markerfacecolor="white", markersize=6,
                    label="measured, unsettled (in-place disagrees)", zorder=4)
    runs = algorithm_runs([p["size"] for p in pred], [p["algorithm"] for p in pred])
    for (_, _, last), (_, first, _) in zip(runs, runs[1:], strict=False):  # where NCCL's choice switches
        ax.axvline((last * first) ** 0.5, color="0.7", linestyle=":", linewidth=1, zorder=0)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_ylabel("busbw, GB/s (log scale)")
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left")
    sizes = sorted({p["size"] for p in pred} | {m["size"] for m in meas})
    bottom = ax_err if ax_err is not None else ax
    if sizes:
        step = max(1, len(sizes) // 10)  # at most ~10 labels
        ticks = sizes[::step]
        bottom.xaxis.set_major_locator(FixedLocator(ticks))
        bottom.xaxis.set_major_formatter(FuncFormatter(lambda v, _: size_label(v)))
        bottom.xaxis.set_minor_locator(FixedLocator([]))
    bottom.set_xlabel("size (log scale)")
    if ax_err is not None:
        rows = [m for m in meas if m.get("error") is not None]
        ax_err.axhspan(-10, 10, color="tab:green", alpha=0.12, label="within 10 %")
        ax_err.axhline(0, color="0.5", linewidth=0.8)
        ax_err.plot([m["size"] for m in rows], [100 * m["error"] for m in rows], color="tab:red", linewidth=1)
        for shaky in (False, True):  # unsettled rows hollow: the source does not say what their time is
            pts = [m for m in rows if bool(m.get("unsettled")) is shaky]
            ax_err.plot([m["size"] for m in pts], [100 * m["error"] for m in pts], marker="o", markersize=4,
                        linestyle="", color="tab:red", markerfacecolor="white" if shaky else "tab:red")
        ax_err.set_ylabel("error, %\n(predicted - measured)", fontsize=8)
        ax_err.grid(True, alpha=0.3)
        ax_err.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    return save_png(fig, path)
