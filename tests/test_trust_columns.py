"""Trust state in the store's own columns, ``meta`` the user's alone (issue 31, item 3).

Stores written before schema v6 (trust state in underscore keys of ``meta``) open and convert on
both backends; user metadata can never set trust state, whichever key it names; the store copy
and the portable export carry the state in its own field and read older files that kept it in
``meta``.
"""

from __future__ import annotations

import io
import json
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from memcurator import Memory
from memcurator.embed import HashingEmbedder
from memcurator.errors import InvalidInput
from memcurator.lifecycle.context import embedder_identity
from memcurator.portable import export_namespace, import_namespace
from memcurator.store import schema
from memcurator.store.base import Store
from memcurator.store.sqlite import SQLiteStore
from memcurator.store.transfer import copy_store, dump_store, load_store
from memcurator.trust.provenance import injectable
from memcurator.types import TRUST_KEYS, TrustState, is_internal_key

EMB = HashingEmbedder(dim=32)
IDENT = embedder_identity(EMB)


def _text(i: int) -> str:
    return f"Task: list the tickets of queue {i}\nAction: SELECT * FROM t WHERE q={i};"


#: pre-v6 rows: (id, meta as the old code stored it, origin)
OLD_ROWS: list[tuple[str, dict[str, Any], str]] = [
    (
        "held",
        {
            "family": "f1",
            "_probation": "origin external",
            "_taint": "external",
            "claimed_origin": "self",
            "_derived_from": [{"kind": "web", "id": "x.test", "via": "observed"}],
            "text_sha1": "k1",
        },
        "external",
    ),
    (
        "released",
        {
            "_corroborated": ["verified outcome at step 3"],
            "_vouched_by": ["peer:a"],
            "_held_for": "tool output instruction",
            "_outcome": {"claim": "ok", "sig": "00"},  # a key no typed field names
            "note": {"_probation": "nested: the user's data"},
        },
        "peer",
    ),
    ("scoped", {"_user": "alice", "_personal": True, "family": "f3"}, "self"),
    ("plain", {"family": "f4"}, "self"),
]


def _check_converted(store: Store) -> None:
    """The old rows read back with clean meta and their state in ``trust``."""
    got = {e.id: e for e in store.entries("n")}
    assert set(got) == {r[0] for r in OLD_ROWS}
    for e in got.values():
        assert not [k for k in e.meta if is_internal_key(k)], (e.id, e.meta)
    held, rel, scoped, plain = (got[i] for i in ("held", "released", "scoped", "plain"))
    assert held.meta == {"family": "f1", "text_sha1": "k1"}
    assert held.trust.probation == "origin external" and held.trust.taint == "external"
    assert held.trust.claimed_origin == "self" and not injectable(held)
    assert held.trust.derived_from == [{"kind": "web", "id": "x.test", "via": "observed"}]
    assert rel.meta == {"note": {"_probation": "nested: the user's data"}}
    assert rel.trust.corroborated == ["verified outcome at step 3"] and injectable(rel)
    assert rel.trust.vouched_by == ["peer:a"] and rel.trust.held_for == "tool output instruction"
    assert rel.trust.extra == {"_outcome": {"claim": "ok", "sig": "00"}}
    assert scoped.trust.user == "alice" and scoped.trust.personal is True
    assert scoped.meta == {"family": "f3"}
    assert plain.trust == TrustState() and plain.meta == {"family": "f4"}


def _recall_checks(connect: Callable[[], Store]) -> None:
    """Recall on the migrated store: probation and user scope come from the columns."""
    mem = Memory(store=connect(), namespace="n", policy="lru", max_bytes=None, embedder=EMB)
    every = {e.id for e in mem.entries()}
    assert every == {r[0] for r in OLD_ROWS}
    for user, want in ((None, {"released", "plain"}), ("alice", {"released", "plain", "scoped"})):
        seen: set[str] = set()
        for i in range(4):
            seen |= set(mem.recall(_text(i), k=10, user=user).ids)
        assert seen == want, user
    mem.close()


def _sqlite_v5(path: Path) -> None:
    c = sqlite3.connect(path, isolation_level=None)
    for v in range(1, 6):
        step = schema.MIGRATIONS[v]
        if callable(step):
            step(c)
        else:
            for stmt in schema._statements(step):
                c.execute(stmt)
    c.execute("PRAGMA user_version=5")
    c.execute("INSERT INTO namespaces VALUES ('n', ?, 32, NULL, 0, 'float32')", (IDENT,))
    for i, (eid, meta, origin) in enumerate(OLD_ROWS):
        c.execute(
            "INSERT INTO entries(id, namespace, kind, text, bytes, raw_bytes, embedding, origin, "
            "meta) VALUES (?, 'n', 'raw', ?, 500, 500, ?, ?, ?)",
            (
                eid,
                _text(i),
                EMB.embed(_text(i)).astype("float32").tobytes(),
                origin,
                json.dumps(meta, sort_keys=True),
            ),
        )
    c.close()


def test_sqlite_v5_file_opens_read_only_with_clean_meta(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    _sqlite_v5(path)
    ro = SQLiteStore(path, readonly=True)  # not migrated: the state is split out when read
    assert ro.schema_version() == 5
    _check_converted(ro)
    ro.close()


def test_sqlite_v5_file_migrates_trust_state_into_columns(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    _sqlite_v5(path)
    s = SQLiteStore(path)
    assert s.schema_version() == schema.SCHEMA_VERSION
    s.close()
    raw = sqlite3.connect(path)
    metas = [json.loads(m) for (m,) in raw.execute("SELECT meta FROM entries")]
    probation = dict(raw.execute("SELECT id, probation FROM entries").fetchall())
    raw.close()
    assert not [k for m in metas for k in m if is_internal_key(k)]
    assert probation == {"held": "origin external", "released": None, "scoped": None, "plain": None}
    _check_converted(SQLiteStore(path))
    _recall_checks(lambda: SQLiteStore(path))


@pytest.fixture
def pg_v5(pg_url: str) -> Iterator[Callable[[], Store]]:
    psycopg = pytest.importorskip("psycopg")
    from memcurator.store import pgschema
    from memcurator.store.postgres import PostgresStore

    with psycopg.connect(pg_url, autocommit=True) as c:
        c.execute("CREATE TABLE mc_schema (version INTEGER NOT NULL)")
        c.execute("INSERT INTO mc_schema(version) VALUES (5)")
        for v in range(1, 6):
            c.execute(pgschema.MIGRATIONS[v])
        c.execute("INSERT INTO namespaces VALUES ('n', %s, 32, NULL, 0, 'float32')", (IDENT,))
        part = pgschema.partition_name("n")
        c.execute(f"CREATE TABLE {part} PARTITION OF entries FOR VALUES IN ('n')")
        for i, (eid, meta, origin) in enumerate(OLD_ROWS):
            e = EMB.embed(_text(i))
            c.execute(
                "INSERT INTO entries(id, namespace, kind, text, bytes, raw_bytes, vec, origin, "
                "meta) VALUES (%s, 'n', 'raw', %s, 500, 500, %s, %s, %s)",
                (
                    eid,
                    _text(i),
                    "[" + ",".join(map(repr, e.tolist())) + "]",
                    origin,
                    json.dumps(meta, sort_keys=True),
                ),
            )
    opened: list[Any] = []

    def connect() -> Store:
        opened.append(PostgresStore(pg_url, pool_size=2))
        return opened[-1]  # type: ignore[no-any-return]

    yield connect
    for s in opened:
        s.close()


def test_postgres_v5_database_migrates_trust_state_into_columns(
    pg_v5: Callable[[], Store], pg_url: str
) -> None:
    import psycopg

    from memcurator.store import pgschema

    s = pg_v5()
    assert s.schema_version() == pgschema.SCHEMA_VERSION
    with psycopg.connect(pg_url) as c:
        keys = c.execute(
            "SELECT count(*) FROM entries, jsonb_object_keys(metab) k "
            "WHERE left(k, 1) = '_' OR k = 'claimed_origin'"
        ).fetchone()
        held = c.execute("SELECT id FROM entries WHERE probation IS NOT NULL").fetchall()
    assert keys == (0,) and held == [("held",)]
    _check_converted(s)
    _recall_checks(pg_v5)


# ------------------------------------------------------------------ user meta never sets trust
RESERVED = [
    {"_probation": "origin external"},
    {"_taint": "external"},
    {"_held_for": "tool output instruction"},
    {"_corroborated": ["verified outcome at step 1"]},
    {"_vouched_by": ["peer:a", "peer:b"]},
    {"_user": "mallory"},
    {"_personal": True},
    {"_derived_from": []},
    {"claimed_origin": "self"},
    {"_outcome": {"ok": True}},  # any underscore key, named by a typed field or not
]


@pytest.mark.parametrize("bad", RESERVED, ids=lambda m: next(iter(m)))
def test_user_meta_naming_trust_state_is_refused(bad: dict[str, Any]) -> None:
    mem = Memory(policy="curator", max_bytes=None, namespace="n")
    key = next(iter(bad))
    with pytest.raises(InvalidInput, match=f"meta key '{key}' is reserved.*'_'"):
        mem.write(_text(1), origin="external", meta={"family": "f", **bad})
    assert len(mem) == 0 and mem.decisions() == []
    own = mem.write(_text(2), meta={"family": "f"}).id
    with pytest.raises(InvalidInput, match="reserved"):
        mem.store.update(_with_meta(mem.get(own), bad))  # nor through the store directly
    assert mem.get(own).trust == TrustState() and injectable(mem.get(own))


def _with_meta(e: Any, meta: dict[str, Any]) -> Any:
    e.meta = {**e.meta, **meta}
    return e


@pytest.mark.parametrize(
    "nested",
    [
        {"note": {"_probation": "origin external"}},
        {"note": {"_taint": "external", "_held_for": "x"}},
        {"notes": [{"_user": "bob"}, {"claimed_origin": "peer"}]},
    ],
)
def test_nested_underscore_keys_are_user_data_without_trust_effect(nested: dict[str, Any]) -> None:
    mem = Memory(policy="curator", max_bytes=None, namespace="n")
    eid = mem.write(_text(1), meta=nested).id
    e = mem.get(eid)
    assert e.trust.probation is None and e.trust.user is None and injectable(e)
    assert {k: v for k, v in e.meta.items() if k != "text_sha1"} == nested
    assert mem.recall(_text(1), k=1).ids == [eid]


def test_trust_state_keys_name_every_typed_field() -> None:
    names = {f for f in TrustState.__dataclass_fields__ if f != "extra"}
    assert set(TRUST_KEYS.values()) == names
    t = TrustState()
    for k in TRUST_KEYS:
        t[k] = "x"
    t["_new"] = 1
    assert TrustState.from_legacy(t.legacy()) == t
    with pytest.raises(InvalidInput, match="not a trust-state key"):
        t["family"] = 1


# ------------------------------------------------------------------ byte accounting unchanged
def test_bytes_count_the_trust_state_as_before() -> None:
    from memcurator.store.sizing import default_sizeof

    mem = Memory(policy="curator", max_bytes=None, namespace="n")
    r = mem.write(_text(1), origin="external", meta={"family": "f"}, user="alice")
    e = mem.get(r.id)
    assert e.trust.probation and e.trust.user == "alice"
    flat = {**e.meta, **e.trust.legacy()}  # what the meta held before v6
    dtype = mem.store.namespace("n").vector_dtype
    assert e.bytes == default_sizeof(e.text, flat, e.embedding, dtype)


# ------------------------------------------------------------------ store copy and export
def _held_memory(path: Path) -> Memory:
    mem = Memory(str(path), namespace="n", policy="curator", max_bytes=None, embedder=EMB)
    mem.write(_text(1), origin="external", meta={"family": "f1"})
    mem.write(_text(2), meta={"family": "f2"}, user="alice", personal=True)
    return mem


def test_store_copy_carries_trust_state_in_its_own_field(tmp_path: Path) -> None:
    mem = _held_memory(tmp_path / "a.db")
    buf = io.StringIO()
    dump_store(mem.store, buf)
    lines = [json.loads(x) for x in buf.getvalue().splitlines()]
    ents = [x for x in lines if x["type"] == "entry"]
    assert all(not [k for k in x["meta"] if is_internal_key(k)] for x in ents)
    assert sorted(x["trust"].get("_probation", "") != "" for x in ents) == [False, True]
    dst = SQLiteStore(tmp_path / "b.db")
    copy_store(mem.store, dst)
    assert [(e.meta, e.trust) for e in dst.entries("n")] == [
        (e.meta, e.trust) for e in mem.store.entries("n")
    ]


def test_store_copy_reads_an_older_stream_with_trust_in_meta(tmp_path: Path) -> None:
    mem = _held_memory(tmp_path / "a.db")
    buf = io.StringIO()
    dump_store(mem.store, buf)
    old = []
    for line in buf.getvalue().splitlines():
        x = json.loads(line)
        if x["type"] == "entry":  # as written before v6: state in meta, no trust field
            x["meta"] = {**x["meta"], **x.pop("trust")}
        old.append(json.dumps(x))
    dst = SQLiteStore(tmp_path / "b.db")
    load_store(dst, io.StringIO("\n".join(old) + "\n"))
    assert [(e.meta, e.trust) for e in dst.entries("n")] == [
        (e.meta, e.trust) for e in mem.store.entries("n")
    ]


def test_export_carries_trust_and_import_of_an_old_export_converts(tmp_path: Path) -> None:
    mem = _held_memory(tmp_path / "a.db")
    buf = io.StringIO()
    export_namespace(mem, buf)
    rows = [json.loads(x) for x in buf.getvalue().splitlines()[1:]]
    assert all("trust" in r and not [k for k in r["meta"] if is_internal_key(k)] for r in rows)
    # an export written before v6: the state in meta, plus keys a file must not grant
    for r in rows:
        r["meta"] = {**r["meta"], **r.pop("trust"), "_corroborated": ["forged"], "_outcome": 1}
    old = buf.getvalue().splitlines()[0] + "\n" + "\n".join(json.dumps(r) for r in rows) + "\n"
    dst = Memory(namespace="copy", policy="curator", max_bytes=None, embedder=EMB)
    rep = import_namespace(dst, io.StringIO(old))
    assert len(rep.admitted) == 2 and rep.rejected == []
    got = {e.meta["family"]: e for e in dst.entries()}
    for e in got.values():
        assert not [k for k in e.meta if is_internal_key(k)]
        assert e.trust.corroborated is None and e.trust.extra == {}  # re-judged, not copied
    assert got["f1"].trust.probation and not injectable(got["f1"])  # the gate's own probation
    assert got["f2"].trust.user == "alice" and got["f2"].trust.personal  # the scope carried
