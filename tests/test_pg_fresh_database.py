"""``pglocal.fresh_database``: a benchmark's database dropped and created, optional setting."""

from __future__ import annotations

import uuid
from typing import Any

from memcurator.store.pglocal import fresh_database


def test_recreates_the_database_empty_and_returns_its_url(pg_server: Any) -> None:
    import psycopg

    name = "mc_fresh_" + uuid.uuid4().hex[:8]
    url = fresh_database(pg_server.url, name)
    assert url == pg_server.db_url(name)
    with psycopg.connect(url, autocommit=True) as c:
        c.execute("CREATE TABLE t (x int)")
        held = psycopg.connect(url)  # an open connection does not stop the drop
    try:
        again = fresh_database(pg_server.url, name, maintenance_work_mem="96MB")
        with psycopg.connect(again) as c:
            assert c.execute("SELECT to_regclass('t')").fetchone() == (None,)
            assert c.execute("SHOW maintenance_work_mem").fetchone() == ("96MB",)
    finally:
        held.close()
        with psycopg.connect(pg_server.url, autocommit=True) as c:
            c.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
            c.execute("ALTER SYSTEM RESET maintenance_work_mem")
            c.execute("SELECT pg_reload_conf()")
