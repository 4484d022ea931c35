"""Write a matplotlib figure as a PNG: atomically, byte-identical for the same figure, and closed after."""

from __future__ import annotations

from pathlib import Path

from simcomm.fileio import atomic_open

__all__ = ["save_png"]


def save_png(fig, path: str | Path, *, dpi: int = 110) -> Path:
    """Write ``fig`` to ``path`` through a temp file (never a partial PNG) and close it.

    ``metadata={"Software": None}`` drops matplotlib's version stamp, so the same
    figure gives the same bytes (determinism).
    """
    import matplotlib.pyplot as plt

    path = Path(path)
    try:
        with atomic_open(path, "wb") as fh:
            fig.savefig(fh, format="png", dpi=dpi, metadata={"Software": None})
    finally:
        plt.close(fig)
    return path
