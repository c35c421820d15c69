"""Final hybrid scores: keep the lexical (BM25) signal in the final ranking, not cosine alone."""

from __future__ import annotations

import numpy as np

from memcurator.errors import InvalidInput


def blend_scores(
    cosine: np.ndarray, bm25: np.ndarray, *, lexical_weight: float = 0.5
) -> np.ndarray:
    """``cosine + lexical_weight * bm25 / max(bm25)`` over one candidate pool.

    BM25 scores are unbounded and depend on the corpus; dividing by the pool's best score puts
    them in [0, 1], the scale of a cosine, so a rare keyword that BM25 ranks first keeps its lead
    unless the dense similarity clearly disagrees.

    Parameters
    ----------
    cosine : ndarray of shape (n,)
        Cosine similarity of each candidate to the query.
    bm25 : ndarray of shape (n,)
        BM25 score of each candidate (0 where BM25 did not propose it); non-negative.
    lexical_weight : float, default 0.5
        Weight of the normalised BM25 score; 0 gives cosine alone.

    Returns
    -------
    ndarray of shape (n,), float64
        The blended score of each candidate; ``cosine`` itself when no BM25 score is positive.

    Raises
    ------
    InvalidInput
        Shapes differ, a negative or non-finite BM25 score, or a negative weight.

    Examples
    --------
    >>> blend_scores(np.array([0.8, 0.7]), np.array([1.0, 4.0])).round(3).tolist()
    [0.925, 1.2]
    >>> blend_scores(np.array([0.8, 0.7]), np.zeros(2)).tolist()
    [0.8, 0.7]
    """
    c = np.asarray(cosine, dtype=np.float64)
    b = np.asarray(bm25, dtype=np.float64)
    if c.shape != b.shape or c.ndim != 1:
        raise InvalidInput(f"cosine and bm25 must be 1-d of one shape, got {c.shape}, {b.shape}")
    if not np.all(np.isfinite(b)) or np.any(b < 0):
        raise InvalidInput("bm25 scores must be finite and >= 0")
    if not lexical_weight >= 0:
        raise InvalidInput(f"lexical_weight must be >= 0, got {lexical_weight!r}")
    top = float(b.max()) if b.size else 0.0
    if top <= 0:
        return c.copy()
    return c + lexical_weight * (b / top)


def recency_bonus(
    scores: np.ndarray, created_step: np.ndarray, step: int, *, weight: float = 0.05
) -> np.ndarray:
    """``scores + weight * created_step / step``: between near-equal candidates, the newer wins.

    Versions of one request written before and after a change (a schema migration, a corrected
    answer) are about equally similar to the query; a small bonus growing linearly with the
    creation step lets the newest version rank first unless an older one scores clearly higher
    (by more than ``weight`` at most).

    Parameters
    ----------
    scores : ndarray of shape (n,)
        Scores of the candidates (cosine scale).
    created_step : ndarray of shape (n,), int
        Step at which each candidate was written (``Entry.created_step``).
    step : int
        The current step; candidates are assumed written at or before it.
    weight : float, default 0.05
        The bonus of an entry written now over one written at step 0.

    Returns
    -------
    ndarray of shape (n,), float64
        ``scores`` with each candidate's recency bonus added (a ``step`` below 1 counts as 1).

    Raises
    ------
    InvalidInput
        Shapes differ or ``weight`` is negative.

    Examples
    --------
    >>> recency_bonus(np.array([0.80, 0.79]), np.array([10, 90]), 100).round(3).tolist()
    [0.805, 0.835]
    """
    s = np.asarray(scores, dtype=np.float64)
    c = np.asarray(created_step, dtype=np.float64)
    if s.shape != c.shape:
        raise InvalidInput(f"scores and created_step differ in shape: {s.shape}, {c.shape}")
    if not weight >= 0:
        raise InvalidInput(f"weight must be >= 0, got {weight!r}")
    return s + weight * c / max(int(step), 1)


def recall_text(text: str) -> str:
    """The part of an entry that recall should compare with a task query: its ``Task:`` line.

    An entry rendered by :func:`memcurator.distill.render_raw` or ``render_insight``
    starts with ``Task: <instruction>``; its observation (schema, example rows) and action (SQL)
    are not what a new task's instruction resembles. Measured by ``benchmarks/recall_bench.py``,
    embedding this line instead of the whole entry raises keep-all's same-family recall@1.
    Text without a ``Task:`` line is returned whole.

    Parameters
    ----------
    text : str

    Returns
    -------
    str

    Examples
    --------
    >>> recall_text("Task: Count the rows\\nObservation: t(a)\\nAction: SELECT COUNT(*) FROM t;")
    'Count the rows'
    >>> recall_text("用户喜欢喝绿茶")
    '用户喜欢喝绿茶'
    """
    for line in text.splitlines():
        if line.startswith("Task: ") and line[6:].strip():
            return line[6:].strip()
    return text
