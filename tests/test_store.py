"""SQLiteStore: namespaces, dimensions, schema versions, the append-only log, hard deletes."""

from __future__ import annotations

import os
import sqlite3

import numpy as np
import pytest

from memcurator import Memory
from memcurator.embed import HashingEmbedder
from memcurator.errors import (
    DimensionMismatch,
    EntryNotFound,
    InvalidInput,
    NamespaceNotFound,
    StoreError,
)
from memcurator.store import schema
from memcurator.store.sqlite import SQLiteStore
from memcurator.types import Entry


def entry(eid: str, ns: str = "a", dim: int = 4, text: str = "some text", **kw) -> Entry:
    e = np.zeros(dim, dtype=np.float32)
    e[0] = 1.0
    return Entry(eid, ns, "insight", text, 100, 100, e, **kw)


@pytest.fixture
def store() -> SQLiteStore:
    s = SQLiteStore(":memory:")
    s.create_namespace("a", embedder="e4", dim=4)
    s.create_namespace("b", embedder="e4", dim=4)
    return s


# --------------------------------------------------------------------------- namespaces
def test_missing_namespace_raises_never_returns_all(store: SQLiteStore) -> None:
    store.insert(entry("x1", "a"))
    store.log("a", step=0, action="admit", entry_id="x1")
    for call in (
        lambda: store.entries("nope"),
        lambda: store.decisions("nope"),
        lambda: store.used_bytes("nope"),
        lambda: store.count("nope"),
        lambda: store.namespace("nope"),
        lambda: store.get("nope", "x1"),
    ):
        with pytest.raises(NamespaceNotFound, match="'nope' does not exist") as ei:
            call()
        assert isinstance(ei.value, KeyError)
        assert "['a', 'b']" in str(ei.value)  # says what does exist
    with pytest.raises(NamespaceNotFound):
        store.insert(entry("x2", "nope"))


def test_two_namespaces_do_not_see_each_other(store: SQLiteStore) -> None:
    store.insert(entry("x1", "a", text="alpha"))
    store.insert(entry("x1", "b", text="beta"))  # same id, other namespace: allowed
    store.insert(entry("x2", "b", text="beta two"))
    store.log("b", step=0, action="admit", entry_id="x2")
    assert [m.text for m in store.entries("a")] == ["alpha"]
    assert [m.text for m in store.entries("b")] == ["beta", "beta two"]
    assert store.get("a", "x1").text == "alpha"
    with pytest.raises(EntryNotFound):
        store.get("a", "x2")
    assert store.decisions("a") == []
    assert [d.entry_id for d in store.decisions("b")] == ["x2"]
    assert store.used_bytes("a") == 100 and store.used_bytes("b") == 200
    store.delete("b", "x1")
    assert store.get("a", "x1").text == "alpha"


def test_memories_sharing_a_store_are_scoped() -> None:
    s = SQLiteStore(":memory:")
    a = Memory(store=s, namespace="alice", policy="keep-all")
    b = Memory(store=s, namespace="bob", policy="keep-all")
    ra = a.write("Task: count alice orders\nAction: SELECT COUNT(*) FROM orders;")
    rb = b.write("Task: count bob orders\nAction: SELECT COUNT(*) FROM orders;")
    assert a.recall("count orders", k=5).ids == [ra.id]
    assert b.recall("count orders", k=5).ids == [rb.id]
    with pytest.raises(EntryNotFound):
        a.get(rb.id)
    with pytest.raises(EntryNotFound):
        a.forget(rb.id)
    assert b.get(rb.id).text.startswith("Task: count bob")
    assert [d.entry_id for d in a.decisions()] == [ra.id]
    assert s.namespaces() == ["alice", "bob"]


def test_invalid_namespace_args() -> None:
    s = SQLiteStore(":memory:")
    for kw in (
        dict(name=" ", embedder="e", dim=4),
        dict(name="n", embedder="e", dim=0),
        dict(name="n", embedder="e", dim=4, max_bytes=0),
    ):
        with pytest.raises(InvalidInput):
            s.create_namespace(**kw)


# --------------------------------------------------------------------------- dimensions
def test_dimension_mismatch_at_open(tmp_path) -> None:
    p = str(tmp_path / "m.sqlite")
    Memory(p, policy="keep-all", embedder=HashingEmbedder(dim=64)).close()
    with pytest.raises(DimensionMismatch) as ei:
        Memory(p, policy="keep-all", embedder=HashingEmbedder(dim=32))
    msg = str(ei.value)
    assert "'default'" in msg and "dim 64" in msg and "dim 32" in msg
    assert "same embedder" in msg  # says what to do
    # same embedder reopens fine, other namespace in the same file is free to differ
    Memory(p, policy="keep-all", embedder=HashingEmbedder(dim=64)).close()
    Memory(p, namespace="other", policy="keep-all", embedder=HashingEmbedder(dim=32)).close()


def test_insert_checks_embedding_shape_and_values(store: SQLiteStore) -> None:
    with pytest.raises(DimensionMismatch, match=r"shape \(3,\)"):
        store.insert(entry("x", dim=3))
    bad = entry("y")
    bad.embedding[1] = np.nan
    with pytest.raises(InvalidInput, match="NaN"):
        store.insert(bad)
    assert store.count("a") == 0


def test_duplicate_id_and_nan_stats_refused(store: SQLiteStore) -> None:
    store.insert(entry("x"))
    with pytest.raises(InvalidInput, match="already exists"):
        store.insert(entry("x"))
    e = store.get("a", "x")
    e.stats["q_r"] = float("nan")
    with pytest.raises(InvalidInput, match="NaN"):
        store.update(e)
    assert store.get("a", "x").stats == {}
    ghost = entry("ghost")
    with pytest.raises(EntryNotFound):
        store.update(ghost)


# --------------------------------------------------------------------------- schema
def test_schema_version_and_pragmas(tmp_path) -> None:
    s = SQLiteStore(tmp_path / "s.sqlite")
    assert s.schema_version() == schema.SCHEMA_VERSION
    c = sqlite3.connect(tmp_path / "s.sqlite")
    assert c.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    c.close()
    s.close()


def test_newer_schema_is_refused(tmp_path) -> None:
    p = tmp_path / "future.sqlite"
    SQLiteStore(p).close()
    c = sqlite3.connect(p)
    c.execute(f"PRAGMA user_version={schema.SCHEMA_VERSION + 1}")
    c.commit()
    c.close()
    with pytest.raises(StoreError, match="newer") as ei:
        SQLiteStore(p)
    assert isinstance(ei.value, RuntimeError)
    assert "upgrade memcurator" in str(ei.value)


def test_migration_runs_step_by_step(tmp_path, monkeypatch) -> None:
    p = tmp_path / "old.sqlite"
    s = SQLiteStore(p)
    s.create_namespace("a", embedder="e4", dim=4)
    s.insert(entry("x"))
    s.close()
    nxt = schema.SCHEMA_VERSION + 1
    v_next = "ALTER TABLE entries ADD COLUMN pinned INTEGER NOT NULL DEFAULT 0"
    monkeypatch.setattr(schema, "SCHEMA_VERSION", nxt)
    monkeypatch.setitem(schema.MIGRATIONS, nxt, v_next)
    s = SQLiteStore(p)
    assert s.schema_version() == nxt
    cols = [r[1] for r in s._conn.execute("PRAGMA table_info(entries)")]
    assert "pinned" in cols
    assert s.get("a", "x").text == "some text"  # data survived
    s.close()


def test_failed_migration_rolls_back(tmp_path, monkeypatch) -> None:
    p = tmp_path / "old.sqlite"
    SQLiteStore(p).close()
    cur = schema.SCHEMA_VERSION
    monkeypatch.setattr(schema, "SCHEMA_VERSION", cur + 1)
    monkeypatch.setitem(schema.MIGRATIONS, cur + 1, "CREATE TABLE extra(x);\nTHIS IS NOT SQL")
    with pytest.raises(sqlite3.Error):
        SQLiteStore(p)
    c = sqlite3.connect(p)
    assert c.execute("PRAGMA user_version").fetchone()[0] == cur
    assert c.execute("SELECT name FROM sqlite_master WHERE name='extra'").fetchone() is None
    c.close()


# --------------------------------------------------------------------------- decision log
def test_decision_log_is_append_only(tmp_path) -> None:
    p = tmp_path / "d.sqlite"
    s = SQLiteStore(p)
    s.create_namespace("a", embedder="e4", dim=4)
    s.log("a", step=0, action="admit", entry_id="x", score=0.5, reason="r")
    s.log("a", step=1, action="evict", entry_id="x", score=float("nan"), reason="budget")
    c = sqlite3.connect(p)
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        c.execute("UPDATE decisions SET reason='tampered'")
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        c.execute("DELETE FROM decisions")
    c.close()
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        s._conn.execute("UPDATE decisions SET action='admit' WHERE action='evict'")
    d = s.decisions("a")
    assert [(x.action, x.reason) for x in d] == [("admit", "r"), ("evict", "budget")]
    assert d[0].score == 0.5 and np.isnan(d[1].score)  # NaN stored as NULL, read back as NaN
    assert [x.action for x in s.decisions("a", since=d[0].seq)] == ["evict"]
    assert [x.action for x in s.decisions("a", action="admit")] == ["admit"]
    s.close()


# --------------------------------------------------------------------------- hard delete
def _on_disk(path: str, needle: bytes) -> dict[str, bool]:
    out = {}
    for suffix in ("", "-wal", "-journal"):
        f = path + suffix
        if os.path.exists(f):
            with open(f, "rb") as fh:
                out[suffix or "db"] = needle in fh.read()
    return out


def test_forget_is_a_hard_delete_on_disk(tmp_path) -> None:
    p = str(tmp_path / "f.sqlite")
    mem = Memory(p, policy="keep-all", embedder=HashingEmbedder(dim=32))
    secret = "Task: look up patient zq-7731-unique-marker\nAction: SELECT * FROM p WHERE id=7731;"
    needle = b"zq-7731-unique-marker"
    for i in range(30):
        mem.write(f"Task: filler row {i}\nAction: SELECT {i};")
    r = mem.write(secret)
    for i in range(5):
        mem.write(f"Task: later row {i}\nAction: SELECT {i};")
    # push it into the main file too, so secure_delete has something to overwrite there
    side = sqlite3.connect(p)
    side.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    side.close()
    assert _on_disk(p, needle)["db"], "precondition: the text reached the database file"
    mem.write("Task: one more\nAction: SELECT 0;")
    assert any(_on_disk(p, needle).values())

    mem.forget(r.id, reason="GDPR request")

    with pytest.raises(EntryNotFound):
        mem.get(r.id)
    assert not any(needle.decode() in m.text for m in mem.entries())
    c = sqlite3.connect(p)
    assert c.execute("SELECT COUNT(*) FROM entries WHERE text LIKE '%zq-7731%'").fetchone()[0] == 0
    c.close()
    on_disk = _on_disk(p, needle)
    assert on_disk and not any(on_disk.values()), f"text still on disk: {on_disk}"
    tomb = mem.decisions(action="forget")
    assert [(d.entry_id, d.reason) for d in tomb] == [(r.id, "GDPR request")]
    assert all(needle.decode() not in d.reason for d in mem.decisions())
    mem.close()
    assert not any(_on_disk(p, needle).values())
