"""Binary codes searched in PostgreSQL (issue 35, item 2): a Hamming short list in the database
(pgvector ``bit`` and ``<~>``, with or without its HNSW index) rescored with exact vectors
derived from the texts."""

from __future__ import annotations

import numpy as np
import pytest

from memcurator import Memory
from memcurator.embed import HashingEmbedder
from memcurator.errors import InvalidInput
from memcurator.retrieve.hybrid import recall_text
from memcurator.store.vectors import sign_code

EMB = HashingEmbedder(dim=128)


def _texts(n: int) -> list[str]:
    tables = ["orders", "clients", "ventes", "logs", "items", "stock", "users"]
    verbs = ["count", "sum the amount of", "list", "average the price of", "find"]
    return [
        f"Task: {verbs[i % 5]} rows of {tables[i % 7]} where id > {i} and region {i % 11}\n"
        f"Action: SELECT * FROM {tables[i % 7]} WHERE id > {i};"
        for i in range(n)
    ]


@pytest.fixture
def store(pg_url: str):  # type: ignore[no-untyped-def]
    from memcurator.store.postgres import PostgresStore

    s = PostgresStore(pg_url, compress_text=True)
    mem = Memory(store=s, namespace="b", embedder=EMB, policy="lru", max_bytes=None,
                 vector_dtype="binary")  # fmt: skip
    for t in _texts(400):
        mem.write(t)
    yield s
    s.close()


def _popcount(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.unpackbits(np.bitwise_xor(a, b), axis=-1).sum(axis=-1)


@pytest.mark.parametrize("index", [False, True])
def test_the_shortlist_is_the_nearest_by_hamming_distance(store, index: bool) -> None:  # type: ignore[no-untyped-def]
    if index:
        store.ensure_hnsw("b")
    ents = store.entries("b")
    codes = sign_code(np.stack([e.embedding for e in ents]))
    by_id = {e.id: i for i, e in enumerate(ents)}
    for q_text in ("count rows of orders where id > 17", "average the price of stock"):
        q = EMB.embed(recall_text(q_text))
        d = _popcount(codes, sign_code(q))
        short = store.hamming_shortlist("b", q, 40, index=None if not index else True)
        assert len(short) == 40
        got = sorted(int(d[by_id[i]]) for i, _ in short)
        want = sorted(d.tolist())[:40]
        if index:  # an approximate index: nearly the nearest 40
            assert np.mean(got) <= np.mean(want) + 2
        else:  # exact: the 40 smallest distances, the texts decompressed
            assert got == want
            assert all(ents[by_id[i]].text == t for i, t in short)


def test_rescored_codes_find_the_exact_top_10(store) -> None:  # type: ignore[no-untyped-def]
    ents = store.entries("b")
    M = EMB.embed_many([recall_text(e.text) for e in ents])
    hits = []
    for i in range(0, 400, 37):
        q = EMB.embed(recall_text(_texts(400)[i]).replace("region", "area"))
        exact = M @ q
        floor = np.sort(exact)[-10] - 1e-6
        got = store.search_codes("b", q, 10, EMB.embed_many)
        ids = {e.id: j for j, e in enumerate(ents)}
        assert len(got) == 10 and all(abs(g.cosine - exact[ids[g.id]]) < 1e-5 for g in got)
        hits.append(np.mean([exact[ids[g.id]] >= floor for g in got]))
    assert np.mean(hits) >= 0.97


def test_codes_of_another_precision_are_refused(pg_url: str) -> None:
    from memcurator.store.postgres import PostgresStore

    s = PostgresStore(pg_url)
    try:
        s.create_namespace("f", embedder="e", dim=8)
        with pytest.raises(InvalidInput):
            s.hamming_shortlist("f", np.ones(8), 5)
    finally:
        s.close()
