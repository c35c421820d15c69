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


__all__ = ["save_png"]
