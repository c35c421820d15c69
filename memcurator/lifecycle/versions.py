"""Versions of one request: which of two near-duplicate entries a user expects to see.

Two entries whose recall texts (their ``Task:`` lines) are near-duplicates answer the same
request; the newer one is the current version (a corrected answer, a migrated schema). The newer
wins, in recall and in Keep, unless the older is **proven better**: the newer has been used and
the older's net outcome (successes - failures) exceeds the newer's by at least ``margin``. An
older entry's praise from before its replacement existed is no proof: the newer had no chance.
"""

from __future__ import annotations

import numpy as np

from memcurator.types import Entry

#: Net-outcome lead (successes - failures) an older version needs over a used newer one.
OUTCOME_MARGIN = 2


def proven_better(old: Entry, new: Entry, margin: int = OUTCOME_MARGIN) -> bool:
    """Whether ``old`` has clearly better outcomes than its newer version ``new``.

    Parameters
    ----------
    old, new : Entry
        Two versions of one request; ``old`` was written first.
    margin : int, default 2
        Net outcomes (successes - failures) by which ``old`` must lead.

    Returns
    -------
    bool
        True only when ``new`` has been used (``uses > 0``) and ``old`` leads by ``margin``.

    Examples
    --------
    >>> from memcurator.types import Entry
    >>> def e(s, f, u):
    ...     return Entry("x", "ns", "insight", "t", 1, 1, np.zeros(2), "self", "",
    ...                  uses=u, successes=s, failures=f)
    >>> proven_better(e(6, 0, 6), e(0, 0, 0))   # the newer was never tried
    False
    >>> proven_better(e(6, 0, 6), e(0, 2, 2))   # the newer was tried and failed
    True
    """
    if new.uses <= 0:
        return False
    return (old.successes - old.failures) - (new.successes - new.failures) >= margin


def prefer_newer(
    scores: np.ndarray,
    cands: list[Entry],
    order: np.ndarray,
    emb: np.ndarray,
    same_request: float,
    top: int,
) -> np.ndarray:
    """Scores where no older version of a request outranks a newer one not proven worse.

    Among the ``top`` best-scored candidates, visited newest first, an older candidate whose
    embedding has cosine >= ``same_request`` with a newer one, and is not
    :func:`proven_better`, gets a score just below the newer one's (never above its own).

    Parameters
    ----------
    scores : ndarray of shape (n,)
        Final recall scores (NaN and -inf are left alone).
    cands : list of Entry, length n
    order : ndarray of shape (n,), int
        Insertion position of each candidate (larger = newer).
    emb : ndarray of shape (n, d)
        Unit embeddings of the candidates.
    same_request : float
        Cosine at or above which two entries are versions of one request.
    top : int
        How many of the best candidates are compared (the rest cannot be raised by this).

    Returns
    -------
    ndarray of shape (n,), float64
    """
    s = np.array(scores, dtype=np.float64)
    fin = np.flatnonzero(np.isfinite(s))
    if fin.size < 2:
        return s
    best = fin[np.argsort(-s[fin], kind="stable")][:top]
    by_age = best[np.argsort(-order[best], kind="stable")]  # newest first
    sims = emb[by_age] @ emb[by_age].T
    for a in range(1, len(by_age)):
        i = by_age[a]
        for b in range(a):
            j = by_age[b]
            if sims[a, b] >= same_request and s[i] >= s[j]:
                if not proven_better(cands[i], cands[j]):
                    s[i] = np.nextafter(s[j], -np.inf)
    return s


__all__ = ["OUTCOME_MARGIN", "prefer_newer", "proven_better"]
