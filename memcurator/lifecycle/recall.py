"""Recall: a candidate pool from BM25 and dense search, fused, then ranked by the policy.

References
----------
Cormack et al., "Reciprocal rank fusion outperforms Condorcet and individual rank learning
methods", SIGIR 2009 (the pool's fusion). TokenWorth, Sec. 4.1 (candidate pool K_c = 12, then a
learned rank).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from memcurator.lifecycle.resident import ResidentSet
from memcurator.policy.base import Policy, Ranking
from memcurator.retrieve import dense_topk, rrf_fuse
from memcurator.types import Entry, RecallResult


def as_ranking(r: Ranking | np.ndarray) -> Ranking:
    """A policy's ``rerank`` result as a :class:`Ranking` (a bare array is taken as scores)."""
    if isinstance(r, Ranking):
        return Ranking(np.asarray(r.scores, dtype=np.float64), r.features)
    return Ranking(np.asarray(r, dtype=np.float64))


def recall(
    res: ResidentSet,
    policy: Policy,
    query: str,
    e_q: np.ndarray,
    k: int,
    *,
    candidates: int,
    step: int,
    where: Callable[[Entry], bool] | None = None,
) -> RecallResult:
    """Up to ``k`` resident entries for ``query`` (embedded as ``e_q``, shape (d,)).

    BM25 and dense cosine each propose ``max(candidates, k)`` entries; reciprocal-rank fusion
    merges them; ``where`` filters; the policy reranks the pool (a policy with ``recall_all``
    reranks every resident entry). NaN or ``-inf`` scores are never returned. The entries
    returned are copies.
    """
    n = len(res.entries)
    if n == 0:
        return RecallResult([], np.zeros(0), [], None, step)
    if policy.recall_all:
        pool = np.arange(n)
    else:
        kc = max(candidates, int(k))  # a pool smaller than k could not return k results
        b_ids, _ = res.bm25.search(query, kc)
        d_ids, _ = dense_topk(res.matrix, e_q, kc)
        pool, _ = rrf_fuse([b_ids, d_ids], k=2 * kc)
    cands = [res.entries[i] for i in pool]
    if where is not None:
        keep = [j for j, m in enumerate(cands) if where(ResidentSet.copy_of(m))]
        pool = pool[keep]
        cands = [cands[j] for j in keep]
    if not cands:
        return RecallResult([], np.zeros(0), [], None, step)
    cos = (res.matrix[pool] @ e_q).astype(np.float64)
    ranking = as_ranking(policy.rerank(cands, cos, e_q, step))
    scores = ranking.scores
    ok = np.isfinite(scores)  # NaN or -inf scores are never ranked
    order = [j for j in np.argsort(-np.where(ok, scores, -np.inf), kind="stable") if ok[j]][:k]
    feats = None
    if ranking.features is not None:
        feats = {cands[j].id: np.array(ranking.features[j]) for j in order}
    return RecallResult(
        [cands[j].id for j in order],
        scores[order],
        [ResidentSet.copy_of(cands[j]) for j in order],
        feats,
        step,
    )


__all__ = ["as_ranking", "recall"]
