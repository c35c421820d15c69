"""Recall: a candidate pool from BM25 and dense search, fused, then ranked by the policy.

References
----------
Cormack et al., "Reciprocal rank fusion outperforms Condorcet and individual rank learning
methods", SIGIR 2009 (the pool's fusion). TokenWorth, Sec. 4.1 (candidate pool K_c = 12, then a
learned rank).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypedDict

import numpy as np

from memcurator import limits
from memcurator.lifecycle.context import Context
from memcurator.lifecycle.query import best_finite, check_recall_args, query_vector
from memcurator.lifecycle.resident import ResidentSet
from memcurator.lifecycle.versions import prefer_newer, superseders, supersedes
from memcurator.policy.base import Policy, Ranking
from memcurator.retrieve import dense_topk, row_dots, rrf_fuse
from memcurator.retrieve.eligible import top_k_eligible
from memcurator.retrieve.hybrid import blend_scores, recall_text
from memcurator.trust import state
from memcurator.trust.provenance import CHANNEL_ORDER, entry_taint
from memcurator.types import Entry, RecallResult


def as_ranking(r: Ranking | np.ndarray) -> Ranking:
    """A policy's ``rerank`` result as a :class:`Ranking` (a bare array is taken as scores)."""
    if isinstance(r, Ranking):
        return Ranking(np.asarray(r.scores, dtype=np.float64), r.features)
    return Ranking(np.asarray(r, dtype=np.float64))


def visible_rows(res: ResidentSet, user: str | None) -> np.ndarray | None:
    """Rows a recall by ``user`` may return, shape (n,) bool; None when every row may.

    A row is hidden when its embedding is zero (a content-free entry: nothing to match), when
    it is on trust probation (kept and counted, never injected until corroborated:
    :func:`memcurator.trust.provenance.injectable`) or when it is scoped to another user
    (``trust.user`` set and not ``user``; entries without one are shared by every user of
    the namespace). Read from cached columns (:class:`~memcurator.value.columns.EntryColumns`):
    O(n) vectorised, plus one look-up per user-scoped row.
    """
    cols = res.entries.columns
    hide = (
        (cols.column("content_free") > 0)
        | (cols.column("on_probation") > 0)
        | other_users_rows(res, user)
    )
    return ~hide if hide.any() else None


def other_users_rows(res: ResidentSet, user: str | None) -> np.ndarray:
    """Rows scoped to a user other than ``user`` (``trust.user`` set and different), shape
    (n,) bool: hidden from every read made for ``user`` (recall, a trial's candidates)."""
    cols = res.entries.columns
    out = np.zeros(len(res.entries), dtype=bool)
    for i in np.flatnonzero(cols.column("user_scoped") > 0):
        out[i] = state.user_of(res.entries[int(i)]) != user
    return out


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

    1. **Eligibility.** Entries scoped to another user (``trust.user``), entries on trust
       probation, entries with a zero embedding (content-free), entries whose cosine is below
       ``min_score`` and entries ``where`` rejects are not eligible (:func:`visible_rows`),
       nor are those the policy's rank never returns
       (:meth:`~memcurator.policy.base.Policy.recallable`). This comes
       **before** the pool is cut, so a filtered recall returns the best ``k`` entries that
       pass the filter whenever ``k`` pass, however rare they are (a filter applied to a cut
       pool returned none of them: issue 20).
    2. **Pool.** BM25 over the eligible entries' recall texts (their ``Task:`` lines) and
       dense cosine each propose their best ``max(candidates, k)`` eligible entries
       (:func:`~memcurator.retrieve.eligible.top_k_eligible`; ``where`` is called in ranking
       order until enough pass); reciprocal-rank fusion merges them (a policy with
       ``recall_all`` takes every eligible entry). Without filters the pool is exactly the
       unfiltered one.
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
    kc = n if policy.recall_all else max(candidates, int(k))  # a pool < k could not return k
    pool, (b_ids, b_sc) = _pool(res, policy, query, e_q, kc, user, where, min_score)
    marked = standing = None
    if same_request is not None and not policy.recall_all:
        cols = res.entries.columns
        marked, standing = cols.column(("of", _supersedes)) > 0, cols.column(("of", _standing))
        pool = superseders(
            pool,
            res.matrix,
            marked,
            standing,
            _eligible(res, policy, e_q, user, where, min_score),
        )
    cos = (res.matrix[pool] @ e_q).astype(np.float64)
    cands = [res.entries[i] for i in pool]
    if not cands:
        return empty
    ranking = as_ranking(policy.rerank(cands, cos, e_q, step))
    lex = _on_pool(pool, b_ids, b_sc)
    scores = blend_scores(ranking.scores, lex, lexical_weight=lexical_weight)
    if same_request is not None:
        scores = prefer_newer(
            scores,
            cands,
            pool,
            res.matrix[pool],
            same_request,
            max(int(k), candidates),
            None if marked is None or standing is None else (marked[pool], standing[pool]),
        )
    order = best_finite(scores, k)
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


def _supersedes(m: Entry) -> float:
    """1.0 when ``m`` is a note (no ``Task:`` record) whose text says it replaces earlier
    notes (:func:`.versions.supersedes`); a task record's versions are its ``Task:`` line's."""
    return float(recall_text(m.text) == m.text and supersedes(m.text))


def _standing(m: Entry) -> float:
    """How little ``m`` is trusted: the index of its channel in ``CHANNEL_ORDER`` (0: own or
    corroborated), the taint of its sources counted (:func:`~.provenance.entry_taint`)."""
    return float(CHANNEL_ORDER.index(entry_taint(state.of(m), m.origin)))


def _eligible(
    res: ResidentSet,
    policy: Policy,
    e_q: np.ndarray,
    user: str | None,
    where: Callable[[Entry], bool] | None,
    min_score: float | None,
) -> Callable[[int], bool]:
    """Whether a row outside the pool may still be recalled (a superseding note joining it):
    the same eligibility as the pool's rows."""
    vis = visible_rows(res, user)
    only = policy.recallable(res.entries)
    test = _where_test(res, where)

    def ok(i: int) -> bool:
        if (vis is not None and not vis[i]) or (only is not None and not only[i]):
            return False
        if min_score is not None and float(res.matrix[i] @ e_q) < min_score:
            return False
        return test is None or bool(test(i))

    return ok


def _on_pool(pool: np.ndarray, ids: np.ndarray, sc: np.ndarray) -> np.ndarray:
    """The BM25 leg's scores ``sc`` of rows ``ids`` laid on ``pool``'s order (0 elsewhere)."""
    lex = np.zeros(len(pool))
    at = {int(i): j for j, i in enumerate(pool)}
    for i, x in zip(ids, sc, strict=True):
        pos = at.get(int(i))
        if pos is not None:
            lex[pos] = x
    return lex


def _where_test(res: ResidentSet, where: Callable[[Entry], bool] | None) -> Any:
    """``where`` as a row test (called once per row, on a copy), or None."""
    if where is None:
        return None
    seen: dict[int, bool] = {}

    def test(i: int) -> bool:
        if i not in seen:
            seen[i] = bool(where(ResidentSet.copy_of(res.entries[i])))
        return seen[i]

    return test


def _pool(
    res: ResidentSet,
    policy: Policy,
    query: str,
    e_q: np.ndarray,
    kc: int,
    user: str | None,
    where: Callable[[Entry], bool] | None,
    min_score: float | None,
) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray]]:
    """Steps 1-2 of :func:`recall`: the candidate rows and the BM25 leg (rows, scores)."""
    M = res.matrix
    mask = visible_rows(res, user)
    only = policy.recallable(res.entries)  # entries the rank never returns (EDM: no PEI)
    if only is not None:
        mask = only if mask is None else mask & only
    sims = None
    if not policy.recall_all:
        v = policy.admission_sketch(M)
        if v is not None:
            # the next write's admission reads E @ v (the propensity normaliser): take it in
            # the same pass over the matrix, bitwise as admission would
            sims, dots = row_dots(M, [e_q, v])
            res.entries.sketch_dots = (v.copy(), res.entries.generation, dots)
    if mask is None and where is None and min_score is None:
        b_ids, b_sc = res.bm25.search(query, kc)
        if policy.recall_all:
            return np.arange(len(res.entries)), (b_ids, b_sc)
        d_ids, _ = dense_topk(M, e_q, kc, sims=sims)
        return rrf_fuse([b_ids, d_ids], k=2 * kc)[0], (b_ids, b_sc)
    # eligibility before the cut: each leg takes its best kc among the rows that pass
    if sims is None:
        sims = M @ e_q
    if min_score is not None:
        above = sims >= min_score
        mask = above if mask is None else mask & above
    test = _where_test(res, where)
    bm = res.bm25.scores(query)
    if bm is None:
        b_ids, b_sc = np.zeros(0, dtype=int), np.zeros(0)
    else:
        # as BM25Index.search ranks them (float64), so an all-passing filter changes nothing
        bm64 = np.asarray(bm, dtype=np.float64)
        b_ids, b_sc = top_k_eligible(bm64, kc, mask=mask, test=test, positive=True)
    d_ids, _ = top_k_eligible(sims, kc, mask=mask, test=test)
    if policy.recall_all:
        return np.sort(d_ids), (b_ids, b_sc)  # every eligible row, in store order
    return rrf_fuse([b_ids, d_ids], k=2 * kc)[0], (b_ids, b_sc)


def observe(ctx: Context, query: str) -> None:
    """Fold a task's query into the policy's running statistics without recalling.

    For a reader that does not go through :func:`recall_for`: a read-time curator that scans
    the resident set with its own retriever (JitMem's BM25 over task descriptions) still
    tells the policy what the working tasks are (CURATOR's query sketch q̄ and working-task
    centroid, Sec. III-A; a local helpfulness baseline's pending query). Nothing is read
    or returned, so no energy is counted.

    Raises
    ------
    InvalidInput
        Empty query, one without a letter or digit of any script, or one the embedder maps
        to NaN or infinite values (nothing is changed).
    """
    _, e_q = query_vector(ctx.embedder, query)
    ctx.sync_usable()
    ctx.policy.observe_query(e_q)


class RecallOptions(TypedDict, total=False):
    """The keyword arguments of :func:`recall_for` (and :meth:`memcurator.Memory.recall`)."""

    where: Callable[[Entry], bool] | None
    observe: bool
    min_score: float | None
    user: str | None
    meta: dict[str, Any] | None


class RecallArgs(TypedDict):
    """The options :func:`recall_for` passes alike to the in-memory and the in-store recall."""

    candidates: int
    step: int
    min_score: float | None
    user: str | None
    lexical_weight: float
    same_request: float | None


def recall_for(
    ctx: Context,
    query: str,
    k: int = 1,
    *,
    where: Callable[[Entry], bool] | None = None,
    observe: bool = True,
    min_score: float | None = None,
    user: str | None = None,
    meta: dict[str, Any] | None = None,
) -> RecallResult:
    """Recall up to ``k`` entries for ``query`` (:func:`recall` on a context): counts the query
    and the resident bytes scanned as energy, and guards ``where``.

    Parameters
    ----------
    query : str
    k : int, default 1
        At most this many results; fewer when fewer entries are resident or pass ``where``,
        or when the policy's rank caps what it injects (``tokenworth``: K_max = 1, the
        paper's default; ``create_policy("tokenworth", k_max=3)`` raises it).
    where : callable (Entry) -> bool, optional
        A filter applied before the candidate pool is cut (it receives copies): the result is
        the best ``k`` entries that pass it. It is called on entries in ranking order until
        enough pass, so it may be called on any resident entry. It may read the memory but
        not change it: a write, feedback, forget or update from inside it raises
        :class:`~memcurator.errors.InvalidInput` (the recall then fails; nothing changed).
    observe : bool, default True
        Fold the query into the policy's running statistics (CURATOR's sketch).
    min_score : float, optional
        Only entries whose cosine with the query is at least this (in [-1, 1]) are eligible;
        a query that matches nothing then returns nothing.
    user : str, optional
        The user recalling: entries written with ``user=`` are returned only to that
        user; entries without one are shared by every user of the namespace.
    meta : dict, optional
        Only entries whose ``meta`` holds every pair (key present, value equal) are eligible.
        A simple filter a database can apply itself (in-database recall pushes it into SQL);
        in memory it is a ``where`` test.

    With ``ctx.recall_in_store`` set (``Memory(..., recall_in_store=True)``) the pool comes
    from the store (:func:`memcurator.lifecycle.store_recall.recall_in_store`), not from the
    resident set.

    Ranking: the policy's score plus ``lexical_weight`` times the candidate's BM25 score
    over the pool's best; between versions of one request (cosine >= ``same_request``)
    the newer first unless the older is proven better. This is the only way recency
    enters recall (see :func:`recall`).

    Returns
    -------
    RecallResult
        ``ids`` (length ``k' <= k``), ``scores`` of shape (k',) descending, ``entries``
        (copies), and the ``features`` and ``step`` that
        :func:`~memcurator.lifecycle.feedback.feedback` learns from.

    Raises
    ------
    InvalidInput
        Empty query or one without a letter or digit of any script, a query the embedder
        maps to NaN or infinite values, ``k`` not a positive integer of at most
        :data:`memcurator.limits.MAX_RECALL_K`, ``min_score`` that is not a finite number, or
        a ``user`` that is not a non-empty string of at most
        :data:`memcurator.limits.MAX_USER_CHARS` characters.
    """
    query, e_q = query_vector(ctx.embedder, query)  # validates the query first
    check_recall_args(k, min_score, meta)
    if user is not None:
        limits.check_user(user)
    in_store = getattr(ctx, "recall_in_store", False)
    ctx.sync_usable()
    # in the store the scan is the database's; in memory it reads every resident byte
    ctx.energy.add(len(query.encode("utf-8")) + (0 if in_store else ctx.res.used))
    if observe:
        ctx.policy.observe_query(e_q)
    common = RecallArgs(
        candidates=ctx.candidates,
        step=ctx.step,
        min_score=min_score,
        user=user,
        lexical_weight=ctx.lexical_weight,
        same_request=ctx.same_request,
    )
    if in_store:
        from memcurator.lifecycle.store_recall import recall_in_store

        return recall_in_store(
            ctx.store,  # type: ignore[arg-type]  # checked when the option was set
            ctx.namespace,
            query,
            e_q,
            int(k),
            where=_guard(ctx, where),
            meta=meta,
            derive=ctx.embedder if ctx.sizing.vector_dtype == "binary" else None,
            **common,
        )
    if meta:
        from memcurator.lifecycle.store_recall import meta_test

        mt, w0 = meta_test(meta), where
        where = mt if w0 is None else (lambda e: mt(e) and bool(w0(e)))
    return recall(ctx.res, ctx.policy, query, e_q, int(k), where=_guard(ctx, where), **common)


def _guard(ctx: Context, where: Callable[[Entry], bool] | None) -> Callable[[Entry], bool] | None:
    """``where`` with changes to the memory refused while it runs."""
    guarded = None
    if where is not None:
        user_where = where

        def guarded(e: Entry) -> bool:
            ctx.in_where = True
            try:
                return bool(user_where(e))
            finally:
                ctx.in_where = False

    return guarded


__all__ = [
    "RecallOptions",
    "as_ranking",
    "check_recall_args",
    "observe",
    "query_vector",
    "recall",
    "recall_for",
    "visible_rows",
]
