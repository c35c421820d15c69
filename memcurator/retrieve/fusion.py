"""Reciprocal rank fusion of several ranked candidate lists."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def rrf_fuse(
    rankings: Sequence[np.ndarray], k: int, c: float = 60.0
) -> tuple[np.ndarray, np.ndarray]:
    """Fuse ranked id lists by ``score(i) = sum_r 1 / (c + rank_r(i))`` (Cormack et al., 2009).

    Parameters
    ----------
    rankings : sequence of ndarray of int
        Each a ranked list of ids, best first.
    k : int
        How many fused ids to return.
    c : float, default 60
        The RRF constant.

    Returns
    -------
    ids : ndarray of shape (k',), int
    scores : ndarray of shape (k',), descending; ties broken by smaller id

    Examples
    --------
    >>> ids, s = rrf_fuse([np.array([3, 1]), np.array([1, 2])], k=3)
    >>> [int(i) for i in ids]
    [1, 3, 2]
    """
    acc: dict[int, float] = {}
    for r in rankings:
        for rank, i in enumerate(r):
            acc[int(i)] = acc.get(int(i), 0.0) + 1.0 / (c + rank + 1)
    order = sorted(acc.items(), key=lambda t: (-t[1], t[0]))[: max(k, 0)]
    return np.array([i for i, _ in order], dtype=int), np.array([s for _, s in order])
