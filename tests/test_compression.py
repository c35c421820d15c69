"""Entry text kept zstd-compressed in both stores (issue 35, :mod:`memcurator.store.compression`).

Each test runs on SQLite and on the PostgreSQL server of ``tests/conftest.py``: texts read back
exactly through every read path, ``b(m)`` counts the stored form, the namespace's bytes count
its dictionary once, a budget holds with it, and an uncompressed store converts and back.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memcurator import Memory
from memcurator.embed import HashingEmbedder
from memcurator.errors import InvalidInput
from memcurator.store.compression import AUTO_TRAIN, text_nbytes
from memcurator.store.sizing import default_sizeof
from memcurator.store.sqlite import SQLiteStore

EMB = HashingEmbedder(dim=64)


def _texts(n: int, start: int = 0) -> list[str]:
    """SQL-stream-like entries, all distinct, with unicode and a multi-line body."""
    tables = ["orders", "clients", "ventes_été", "日志", "items"]
    return [
        f"Task: how many rows of {tables[i % 5]} have id above {i}?\n"
        f"Observation: CREATE TABLE {tables[i % 5]}(id INTEGER, name TEXT, amount REAL);\n"
        f"rows: ({i}, 'n{i}', {i * 0.5})\n"
        f"Action: SELECT COUNT(*) FROM {tables[i % 5]} WHERE id > {i};"
        for i in range(start, start + n)
    ]


@pytest.fixture(params=["sqlite", "postgres"])
def opener(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[..., Any]:
    """``opener(**store options)``: a new handle on one fresh database of the backend."""
    handles: list[Any] = []
    if request.param == "sqlite":

        def open_sqlite(**kw: Any) -> Any:
            handles.append(SQLiteStore(tmp_path / "c.sqlite", **kw))
            return handles[-1]

        yield open_sqlite
    else:
        from memcurator.store.postgres import PostgresStore

        url = request.getfixturevalue("pg_url")

        def open_pg(**kw: Any) -> Any:
            handles.append(PostgresStore(url, pool_size=2, **kw))
            return handles[-1]

        yield open_pg
    for h in handles:
        h.close()


def _mem(store: Any, **kw: Any) -> Memory:
    kw.setdefault("policy", "lru")
    kw.setdefault("max_bytes", None)
    return Memory(store=store, namespace="a", embedder=EMB, **kw)


def _stored_text_bytes(store: Any) -> int:
    """Bytes of the text column(s) as the database holds them (not the store's own count)."""
    if isinstance(store, SQLiteStore):
        row = store._conn.execute("SELECT SUM(length(CAST(text AS BLOB))) FROM entries").fetchone()
    else:
        row = store._one(
            "SELECT SUM(octet_length(text) + COALESCE(octet_length(ztext), 0)) FROM entries"
        )
    return int(row[0])


def test_texts_round_trip_and_bytes_count_the_stored_form(opener: Callable[..., Any]) -> None:
    s = opener(compress_text=True)
    mem = _mem(s)
    texts = _texts(AUTO_TRAIN + 40)
    ids = [mem.write(t).id for t in texts]
    assert s.fixed_bytes("a") > 0  # trained once the namespace reached AUTO_TRAIN entries
    other = opener()  # a handle of a store without the option reads the same texts
    for h in (s, other):
        assert [e.text for e in h.entries("a")] == texts
        assert [r.text for r in h.vector_rows("a")] == texts
        assert h.get("a", ids[7]).text == texts[7]
        assert [e.text for e in h.get_many("a", ids[::-1][:5])] == texts[::-1][:5]
    raw = sum(len(t.encode()) for t in texts)
    stored = _stored_text_bytes(s)
    assert stored < raw / 2, (stored, raw)
    codec = s.text_codec("a")
    for e in s.entries("a"):  # b(m) is the entry as stored: the compressed text
        want = default_sizeof(e.text, e.meta, e.embedding, "float32", text_codec=codec)
        assert e.bytes == want + len(e.origin_detail.encode())
    # the namespace's bytes: every entry once and the dictionary once; the handle agrees
    entries = sum(e.bytes for e in s.entries("a"))
    assert s.used_bytes("a") == entries + s.fixed_bytes("a") == mem.used_bytes
    assert [x.used_bytes for x in s.namespace_stats()] == [s.used_bytes("a")]


def test_a_budget_holds_with_the_dictionary_counted(opener: Callable[..., Any]) -> None:
    s = opener(compress_text=True)
    budget = 80_000
    mem = _mem(s, max_bytes=budget, vector_dtype="float32")  # sized for float32 entries
    for i, t in enumerate(_texts(300)):  # past the budget: evictions, and retrains on the way
        mem.write(t)
        assert s.used_bytes("a") <= budget, i
        assert mem.used_bytes == s.used_bytes("a"), i
    assert s.fixed_bytes("a") > 0
    assert len(mem.decisions(action="evict")) > 0
    # every entry still reads back whole
    assert all(e.text.startswith("Task: how many rows") for e in s.entries("a"))


def test_an_old_store_converts_and_back(opener: Callable[..., Any]) -> None:
    s = opener()
    mem = _mem(s)
    texts = _texts(120)
    for t in texts:
        mem.write(t)
    plain = s.used_bytes("a")
    assert s.text_codec("a").codec == "none" and s.fixed_bytes("a") == 0
    watcher = _mem(opener())  # a handle open while another process converts
    n = opener().train_text_dict("a")
    assert n == len(texts)
    small = s.used_bytes("a")
    assert small < plain
    assert [e.text for e in s.entries("a")] == texts
    watcher.recall("rows of orders", k=1)  # catches up with the rewritten entries
    assert watcher.used_bytes == small
    mem.write(_texts(1, start=500)[0])  # a write after conversion is compressed and counted
    e = s.entries("a")[-1]
    assert e.bytes < default_sizeof(e.text, e.meta, e.embedding)
    # back to plain text: every b(m) is the uncompressed size again, no dictionary
    assert opener().set_text_codec("a", "none") == len(texts) + 1
    assert s.fixed_bytes("a") == 0
    assert [e.text for e in s.entries("a")][:-1] == texts
    for e in s.entries("a"):
        assert e.bytes == default_sizeof(e.text, e.meta, e.embedding) + len(
            e.origin_detail.encode()
        )


def test_an_update_rewrites_the_compressed_text(opener: Callable[..., Any]) -> None:
    s = opener(compress_text=True)
    mem = _mem(s)
    for t in _texts(AUTO_TRAIN):
        mem.write(t)
    e = s.entries("a")[3]
    e.text = "Task: a distilled insight\nInsight: count rows with COUNT(*) and a WHERE clause."
    e.bytes = default_sizeof(e.text, e.meta, e.embedding, text_codec=s.text_codec("a"))
    s.update(e)
    assert s.get("a", e.id).text == e.text
    assert opener().get("a", e.id).text == e.text


def test_bad_input_changes_nothing(opener: Callable[..., Any]) -> None:
    s = opener()
    _mem(s).write(_texts(1)[0])
    with pytest.raises(InvalidInput):
        s.set_text_codec("a", "gzip")
    with pytest.raises(InvalidInput):  # too few entries to train a dictionary
        s.train_text_dict("a")
    assert s.text_codec("a").codec == "none" and s.fixed_bytes("a") == 0
    assert [e.text for e in s.entries("a")] == _texts(1)


def test_text_nbytes_counts_the_tag_and_frame() -> None:
    from memcurator.store.compression import NamespaceCodec, train

    texts = _texts(300)
    codec = NamespaceCodec("zstd", train(texts))
    t = texts[5]
    assert text_nbytes(None, t) == len(t.encode())
    assert 1 < text_nbytes(codec, t) < len(t.encode()) / 2
    assert text_nbytes(codec, "x") == 1  # too short to gain: stored as is


def test_postgres_full_text_search_reads_compressed_rows(pg_url: str) -> None:
    from memcurator.store.postgres import PostgresStore

    s = PostgresStore(pg_url, compress_text=True)
    try:
        mem = _mem(s)
        texts = _texts(max(AUTO_TRAIN + 10, 80))  # trained, and a text 73 to find
        ids = [mem.write(t).id for t in texts]
        assert s.fixed_bytes("a") > 0
        q = "how many rows of 日志 have id above 73"
        hits = s.search("a", q, np.asarray(EMB.embed(q), dtype=np.float32), 5)
        lexical = [h.id for h in hits.lexical]
        assert ids[73] in lexical
    finally:
        s.close()


def test_a_trained_dictionary_leaves_with_the_last_entry(opener: Callable[..., Any]) -> None:
    """A dictionary trained on the texts holds fragments of them: forgetting every entry
    removes it too (the namespace's bytes go to 0), and the namespace trains again."""
    s = opener(compress_text=True)
    mem = _mem(s)
    for t in _texts(AUTO_TRAIN):
        mem.write(t)
    assert s.fixed_bytes("a") > 0
    mem.forget_all()
    assert s.fixed_bytes("a") == 0 and s.used_bytes("a") == 0 == mem.used_bytes
    for t in _texts(AUTO_TRAIN, start=1000):
        mem.write(t)
    assert s.fixed_bytes("a") > 0
    assert [e.text for e in s.entries("a")] == _texts(AUTO_TRAIN, start=1000)


def test_the_commands_convert_an_old_store(tmp_path: Path) -> None:
    """``memcurator compress`` and ``reembed --compress-text`` convert a store written without
    compression; ``--off`` reverts."""
    from typer.testing import CliRunner

    from memcurator.cli import app

    path = str(tmp_path / "old.sqlite")
    mem = Memory(path, namespace="a", embedder=HashingEmbedder(), policy="lru", max_bytes=None)
    texts = _texts(100)
    for t in texts:
        mem.write(t)
    mem.close()
    plain = SQLiteStore(path).used_bytes("a")
    runner = CliRunner()
    r = runner.invoke(app, ["compress", path, "--namespace", "a"])
    assert r.exit_code == 0, r.output
    assert "compressed 100 entries" in r.output
    s = SQLiteStore(path)
    assert s.used_bytes("a") < plain and [e.text for e in s.entries("a")] == texts
    assert "text compressed" in s.decisions("a")[-1].reason
    r = runner.invoke(app, ["compress", path, "--namespace", "a", "--off"])
    assert r.exit_code == 0, r.output
    assert SQLiteStore(path).used_bytes("a") == plain
    r = runner.invoke(
        app, ["reembed", path, "--namespace", "a", "--vector-dtype", "binary", "--compress-text"]
    )
    assert r.exit_code == 0, r.output
    s = SQLiteStore(path)
    assert s.fixed_bytes("a") > 0 and s.namespace("a").vector_dtype == "binary"
    assert [e.text for e in s.entries("a")] == texts
    assert s.used_bytes("a") / s.count("a") < plain / 100 / 2
    r = runner.invoke(app, ["compress", path, "--namespace", "nope"])
    assert r.exit_code != 0
