"""Recall inside PostgreSQL (issue 20, item 3): the pool from pgvector HNSW + full-text, filters in
SQL before the cut, against a real local server (tests/conftest.py).

The kind covered: a filter that passes 10% and 1% of the rows (meta pairs, user scope, a
``where`` callable that cannot be pushed down), a rare exact term only the full-text leg finds,
the same ids as the in-memory path where both are exact, forgotten and probation entries never
returned, and the stores and policies the option refuses.
"""

from __future__ import annotations

import numpy as np
import pytest

from memcurator import Memory
from memcurator.embed import HashingEmbedder
from memcurator.errors import InvalidInput
from memcurator.lifecycle.store_recall import StoreRecall
from memcurator.retrieve import dense_topk
from memcurator.store.postgres import PostgresStore
from memcurator.types import Entry

SALES = "total sales of region {i}"
QUERY = "total sales amount per region"


def fill(s: PostgresStore, ns: str, n: int, *, every: int, seed: int = 0) -> np.ndarray:
    """``n`` entries with random unit vectors (dim 16); ``meta["f"] = "hr"`` on every
    ``every``-th, ``"sales"`` on the rest; the vectors."""
    dim = 16
    s.create_namespace(ns, embedder="rand", dim=dim)
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, dim)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    with s.transaction(namespace=ns):
        for i in range(n):
            f = "hr" if i % every == 0 else "sales"
            s.insert(
                Entry(
                    f"e{i}",
                    ns,
                    "raw",
                    f"Task: row {i} {f}",
                    100,
                    100,
                    x[i],
                    "self",
                    "",
                    meta={"f": f},
                )
            )
    return x


@pytest.mark.parametrize("every", [10, 100])
def test_meta_filter_returns_k_through_the_index(pg_url: str, every: int) -> None:
    """10% and 1% filters: the dense leg returns k that pass, nearly the exact k (HNSW)."""
    s = PostgresStore(pg_url)
    n, k = 3000, 10
    x = fill(s, "v", n, every=every)
    rng = np.random.default_rng(1)
    for t in range(5):
        q = x[3 + t] + 0.1 * rng.standard_normal(16).astype(np.float32)
        q /= np.linalg.norm(q)
        # ef_search 10: the index keeps 10 candidates, about 1 (10%) or 0.1 (1%) pass
        got = s.search("v", "row", q, k, meta={"f": "hr"}, ef_search=10).dense
        exact = s.search("v", "row", q, k, meta={"f": "hr"}, exact=True).dense
        assert len(got) == k and len(exact) == k
        assert all(int(h.id[1:]) % every == 0 for h in got)
        assert len({h.id for h in got} & {h.id for h in exact}) >= 8
        want = np.flatnonzero(np.arange(n) % every == 0)
        best = want[np.argsort(-(x[want] @ q), kind="stable")[:k]]
        assert [h.id for h in exact] == [f"e{i}" for i in best]
    plan = s._q(  # the index is what served it: HNSW, not a sequential scan
        "EXPLAIN SELECT id FROM entries WHERE namespace = 'v' AND vec_dtype = 'float32' "
        "ORDER BY (vec::vector(16)) <=> %s::vector(16) LIMIT 10",
        ("[" + ",".join(["0.25"] * 16) + "]",),
    )
    assert "entries_hnsw_" in " ".join(r[0] for r in plan)
    s.close()


def test_issue_examples_in_the_database(pg_url: str) -> None:
    mem = Memory(pg_url, policy="keep-all", recall_in_store=True)
    for i in range(100):
        mem.write(SALES.format(i=i), meta={"f": "sales", "i": i})
    hr = mem.write("list staff hired in 2001", meta={"f": "hr"}).id
    assert mem.recall(QUERY, k=5, where=lambda e: e.meta.get("f") == "hr").ids == [hr]
    assert mem.recall(QUERY, k=5, meta={"f": "hr"}).ids == [hr]
    got = mem.recall(QUERY, k=5, meta={"f": "sales"})
    assert len(got.ids) == 5 and hr not in got.ids
    for i in range(40):
        mem.write(f"total sales of region {i} for alice", user="alice")
    bob = mem.write("total sales of the north region for bob", user="bob").id
    assert mem.recall("sales of the north region", k=1, user="bob").ids == [bob]
    assert bob not in mem.recall(QUERY, k=50, user="alice").ids
    assert bob not in mem.recall(QUERY, k=200).ids
    # where and meta together: both hold
    assert mem.recall(QUERY, k=5, meta={"f": "sales"}, where=lambda e: e.meta["i"] == 77).ids == [
        mem.recall("total sales of region 77", k=1).ids[0]
    ]
    mem.close()


def test_where_rare_pass_is_found_by_widening(pg_url: str) -> None:
    """A ``where`` callable that 1 entry in 300 passes: the search widens until it is found."""
    mem = Memory(pg_url, policy="keep-all", recall_in_store=True)
    ids = [mem.write(SALES.format(i=i), meta={"i": i}).id for i in range(300)]
    calls: list[str] = []

    def only_250(e: Entry) -> bool:
        calls.append(e.id)
        return bool(e.meta["i"] == 250)

    assert mem.recall("list staff hired in 2001", k=3, where=only_250).ids == [ids[250]]
    assert len(set(calls)) == len(calls)  # each entry tested once
    mem.close()


def test_rare_exact_term_is_found_by_the_full_text_leg(pg_url: str) -> None:
    emb = HashingEmbedder()
    mem = Memory(pg_url, policy="keep-all", embedder=emb, recall_in_store=True)
    for i in range(300):
        mem.write(f"Task: billing run failed for customer {i} with a timeout\nAction: retry")
    rare = mem.write("Task: billing run failed with error ZX4471\nAction: rotate the key").id
    s = mem.store
    assert isinstance(s, PostgresStore)
    line = "billing run failed with error ZX4471"
    hits = s.search("default", line, emb.embed(line), 5)
    assert hits.lexical[0].id == rare  # before ANALYZE: every word weighs 1, it holds most
    with s._conn() as c:
        c.execute("ANALYZE entries")
    s._wstats.clear()
    hits = s.search("default", "ZX4471 billing run failed", emb.embed(line), 5)
    assert hits.lexical[0].id == rare
    assert hits.lexical[0].score > 2 * hits.lexical[1].score  # IDF: the rare word counts
    assert mem.recall("why did the billing run fail with ZX4471", k=1).ids == [rare]
    mem.close()


QUERIES = [
    "total sales amount per region",
    "region 17 sales",
    "staff hired in 2001",
    "count the orders per customer",
    "sales of region 3",
]


def twin_memories(pg_url: str, **kw: object) -> tuple[Memory, Memory]:
    a = Memory(":memory:", policy="keep-all", **kw)  # type: ignore[arg-type]
    b = Memory(pg_url, policy="keep-all", recall_in_store=True, **kw)  # type: ignore[arg-type]
    texts = [SALES.format(i=i) for i in range(60)]
    texts += ["list staff hired in 2001", "count the orders of each customer"]
    texts += [f"Task: find invoices of customer {i}\nAction: SELECT 1;" for i in range(20)]
    for t in texts:
        assert a.write(t).id == b.write(t).id
    return a, b


def test_same_ids_as_in_memory_where_both_are_exact(pg_url: str) -> None:
    """Cosine alone (lexical_weight 0, versions off), exact dense search (no HNSW): the
    database's dense leg holds the exact top kc, so the k best of the fused pool are the
    in-memory path's k best, in order. Entries of equal cosine ("region 1" and "region 2"
    against a query without a number) are ordered by their place in the fused pool, whose
    full-text leg differs from BM25: among ties the ids may differ, the scores never."""
    a, b = twin_memories(pg_url, lexical_weight=0.0, same_request=None)
    ex = StoreRecall(b.store, "default", exact=True, lexical_weight=0.0, same_request=None)
    for q in QUERIES:
        # through HNSW (approximate; its graph has random levels): the best cosine is found
        assert abs(a.recall(q, k=1).scores[0] - b.recall(q, k=1).scores[0]) < 1e-6
        for k in (1, 5, 12):
            ra, rb = a.recall(q, k=k), ex.recall(q, k=k)
            np.testing.assert_allclose(ra.scores, rb.scores, rtol=0, atol=1e-6)
            tied = {round(float(x), 5) for x in ra.scores if np.sum(np.isclose(ra.scores, x)) > 1}
            for i, x in enumerate(ra.scores):
                if round(float(x), 5) not in tied and x > ra.scores[-1] + 1e-6:
                    assert ra.ids[i] == rb.ids[i], (q, k, i)
    s = b.store
    assert isinstance(s, PostgresStore)
    for q in QUERIES:  # and the dense leg itself is dense_topk's (cosines; ties in any order)
        e_q = b.embedder.embed(q)
        _, d_sc = dense_topk(a.matrix, e_q, 12)
        got = [h.score for h in s.search("default", q, e_q, 12, exact=True).dense]
        np.testing.assert_allclose(got, d_sc, rtol=0, atol=1e-6)
    a.close()
    b.close()


def test_blended_top1_agrees_with_in_memory(pg_url: str) -> None:
    """With the lexical signal on (the default), the full-text score is a capped IDF, not BM25,
    so scores differ; the best entry agrees on these queries."""
    a, b = twin_memories(pg_url)
    for q in QUERIES:
        assert a.recall(q, k=1).ids == b.recall(q, k=1).ids, q
    a.close()
    b.close()


def test_forgotten_and_probation_entries_are_never_returned(pg_url: str) -> None:
    mem = Memory(pg_url, policy="keep-all", recall_in_store=True)
    ids = [mem.write(SALES.format(i=i)).id for i in range(30)]
    target = mem.write("list staff hired in 2001").id
    reader = StoreRecall(mem.store, "default")
    assert reader.recall("staff hired in 2001", k=1).ids == [target]
    mem.forget(target)
    everything = lambda e: True  # noqa: E731
    for r in (mem, reader):
        got = r.recall("staff hired in 2001", k=50, where=everything)
        assert target not in got.ids and len(got.ids) == 30
    s = mem.store
    assert isinstance(s, PostgresStore)
    e = s.get("default", ids[3])
    e.trust.probation = "origin external"
    with s.transaction(namespace="default"):
        s.update(e)
    assert ids[3] not in reader.recall(SALES.format(i=3), k=50).ids
    assert ids[3] not in mem.recall(SALES.format(i=3), k=50).ids
    mem.close()


def test_refused_where_it_cannot_hold(pg_url: str) -> None:
    with pytest.raises(InvalidInput, match="cannot search"):
        Memory(":memory:", policy="keep-all", recall_in_store=True)
    with pytest.raises(InvalidInput, match="byte budget"):
        Memory(pg_url, namespace="b", policy="lru", max_bytes=10_000, recall_in_store=True)
    with pytest.raises(InvalidInput, match="byte budget"):
        Memory(pg_url, namespace="c", policy="keep-all", max_bytes=10_000, recall_in_store=True)
    with pytest.raises(InvalidInput, match="stays in memory"):
        Memory(pg_url, namespace="d", policy="curator", max_bytes=None, recall_in_store=True)
    mem = Memory(pg_url, namespace="e", policy="keep-all", recall_in_store=True)
    with pytest.raises(InvalidInput, match="meta filter"):
        mem.recall("x", meta={"f": ["a"]})
    mem.close()


def test_migration_from_v1_fills_the_new_columns(pg_url: str) -> None:
    import psycopg

    from memcurator.store import pgschema

    with psycopg.connect(pg_url, autocommit=True) as c:
        c.execute("CREATE TABLE mc_schema (version INTEGER NOT NULL)")
        c.execute("INSERT INTO mc_schema(version) VALUES (1)")
        c.execute(pgschema.MIGRATIONS[1])
        c.execute(
            "INSERT INTO namespaces VALUES ('n', 'rand', 2, NULL, 0, 'float32');"
            "INSERT INTO entries(id, namespace, kind, text, bytes, raw_bytes, vec, origin, meta) "
            "VALUES ('a', 'n', 'raw', E'Task: Count Orders\\nAction: x', 1, 1, '[1,0]', 'self', "
            '\'{"f": "hr"}\')'
        )
    s = PostgresStore(pg_url)
    assert s.schema_version() == pgschema.SCHEMA_VERSION
    assert s._one("SELECT rtsv::text, metab ->> 'f' FROM entries") == ("'count':1 'orders':2", "hr")
    assert [h.id for h in s.search("n", "orders", np.array([1.0, 0.0]), 1).lexical] == ["a"]
    s.close()


def test_secure_erase_clears_the_forgotten_words_from_the_statistics(
    pg_url: str, pg_server: object
) -> None:
    """ANALYZE copies common words of ``rtsv`` (and, without schema v2's targets of 0, sampled
    texts) into ``pg_statistic``; after forget + secure_erase neither the word nor the text is
    in the statistics or in the database files."""
    mem = Memory(pg_url, policy="keep-all", recall_in_store=True)
    for i in range(40):
        mem.write(f"Task: count orders of customer {i}\nAction: SELECT 1;")
    secret = "Task: quokkasecret quokkasecret rotate\nAction: SELECT 2;"
    sid = mem.write(secret).id
    s = mem.store
    assert isinstance(s, PostgresStore)
    with s._conn() as c:
        c.execute("ANALYZE entries")
    stats = "SELECT string_agg(coalesce(most_common_elems::text, ''), ' ') FROM pg_stats "
    stats += "WHERE tablename = 'entries'"
    assert "quokkasecret" in (s._one(stats) or [""])[0]
    mem.forget(sid)
    assert s.secure_erase(), s.erase_report
    assert "quokkasecret" not in ((s._one(stats) or [""])[0] or "")
    datadir = pg_server.datadir  # type: ignore[attr-defined]
    if datadir is not None:
        blob = b"".join(
            p.read_bytes()
            for d in ("base", "global", "pg_wal")
            for p in sorted((datadir / d).rglob("*"))
            if p.is_file()
        )
        assert b"quokkasecret" not in blob
    mem.close()
