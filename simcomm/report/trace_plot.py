"""Per-layer bar chart of a trace (forward, backward, update stacked per layer)."""

from __future__ import annotations

import os
from pathlib import Path

from simcomm.fileio import atomic_open
from simcomm.traces.schema import Trace

__all__ = ["plot_trace"]


def plot_trace(trace: Trace, path: str | os.PathLike) -> Path:
    """Draw stacked per-layer times in milliseconds to ``path`` (PNG), atomically."""
    import matplotlib

    matplotlib.use("Agg")  # headless: never open a window from a CLI command
    from matplotlib import pyplot as plt

    n = len(trace.layers)
    xs = range(n)
    fwd = [x.forward_s * 1e3 for x in trace.layers]
    bwd = [x.backward_s * 1e3 for x in trace.layers]
    upd = [x.update_s * 1e3 for x in trace.layers]
    fig, ax = plt.subplots(figsize=(max(6.0, min(24.0, 0.12 * n)), 4.0), dpi=100)
    ax.bar(xs, fwd, label="forward", color="#4c72b0")
    ax.bar(xs, bwd, bottom=fwd, label="backward", color="#dd8452")
    ax.bar(xs, upd, bottom=[a + b for a, b in zip(fwd, bwd, strict=False)], label="update", color="#55a868")
    ax.set_xlabel("layer (execution order)")
    ax.set_ylabel("time (ms)")
    ax.set_title(f"{trace.model} on {trace.device}, {trace.method}, batch {trace.batch}")
    if n <= 40:
        ax.set_xticks(list(xs), [x.name for x in trace.layers], rotation=90, fontsize=6)
    ax.legend()
    fig.tight_layout()
    path = Path(path)
    try:
        with atomic_open(path, "wb") as fh:
            fig.savefig(fh, format="png")
    finally:
        plt.close(fig)
    return path
