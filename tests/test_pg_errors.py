"""PostgreSQL failures name their real cause, without waiting out the timeout (issue 32, 3):
a wrong database, role or port each get their own message; a lock timeout says what kind of
session held the lock (another namespace writer, a table lock such as a VACUUM's or an index
build's). A wrong password is covered by :func:`memcurator.store.pgerrors.connect_cause`'s
doctest (the embedded test server trusts every local role)."""

from __future__ import annotations

import time

import numpy as np
import pytest

from memcurator.errors import StoreError
from memcurator.store.pglocal import free_port
from memcurator.store.pgschema import LOCK_NAMESPACE
from memcurator.types import Entry

psycopg = pytest.importorskip("psycopg")
from memcurator.store.postgres import PostgresStore  # noqa: E402


def _base(url: str) -> tuple[str, str]:
    """(scheme://user@host, port) of a URL of the form scheme://user@host:port/db."""
    head, _, _ = url.rpartition("/")
    host, _, port = head.rpartition(":")
    return host, port


@pytest.mark.parametrize(
    ("kind", "match"),
    [
        ("database", r'database "mc_no_such_db" does not exist'),
        ("role", r'role "mc_no_such_role" does not exist'),
        ("port", "nothing listens there: a wrong port"),
    ],
)
def test_a_wrong_url_names_its_cause_without_waiting(pg_url: str, kind: str, match: str) -> None:
    host, port = _base(pg_url)
    db = pg_url.rpartition("/")[2]
    url = {
        "database": f"{host}:{port}/mc_no_such_db",
        "role": f"{host.replace('//postgres@', '//mc_no_such_role@')}:{port}/{db}",
        "port": f"{host}:{free_port()}/{db}",
    }[kind]
    t0 = time.monotonic()
    with pytest.raises(StoreError, match=match):
        PostgresStore(url, timeout_s=30)
    # a definite cause is not retried: it does not wait out timeout_s (30 s)
    assert time.monotonic() - t0 < 15


def _entry(ns: str, i: int) -> Entry:
    return Entry(f"x{i}", ns, "insight", f"text {i}", 10, 10, np.ones(4, dtype=np.float32) / 2)


def test_a_lock_timeout_names_the_holder(pg_url: str) -> None:
    store = PostgresStore(pg_url, timeout_s=1)
    for ns in ("a", "b"):
        store.create_namespace(ns, embedder="e", dim=4)
    with psycopg.connect(pg_url, autocommit=True) as other:
        with other.transaction():  # another process writing namespace a
            other.execute("SELECT pg_advisory_xact_lock(%s, hashtext('a'))", (LOCK_NAMESPACE,))
            with pytest.raises(StoreError, match="another writer of a namespace"):
                store.insert(_entry("a", 1))
            store.insert(_entry("b", 1))  # another namespace goes on
        with other.transaction():  # a table lock of the kind a VACUUM FULL holds
            other.execute("LOCK TABLE entries IN ACCESS EXCLUSIVE MODE")
            with pytest.raises(StoreError, match="holding AccessExclusiveLock on entries") as err:
                store.insert(_entry("b", 2))
            assert "another writer" not in str(err.value)
    store.insert(_entry("b", 2))  # released: writes go on
    assert store.count("b") == 2
    store.close()


def test_one_namespace_locked_does_not_stop_another(pg_url: str) -> None:
    """While namespace a's table is held exclusively (what its VACUUM FULL holds during a
    secure erase), namespace b writes, recalls, forgets with a secure erase of its own, and
    builds its HNSW index (schema v4: one partition per namespace)."""
    from memcurator import Memory
    from memcurator.embed import HashingEmbedder
    from memcurator.store.pgschema import partition_name

    emb = HashingEmbedder(dim=32)
    opened = [PostgresStore(pg_url, timeout_s=3) for _ in range(2)]
    a = Memory(store=opened[0], namespace="a", policy="keep-all", embedder=emb)
    b = Memory(store=opened[1], namespace="b", policy="keep-all", embedder=emb)
    for i in range(5):
        a.write(f"Task: list the parcels of depot {i}\nAction: SELECT {i};")
        b.write(f"Task: count the visits of clinic {i}\nAction: SELECT {i};")
    with psycopg.connect(pg_url, autocommit=True) as other, other.transaction():
        other.execute(f'LOCK TABLE "{partition_name("a")}" IN ACCESS EXCLUSIVE MODE')
        r = b.write("Task: count the visits of clinic 9\nAction: SELECT 9;")
        assert r.admitted
        assert b.recall("visits of clinic 9", k=1).ids == [r.id]
        f = b.forget(r.id)
        assert f.ids == [r.id] and f.erased, opened[1].erase_report
        opened[1].ensure_hnsw("b")
    assert len(a) == 5 and len(b) == 5
    for s in opened:
        s.close()
