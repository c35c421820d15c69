"""The shared state in the store's PostgreSQL database: any number of replicas on one database.

A pool of its own (``psycopg_pool``, as :class:`~memcurator.store.postgres.PostgresStore`
keeps one; the same driver import, URL redaction and connect-error causes), each
:meth:`PostgresState.tx` one transaction on one pooled connection at READ COMMITTED. The
read-modify-writes lock the row they change first (``SELECT ... FOR UPDATE`` on a hub group's
row, a key's bucket), so replicas take turns per group and per key, never per table. A
connection broken by a restart of the server is discarded by the pool and the next one is
fresh; a statement error rolls its transaction back and raises
:class:`~memcurator.errors.StoreError`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from memcurator.errors import StoreError
from memcurator.service.state.schema import current_version, migrate
from memcurator.store.postgres import _psycopg, open_pool, redact

#: the advisory lock key replicas migrate the state under (any constant of our own)
_MIGRATE_LOCK = 0x6D63_7376_6331  # "mcsvc1"


class _PgTx:
    def __init__(self, conn: Any):
        self._c = conn

    def q(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        return [tuple(r) for r in self._c.execute(sql.replace("?", "%s"), args).fetchall()]

    def x(self, sql: str, args: tuple[Any, ...] = ()) -> int:
        return int(self._c.execute(sql.replace("?", "%s"), args).rowcount)


class PostgresState:
    """The state in a PostgreSQL database.

    Parameters
    ----------
    url : str
        ``postgresql://...`` (the served store's URL).
    timeout_s : float, default 30
        Seconds to wait for the server, a pooled connection or a row lock.
    pool_size : int, default 4
        Connections kept (each request takes one for a few statements).

    Raises
    ------
    MissingExtra
        psycopg / psycopg_pool not installed.
    StoreError
        The server cannot be reached (with the driver's cause), or the state is newer than
        this code.
    """

    kind = "postgres"

    def __init__(self, url: str, *, timeout_s: float = 30.0, pool_size: int = 4):
        psycopg, psycopg_pool = _psycopg()
        self._pg, self._pgpool = psycopg, psycopg_pool
        self.where = redact(url)
        self.timeout_s = float(timeout_s)
        self._pool = open_pool(
            url,
            where=self.where,
            timeout_s=self.timeout_s,
            pool_size=pool_size,
            name="memcurator-state",
            conn_kwargs={"options": f"-c lock_timeout={int(self.timeout_s * 1000)}"},
        )
        try:
            with self.tx() as tx:
                tx.q("SELECT pg_advisory_xact_lock(?)", (_MIGRATE_LOCK,))
                migrate(tx, self.kind, self.where)
        except BaseException:
            self._pool.close()
            raise

    @contextmanager
    def tx(self, write: bool = True) -> Iterator[_PgTx]:
        """One transaction on a pooled connection (committed at the end of the block;
        ``write`` changes nothing here: row locks order the writers)."""
        try:
            with self._pool.connection() as c, c.transaction():
                yield _PgTx(c)
        except self._pgpool.PoolTimeout as e:
            raise StoreError(
                f"no PostgreSQL connection for the service state at {self.where} within "
                f"{self.timeout_s:g} s (server down, or every pooled connection busy)"
            ) from e
        except self._pg.Error as e:
            raise StoreError(f"service state at {self.where}: {e}".strip()) from e

    def version(self) -> int:
        with self.tx(write=False) as tx:
            return current_version(tx)

    def close(self) -> None:
        self._pool.close()


__all__ = ["PostgresState"]
