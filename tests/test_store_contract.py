"""One contract every store backend passes (STYLE.md rule 5): budget held across two handles of
one namespace, hard delete, namespace isolation, crash safety, change detection.

A backend is one entry of :data:`BACKENDS`: a factory that, given a temporary folder, returns how
to open a new handle on one database (``connect``) and, where it can, the bytes its persistent
medium holds (``persisted``, for the physical-erase check). The PostgreSQL backend runs on the
server of ``tests/conftest.py`` with a fresh database per test; its ``persisted`` reads the
server's data files (heap and WAL) when the server was started here. Nothing below names a
backend.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memcurator import Memory
from memcurator.embed import HashingEmbedder
from memcurator.errors import EntryNotFound, NamespaceNotFound
from memcurator.store.base import Store
from memcurator.store.sqlite import SQLiteStore
from memcurator.types import Entry


@dataclass
class Backend:
    """How the contract reaches one store implementation."""

    name: str
    connect: Callable[[], Store]
    persisted: Callable[[], bytes] | None = None


DIM = 64
EMB = HashingEmbedder(dim=DIM)


def _text(i: int, tag: str = "") -> str:
    return (
        f"Task: count the orders of customer {i}{tag}\nAction: SELECT COUNT(*) FROM o WHERE c={i};"
    )


def _sqlite(tmp: Path, **kw: Any) -> Backend:
    path = tmp / "contract.sqlite"

    def persisted() -> bytes:  # the database file and its WAL / journal
        return b"".join(p.read_bytes() for p in sorted(tmp.glob("contract.sqlite*")))

    return Backend("sqlite", lambda: SQLiteStore(path, **kw), persisted)


def _postgres(tmp: Path, request: pytest.FixtureRequest, **kw: Any) -> Backend:
    from memcurator.store.postgres import PostgresStore

    url = request.getfixturevalue("pg_url")
    datadir = request.getfixturevalue("pg_server").datadir
    handles: list[PostgresStore] = []

    def connect() -> Store:
        handles.append(PostgresStore(url, pool_size=2, **kw))
        return handles[-1]

    def persisted() -> bytes:  # every relation file and WAL segment of the cluster
        assert datadir is not None
        parts = [datadir / "base", datadir / "global", datadir / "pg_wal"]
        return b"".join(p.read_bytes() for d in parts for p in sorted(d.rglob("*")) if p.is_file())

    request.addfinalizer(lambda: [h.close() for h in handles])
    return Backend("postgres", connect, persisted if datadir is not None else None)


def _zstd_dict() -> bytes:
    """A text dictionary trained on texts like the contract's (issue 35: each store also runs
    the contract with its texts kept zstd-compressed from the first entry)."""
    from memcurator.store.compression import train

    texts = [_text(i, t) for i in range(200) for t in ("", "-b")]
    codec = train(texts)
    assert codec.dictionary is not None
    return codec.dictionary


#: Store options of the compressed backends: text kept zstd-compressed from the first entry.
_ZSTD = {"compress_text": True, "text_dict": _zstd_dict()}


#: Store factories: name -> (temporary folder, pytest request -> Backend). Add a backend here.
BACKENDS: dict[str, Callable[[Path, pytest.FixtureRequest], Backend]] = {
    "sqlite": lambda tmp, request: _sqlite(tmp),
    "postgres": _postgres,
    "sqlite+zstd": lambda tmp, request: _sqlite(tmp, **_ZSTD),
    "postgres+zstd": lambda tmp, request: _postgres(tmp, request, **_ZSTD),
}


@pytest.fixture(params=sorted(BACKENDS))
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    return BACKENDS[request.param](tmp_path, request)


def _memory(store: Store, namespace: str = "a", **kw: object) -> Memory:
    kw.setdefault("policy", "lru")
    return Memory(store=store, namespace=namespace, embedder=EMB, **kw)  # type: ignore[arg-type]


def _as_stored(store: Store, text: str, meta: dict[str, Any]) -> bytes:
    """The bytes ``store`` writes for an entry's ``text`` in namespace "a": UTF-8, or the zstd
    frame holding its meta and text (schema v8)."""
    import json

    from memcurator.store.compression import stored_entry

    codec = getattr(store, "text_codec", None)
    v, _ = stored_entry(
        None if codec is None else codec("a"), text, json.dumps(meta, sort_keys=True)
    )
    return v.encode() if isinstance(v, str) else v[1:]


def _fixed_bytes(store: Store) -> int:
    """What namespace "a" stores besides its entries (a given text dictionary), bytes."""
    fixed = getattr(store, "fixed_bytes", None)
    return 0 if fixed is None else int(fixed("a"))


def test_implements_the_protocol(backend: Backend) -> None:
    assert isinstance(backend.connect(), Store)


def test_budget_held_across_two_handles(backend: Backend) -> None:
    budget = 6_000
    a = _memory(backend.connect(), max_bytes=budget, vector_dtype="float32")
    b = _memory(backend.connect())  # the namespace's stored budget
    assert b.max_bytes == budget
    for i in range(24):
        (a if i % 2 else b).write(_text(i))
        for m in (a, b):
            assert m.used_bytes <= budget
        assert backend.connect().used_bytes("a") <= budget
    assert {e.id for e in a.entries()} == {e.id for e in b.entries()}
    assert len(a.decisions(action="evict")) > 0  # the budget bound: entries were evicted
    assert a.step == b.step


def test_hard_delete_leaves_no_read_path_and_no_bytes(backend: Backend) -> None:
    secret = "Task: the vault code of user 7 is zebra-4417-quartz\nAction: SELECT 1;"
    mem = _memory(backend.connect(), max_bytes=None)
    other = _memory(backend.connect())  # a second handle on the namespace
    keep = mem.write(_text(1)).id
    gone = mem.write(secret).id
    assert gone is not None and keep is not None
    assert other.get(gone).text == secret
    gone_meta, keep_meta = other.get(gone).meta, other.get(keep).meta
    r = mem.forget(gone)
    assert r.ids == [gone] and r.freed > 0
    for m in (mem, other):
        with pytest.raises(EntryNotFound):
            m.get(gone)
        assert gone not in {e.id for e in m.entries()}
        assert gone not in m.recall("vault code of user 7 zebra quartz", k=5).ids
    s = backend.connect()
    with pytest.raises(EntryNotFound):
        s.get("a", gone)
    assert all(e.text != secret for e in s.entries("a"))
    assert gone not in {row.id for row in s.vector_rows("a")}
    assert [d.entry_id for d in s.decisions("a", action="forget")] == [gone]
    assert all("zebra" not in d.reason for d in s.decisions("a"))
    if backend.persisted is not None:
        assert r.erased
        assert b"zebra-4417-quartz" not in backend.persisted()
        assert _as_stored(s, secret, gone_meta) not in backend.persisted()  # nor compressed
        assert _as_stored(s, _text(1), keep_meta) in backend.persisted()  # the check sees text
    assert keep in {e.id for e in mem.entries()}


def test_forget_all_is_all_or_nothing_per_namespace(backend: Backend) -> None:
    store = backend.connect()
    a, b = _memory(store, "a"), _memory(store, "b")
    for i in range(3):
        a.write(_text(i))
        b.write(_text(i))
    with pytest.raises(EntryNotFound):  # one unknown id: nothing is deleted
        a.forget("deadbeef")
    assert len(a) == 3
    freed = a.forget_all().freed
    assert freed > 0 and len(a) == 0 and store.used_bytes("a") == _fixed_bytes(store)
    assert len(b) == 3 and store.count("b") == 3


def test_namespace_isolation(backend: Backend) -> None:
    store = backend.connect()
    a = _memory(store, "a", max_bytes=50_000)
    b = _memory(backend.connect(), "b", max_bytes=5_000)
    ra = a.write(_text(1))
    b.write(_text(1))
    assert [e.namespace for e in store.entries("a")] == ["a"]
    assert store.namespace("b").max_bytes == 5_000 and store.namespace("a").max_bytes == 50_000
    with pytest.raises(EntryNotFound):
        store.get("a", "not-there")
    with pytest.raises(NamespaceNotFound):
        store.entries("c")
    assert [d.namespace for d in store.decisions("b")] == ["b"]
    for i in range(2, 12):
        b.write(_text(i))
    assert b.used_bytes <= 5_000 and len(a) == 1  # b's evictions never reach a
    b.forget_all()
    assert len(a) == 1 and a.recall("orders of customer 1", k=1).ids == [ra.id]


def test_a_transaction_that_raises_leaves_nothing(backend: Backend) -> None:
    store = backend.connect()
    store.create_namespace("a", embedder="e", dim=4)
    token = store.change_token()
    e = np.ones(4, dtype=np.float32) / 2
    with pytest.raises(RuntimeError, match="crash"):
        with store.transaction():
            store.insert(Entry("x1", "a", "insight", "half-written", 10, 10, e))
            store.log("a", step=0, action="admit", entry_id="x1", nbytes=10)
            with store.transaction():  # a nested one joins the outer
                store.save_state("a", "lru", 3, {"k": 1})
            raise RuntimeError("crash")
    assert store.change_token() != token  # a rollback is a change readers must see
    for s in (store, backend.connect()):
        assert s.count("a") == 0 and s.decisions("a") == [] and s.load_state("a") is None


def test_a_failed_write_leaves_nothing(backend: Backend, monkeypatch: pytest.MonkeyPatch) -> None:
    mem = _memory(backend.connect(), max_bytes=None)
    mem.write(_text(1))
    before = (mem.used_bytes, len(mem.decisions()))

    def boom(*a: object, **k: object) -> list[tuple[str, float, str]]:
        raise RuntimeError("keep pass crashed")

    monkeypatch.setattr(mem.policy, "victims", boom)
    with pytest.raises(RuntimeError, match="crashed"):
        mem.write(_text(2))  # inserted and logged, then the Keep pass raises
    assert (mem.used_bytes, len(mem.decisions())) == before
    assert backend.connect().count("a") == 1


def test_change_token_sees_another_handle(backend: Backend) -> None:
    a, b = backend.connect(), backend.connect()
    a.create_namespace("a", embedder="e", dim=4)
    t = a.change_token()
    assert a.change_token() == t  # stable while nothing changes
    b.log("a", step=0, action="admit", entry_id="x")
    assert a.change_token() != t


def test_vector_rows_walk_resumes_by_position(backend: Backend) -> None:
    mem = _memory(backend.connect(), max_bytes=None)
    ids = [mem.write(_text(i)).id for i in range(5)]
    s = backend.connect()
    first = s.vector_rows("a", limit=2)
    rest = s.vector_rows("a", after=first[-1].pos)
    assert [r.id for r in first + rest] == ids
    assert all(r.vector_bytes > 0 and r.bytes > r.vector_bytes for r in first + rest)
    assert s.vector_rows("a", other_than=("float32", 4 * DIM)) == []


def test_known_ids_remembers_what_left(backend: Backend) -> None:
    mem = _memory(backend.connect(), max_bytes=None)
    a, b = mem.write(_text(1)).id, mem.write(_text(2)).id
    assert a is not None and b is not None
    mem.forget(a)
    assert backend.connect().known_ids("a", [a, b, "deadbeef"]) == {a, b}


def test_a_commit_landing_right_after_ours_is_not_missed(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process forgets an entry between this handle's commit and the moment it records
    that its resident set is current: the next read must still see the forget (a handle that
    recorded the store's token then would take that commit as read and serve the entry)."""
    sa, sb = backend.connect(), backend.connect()
    a, b = _memory(sa, max_bytes=None), _memory(sb)
    x = a.write(_text(1)).id
    assert x is not None and b.get(x).id == x
    inner = sa.transaction
    depth, fired = [0], []

    @contextmanager
    def racing(namespace: str | None = None) -> Iterator[None]:
        depth[0] += 1
        try:
            with inner(namespace=namespace):
                yield
        finally:
            depth[0] -= 1
        if depth[0] == 0 and not fired:  # a's outermost commit is done, its record not yet
            fired.append(b.forget(x))

    monkeypatch.setattr(sa, "transaction", racing)
    a.write(_text(2))
    assert fired and fired[0].ids == [x]
    with pytest.raises(EntryNotFound):
        a.get(x)
    assert x not in {e.id for e in a.entries()}
    assert x not in a.recall("orders of customer 1", k=5).ids


def test_change_feed_lists_each_changed_id_once(backend: Backend) -> None:
    """The feed of a namespace: inserts, updates and deletes after a number, each id once at
    its latest change, in change order; other namespaces' changes and rollbacks are not in it."""
    a, b = backend.connect(), backend.connect()
    for ns in ("a", "b"):
        a.create_namespace(ns, embedder="e", dim=4)
    e = np.ones(4, dtype=np.float32) / 2
    s0 = b.change_seq("a")
    assert b.changes_since("a", s0) == (s0, [])
    with a.transaction(namespace="a"):
        a.insert(Entry("x", "a", "insight", "first", 10, 10, e))
        a.insert(Entry("y", "a", "insight", "second", 10, 10, e))
    a.insert(Entry("z", "b", "insight", "elsewhere", 10, 10, e))
    got = b.changes_since("a", s0)
    assert got is not None and got.ids == ["x", "y"] and got.seq > s0
    s1 = got.seq
    x = a.get("a", "x")
    x.uses += 1
    a.update(x)
    a.delete("a", "y")
    got = b.changes_since("a", s1)
    assert got is not None and sorted(got.ids) == ["x", "y"] and got.seq > s1
    assert b.changes_since("a", s0) == (got.seq, ["x", "y"])  # y's latest change is last
    s2 = got.seq
    with pytest.raises(RuntimeError):
        with a.transaction(namespace="a"):
            a.insert(Entry("w", "a", "insight", "rolled back", 10, 10, e))
            raise RuntimeError("crash")
    assert b.changes_since("a", s2) == (s2, [])
    assert b.change_seq("a") == s2


def test_a_handle_catches_up_by_the_change_only(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After another handle's write, feedback and forget, a loaded handle reads only the
    changed entries (no reload of the namespace) and ends as a fresh load would."""
    a = _memory(backend.connect(), max_bytes=None)
    ids = [a.write(_text(i)).id for i in range(12)]
    sb = backend.connect()
    b = _memory(sb)
    assert len(b) == 12
    res = b._ctx.res
    reloads = res.reloads
    read: list[list[str]] = []
    full: list[str] = []
    get_many, entries = sb.get_many, sb.entries
    monkeypatch.setattr(
        sb, "get_many", lambda ns, want: read.append(list(want)) or get_many(ns, want)
    )
    monkeypatch.setattr(sb, "entries", lambda ns: full.append(ns) or entries(ns))
    new = a.write(_text(99, " new")).id
    r = a.recall("orders of customer 3", k=1)
    a.feedback(r, 1.0)
    a.forget(ids[5])
    hit = b.recall("orders of customer 99 new", k=1)
    assert hit.ids == [new]
    assert res.reloads == reloads and full == [] and res.catchups >= 1
    assert sum(len(w) for w in read) <= 3  # the new entry, the one given feedback, the forgotten
    fresh = _memory(backend.connect())
    assert [e.id for e in b.entries()] == [e.id for e in fresh.entries()]
    assert [(e.uses, e.successes) for e in b.entries()] == [
        (e.uses, e.successes) for e in fresh.entries()
    ]
    assert b.used_bytes == fresh.used_bytes == backend.connect().used_bytes("a")
    np.testing.assert_array_equal(b.matrix, fresh.matrix)
    with pytest.raises(EntryNotFound):
        b.get(ids[5])


def test_a_trimmed_feed_makes_a_handle_reload(backend: Backend) -> None:
    a = _memory(backend.connect(), max_bytes=None)
    ids = [a.write(_text(i)).id for i in range(6)]
    b = _memory(backend.connect())
    res = b._ctx.res
    reloads = res.reloads
    for i in ids[:3]:
        a.forget(i)
    assert backend.connect().trim_changes("a", keep=0) == 3  # the tombstones go
    assert len(b) == 3 and res.reloads == reloads + 1  # behind the cut: a full reload
    assert {e.id for e in b.entries()} == set(ids[3:])
    a.write(_text(7))
    assert len(b) == 4 and res.reloads == reloads + 1  # caught up again from the feed


def test_a_deleted_namespace_is_reloaded_not_caught_up(backend: Backend) -> None:
    s = backend.connect()
    a = _memory(s, max_bytes=None)
    a.write(_text(1))
    seq = s.change_seq("a")
    backend.connect().delete_namespace("a")
    assert s.changes_since("a", seq) is None


def test_trust_state_lives_in_its_own_columns(backend: Backend) -> None:
    """Every field of an entry's trust state, and any other internal key (the generic column),
    round-trips through insert, update and a second handle; ``meta`` stays the user's: an
    internal key there is refused and nothing is stored."""
    from memcurator.errors import InvalidInput
    from memcurator.trust.provenance import corroborate
    from memcurator.types import TrustState

    store = backend.connect()
    store.create_namespace("a", embedder="e", dim=4)
    e = np.ones(4, dtype=np.float32) / 2
    trust = TrustState(
        probation="origin peer",
        taint="peer",
        claimed_origin="self",
        derived_from=[{"kind": "peer", "id": "p1"}, {"kind": "web", "id": "w", "via": "observed"}],
        vouched_by=["peer:p1"],
        user="alice",
        personal=True,
        extra={"_outcome": {"claim": "passed", "sig": "ab12"}},
    )
    store.insert(Entry("x", "a", "insight", "held", 10, 10, e, meta={"n": {"_x": 1}}, trust=trust))
    store.insert(Entry("y", "a", "insight", "plain", 10, 10, e))
    for s in (store, backend.connect()):
        x, y = s.get_many("a", ["x", "y"])
        assert (x.trust, x.meta) == (trust, {"n": {"_x": 1}})
        assert (y.trust, y.meta) == (TrustState(), {})
    assert corroborate(x.trust, "verified outcome at step 2")
    x.trust.held_for, x.trust.extra["_more"] = "tool output instruction", [1, 2]
    store.update(x)
    for s in (store, backend.connect()):
        got = s.get("a", "x").trust
        assert got == x.trust and got.probation is None
        assert got.corroborated == ["verified outcome at step 2"]
    for bad in ({"_probation": "x"}, {"claimed_origin": "self"}, {"_new": 1}):
        with pytest.raises(InvalidInput, match="reserved"):
            store.insert(Entry("z", "a", "insight", "bad", 10, 10, e, meta=bad))
        y.meta = bad
        with pytest.raises(InvalidInput, match="reserved"):
            store.update(y)
    assert store.count("a") == 2 and store.get("a", "y").meta == {}
