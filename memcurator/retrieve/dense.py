"""Dense cosine recall over unit-norm embeddings."""

from __future__ import annotations

import numpy as np


def dense_topk(matrix: np.ndarray, query: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Top-``k`` rows of ``matrix`` by inner product with ``query`` (cosine for unit vectors).

    Parameters
    ----------
    matrix : ndarray of shape (n, d)
    query : ndarray of shape (d,)
    k : int

    Returns
    -------
    ids : ndarray of shape (min(k, n),), int
    scores : ndarray of shape (min(k, n),), descending

    Examples
    --------
    >>> m = np.eye(3, dtype=np.float32)
    >>> ids, s = dense_topk(m, np.array([0, 1, 0], dtype=np.float32), 2)
    >>> int(ids[0]), float(s[0])
    (1, 1.0)
    """
    n = matrix.shape[0]
    if n == 0 or k <= 0:
        return np.zeros(0, dtype=int), np.zeros(0)
    sims = matrix @ query
    k = min(k, n)
    top = np.argpartition(-sims, k - 1)[:k]
    top = top[np.argsort(-sims[top], kind="stable")]
    return top, sims[top].astype(np.float64)
