"""Dense cosine recall over unit-norm embeddings."""

from __future__ import annotations

import numpy as np


def dense_topk(
    matrix: np.ndarray, query: np.ndarray, k: int, *, sims: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Top-``k`` rows of ``matrix`` by inner product with ``query`` (cosine for unit vectors).

    Parameters
    ----------
    matrix : ndarray of shape (n, d)
    query : ndarray of shape (d,)
    k : int
    sims : ndarray of shape (n,), optional
        ``matrix @ query`` when the caller took it already (:func:`row_dots`).

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
    if sims is None:
        sims = matrix @ query
    k = min(k, n)
    top = np.argpartition(-sims, k - 1)[:k]
    top = top[np.argsort(-sims[top], kind="stable")]
    return top, sims[top].astype(np.float64)


#: Rows per block of :func:`row_dots`: 512 rows of d = 512 float32 are 1 MiB, which stays in
#: this machine's per-core L2 between the products that read it.
ROW_BLOCK = 512


def row_dots(
    matrix: np.ndarray, vectors: list[np.ndarray], block: int = ROW_BLOCK
) -> list[np.ndarray]:
    """``[matrix @ v for v in vectors]`` reading ``matrix`` from memory once.

    Each product is taken block by block, every block while it is still in cache: at 100k
    rows (205 MB of float32) the matrix streams from memory once instead of ``len(vectors)``
    times. Each row's dot product is the same BLAS call on the same row, so the results are
    bitwise those of ``matrix @ v`` (``tests/test_row_dots.py`` checks it); a single
    matrix-matrix product would not be (it sums in another order).

    Parameters
    ----------
    matrix : ndarray of shape (n, d)
    vectors : list of ndarray of shape (d,)
        Results have the common dtype of ``matrix`` and the vectors, as with ``@``.
    block : int, default ROW_BLOCK

    Returns
    -------
    list of ndarray of shape (n,)

    Examples
    --------
    >>> M = np.arange(6, dtype=np.float32).reshape(3, 2)
    >>> e0, e1 = np.array([1, 0], np.float32), np.array([0, 1], np.float32)
    >>> [x.tolist() for x in row_dots(M, [e0, e1])]
    [[0.0, 2.0, 4.0], [1.0, 3.0, 5.0]]
    """
    n = matrix.shape[0]
    dt = np.result_type(matrix.dtype, *(v.dtype for v in vectors))
    outs = [np.empty(n, dtype=dt) for _ in vectors]
    if n <= block:
        for v, o in zip(vectors, outs, strict=True):
            np.matmul(matrix, v, out=o)
        return outs
    for lo, hi in row_blocks(n, block):
        mb = matrix[lo:hi]
        for v, o in zip(vectors, outs, strict=True):
            np.matmul(mb, v, out=o[lo:hi])
    return outs


def row_blocks(n: int, block: int = ROW_BLOCK) -> list[tuple[int, int]]:
    """``[lo, hi)`` row ranges of at most ``block`` rows covering ``range(n)``, except that a
    last range of one row joins the one before: numpy multiplies a (1, d) matrix by a vector
    with a dot product, which sums float32 in another order than the matrix-vector product.

    Examples
    --------
    >>> row_blocks(5, 2)
    [(0, 2), (2, 5)]
    """
    out = []
    lo = 0
    while lo < n:
        hi = min(lo + block, n)
        if n - hi == 1:
            hi = n
        out.append((lo, hi))
        lo = hi
    return out


#: Set bits of every byte value (a table lookup: numpy's bit_count needs numpy >= 2).
_POPCOUNT = np.array([bin(i).count("1") for i in range(256)], dtype=np.uint8)


def hamming_topk(codes: np.ndarray, qcode: np.ndarray, k: int) -> np.ndarray:
    """Rows of ``codes`` with the ``k`` smallest Hamming distances to ``qcode``, nearest first.

    For sign codes (:func:`memcurator.store.vectors.sign_code`) a small Hamming distance
    approximates a large cosine; the result is a short list to rescore exactly
    (:func:`rescore_shortlist`), not a ranking to return.

    Parameters
    ----------
    codes : ndarray of shape (n, d/8), uint8
    qcode : ndarray of shape (d/8,), uint8
    k : int

    Returns
    -------
    ndarray of shape (min(k, n),), int
        Ties keep row order.

    Examples
    --------
    >>> C = np.array([[0b1111], [0b0001], [0b0011]], dtype=np.uint8)
    >>> hamming_topk(C, np.array([0b0001], dtype=np.uint8), 2).tolist()
    [1, 2]
    """
    n = codes.shape[0]
    if n == 0 or k <= 0:
        return np.zeros(0, dtype=int)
    dist = _POPCOUNT[np.bitwise_xor(codes, qcode)].sum(axis=1, dtype=np.int32)
    k = min(k, n)
    top = np.argpartition(dist, k - 1)[:k] if k < n else np.arange(n)
    return top[np.lexsort((top, dist[top]))]


def rescore_shortlist(
    short: np.ndarray, exact: np.ndarray, query: np.ndarray, k: int
) -> tuple[np.ndarray, np.ndarray]:
    """The top ``k`` of a short list by exact inner product with ``query``.

    Parameters
    ----------
    short : ndarray of shape (L,), int
        Row ids of the short list (:func:`hamming_topk`).
    exact : ndarray of shape (L, d)
        Their exact vectors, in the same order (for a derived precision: the recall texts
        embedded again, :mod:`memcurator.lifecycle.derive`).
    query : ndarray of shape (d,)
    k : int

    Returns
    -------
    ids : ndarray of shape (min(k, L),), int
        Row ids from ``short``.
    scores : ndarray of shape (min(k, L),), descending

    Examples
    --------
    >>> ids, s = rescore_shortlist(np.array([7, 3]), np.eye(2), np.array([0.2, 0.9]), 1)
    >>> int(ids[0]), round(float(s[0]), 2)
    (3, 0.9)
    """
    top, scores = dense_topk(np.asarray(exact), np.asarray(query), k)
    return np.asarray(short)[top], scores
