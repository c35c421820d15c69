"""More members of "one ``Memory`` handle shared by several threads" (issue 32, item 2).

:mod:`tests.test_handle_threads` covers one handle of the lru and curator policies on the three
backends. Here the same handle is driven by a mixed workload (write, recall, feedback, forget,
update, the listings and the matrix) from several threads on the other members of the kind:
the other policy families, the compressed vector precisions, a text-compressing store, one
store object under several handles, PostgreSQL with recall in the store, a recall whose
``where`` callback reads the memory, two handles sharing with each other, thread pools
(``concurrent.futures``, ``asyncio.to_thread``), and a handle closed while threads use it
(a clear :class:`~memcurator.errors.StoreError`, no crash, no hang). Loops are bounded.
"""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import random
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from test_handle_threads import _switch_often, _text  # noqa: F401 -- an autouse fixture

from memcurator import Memory
from memcurator.embed import HashingEmbedder
from memcurator.errors import DuplicateEntry, EntryNotFound, InvalidInput, StoreError
from memcurator.store import open_store

EMB = HashingEmbedder(dim=64)
BUDGET = 9_000
#: errors a call may raise by design when another thread changed the memory between two calls
EXPECTED = (EntryNotFound, DuplicateEntry)


Extra = Callable[[Memory, random.Random, list[str]], None]


def _start_join(ts: list[threading.Thread], timeout_s: float) -> None:
    """Start the threads, wait for each (``timeout_s`` seconds at most); none may hang."""
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout=timeout_s)
    assert not any(t.is_alive() for t in ts)


def _mixed(
    mem: Memory, threads: int = 5, calls: int = 50, extra: Extra | None = None, check: bool = True
) -> None:
    """``threads`` threads of ``calls`` random calls through ``mem``; asserts none raised (but
    :data:`EXPECTED`), none hung, the budget held, and (``check``) that the handle's view equals
    the store's (:func:`_same_as_store`; a caller whose other handles still write checks later)."""
    ids: list[str] = []
    errors: list[BaseException] = []
    guard = threading.Lock()
    start = threading.Barrier(threads)
    ops = ["write", "write", "recall", "feedback", "forget", "update", "list", "extra"]

    def body(seed: int) -> None:
        rnd = random.Random(seed)
        start.wait()
        for i in range(calls):
            op = rnd.choice(ops)
            try:
                if op == "write":
                    r = mem.write(_text(seed * 1000 + i))
                    if r.id is not None:
                        with guard:
                            ids.append(r.id)
                elif op == "recall":
                    r = mem.recall(f"invoice {rnd.randint(0, 300)} client {i % 7}", k=3)
                    assert len(r.ids) == len(r.entries)
                elif op == "feedback" and ids:
                    mem.feedback([rnd.choice(ids)], rnd.random())
                elif op == "forget" and ids:
                    mem.forget(rnd.choice(ids))
                elif op == "update" and ids:
                    mem.update(rnd.choice(ids), _text(rnd.randint(10**5, 10**6)))
                elif op == "list":
                    assert mem.matrix.shape[0] >= 0 and len(mem.entries()) >= 0
                    assert mem.used_bytes <= (mem.max_bytes or sys.maxsize)
                    mem.decisions(since=0)
                elif op == "extra" and extra is not None:
                    extra(mem, rnd, ids)
            except EXPECTED:
                pass
            except Exception as e:  # noqa: BLE001 -- any other error is the finding
                errors.append(e)

    ts = [threading.Thread(target=body, args=(s,)) for s in range(threads)]
    _start_join(ts, 300)
    assert errors == [], errors[:3]
    if check:
        _same_as_store(mem)


def _each_in_threads(
    mems: list[Memory], threads: int, calls: int, extra: Extra | None = None
) -> None:
    """:func:`_mixed` on each handle at once (its own threads), then each handle's checks."""
    failed: list[BaseException] = []

    def run(m: Memory) -> None:
        try:
            _mixed(m, threads, calls, extra, check=False)
        except BaseException as e:  # noqa: BLE001
            failed.append(e)

    ts = [threading.Thread(target=run, args=(m,)) for m in mems]
    _start_join(ts, 300)
    assert failed == [], failed[:2]
    for m in mems:
        _same_as_store(m)


def _same_as_store(mem: Memory) -> None:
    assert {e.id for e in mem.entries()} == {e.id for e in mem.store.entries(mem.namespace)}
    assert mem.used_bytes <= (mem.max_bytes or sys.maxsize)


@pytest.mark.parametrize(
    "policy", ["tokenworth", "jitmem/extractive", "mempilot", "edm", "curator+worth"]
)
def test_policy_families(policy: str) -> None:
    _mixed(Memory(policy=policy, max_bytes=BUDGET, embedder=EMB))


@pytest.mark.parametrize("dtype", ["float16", "int8", "binary"])
@pytest.mark.parametrize("where", ["memory", "file"])
def test_vector_precisions(dtype: str, where: str, tmp_path: Path) -> None:
    path = ":memory:" if where == "memory" else str(tmp_path / "v.sqlite")
    _mixed(Memory(path, vector_dtype=dtype, max_bytes=BUDGET, embedder=EMB))


def test_compressing_store_handles_share_one_store(tmp_path: Path) -> None:
    """Dictionary training rewrites stored texts while other handles on the store recall."""
    store = open_store(tmp_path / "c.sqlite", compress_text=True)
    mems = [
        Memory(store=store, namespace=f"n{i}", max_bytes=60_000, embedder=EMB) for i in range(3)
    ]
    _each_in_threads(mems, 2, 60)


def test_where_callback_reads_the_memory() -> None:
    mem = Memory(max_bytes=BUDGET, embedder=EMB)

    def extra(m: Memory, rnd: random.Random, ids: list[str]) -> None:
        n = len(m.entries())
        r = m.recall("invoice", k=3, where=lambda e: len(m) == n and "client" in e.text)
        assert all("client" in e.text for e in r.entries)

    _mixed(mem, extra=extra)


def test_two_handles_share_with_each_other() -> None:
    a = Memory(max_bytes=BUDGET, embedder=EMB, namespace="a")
    b = Memory(max_bytes=BUDGET, embedder=EMB, namespace="b")

    def extra(m: Memory, rnd: random.Random, ids: list[str]) -> None:
        other, peer = (b, "a") if m is a else (a, "b")
        other.receive(m.share(other.sketch, 2_000), peer)
        if rnd.random() < 0.2:
            try:
                other.release_peer(peer, "reviewed")
            except InvalidInput:  # not quarantined (its entries were not held back)
                pass

    _each_in_threads([a, b], 3, 40, extra)


def test_thread_pools() -> None:
    mem = Memory(max_bytes=BUDGET, embedder=EMB)

    def call(i: int) -> Any:
        return mem.write(_text(i)) if i % 2 else mem.recall(f"invoice {i}", k=3)

    with cf.ThreadPoolExecutor(6) as pool:
        done = list(pool.map(call, range(200)))
    assert len(done) == 200

    async def main() -> list[Any]:
        return await asyncio.gather(*(asyncio.to_thread(call, i) for i in range(200, 400)))

    assert len(asyncio.run(main())) == 200
    assert mem.used_bytes <= BUDGET


@pytest.mark.parametrize("where", ["memory", "file"])
def test_close_while_threads_work(where: str, tmp_path: Path) -> None:
    """Closing a handle that other threads use: their later calls raise StoreError, nothing
    else, and no thread hangs."""
    path = ":memory:" if where == "memory" else str(tmp_path / "close.sqlite")
    mem = Memory(path, max_bytes=BUDGET, embedder=EMB)
    closed = threading.Event()
    errors: list[BaseException] = []
    after: list[int] = []

    def work(seed: int) -> None:
        for i in range(2_000):
            try:
                mem.write(_text(seed * 10_000 + i))
                mem.recall("invoice", k=2)
            except StoreError:
                if closed.is_set():
                    after.append(i)
                    return
                errors.append(StoreError("raised before close"))
            except Exception as e:  # noqa: BLE001
                errors.append(e)
                return

    ts = [threading.Thread(target=work, args=(s,)) for s in range(3)]
    for t in ts:
        t.start()
    time.sleep(0.2)
    mem.close()
    closed.set()
    for t in ts:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in ts)
    assert errors == [], errors[:3]
    assert len(after) == 3  # every thread saw the close as a StoreError


@pytest.mark.parametrize(
    ("policy", "budget", "in_store"),
    [("curator", BUDGET, False), ("lru", BUDGET, False), ("keep-all", None, True)],
)
def test_postgres_one_handle(policy: str, budget: int | None, in_store: bool, pg_url: str) -> None:
    mem = Memory(pg_url, policy=policy, max_bytes=budget, embedder=EMB, recall_in_store=in_store)
    try:
        _mixed(mem, threads=4, calls=30)
    finally:
        mem.close()


def test_keyring_shared_while_keys_are_added() -> None:
    """One key ring under several handles while another thread adds and rotates peer keys (a
    service adds a peer's key on its first write): signing never sees the ring change size
    (before: ``RuntimeError: dictionary changed size during iteration``), and no two adds get
    one key id."""
    from memcurator.trust.auth import OWNER, KeyRing

    ring = KeyRing()
    ring.add(OWNER)
    mems = [
        Memory(namespace=f"r{i}", keyring=ring, max_bytes=BUDGET, embedder=EMB) for i in range(2)
    ]
    errors: list[BaseException] = []
    added: list[str] = []

    def adder(t: int) -> None:
        for i in range(1_500):
            try:
                added.append(ring.add(f"peer{t}-{i}"))
                if i % 3 == 0:
                    added.append(ring.rotate(f"peer{t}-{i}"))
            except Exception as e:  # noqa: BLE001
                errors.append(e)

    def signer(m: Memory) -> None:
        for i in range(400):
            try:
                text = _text(i)
                m.write(text, signature=m.sign(text))
                ring.principals()
            except Exception as e:  # noqa: BLE001
                errors.append(e)

    ts = [threading.Thread(target=adder, args=(t,)) for t in range(2)]
    ts += [threading.Thread(target=signer, args=(m,)) for m in mems]
    _start_join(ts, 300)
    assert errors == [], errors[:3]
    assert len(set(added)) == len(added) == 2 * 2_000
    assert all(e.origin == "self" for m in mems for e in m.entries())


@pytest.mark.parametrize("policy", ["curator", "lru"])
def test_langgraph_stores_and_direct_calls_share_one_memory(policy: str) -> None:
    """Two LangGraph stores over one memory, and direct writes through it, in threads: a put
    never fails because another thread's write evicted its item between the write and the read
    back (before: ``EntryNotFound``), and a key never ends up with two items."""
    pytest.importorskip("langgraph")
    from memcurator.integrations.langgraph import KEY, NS, MemcuratorStore

    mem = Memory(policy=policy, max_bytes=20_000, embedder=EMB)
    stores = [MemcuratorStore(mem), MemcuratorStore(mem)]
    errors: list[BaseException] = []

    def body(seed: int) -> None:
        rnd = random.Random(seed)
        st = stores[seed % 2]
        for i in range(60):
            op = rnd.choice(["put", "put", "aput", "search", "get", "delete", "direct"])
            ns, key = ("u", str(seed % 3)), f"k{rnd.randint(0, 20)}"
            value = {"text": f"Task: rows in t{rnd.randint(0, 99)}\nAction: SELECT 1 FROM t{i};"}
            try:
                if op == "put":
                    st.put(ns, key, value)
                elif op == "aput":
                    asyncio.run(st.aput(ns, key, value))
                elif op == "search":
                    st.search(("u",), query=f"rows in t{i}", limit=3)
                elif op == "get":
                    st.get(ns, key)
                elif op == "delete":
                    st.delete(ns, key)
                else:
                    mem.write(f"Task: direct note {seed} {i}\nAction: ls /tmp/d{i};")
                    mem.recall("rows in t5", k=3)
            except Exception as e:  # noqa: BLE001
                errors.append(e)

    ts = [threading.Thread(target=body, args=(s,)) for s in range(6)]
    _start_join(ts, 300)
    assert errors == [], errors[:3]
    keys = [(tuple(e.meta[NS]), e.meta[KEY]) for e in mem.entries() if KEY in e.meta]
    assert len(keys) == len(set(keys)) > 0


def test_postgres_one_store_object_under_handles_in_threads(pg_url: str) -> None:
    """One PostgresStore object (its connection pool) under three handles, two on one
    namespace with recall in the store, each handle driven by two threads."""
    from memcurator.store.postgres import PostgresStore

    store = PostgresStore(pg_url, pool_size=4)
    mems = [
        Memory(
            store=store, namespace="shared", policy="keep-all", embedder=EMB, recall_in_store=True
        ),
        Memory(
            store=store, namespace="shared", policy="keep-all", embedder=EMB, recall_in_store=True
        ),
        Memory(
            store=store,
            namespace="own",
            policy="curator",
            vector_dtype="float32",
            max_bytes=BUDGET,
            embedder=EMB,
        ),
    ]
    try:
        _each_in_threads(mems, 2, 25)
    finally:
        store.close()


@pytest.mark.parametrize("backend", ["sqlite", "postgres-url", "postgres-store"])
def test_handles_opened_at_once_in_threads(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Four threads open handles at once on a new store, on new namespaces (two threads per
    namespace), then write and recall. Before: on PostgreSQL two creators' partitions
    deadlocked (``StoreError`` ... deadlock, on SHARE ROW EXCLUSIVE of ``namespaces``)."""
    shared: Any = None
    if backend == "sqlite":
        target: dict[str, Any] = {"path": str(tmp_path / "fresh.sqlite")}
    else:
        from memcurator.store.postgres import PostgresStore

        url = request.getfixturevalue("pg_url")
        if backend == "postgres-url":
            target = {"path": url}
        else:
            shared = PostgresStore(url, pool_size=4)
            target = {"store": shared}
    errors: list[BaseException] = []
    opened: list[Memory] = []
    start = threading.Barrier(4)

    def open_and_use(i: int) -> None:
        start.wait()
        try:
            m = Memory(**target, namespace=f"fresh{i % 2}", embedder=EMB, max_bytes=BUDGET)
            opened.append(m)
            m.write(_text(i))
            m.recall("invoice", k=1)
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    ts = [threading.Thread(target=open_and_use, args=(i,)) for i in range(4)]
    try:
        _start_join(ts, 120)
        assert errors == [], errors[:2]
        for ns in ("fresh0", "fresh1"):
            assert len(opened[0].store.entries(ns)) == 2
    finally:
        for m in opened if shared is None else []:  # a shared store: closed once, below
            m.close()
        if shared is not None:
            shared.close()
