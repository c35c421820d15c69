"""Meta stored inside the text's zstd frame in compressing namespaces (issue 35, schema v8).

Each store test runs on SQLite and on the PostgreSQL server of ``tests/conftest.py``. The
budget counts what is stored: every entry's ``b(m)`` equals the bytes its columns hold in the
database (text, compressed frame, meta, vector, origin detail), read with SQL, not with the
store's own count; meta reads back whole through every read path, filters on it still work,
and an uncompressed store converts and back.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from memcurator import Memory
from memcurator.embed import HashingEmbedder
from memcurator.store.compression import (
    AUTO_TRAIN,
    NamespaceCodec,
    entry_nbytes,
    read_entry,
    stored_entry,
    train,
)
from memcurator.store.sizing import default_sizeof, stats_bytes
from memcurator.store.sqlite import SQLiteStore

EMB = HashingEmbedder(dim=64)


def _meta(i: int) -> dict[str, Any]:
    """Meta as the bench writes it (task id, family, solver, trajectory metrics), and some
    other kinds: unicode, nested values, a NUL inside a string, none at all."""
    m: dict[str, Any] = {
        "task_id": f"sql-{i:05d}",
        "family": f"family_{i % 7}",
        "solver": "expert",
        "pei": 1.0 / (1 + i % 3),
        "frr": 1.0,
        "ti": (i % 11) / 11,
    }
    kind = i % 5
    if kind == 1:
        m["note"] = "données 日志 ✓"
    elif kind == 2:
        m["nested"] = {"a": [1, 2, {"b": None}], "z": True}
    elif kind == 3:
        m["odd"] = "a\x01b\nc"  # control characters: JSON escapes them
    elif kind == 4:
        m = {}
    return m


# the fixture ``opener`` (a new handle on one fresh database of each backend), the keep-
# everything Memory and the SQL-like texts of tests/test_compression.py
from tests.test_compression import _mem, _texts, opener  # noqa: E402, F401


def _columns(store: Any) -> dict[str, tuple[int, int, int, str]]:
    """id -> (bytes the row's columns hold, its b(m), bytes of its meta column, its stats),
    read from the database with SQL: text (UTF-8 or frame), meta, vector, origin detail."""
    if isinstance(store, SQLiteStore):
        rows = store._conn.execute(
            "SELECT id, length(CAST(text AS BLOB)) + length(CAST(meta AS BLOB)) "
            "+ length(embedding) + length(CAST(origin_detail AS BLOB)), bytes, "
            "length(CAST(meta AS BLOB)), stats FROM entries WHERE namespace='a'"
        ).fetchall()
    else:
        rows = store._q(
            "SELECT id, octet_length(text) + COALESCE(octet_length(ztext), 0) "
            "+ octet_length(meta) + 4 * vector_dims(vec) + octet_length(origin_detail), bytes, "
            "octet_length(meta), stats FROM entries WHERE namespace='a'"
        )
    return {str(r[0]): (int(r[1]), int(r[2]), int(r[3]), str(r[4])) for r in rows}


def _write(mem: Memory, n: int, start: int = 0) -> dict[str, dict[str, Any]]:
    out = {}
    for i, t in zip(range(start, start + n), _texts(n, start), strict=True):
        r = mem.write(t, meta=_meta(i))
        assert r.id is not None
        out[r.id] = _meta(i)
    return out


def test_b_m_is_the_bytes_the_database_holds(opener: Callable[..., Any]) -> None:  # noqa: F811
    s = opener(compress_text=True)
    mem = _mem(s)
    metas = _write(mem, AUTO_TRAIN + 60)
    assert s.fixed_bytes("a") > 0  # the dictionary was trained on the way
    cols = _columns(s)
    codec = s.text_codec("a")
    folded = 0
    for e in s.entries("a"):
        held, b_m, meta_col, stats = cols[e.id]
        assert held + stats_bytes(json.loads(stats)) == b_m == e.bytes, e.id
        assert e.bytes == default_sizeof(e.text, e.meta, e.embedding, text_codec=codec) + len(
            e.origin_detail.encode()
        )
        want = dict(metas[e.id], text_sha1=e.meta["text_sha1"])
        assert e.meta == want  # meta back whole, the de-duplication key with it
        folded += meta_col == 0
    assert folded == len(cols)  # every entry keeps its meta in the frame
    assert s.used_bytes("a") == sum(c[1] for c in cols.values()) + s.fixed_bytes("a")
    assert s.used_bytes("a") == mem.used_bytes
    # every read path gives the meta back, on a handle of a store without the option too
    other = opener()
    some = list(metas)[::17]
    for h in (s, other):
        assert [h.get("a", i).meta for i in some] == [s.get("a", i).meta for i in some]
        assert {e.id: e.meta for e in h.get_many("a", some)} == {
            i: s.get("a", i).meta for i in some
        }


def test_meta_filters_and_dedup_find_folded_rows(opener: Callable[..., Any]) -> None:  # noqa: F811
    s = opener(compress_text=True)
    mem = _mem(s)
    metas = _write(mem, AUTO_TRAIN + 10)
    target = next(i for i, m in metas.items() if m.get("note"))
    # a repeated text reinforces the resident copy (its text_sha1 read back from the frame)
    again = mem.write(s.get("a", target).text, meta=metas[target])
    assert again.id == target and s.get("a", target).reinforcement >= 1
    if isinstance(s, SQLiteStore):
        assert s.find_text("a", s.get("a", target).meta["text_sha1"]) == target
        assert s.find_text("a", "0" * 40) is None
    else:  # PostgreSQL filters meta in SQL (metab, filled by the store since v8)
        q = "how many rows of ventes_été"
        vec = np.asarray(EMB.embed(q), dtype=np.float32)
        hits = s.search("a", q, vec, 50, meta={"note": "données 日志 ✓"})
        got = {h.id for h in (*hits.dense, *hits.lexical)}
        assert got and all(metas[i].get("note") == "données 日志 ✓" for i in got)
        assert target in got or len(got) >= 5


def test_an_old_store_folds_and_unfolds(opener: Callable[..., Any]) -> None:  # noqa: F811
    s = opener()
    mem = _mem(s)
    metas = _write(mem, 120)
    plain = _columns(s)
    assert all(c[2] > 0 for c in plain.values())  # meta in its column as JSON
    assert opener().train_text_dict("a") == 120  # `memcurator compress`
    folded = _columns(s)
    as_is = sum(
        len(e.text.encode()) + len(json.dumps(e.meta, sort_keys=True)) for e in s.entries("a")
    )
    # text and meta together shrink to less than half
    assert sum(c[1] for c in folded.values()) < sum(c[1] for c in plain.values()) - as_is / 2
    assert all(c[0] + stats_bytes(json.loads(c[3])) == c[1] for c in folded.values())
    assert {
        e.id: {k: v for k, v in e.meta.items() if k != "text_sha1"} for e in s.entries("a")
    } == metas
    assert opener().set_text_codec("a", "none") == 120
    assert _columns(s) == plain  # byte for byte as before, every b(m) too
    assert {
        e.id: {k: v for k, v in e.meta.items() if k != "text_sha1"} for e in s.entries("a")
    } == metas


def test_stored_entry_round_trips_every_kind_of_meta() -> None:
    texts = _texts(200)
    metas = [json.dumps(_meta(i), sort_keys=True) for i in range(200)]
    codec = NamespaceCodec("zstd", train([m + "\0" + t for m, t in zip(metas, texts, strict=True)]))
    for t, m in zip(texts, metas, strict=True):
        value, col = stored_entry(codec, t, m)
        assert isinstance(value, bytes) and col == ""  # folded: shorter than as is
        assert read_entry(codec, value, col) == (t, m)
        assert entry_nbytes(codec, t, m) == len(value) < len(t.encode()) + len(m)
    # a NUL inside the meta or the text: JSON escapes the meta's, the first raw NUL ends it
    m0 = json.dumps({"k": "a\x00b"}, sort_keys=True)
    v0, c0 = stored_entry(codec, texts[1] + "\x00!", m0)
    assert read_entry(codec, v0, c0) == (texts[1] + "\x00!", m0)
    # too short to gain: stored as is, both columns; no codec: as is
    assert stored_entry(codec, "x", "{}") == ("x", "{}")
    assert stored_entry(None, texts[0], metas[0]) == (texts[0], metas[0])
    assert entry_nbytes(None, texts[0], metas[0]) == len(texts[0].encode()) + len(metas[0])
    # a tag-1 frame (v7: text alone compressed) still reads, its meta from the column
    blob = codec.text.encode(texts[3]) if codec.text else b""
    assert blob[0] == 1 and read_entry(codec, blob, metas[3]) == (texts[3], metas[3])


def test_a_v7_file_with_compressed_texts_opens_and_folds(tmp_path: Path) -> None:
    """A store written by v7 (texts as tag-1 frames, meta in its column) migrates to v8 on
    open, reads back whole, and `memcurator compress` (train_text_dict) folds its meta."""
    import sqlite3

    from memcurator.store import schema

    path = tmp_path / "v7.sqlite"
    s = SQLiteStore(path, compress_text=True)
    mem = _mem(s)
    metas = _write(mem, AUTO_TRAIN + 20)
    codec = s.text_codec("a")
    assert codec.text is not None
    rows = [(e.id, e.text, json.dumps(e.meta, sort_keys=True), e) for e in s.entries("a")]
    mem.close()
    c = sqlite3.connect(path)
    for eid, text, meta, e in rows:  # back to v7's layout, b(m) as v7 counted it
        blob = codec.text.encode(text)
        nb = len(blob) + len(meta) + 256 + len(e.origin_detail.encode())
        c.execute("UPDATE entries SET text=?, meta=?, bytes=? WHERE id=?", (blob, meta, nb, eid))
    c.execute("PRAGMA user_version=7")
    c.commit()
    c.close()
    old = SQLiteStore(path)
    assert old.schema_version() == schema.SCHEMA_VERSION == 8
    got = {e.id: (e.text, e.meta) for e in old.entries("a")}
    assert got == {eid: (text, json.loads(meta)) for eid, text, meta, _ in rows}
    before = old.used_bytes("a")
    assert all(c[2] > 0 for c in _columns(old).values())  # meta still in its column
    assert old.train_text_dict("a") == len(rows)
    cols = _columns(old)
    assert all(c[2] == 0 and c[0] + stats_bytes(json.loads(c[3])) == c[1] for c in cols.values())
    assert old.used_bytes("a") < before
    assert {
        e.id: {k: v for k, v in e.meta.items() if k != "text_sha1"} for e in old.entries("a")
    } == metas
    old.close()
