"""PostgreSQL-only behaviour (the shared contract is tests/test_store_contract.py): the missing
extra, URL selection, an unreachable server, values PostgreSQL cannot hold, the honest erase
report, and filtered nearest-neighbour search over an HNSW index."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from _proc_util import run_python

from memcurator import Memory
from memcurator.errors import InvalidInput, MissingExtra, StoreError
from memcurator.store import open_store
from memcurator.store.pglocal import free_port
from memcurator.store.postgres import PostgresStore, redact
from memcurator.types import Entry


def test_missing_extra_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # import psycopg raises ImportError
    with pytest.raises(MissingExtra, match=r"memcurator\[postgres\]"):
        open_store("postgresql://nobody@127.0.0.1:1/x")
    with pytest.raises(MissingExtra):
        Memory("postgres://nobody@127.0.0.1:1/x")


def test_unreachable_server_is_a_store_error() -> None:
    url = f"postgresql://u:secret@127.0.0.1:{free_port()}/db"
    with pytest.raises(StoreError, match="cannot connect") as err:
        PostgresStore(url, timeout_s=1)
    assert "secret" not in str(err.value)
    assert redact(url).endswith(":***@127.0.0.1:" + url.rsplit(":", 1)[1])


def test_memory_on_a_url(pg_url: str) -> None:
    mem = Memory(pg_url, namespace="u", policy="lru", max_bytes=None)
    assert type(mem.store).__name__ == "PostgresStore"
    r = mem.write("Task: count orders\nAction: SELECT COUNT(*) FROM orders;")
    with pytest.raises(InvalidInput, match="NUL"):
        mem.write("Task: a NUL \x00 inside\nAction: SELECT 1;")
    assert [e.id for e in mem.entries()] == [r.id]
    assert [d.action for d in mem.decisions()] == ["admit"]
    ro = PostgresStore(pg_url, readonly=True)
    with pytest.raises(StoreError, match="read-only"):
        ro.save_state("u", "lru", 1, {})
    ro.close()
    mem.close()


def test_erase_reports_why_it_cannot_guarantee(pg_url: str, pg_server: object) -> None:
    if getattr(pg_server, "local", None) is None:
        pytest.skip("changes the server's configuration: only on the server started here")
    s = PostgresStore(pg_url)
    assert s.secure_erase() and s.erase_report == "erased"
    with s._conn() as c:
        c.execute("ALTER SYSTEM SET wal_recycle = on")
        c.execute("SELECT pg_reload_conf()")
    try:
        import time

        time.sleep(0.3)  # the reload is asynchronous
        assert s.secure_erase() is False and "wal_recycle" in s.erase_report
    finally:
        with s._conn() as c:
            c.execute("ALTER SYSTEM RESET wal_recycle")
            c.execute("SELECT pg_reload_conf()")
    s.close()


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_filtered_nearest_returns_k_through_the_hnsw_index(pg_url: str, dtype: str) -> None:
    """A filter passing 10% of the rows: without iterative scans the index's ef_search=40
    candidates hold ~4 that pass; with them (pgvector 0.8) all k come back, as exact search
    gives."""
    s = PostgresStore(pg_url)
    dim, n = 16, 2000
    s.create_namespace("v", embedder="rand", dim=dim, vector_dtype=dtype)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, dim)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    with s.transaction(namespace="v"):
        for i in range(n):
            s.insert(
                Entry(
                    f"e{i}",
                    "v",
                    "raw",
                    f"t{i}",
                    100,
                    100,
                    x[i],
                    "self",
                    "",
                    meta={"f": "hr" if i % 10 == 0 else "sales"},
                )
            )
    s.ensure_hnsw("v", m=16, ef_construction=64)
    q = x[7] + 0.1 * rng.standard_normal(dim).astype(np.float32)
    hr = "(meta::jsonb ->> 'f') = %s"
    exact = s.nearest("v", q, 10, where=hr, params=("hr",), index=False)
    assert len(exact) == 10 and all(int(r.id[1:]) % 10 == 0 for r in exact)
    post = s.nearest("v", q, 10, where=hr, params=("hr",), index=True, iterative=False)
    assert len(post) < 10  # the failure the iterative scan exists for
    it = s.nearest("v", q, 10, where=hr, params=("hr",), index=True, ef_search=100)
    assert len(it) == 10
    assert len({r.id for r in it} & {r.id for r in exact}) >= 9  # recall@10 against exact
    assert [r.cosine for r in it] == sorted((r.cosine for r in it), reverse=True)
    with pytest.raises(InvalidInput):
        s.nearest("v", q[:3], 10)
    s.close()


def test_store_commands_take_a_url(pg_url: str) -> None:
    from typer.testing import CliRunner

    from memcurator.cli import app

    mem = Memory(pg_url, namespace="c", policy="lru", max_bytes=None)
    r = mem.write("Task: count orders\nAction: SELECT COUNT(*) FROM orders;")
    mem.close()
    runner = CliRunner()
    out = runner.invoke(app, ["namespaces", pg_url])
    assert out.exit_code == 0 and "c" in out.output, out.output
    out = runner.invoke(app, ["entries", pg_url, "--namespace", "c", "--json"])
    assert out.exit_code == 0 and r.id in out.output, out.output
    out = runner.invoke(app, ["forget", pg_url, str(r.id), "--namespace", "c"])
    assert out.exit_code == 0, out.output
    assert open_store(pg_url).count("c") == 0


def test_core_imports_without_psycopg() -> None:
    code = (
        "import memcurator, memcurator.store, memcurator.store.postgres, memcurator.cli\n"
        "from memcurator import Memory\n"
        "Memory(':memory:').write('Task: x\\nAction: SELECT 1;')\n"
    )
    run_python(code, hide=("psycopg", "psycopg_pool"))


def test_namespaces_created_at_once_do_not_deadlock(pg_url: str) -> None:
    """Handles creating namespaces at the same moment (new names, one name twice, beside a
    writer of an existing namespace) all succeed: each creator took its row lock on
    ``namespaces`` and then waited for the other's ACCESS EXCLUSIVE on ``entries``
    (``deadlock detected`` before creation was serialised)."""
    import threading

    emb = "hashing-8"
    base = PostgresStore(pg_url)
    base.create_namespace("old", embedder=emb, dim=8)
    handles = [PostgresStore(pg_url) for _ in range(6)]
    errors: list[BaseException] = []
    for rnd in range(3):
        gate = threading.Barrier(len(handles) + 1)
        names = [f"n{rnd}_{i}" for i in range(4)] + [f"twice{rnd}", f"twice{rnd}"]

        def create(h: PostgresStore, name: str, gate: threading.Barrier = gate) -> None:
            gate.wait()
            try:
                h.create_namespace(name, embedder=emb, dim=8)
            except BaseException as e:  # noqa: BLE001 -- collected, asserted below
                errors.append(e)

        def write(rnd: int = rnd, gate: threading.Barrier = gate) -> None:
            gate.wait()
            e = Entry(f"w{rnd}", "old", "raw", "text", 4, 4, np.ones(8, np.float32), "self", "")
            try:
                base.insert(e)
            except BaseException as x:  # noqa: BLE001
                errors.append(x)

        ts = [
            threading.Thread(target=create, args=(h, n))
            for h, n in zip(handles, names, strict=True)
        ]
        ts.append(threading.Thread(target=write))
        for t in ts:
            t.start()
        for t in ts:
            t.join(60)
        assert errors == []
        assert set(names) <= set(base.namespaces())
    assert base.count("old") == 3
    for h in [base, *handles]:
        h.close()
