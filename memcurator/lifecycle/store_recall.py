"""Recall inside the database: the candidate pool comes from the store, not from a resident set.

For namespaces too large to hold in one process (keep-all, a JitMem raw bank, a service with
10^6 entries): a :class:`~memcurator.store.base.SearchableStore` (PostgreSQL: pgvector HNSW
and full-text) returns each leg's best eligible entries, they are fused by the same
reciprocal-rank fusion as :func:`memcurator.lifecycle.recall.recall`, and only the fused pool
(at most ``2 * max(candidates, k)`` entries) is read into the process.

Where the line is: a policy whose rank is cosine alone (keep-all and the raw banks built on
it; :func:`rank_in_store`) ranks the pool exactly as the in-memory path does, so its recall can
move into the database. A budgeted namespace keeps its resident set in memory, because its
Keep pass chooses victims among **all** resident entries at every admitted write (the set is
in memory anyway, and in-memory recall over it is faster than a round trip); a policy whose
rank reads learned state over the whole set (CURATOR's helpfulness, TokenWorth's worth,
EDM's PEI, the oracle's ``recall_all``) is not moved either.

References
----------
Cormack et al., "Reciprocal rank fusion outperforms Condorcet and individual rank learning
methods", SIGIR 2009. Malkov & Yashunin, "Efficient and robust approximate nearest neighbor
search using HNSW graphs", TPAMI 2020 (the dense leg's index).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from memcurator.embed import Embedder
from memcurator.errors import DimensionMismatch, InvalidInput
from memcurator.lifecycle.checks import embed_checked
from memcurator.lifecycle.query import (
    best_finite,
    check_recall_args,
    embedder_identity,
    query_vector,
)
from memcurator.lifecycle.versions import prefer_newer
from memcurator.policy.base import Policy
from memcurator.retrieve import rrf_fuse
from memcurator.retrieve.hybrid import blend_scores, recall_text
from memcurator.store.base import Hit, SearchableStore, Store
from memcurator.types import Entry, RecallResult


def rank_in_store(policy: Policy) -> str | None:
    """Why ``policy``'s recall cannot run in the database, or None when it can.

    It can when the policy is unbounded (no Keep pass needs the resident set) and its rank is
    cosine alone (so the database's pool, fused, is ranked as in memory).
    """
    if policy.bounded:
        return (
            f"policy {policy.name!r} has a byte budget: its Keep pass reads every resident entry, "
            "so its recall stays in memory; in-database recall is for unbounded policies "
            "(keep-all, raw banks)"
        )
    if policy.recall_all:
        return f"policy {policy.name!r} reranks every resident entry (recall_all)"
    from memcurator.policy.rank import CosinePlusHelpfulness, CosineRank

    rank = getattr(policy, "_rank", None)
    cosine_only = type(rank) is CosineRank or (
        type(rank) is CosinePlusHelpfulness and rank.beta_q == 0
    )
    if not cosine_only:
        return (
            f"policy {policy.name!r} ranks with learned state ({type(rank).__name__}), not by "
            "cosine alone; its recall stays in memory"
        )
    return None


def meta_test(meta: dict[str, Any]) -> Callable[[Entry], bool]:
    """The in-memory form of a ``meta`` filter: every pair present and equal."""
    pairs = list(meta.items())
    return lambda e: all(key in e.meta and e.meta[key] == v for key, v in pairs)


def _legs(
    store: SearchableStore,
    namespace: str,
    line: str,
    e_q: np.ndarray,
    kc: int,
    where: Callable[[Entry], bool] | None,
    dense_kc: int | None = None,
    **kw: Any,
) -> tuple[list[Hit], list[Hit]]:
    """Each leg's best ``kc`` hits that pass ``where`` (the dense leg's best ``dense_kc``,
    default ``kc``: a binary namespace's whole Hamming short list): the store's search is
    repeated with 4x more hits until ``kc`` pass or the leg is exhausted (``where`` cannot be
    pushed into SQL; a rare one costs up to a scan of the namespace, never results)."""
    n = kc
    dk = kc if dense_kc is None else int(dense_kc)
    seen: dict[str, bool] = {}
    while True:
        hits = store.search(namespace, line, e_q, n, **kw)
        if where is None:
            return hits.dense[:dk], hits.lexical[:kc]
        fresh = [h.id for h in hits.dense + hits.lexical if h.id not in seen]
        for e in store.get_many(namespace, fresh):
            seen[e.id] = bool(where(e))
        dense = [h for h in hits.dense if seen.get(h.id, False)]
        lex = [h for h in hits.lexical if seen.get(h.id, False)]
        done_d = len(dense) >= kc or len(hits.dense) < n
        done_l = len(lex) >= kc or len(hits.lexical) < n
        if done_d and done_l:
            return dense[:dk], lex[:kc]
        n *= 4


def recall_in_store(
    store: SearchableStore,
    namespace: str,
    line: str,
    e_q: np.ndarray,
    k: int,
    *,
    candidates: int = 12,
    step: int = 0,
    where: Callable[[Entry], bool] | None = None,
    min_score: float | None = None,
    user: str | None = None,
    meta: dict[str, Any] | None = None,
    lexical_weight: float = 0.5,
    same_request: float | None = 0.99,
    exact: bool = False,
    ef_search: int | None = None,
    derive: Embedder | None = None,
) -> RecallResult:
    """Up to ``k`` entries for the query ``line`` (embedded as ``e_q``, shape (d,)), the pool
    found by the store.

    A namespace that stores binary codes (``derive`` given: the namespace's deterministic
    embedder, as :mod:`memcurator.lifecycle.derive` uses on load) has no exact vectors in the
    store: its dense leg is the store's Hamming short list of the codes (PostgreSQL: ``<~>``
    on the sign bits, ``code_shortlist * kc`` rows), rescored here with the exact vectors
    derived from the short list's texts (``min_score`` applied to the exact cosine); the best
    ``kc`` form the leg, and the pool is scored with derived vectors too. recall@10 against
    float32 exact search: docs/bytes.md.

    1. **Pool.** :meth:`~memcurator.store.base.SearchableStore.search` returns the best
       ``kc = max(candidates, k)`` eligible entries of its full-text and dense legs
       (eligibility: user scope, probation, ``meta`` pairs and ``min_score`` in SQL, before
       the cut; ``where`` in Python, the search widened until ``kc`` pass); reciprocal-rank
       fusion (:func:`~memcurator.retrieve.rrf_fuse`, full-text first as BM25 is in memory)
       keeps ``2 * kc``.
    2. **Score.** Cosine (recomputed from the stored vectors) plus ``lexical_weight`` times
       the full-text score over the pool's best (:func:`~memcurator.retrieve.hybrid.blend_scores`),
       then the newer of two versions of one request first
       (:func:`~memcurator.lifecycle.versions.prefer_newer`): as in memory for a cosine rank.

    Differences from the in-memory path: the full-text score is a capped-IDF sum, not BM25,
    so the lexical leg's order (and the blended scores) can differ; the dense leg through
    HNSW is approximate (``exact=True``: exact). Entries forgotten before the pool is read are
    never returned (the pool is read after the search, from the committed rows).

    Returns
    -------
    RecallResult
        ``features`` is None (a cosine rank has none).
    """
    kc = max(int(candidates), int(k))
    d_hits, l_hits = _legs(
        store,
        namespace,
        line,
        e_q,
        kc,
        where,
        None if derive is None else kc * int(getattr(store, "code_shortlist", 1)),
        user=user,
        meta=meta,
        min_score=min_score,
        exact=exact,
        ef_search=ef_search,
    )
    exact_of: dict[str, np.ndarray] = {}
    if derive is not None:
        d_hits = _rescored(store, namespace, d_hits, e_q, kc, derive, exact_of, min_score)
    pos_of = {h.id: h.pos for h in d_hits + l_hits}
    id_at = {h.pos: h.id for h in d_hits + l_hits}
    pool, _ = rrf_fuse(
        [
            np.array([h.pos for h in l_hits], dtype=int),
            np.array([h.pos for h in d_hits], dtype=int),
        ],
        k=2 * kc,
    )
    cands, E = _pool_vectors(
        store.get_many(namespace, [id_at[int(p)] for p in pool]), e_q, derive, exact_of, min_score
    )
    if not cands:
        return RecallResult([], np.zeros(0), [], None, step)
    cos = (E @ np.asarray(e_q, dtype=np.float32)).astype(np.float64)
    lex_of = {h.id: h.score for h in l_hits}
    lex = np.array([lex_of.get(e.id, 0.0) for e in cands])
    scores = blend_scores(cos, lex, lexical_weight=lexical_weight)
    if same_request is not None:
        order_pos = np.array([pos_of[e.id] for e in cands], dtype=np.int64)
        scores = prefer_newer(scores, cands, order_pos, E, same_request, kc)
    order = best_finite(scores, k)
    return RecallResult(
        [cands[j].id for j in order], scores[order], [cands[j] for j in order], None, step
    )


def _pool_vectors(
    cands: list[Entry],
    e_q: np.ndarray,
    derive: Embedder | None,
    exact_of: dict[str, np.ndarray],
    min_score: float | None,
) -> tuple[list[Entry], np.ndarray]:
    """The pool and its vectors (n, d): as stored, or derived for a binary namespace (then
    ``min_score``, not in SQL for codes, is applied to the exact cosine of both legs)."""
    if derive is None or not cands:
        return cands, np.vstack([np.asarray(e.embedding, dtype=np.float32) for e in cands] or
                                [np.zeros((0, len(e_q)), dtype=np.float32)])  # fmt: skip
    _derive_into(exact_of, derive, [e for e in cands if e.id not in exact_of])
    if min_score is not None:
        q = np.asarray(e_q, dtype=np.float32)
        cands = [e for e in cands if float(exact_of[e.id] @ q) >= float(min_score)]
    if not cands:
        return [], np.zeros((0, len(e_q)), dtype=np.float32)
    return cands, np.vstack([exact_of[e.id] for e in cands])


def _derive_into(out: dict[str, np.ndarray], embedder: Embedder, ents: list[Entry]) -> None:
    """Exact vectors of ``ents`` derived from their recall texts, into ``out`` by id."""
    if not ents:
        return
    many = getattr(embedder, "embed_many", None)
    if many is not None:
        X = np.asarray(many([recall_text(e.text) for e in ents]), dtype=np.float32)
    else:
        X = np.stack([embed_checked(embedder.embed, e.text) for e in ents])
    out.update({e.id: X[i] for i, e in enumerate(ents)})


def _rescored(
    store: SearchableStore,
    namespace: str,
    hits: list[Hit],
    e_q: np.ndarray,
    kc: int,
    derive: Embedder,
    out: dict[str, np.ndarray],
    min_score: float | None,
) -> list[Hit]:
    """The best ``kc`` of a Hamming short list by exact cosine (vectors derived from the
    texts, kept in ``out``), those at least ``min_score``; ties by position."""
    _derive_into(out, derive, store.get_many(namespace, [h.id for h in hits]))
    q = np.asarray(e_q, dtype=np.float32)
    scored = [Hit(h.pos, h.id, float(out[h.id] @ q)) for h in hits if h.id in out]
    if min_score is not None:
        scored = [h for h in scored if h.score >= float(min_score)]
    scored.sort(key=lambda h: (-h.score, h.pos))
    return scored[:kc]


class StoreRecall:
    """Recall on one namespace of a searchable store without loading it: a reader for
    namespaces too large to hold in a process (a service's read path, an agent that only
    recalls). Writes go through :class:`~memcurator.Memory` as always.

    Parameters
    ----------
    store : SearchableStore and Store
        E.g. :class:`~memcurator.store.postgres.PostgresStore`.
    namespace : str
    embedder : Embedder, optional
        The namespace's embedder (default: the 512-d hashing embedder).
    candidates, lexical_weight, same_request
        As :class:`~memcurator.Memory`'s.
    exact : bool, default False
        Exact dense search instead of HNSW (the reference for recall@10).
    ef_search : int, optional
        ``hnsw.ef_search`` (default the store's, 100).

    Raises
    ------
    InvalidInput
        A store without in-database search (SQLite: use :class:`~memcurator.Memory`).
    NamespaceNotFound, DimensionMismatch
        No such namespace; it was written with another embedder.

    Examples
    --------
    >>> from memcurator.store.sqlite import SQLiteStore
    >>> StoreRecall(SQLiteStore(":memory:"), "default")
    Traceback (most recent call last):
    ...
    memcurator.errors.InvalidInput: store :memory: cannot search in the database (SQLiteStore); ...
    """

    def __init__(
        self,
        store: Store,
        namespace: str,
        *,
        embedder: Embedder | None = None,
        candidates: int = 12,
        lexical_weight: float = 0.5,
        same_request: float | None = 0.99,
        exact: bool = False,
        ef_search: int | None = None,
    ):
        from memcurator.embed import HashingEmbedder

        if not isinstance(store, SearchableStore):
            raise InvalidInput(
                f"store {store.path} cannot search in the database ({type(store).__name__}); "
                "recall it through Memory (in memory), or use a postgresql:// store"
            )
        self.store = store
        self.namespace = namespace
        self.embedder = embedder if embedder is not None else HashingEmbedder()
        self.candidates = candidates
        self.lexical_weight = lexical_weight
        self.same_request = same_request
        self.exact = exact
        self.ef_search = ef_search
        info = store.namespace(namespace)
        #: a binary namespace's exact vectors come from its texts (``recall_in_store``)
        self.derive = self.embedder if info.vector_dtype == "binary" else None
        if info.embedder != embedder_identity(self.embedder) or info.dim != self.embedder.dim:
            raise DimensionMismatch(
                f"namespace {namespace!r} was written with {info.embedder} (dim {info.dim}); "
                f"this reader embeds with {embedder_identity(self.embedder)}"
            )

    def recall(
        self,
        query: str,
        k: int = 1,
        *,
        where: Callable[[Entry], bool] | None = None,
        min_score: float | None = None,
        user: str | None = None,
        meta: dict[str, Any] | None = None,
    ) -> RecallResult:
        """Up to ``k`` entries for ``query``: :func:`recall_in_store`.

        Raises
        ------
        InvalidInput
            As :meth:`memcurator.Memory.recall`.
        """
        line, e_q = query_vector(self.embedder, query)
        check_recall_args(k, min_score, meta)
        saved = self.store.load_state(self.namespace)  # type: ignore[attr-defined]
        return recall_in_store(
            self.store,
            self.namespace,
            line,
            e_q,
            int(k),
            candidates=self.candidates,
            step=saved[1] if saved else 0,
            where=where,
            min_score=min_score,
            user=user,
            meta=meta,
            lexical_weight=self.lexical_weight,
            same_request=self.same_request,
            exact=self.exact,
            ef_search=self.ef_search,
            derive=self.derive,
        )


__all__ = ["StoreRecall", "meta_test", "rank_in_store", "recall_in_store"]
