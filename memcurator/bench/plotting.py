"""Saving a report figure: one helper the report, fronts and budget-front modules share.

It sits in its own module so that those modules do not import each other for it (they used to
reach ``report._save_png``, which made ``report`` ↔ ``fronts`` and ``report`` → ``runner`` →
``budget_fronts`` → ``report`` import cycles).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from memcurator.files import atomic_open


def save_png(fig: Any, path: Path) -> None:
    """Write a matplotlib figure to ``path`` as a 120-dpi PNG, atomically.

    Parameters
    ----------
    fig : matplotlib.figure.Figure
    path : Path
        Replaced only once the whole image is written.
    """
    with atomic_open(path, "wb") as f:
        fig.savefig(f, format="png", dpi=120)


def finish_png(fig: Any, path: Path) -> Path:
    """Lay out a finished report figure, write it (:func:`save_png`) and close it, even when
    writing fails.

    Parameters
    ----------
    fig : matplotlib.figure.Figure
    path : Path

    Returns
    -------
    Path
        ``path``.
    """
    import matplotlib.pyplot as plt

    fig.tight_layout()
    try:
        save_png(fig, path)
    finally:
        plt.close(fig)
    return path


__all__ = ["finish_png", "save_png"]
