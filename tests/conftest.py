"""Shared fixtures: a real PostgreSQL server (with pgvector) for the PostgreSQL backend's tests.

``MEMCURATOR_TEST_PG_URL`` set: the tests use that server (a superuser URL: each test gets a
database of its own, created and dropped here). Unset: one local server for the session
(:class:`memcurator.store.pglocal.LocalPostgres`, 127.0.0.1, a free port, a temporary data
folder). When no server can be had, the tests that need one fail under ``CI=true`` (CI must
never pass by skipping the second backend) and are skipped elsewhere with the reason.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest


@dataclass
class PgServer:
    """A server the tests may use: its admin URL and, when started here, its data folder (for
    reading the database files) and the launcher (for restarts)."""

    url: str
    datadir: Path | None
    local: object | None = None

    def db_url(self, dbname: str) -> str:
        base, _, _ = self.url.rpartition("/")
        return f"{base}/{dbname}"


def _unavailable(why: str) -> None:
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"PostgreSQL is required in CI and could not be had: {why}")
    pytest.skip(f"no PostgreSQL server: {why}")


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    url = os.environ.get("MEMCURATOR_TEST_PG_URL")
    try:
        import psycopg  # noqa: F401
    except ImportError:
        _unavailable("psycopg is not installed (pip install 'memcurator[postgres]')")
    if url:
        yield PgServer(url, None)
        return
    from memcurator.errors import MemcuratorError
    from memcurator.store.pglocal import LocalPostgres

    try:
        local = LocalPostgres()
        local.start()
    except (MemcuratorError, OSError) as e:
        _unavailable(f"the local server did not start: {e}")
    try:
        yield PgServer(local.url, local.datadir, local)
    finally:
        local.stop()


@pytest.fixture
def pg_url(pg_server: PgServer) -> Iterator[str]:
    """The URL of a new, empty database on the session's server, dropped afterwards."""
    import psycopg

    name = "mc_test_" + uuid.uuid4().hex[:12]
    with psycopg.connect(pg_server.url, autocommit=True) as c:
        c.execute(f"CREATE DATABASE {name}")
    try:
        yield pg_server.db_url(name)
    finally:
        with psycopg.connect(pg_server.url, autocommit=True) as c:
            c.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture
def store_target(tmp_path: Path, request: pytest.FixtureRequest) -> Callable[[str], str]:
    """``store_target(backend)``: where a test of ``backend`` keeps its store: a new SQLite file
    under ``tmp_path`` for ``"sqlite"``, a new PostgreSQL database (:func:`pg_url`) otherwise."""

    def target(backend: str) -> str:
        if backend == "sqlite":
            return str(tmp_path / "store.sqlite")
        return str(request.getfixturevalue("pg_url"))

    return target


@pytest.fixture(scope="module")
def tasks() -> dict[int, Any]:
    """The OS environment's 500 tasks by index (:func:`memcurator.envs.os.data.load_os_tasks`);
    a module that defines its own ``tasks`` fixture uses that one."""
    from memcurator.envs.os.data import load_os_tasks

    return {t.index: t for t in load_os_tasks()}
