"""Top-k among the rows a filter lets through: the filter comes before the cut, never after.

A recall that cuts a candidate pool of K rows first and filters it afterwards returns fewer than
k rows (often none) as soon as the rows that pass are not among the K best overall: one HR entry
among 100 sales entries, one user's entry among another user's 40. pgvector before 0.8 has the
same flaw (it filters after the index scan) and 0.8 added iterative index scans for it. Here
each leg of the pool (BM25, dense) takes its K best **among eligible rows**, walking the
ranking until K of them pass.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np


def top_k(scores: np.ndarray, k: int, *, positive: bool = False) -> np.ndarray:
    """The ``k`` best rows of ``scores``, best first: the selection
    :func:`~memcurator.retrieve.dense.dense_topk` and
    :meth:`~memcurator.retrieve.bm25.BM25Index.search` make (a partition, then a stable sort of
    the ``k``), so that with nothing filtered out the order, ties included, is theirs.

    Rows scored ``-inf`` are never returned; with ``positive`` only rows scored > 0 are.

    Examples
    --------
    >>> top_k(np.array([0.1, 0.9, -np.inf, 0.5]), 3).tolist()
    [1, 3, 0]
    """
    n = scores.shape[0]
    k = min(int(k), n)
    if k <= 0:
        return np.zeros(0, dtype=int)
    top = np.argpartition(-scores, k - 1)[:k]
    top = top[np.argsort(-scores[top], kind="stable")]
    return top[scores[top] > 0] if positive else top[scores[top] > -np.inf]


def top_k_eligible(
    scores: np.ndarray,
    k: int,
    *,
    mask: np.ndarray | None = None,
    test: Callable[[int], bool] | None = None,
    positive: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` best rows of ``scores`` among those that pass ``mask`` and ``test``.

    Parameters
    ----------
    scores : ndarray of shape (n,)
        One score per row (higher is better); not modified.
    k : int
        How many rows to return at most.
    mask : ndarray of bool, shape (n,), optional
        Rows that may be returned (None: all). Cheap, vectorised eligibility.
    test : callable (row: int) -> bool, optional
        A per-row test for what ``mask`` cannot express (a user's ``where`` callable). It is
        called on the best rows first, and only until ``k`` passed (an iterative scan: the
        best ``k``, then ``4k``, ``16k``, ... rows until ``k`` passed or none are left), so a
        test that passes everything costs ``k`` calls and a rare one at most one call per row.
        It should be memoised by the caller when two rankings share it.
    positive : bool, default False
        Only rows with a score > 0 (BM25: a row sharing no query token is no candidate).

    Returns
    -------
    rows : ndarray of shape (k',), int
        Best first. ``k' = min(k, rows that pass)``. When every row passes, exactly
        :func:`top_k` (so the unfiltered selection, ties included).
    scores : ndarray of shape (k',), float64

    Examples
    --------
    >>> s = np.array([0.9, 0.8, 0.7, 0.1])
    >>> top_k_eligible(s, 2, test=lambda i: i >= 2)[0].tolist()
    [2, 3]
    >>> top_k_eligible(s, 2, mask=np.array([True, False, True, True]))[0].tolist()
    [0, 2]
    """
    s = np.asarray(scores)
    if mask is not None:
        s = np.where(mask, s, -np.inf).astype(s.dtype, copy=False)
    if test is None:
        top = top_k(s, k, positive=positive)
    else:
        seen: dict[int, bool] = {}
        m = int(k)
        while True:
            cand = top_k(s, m, positive=positive)
            picked: list[int] = []
            for i in cand.tolist():
                if i not in seen:
                    seen[i] = bool(test(i))
                if seen[i]:
                    picked.append(i)
                    if len(picked) == k:
                        break
            if len(picked) >= k or len(cand) < m:
                break
            m *= 4
        top = np.array(picked, dtype=int)
    return top, np.asarray(s[top], dtype=np.float64)


__all__ = ["top_k", "top_k_eligible"]
