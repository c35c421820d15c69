"""``memcurator serve postgresql://... --recall-in-store`` (issues 20 and 21): the service's
tenants recall inside PostgreSQL (pgvector + full-text, fused) where :class:`~memcurator.Memory`
allows it, and refuse clearly where it does not.

- Two real server processes (:class:`~memcurator.service.launch.ServeProcess`) on one database:
  write, recall, feedback and forget through them; every recall equals, ids and scores,
  :class:`~memcurator.lifecycle.store_recall.StoreRecall`'s on the same database (the
  in-database path), and the test checks that the in-memory path scores the same queries
  differently, so the equality could fail if the service recalled in memory.
- A forget through one server is never returned by the other's next recall (nor by its own).
- A namespace Memory refuses (a byte budget; a policy that reranks every entry; a budgeted
  keep-all) stops the server at start: exit 2, one line naming the namespace and the reason.
- A SQLite store with ``--recall-in-store`` (``serve`` and ``mcp``): exit 2, one line.

PostgreSQL from the ``pg_url`` fixture (under ``CI=true`` it fails when none can be had).
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from memcurator import Memory  # noqa: E402
from memcurator.client import Client  # noqa: E402
from memcurator.errors import InvalidInput  # noqa: E402
from memcurator.lifecycle.store_recall import StoreRecall  # noqa: E402
from memcurator.service.keys import KeyTable  # noqa: E402
from memcurator.service.launch import ServeProcess  # noqa: E402
from memcurator.store import open_store  # noqa: E402

TABLES = ["orders", "customers", "invoices", "staff", "regions", "products", "payments"]
QUERIES = [
    "how many orders per customer",
    "total invoices amount by region",
    "list staff hired in 2001",
    "count products in stock",
    "payments late by more than 30 days",
    "customers with no orders",
]


def _texts() -> list[str]:
    out = []
    for i in range(70):
        t = TABLES[i % len(TABLES)]
        col = ["amount", "region", "hired", "stock", "due", "name"][i % 6]
        out.append(
            f"Task: report {i} on {t} by {col}\nAction: SELECT {col}, COUNT(*) FROM {t} "
            f"WHERE id > {i} GROUP BY {col};"
        )
    return out


def _serve(url: str, keys: str, log: str) -> ServeProcess:
    return ServeProcess(url, keys=keys, log_path=log, args=["--recall-in-store"]).start()


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "memcurator.cli", *args],
        capture_output=True,
        text=True,
        timeout=90,
    )


def test_served_recall_is_in_database_and_forget_crosses_processes(pg_url, tmp_path):
    import psycopg

    keys = str(tmp_path / "k.keys")
    table = KeyTable(keys)
    _, tok = table.create("docs", name="agent", scopes=("read", "write"))
    table.configure("docs", policy="keep-all")
    table.close()
    a = _serve(pg_url, keys, str(tmp_path / "a.log"))
    b = None
    try:
        ca = Client(a.url, key=tok, timeout=60)
        ids = [ca.write(t)["id"] for t in _texts()]
        assert all(ids)
        # the full-text leg weighs words by the table's statistics, cached per process for
        # 60 s: take them now, so that server B and the reference read the same ones
        with psycopg.connect(pg_url, autocommit=True) as c:
            c.execute("ANALYZE entries")
        b = _serve(pg_url, keys, str(tmp_path / "b.log"))
        cb = Client(b.url, key=tok, timeout=60)
        ref = StoreRecall(open_store(pg_url), "docs")
        with Memory(pg_url, namespace="docs", policy="keep-all") as mem:  # in memory
            differs = 0
            for q in QUERIES:
                got = cb.recall(q, k=5)
                want = ref.recall(q, k=5)
                assert got["ids"] == want.ids, q
                np.testing.assert_allclose(got["scores"], want.scores, rtol=1e-6, atol=1e-9)
                local = mem.recall(q, k=5)
                differs += local.ids != want.ids or not np.allclose(
                    local.scores, want.scores, rtol=1e-6, atol=1e-9
                )
            # the in-memory path (BM25 lexical leg) scores these queries otherwise: the
            # equality above would fail if the service recalled in memory
            assert differs > 0
        # feedback on a served recall, by recall_id and by ids
        r = ca.recall(QUERIES[0], k=3)
        ca.feedback(r, 1.0)
        cb.feedback(r["ids"][:1], 0.0)
        # a forget through one server: gone from the other's next recall and from its own
        forgotten: set[str] = set()
        for i, q in enumerate(QUERIES):
            reader, writer = (cb, ca) if i % 2 == 0 else (ca, cb)
            before = reader.recall(q, k=5)["ids"]
            assert before
            victim = before[0] if i % 3 else before[-1]
            writer.forget(victim, reason="test")
            forgotten.add(victim)
            for c in (reader, writer):
                assert not forgotten & set(c.recall(q, k=5)["ids"]), q
        for q in QUERIES:  # and for every query, on both servers, and in the database path
            for c in (ca, cb):
                assert not forgotten & set(c.recall(q, k=10)["ids"])
            assert not forgotten & set(ref.recall(q, k=10).ids)
        ref.store.close()
        # a namespace configured while the server runs, one Memory refuses: a clear 422 (the
        # key file was imported into the database at start: new keys go to the database)
        late = KeyTable.for_store(pg_url)
        _, tok2 = late.create("late", name="agent2", scopes=("read", "write"))
        late.configure("late", policy="lru", max_bytes=50_000)
        late.close()
        with pytest.raises(InvalidInput, match="recall_in_store: .*byte budget"):
            Client(a.url, key=tok2, timeout=60).recall("anything", k=1)
        assert "Traceback" not in a.log(10**7) + b.log(10**7)
    finally:
        a.stop()
        if b is not None:
            b.stop()


@pytest.mark.parametrize("command", ["serve", "mcp"])
@pytest.mark.parametrize(
    ("policy", "max_bytes", "why"),
    [
        ("curator", None, "has a byte budget"),
        ("full-oracle", None, "reranks every resident entry"),
        ("keep-all", 20000, "has a byte budget (20000 bytes)"),
    ],
)
def test_namespace_memory_refuses_stops_the_server(
    pg_url, tmp_path, command, policy, max_bytes, why
):
    keys = str(tmp_path / "k.keys")
    table = KeyTable(keys)
    table.create("ok", name="a", scopes=("read",))
    table.configure("ok", policy="keep-all")
    table.create("bad", name="b", scopes=("read",))
    table.configure("bad", policy=policy, max_bytes=max_bytes)
    table.close()
    http = ["--transport", "http"] if command == "mcp" else []
    p = _cli(command, pg_url, "--keys", keys, *http, "--port", "1", "--recall-in-store")
    assert p.returncode == 2, p.stderr
    err = [ln for ln in p.stderr.splitlines() if ln.startswith("error:")]
    assert len(err) == 1, p.stderr
    assert "namespace 'bad'" in err[0] and "recall_in_store" in err[0] and why in err[0]


@pytest.mark.parametrize("command", ["serve", "mcp"])
def test_sqlite_store_with_recall_in_store_is_refused(tmp_path, command):
    store = str(tmp_path / "m.db")
    p = _cli(command, store, "--keys", str(tmp_path / "k.keys"), "--recall-in-store")
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --recall-in-store"), p.stderr
    assert "cannot search in the database" in lines[0]
    assert "Traceback" not in p.stderr
