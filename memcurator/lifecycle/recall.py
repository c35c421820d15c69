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
from memcurator.lifecycle.versions import prefer_newer
from memcurator.policy.base import Policy, Ranking
from memcurator.retrieve import dense_topk, row_dots, rrf_fuse
from memcurator.retrieve.hybrid import blend_scores
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
    min_score: float | None = None,
    user: str | None = None,
    lexical_weight: float = 0.5,
    same_request: float | None = 0.99,
) -> RecallResult:
    """Up to ``k`` resident entries for ``query`` (embedded as ``e_q``, shape (d,)).

    1. **Pool.** BM25 over the entries' recall texts (their ``Task:`` lines) and dense cosine
       each propose ``max(candidates, k)`` entries; reciprocal-rank fusion merges them (a policy
       with ``recall_all`` takes every resident entry).
    2. **Filters.** Entries scoped to another user (``meta["_user"]``), entries ``where``
       rejects, entries with a zero embedding (content-free) and entries whose cosine is below
       ``min_score`` leave the pool.
    3. **Score.** The policy reranks the pool; the lexical signal is then added to its scores,
       ``score + lexical_weight * bm25 / max(bm25)``
       (:func:`~memcurator.retrieve.hybrid.blend_scores`), so the entry BM25 ranks first keeps
       a lead the dense leg must clearly outweigh.
    4. **Recency.** Between versions of one request (entry cosine >= ``same_request``), the
       newer ranks first unless the older is proven better
       (:func:`memcurator.lifecycle.versions.proven_better`); recency enters nowhere else.

    NaN or ``-inf`` scores are never returned. The entries returned are copies.
    """
    n = len(res.entries)
    empty = RecallResult([], np.zeros(0), [], None, step)
    if n == 0:
        return empty
    if policy.recall_all:
        pool = np.arange(n)
        b_ids, b_sc = res.bm25.search(query, n)
    else:
        kc = max(candidates, int(k))  # a pool smaller than k could not return k results
        b_ids, b_sc = res.bm25.search(query, kc)
        M = res.matrix
        v = policy.admission_sketch(M)
        if v is None:
            d_ids, _ = dense_topk(M, e_q, kc)
        else:
            # the next write's admission reads E @ v (the propensity normaliser): take it in
            # the same pass over the matrix, bitwise as admission would
            sims, dots = row_dots(M, [e_q, v])
            res.entries.sketch_dots = (v.copy(), res.entries.generation, dots)
            d_ids, _ = dense_topk(M, e_q, kc, sims=sims)
        pool, _ = rrf_fuse([b_ids, d_ids], k=2 * kc)
    emb = res.matrix[pool]
    cos = (emb @ e_q).astype(np.float64)
    keep = np.any(emb != 0, axis=1)  # a zero embedding has no content to match
    if min_score is not None:
        keep &= cos >= min_score
    for j, i in enumerate(pool):
        if keep[j]:
            owner = res.entries[i].meta.get("_user")
            keep[j] = owner is None or owner == user
    pool, cos = pool[keep], cos[keep]
    cands = [res.entries[i] for i in pool]
    if where is not None:
        ok_w = np.array([bool(where(ResidentSet.copy_of(m))) for m in cands], dtype=bool)
        pool, cos = pool[ok_w], cos[ok_w]
        cands = [m for m, o in zip(cands, ok_w, strict=True) if o]
    if not cands:
        return empty
    ranking = as_ranking(policy.rerank(cands, cos, e_q, step))
    lex = np.zeros(len(pool))
    at = {int(i): j for j, i in enumerate(pool)}
    for i, sc in zip(b_ids, b_sc, strict=True):
        pos = at.get(int(i))
        if pos is not None:
            lex[pos] = sc
    scores = blend_scores(ranking.scores, lex, lexical_weight=lexical_weight)
    if same_request is not None:
        scores = prefer_newer(
            scores, cands, pool, res.matrix[pool], same_request, max(int(k), candidates)
        )
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
