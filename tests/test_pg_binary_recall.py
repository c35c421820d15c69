"""Memory.recall in PostgreSQL on a namespace that stores binary codes (issue 35).

The store has no exact vectors: the dense leg is a Hamming short list of the sign bits in the
database, rescored in the process with the vectors derived from the short list's texts
(:func:`memcurator.lifecycle.store_recall.recall_in_store` with ``derive``). Compared here with
the same namespace ranked in memory (a handle that derives every exact vector on load): with
the cosine alone (lexical weight 0, versions off) the top 10 must agree up to ties.
"""

from __future__ import annotations

import numpy as np
import pytest

from memcurator import Memory
from memcurator.embed import HashingEmbedder
from memcurator.lifecycle.store_recall import StoreRecall
from memcurator.retrieve.hybrid import recall_text

pytest.importorskip("psycopg")

TABLES = ["orders", "clients", "invoices", "staff", "items", "regions", "stock"]
VERBS = ["count", "list", "sum", "average", "find", "delete", "update"]


def _texts(n: int) -> list[str]:
    return [
        f"Task: {VERBS[i % 7]} the {TABLES[(i // 7) % 7]} rows where id > {i % 13} "
        f"and region = r{i % 29}\nAction: SELECT * FROM {TABLES[(i // 7) % 7]} WHERE id > {i};"
        for i in range(n)
    ]


QUERIES = [
    f"{VERBS[j % 7]} the {TABLES[(j * 3) % 7]} rows where region = r{j % 29}" for j in range(25)
]


def _hits(got: list[str], texts_of: dict[str, str], q: np.ndarray, X: np.ndarray) -> float:
    """Share of ``got`` (10 ids) whose exact cosine is at least the exact 10th best."""
    emb = HashingEmbedder()
    floor = float(np.sort(X @ q)[-10]) - 1e-6
    cos = [float(emb.embed(recall_text(texts_of[i])) @ q) for i in got]
    return min(10, sum(c >= floor for c in cos)) / 10


def test_binary_recall_in_the_database_matches_exact_search(pg_url: str) -> None:
    emb = HashingEmbedder()
    kw = {"policy": "keep-all", "embedder": emb, "lexical_weight": 0.0, "same_request": None}
    mem = Memory(pg_url, namespace="b", vector_dtype="binary", recall_in_store=True, **kw)
    texts = _texts(600)
    ids = [mem.write(t, meta={"t": TABLES[(i // 7) % 7]}).id for i, t in enumerate(texts)]
    texts_of = dict(zip(ids, texts, strict=True))
    X = np.stack([emb.embed(recall_text(t)) for t in texts])
    reader = StoreRecall(mem.store, "b", embedder=emb, lexical_weight=0.0, same_request=None)
    assert reader.derive is emb
    scores = []
    for query in QUERIES:
        q = emb.embed(recall_text(query))
        for r in (mem.recall(query, k=10), reader.recall(query, k=10)):
            assert len(r.ids) == 10
            # the returned scores are exact cosines, not the codes' estimate
            exact = [float(emb.embed(recall_text(texts_of[i])) @ q) for i in r.ids]
            assert np.allclose(r.scores, exact, atol=1e-5)
            scores.append(_hits(r.ids, texts_of, q, X))
    assert float(np.mean(scores)) >= 0.97, np.mean(scores)
    # filters hold on the binary path: meta in SQL, min_score on the exact cosine
    q0 = QUERIES[0]
    got = mem.recall(q0, k=10, meta={"t": "staff"})
    assert got.ids and all(texts_of[i].split(" the ")[1].startswith("staff") for i in got.ids)
    floor = float(mem.recall(q0, k=3).scores[-1])
    high = mem.recall(q0, k=10, min_score=floor)
    assert len(high.ids) >= 3 and all(s >= floor - 1e-9 for s in high.scores)
    mem.close()


def test_a_binary_namespace_recalls_through_the_hnsw_index(pg_url: str) -> None:
    emb = HashingEmbedder()
    mem = Memory(pg_url, namespace="b", policy="keep-all", embedder=emb, vector_dtype="binary",
                 recall_in_store=True, lexical_weight=0.0, same_request=None)  # fmt: skip
    texts = _texts(300)
    ids = [mem.write(t).id for t in texts]
    r = mem.recall(texts[42], k=5)  # the index is built on first use; an entry finds itself
    assert r.ids[0] == ids[42] and r.scores[0] == pytest.approx(1.0, abs=1e-5)
    mem.close()
