"""Stores written before the change feed (SQLite schema v3, PostgreSQL schema v2) open,
migrate, and then feed: a handle opened on the migrated store catches up on another handle's
write without reloading (issue 32, item 1)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from memcurator import Memory
from memcurator.embed import HashingEmbedder
from memcurator.lifecycle.context import embedder_identity
from memcurator.store import schema
from memcurator.store.base import Store
from memcurator.store.sqlite import SQLiteStore

EMB = HashingEmbedder(dim=32)
IDENT = embedder_identity(EMB)


def _text(i: int) -> str:
    return f"Task: list the tickets of queue {i}\nAction: SELECT * FROM t WHERE q={i};"


def _catches_up(connect: object) -> None:
    a = Memory(store=connect(), namespace="n", policy="lru", max_bytes=None, embedder=EMB)  # type: ignore[operator]
    assert len(a) == 2  # the rows written before the migration
    b = Memory(store=connect(), namespace="n", policy="lru", embedder=EMB)  # type: ignore[operator]
    reloads = b._ctx.res.reloads
    new = a.write(_text(3)).id
    a.forget(b.entries()[0].id)
    assert [e.id for e in b.entries()] == [e.id for e in a.entries()]
    assert new in {e.id for e in b.entries()} and len(b) == 2
    assert b._ctx.res.reloads == reloads


def test_sqlite_v3_file_migrates_and_feeds(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    c = sqlite3.connect(path, isolation_level=None)
    for v in (1, 2, 3):
        for stmt in schema._statements(schema.MIGRATIONS[v]):
            c.execute(stmt)
    c.execute("PRAGMA user_version=3")
    c.execute("INSERT INTO namespaces VALUES ('n', ?, 32, NULL, 0, 'float32')", (IDENT,))
    for i in (1, 2):  # rows as v3 code wrote them: in no feed
        c.execute(
            "INSERT INTO entries(id, namespace, kind, text, bytes, raw_bytes, embedding, origin) "
            "VALUES (?, 'n', 'raw', ?, 500, 500, ?, 'self')",
            (f"old{i}", _text(i), EMB.embed(_text(i)).astype("float32").tobytes()),
        )
    c.close()
    s = SQLiteStore(path)
    assert s.schema_version() == schema.SCHEMA_VERSION
    assert s.change_seq("n") == 0 and s.changes_since("n", 0) == (0, [])
    s.close()
    _catches_up(lambda: SQLiteStore(path))


def test_postgres_v2_database_migrates_and_feeds(pg_url: str) -> None:
    psycopg = pytest.importorskip("psycopg")
    from memcurator.store import pgschema
    from memcurator.store.postgres import PostgresStore

    opened: list[Store] = []

    def connect() -> Store:
        opened.append(PostgresStore(pg_url, pool_size=2))
        return opened[-1]

    with psycopg.connect(pg_url, autocommit=True) as c:
        c.execute("CREATE TABLE mc_schema (version INTEGER NOT NULL)")
        c.execute("INSERT INTO mc_schema(version) VALUES (2)")
        c.execute(pgschema.MIGRATIONS[1])
        c.execute(pgschema.MIGRATIONS[2])
        emb = EMB.embed(_text(1)), EMB.embed(_text(2))
        c.execute(
            "INSERT INTO namespaces VALUES ('n', %s, 32, NULL, 0, 'float32')",
            (IDENT,),
        )
        for i, e in ((1, emb[0]), (2, emb[1])):
            c.execute(
                "INSERT INTO entries(id, namespace, kind, text, bytes, raw_bytes, vec, origin, "
                "meta) VALUES (%s, 'n', 'raw', %s, 500, 500, %s, 'self', '{}')",
                (f"old{i}", _text(i), "[" + ",".join(map(repr, e.tolist())) + "]"),
            )
    try:
        s = connect()
        assert s.schema_version() == pgschema.SCHEMA_VERSION
        _catches_up(connect)
    finally:
        for s in opened:
            s.close()  # type: ignore[attr-defined]
