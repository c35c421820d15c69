"""Redundancy among residents: the marginal value of an entry given the entries kept before it.

CURATOR's Keep (Alg. 1 lines 7-12) fills the budget by ρ = (V̂ − λĤ)/b (Eq. 1) with each entry
scored alone. Its helpfulness is a *marginal* utility, q(m) = E_x[U(x; R_x ∪ {m}) − U(x; R_x)]
(Eq. 3): when a near-duplicate m' of m is already resident, the queries that would retrieve m
retrieve m' too, so m adds little. CURATOR tests exactly this on the uplink (Share, Alg. 1 line
15: m is sent only when max_{m'∈U} ⟨e_m, e_m'⟩ < δ) but not on the resident set; TokenWorth's
lifecycle (Sec. 4.4) builds *coverage* first and admits a further memory only when it is novel
(τ_nov) or clearly better. Under a budget with fewer slots than recurring task families, a Keep
that scores entries alone holds second and third exemplars of some families while others have
none.

This module gives Keep the marginal reading: entries are taken greedily (lazy greedy, exact
because the redundancy of a candidate only grows as the kept set grows), and an entry's value
given the kept set S is

    V̂_S(m) = V̂(m) − r_S(m)·max(V̂(m), 0),
    r_S(m) = clip((max_{m'∈S} cos(e_m, e_m') − δ₀) / (δ₁ − δ₀), 0, 1),

Share's δ test made a ramp (our reading: δ₀ where similarity starts to count, δ₁ where m is a
full duplicate), so ties and near-ties degrade smoothly. Its key is Keep's density on V̂_S, and
it is lowered by r_S(m)·Γ, with Γ larger than the spread of every entry's key taken alone: a full
duplicate of a kept entry (r = 1) ranks below every entry that duplicates nothing kept
(TokenWorth's coverage before quality; the brief of issue 35: the second exemplar of a covered
family must be worth less than the first of an uncovered one). Redundancy is read from the
residents' embeddings only; the library never sees task families.

References
----------
CURATOR, Eq. 1, Eq. 3 (q as marginal utility), Eq. 5 and Prop. 1 (density greedy), Alg. 1 line
15 (redundancy test δ). TokenWorth, Sec. 4.4 (coverage-quality principle, novelty τ_nov).
"""

from __future__ import annotations

import heapq

import numpy as np

from memcurator.errors import InvalidInput
from memcurator.retrieve.dense import row_blocks


def check_ramp(lo: float, hi: float) -> None:
    """Validate the redundancy ramp δ₀ < δ₁ (cosines in [-1, 1]).

    Raises
    ------
    InvalidInput
        Not finite, out of [-1, 1], or ``lo >= hi``.

    Examples
    --------
    >>> check_ramp(0.7, 0.9)
    >>> check_ramp(0.9, 0.7)
    Traceback (most recent call last):
    ...
    memcurator.errors.InvalidInput: coverage ramp needs -1 <= lo < hi <= 1, got (0.9, 0.7)
    """
    ok = all(isinstance(v, int | float) and np.isfinite(v) for v in (lo, hi))
    if not ok or not -1.0 <= lo < hi <= 1.0:
        raise InvalidInput(f"coverage ramp needs -1 <= lo < hi <= 1, got ({lo!r}, {hi!r})")


def near_neighbours(E: np.ndarray, lo: float) -> list[tuple[np.ndarray, np.ndarray]]:
    """For each row of ``E``, the other rows whose cosine with it is at least ``lo``.

    Parameters
    ----------
    E : ndarray of shape (n, d)
        Embeddings (any float or int dtype; rows are normalised here, a zero row has no
        neighbours).
    lo : float
        Cosine floor δ₀.

    Returns
    -------
    list of (ndarray of int, ndarray of float)
        Per row: neighbour indices and their cosines. O(n² d) time in row blocks, O(n·block)
        memory.

    Examples
    --------
    >>> E = np.array([[1.0, 0.0], [0.99, 0.14], [0.0, 1.0]])
    >>> [idx.tolist() for idx, _ in near_neighbours(E, 0.9)]
    [[1], [0], []]
    """
    X = np.asarray(E, dtype=np.float32)
    n = X.shape[0]
    norms = np.linalg.norm(X, axis=1)
    X = np.divide(X, norms[:, None], out=np.zeros_like(X), where=norms[:, None] > 0)
    out: list[tuple[np.ndarray, np.ndarray]] = []
    for a, z in row_blocks(n):
        C = X[a:z] @ X.T
        for k in range(z - a):
            C[k, a + k] = -np.inf  # not its own neighbour
            j = np.flatnonzero(C[k] >= lo)
            out.append((j, C[k, j].astype(np.float64)))
    return out


def _key(
    V: np.ndarray | float, H: np.ndarray | float, b: np.ndarray | float, lam: float, per_byte: bool
) -> np.ndarray:
    """Keep's key of an entry alone: ρ = net/b for a positive net value (per_byte), else in
    (−2, −1] by tanh(net), below every positive one (:class:`~memcurator.policy.keep.RhoDensity`).
    """
    net = np.asarray(V, dtype=np.float64) - lam * np.asarray(H, dtype=np.float64)
    pos = net / np.asarray(b, dtype=np.float64) if per_byte else net
    return np.where(net > 0, pos, -1.0 + np.tanh(net))


def coverage_priority(
    V: np.ndarray,
    H: np.ndarray,
    b: np.ndarray,
    lam: float,
    neighbours: list[tuple[np.ndarray, np.ndarray]],
    lo: float = 0.7,
    hi: float = 0.9,
    per_byte: bool = True,
) -> np.ndarray:
    """Keep priorities from the lazy greedy over marginal (redundancy-discounted) keys.

    Parameters
    ----------
    V, H, b : ndarray of shape (n,)
        CURATOR's value V̂, harm Ĥ and bytes b (> 0) of each entry (Eq. 1-4).
    lam : float
        λ of Eq. 1.
    neighbours : list of (ndarray of int, ndarray of float)
        :func:`near_neighbours` of the entries' embeddings with floor ``lo``.
    lo, hi : float
        The ramp δ₀ < δ₁ of r_S (module docstring).
    per_byte : bool, default True
        Divide a positive net value by b (Eq. 1).

    Returns
    -------
    ndarray of shape (n,)
        The key each entry had when the greedy took it: non-increasing in the greedy order, so
        a fill by descending priority (ties to the later row, as Keep's fill breaks them) takes
        the entries in that order. With no neighbours it is Keep's key alone.

    Examples
    --------
    Two near-duplicates (rows 0, 1) of one family and one entry of another (row 2), worth less
    alone: the duplicate taken second ranks last.

    >>> V = np.array([0.5, 0.45, 0.3]); H = np.zeros(3); b = np.full(3, 100.0)
    >>> E = np.array([[1.0, 0.0], [0.999, 0.04], [0.0, 1.0]])
    >>> pr = coverage_priority(V, H, b, 1.0, near_neighbours(E, 0.7))
    >>> np.argsort(-pr).tolist()
    [0, 2, 1]
    """
    check_ramp(lo, hi)
    V = np.asarray(V, dtype=np.float64)
    n = V.shape[0]
    if n == 0:
        return np.zeros(0)
    alone = _key(V, H, b, lam, per_byte)
    gamma = float(alone.max() - alone.min()) + 1.0  # r = 1 drops below every key alone
    Vpos = np.maximum(V, 0.0)
    Hf = np.asarray(H, dtype=np.float64)
    bf = np.asarray(b, dtype=np.float64)

    def key(i: int, r: float) -> float:
        return float(_key(V[i] - r * Vpos[i], Hf[i], bf[i], lam, per_byte)) - r * gamma

    taken = np.zeros(n, dtype=bool)
    r_used = np.zeros(n)
    out = np.empty(n)
    heap = [(-float(alone[i]), -i) for i in range(n)]
    heapq.heapify(heap)
    span = hi - lo
    while heap:
        neg, negi = heapq.heappop(heap)
        i = -negi
        idx, cos = neighbours[i]
        kept = taken[idx]
        r = float(np.clip((cos[kept].max() - lo) / span, 0.0, 1.0)) if kept.any() else 0.0
        if r > r_used[i]:  # its bound is stale: the kept set grew around it
            r_used[i] = r
            heapq.heappush(heap, (-key(i, r), negi))
            continue
        taken[i] = True
        out[i] = -neg
    return out


def redundancy_to_kept(
    neighbours: list[tuple[np.ndarray, np.ndarray]], priority: np.ndarray, lo: float, hi: float
) -> np.ndarray:
    """r_S(m) of each entry against the entries ranked above it by ``priority`` (ties to the later
    row), shape (n,): what the greedy charged it (for decision-log reasons and tests).

    Examples
    --------
    >>> E = np.array([[1.0, 0.0], [0.999, 0.04], [0.0, 1.0]])
    >>> nb = near_neighbours(E, 0.7)
    >>> redundancy_to_kept(nb, np.array([3.0, 1.0, 2.0]), 0.7, 0.9).round(2).tolist()
    [0.0, 1.0, 0.0]
    """
    n = len(neighbours)
    order = np.lexsort((-np.arange(n), -np.asarray(priority, dtype=np.float64)))
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n)
    r = np.zeros(n)
    for i, (idx, cos) in enumerate(neighbours):
        above = rank[idx] < rank[i]
        if above.any():
            r[i] = float(np.clip((cos[above].max() - lo) / (hi - lo), 0.0, 1.0))
    return r


__all__ = ["check_ramp", "coverage_priority", "near_neighbours", "redundancy_to_kept"]
