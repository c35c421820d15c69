"""One ``Memory`` handle shared by several threads (issue 32, item 2).

Threads write, recall, give feedback, forget and read the handle's listings through one handle
on an in-memory store, a SQLite file and PostgreSQL. The handle's lock
(:mod:`memcurator.lifecycle.handle_lock`) makes their calls take turns: no call raises, the
byte budget holds after every call, and nothing is lost (every admitted entry is resident or
has an eviction or forget in the decision log; the handle's view equals the store's).
"""

from __future__ import annotations

import random
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from memcurator import Memory
from memcurator.embed import HashingEmbedder
from memcurator.errors import EntryNotFound
from memcurator.store.base import Store
from memcurator.store.sqlite import SQLiteStore

EMB = HashingEmbedder(dim=64)
BUDGET = 9_000


def _stores(kind: str, tmp: Path, request: pytest.FixtureRequest) -> Callable[[], Store]:
    if kind == "memory":
        shared = SQLiteStore(":memory:")
        return lambda: shared
    if kind == "sqlite":
        return lambda: SQLiteStore(tmp / "threads.sqlite")
    from memcurator.store.postgres import PostgresStore

    url = request.getfixturevalue("pg_url")
    opened: list[PostgresStore] = []
    request.addfinalizer(lambda: [s.close() for s in opened])

    def connect() -> Store:
        opened.append(PostgresStore(url, pool_size=4))
        return opened[-1]

    return connect


@pytest.fixture(autouse=True)
def _switch_often() -> Iterator[None]:
    """Switch threads every 10 µs (default 5 ms), so that unguarded interleavings happen within
    a test's few hundred calls (without the handle's lock: IndexError/ValueError every run)."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        yield
    finally:
        sys.setswitchinterval(before)


def _text(i: int) -> str:
    return f"Task: total of invoice {i} for client {i % 7}\nAction: SELECT v FROM inv WHERE id={i};"


@pytest.mark.parametrize("kind", ["memory", "sqlite", "postgres"])
@pytest.mark.parametrize("policy", ["lru", "curator"])
def test_one_handle_many_threads(
    kind: str, policy: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    connect = _stores(kind, tmp_path, request)
    mem = Memory(store=connect(), policy=policy, max_bytes=BUDGET, embedder=EMB)
    errors: list[BaseException] = []
    over: list[int] = []
    admitted: set[str] = set()
    guard = threading.Lock()
    start = threading.Barrier(5)

    def writer(t: int) -> None:
        start.wait()
        for i in range(60):
            try:
                r = mem.write(_text(t * 1000 + i))
                if r.admitted and r.id is not None:
                    with guard:
                        admitted.add(r.id)
                if i % 9 == 8:
                    ids = [e.id for e in mem.entries()]
                    if ids:
                        try:  # another thread may evict or forget it between the two calls
                            mem.forget(random.Random(i).choice(ids))
                        except EntryNotFound:
                            pass
                used = mem.used_bytes
                if used > BUDGET:
                    over.append(used)
            except Exception as e:  # noqa: BLE001 -- any error is the finding
                errors.append(e)

    def reader() -> None:
        start.wait()
        for i in range(150):
            try:
                r = mem.recall(f"invoice {i * 7} client {i % 7}", k=3)
                if r.ids and i % 3 == 0:
                    mem.feedback(r, 1.0 if i % 2 else 0.0)
                len(mem)
                mem.visible()
                _ = mem.matrix.shape
            except Exception as e:  # noqa: BLE001
                errors.append(e)

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(3)]
    threads += [threading.Thread(target=reader) for _ in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=300)
    assert not any(th.is_alive() for th in threads)
    assert errors == [], errors[:3]
    assert over == []
    resident = {e.id for e in mem.entries()}
    left = {d.entry_id for d in mem.decisions() if d.action in ("evict", "forget", "distill")}
    assert admitted - resident <= left  # nothing admitted vanished without a decision
    store = connect()
    assert {e.id for e in store.entries("default")} == resident
    assert store.used_bytes("default") == mem.used_bytes <= BUDGET
    assert len(admitted) > 0 and len(left) > 0  # writes were admitted, and some left
