"""The shared state in a SQLite file (the key file of a SQLite store): several processes on
one file.

WAL (readers never wait for the writer), a busy timeout, and every transaction opened with
``BEGIN IMMEDIATE``: it takes the file's write lock first, so a read-modify-write (a hub push's
sequence number and byte caps, a rate bucket) is never interleaved with another process's.
A lock that stays busy past SQLite's own handler is retried
(:func:`memcurator.store.connection.retry_busy`).
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from memcurator.errors import InvalidInput
from memcurator.service.state.schema import current_version, migrate
from memcurator.store.connection import retry_busy

#: seconds a transaction waits for another process's write lock
BUSY_TIMEOUT_S = 30.0


class _SqliteTx:
    def __init__(self, conn: sqlite3.Connection):
        self._c = conn

    def q(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        return self._c.execute(sql.replace(" FOR UPDATE", ""), args).fetchall()

    def x(self, sql: str, args: tuple[Any, ...] = ()) -> int:
        return int(self._c.execute(sql, args).rowcount)


class SqliteState:
    """The state in one SQLite file (``":memory:"``: this process only, for tests).

    Parameters
    ----------
    path : str
        The file (created with mode 0600 when missing).

    Raises
    ------
    InvalidInput
        The file exists but is not a SQLite key file.
    StoreError
        Locked by another process past :data:`BUSY_TIMEOUT_S`, or of a newer state version.
    """

    kind = "sqlite"

    def __init__(self, path: str):
        self.path = self.where = path
        if path != ":memory:" and not Path(path).exists():
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        try:
            self._conn.execute(f"PRAGMA busy_timeout={int(BUSY_TIMEOUT_S * 1000)}")
            if path != ":memory:":
                retry_busy(
                    lambda: self._conn.execute("PRAGMA journal_mode=WAL"),
                    timeout_s=BUSY_TIMEOUT_S,
                    what=path,
                )
            with self.tx() as tx:
                migrate(tx, self.kind, path)
        except sqlite3.DatabaseError as e:
            self._conn.close()
            raise InvalidInput(f"{path} is not a memcurator key file: {e}") from None

    @contextmanager
    def tx(self, write: bool = True) -> Iterator[_SqliteTx]:
        """One transaction (this process's threads take turns): ``BEGIN IMMEDIATE`` (the
        file's write lock first), or a plain ``BEGIN`` for a read (WAL: never waits)."""
        with self._lock:
            retry_busy(
                lambda: self._conn.execute("BEGIN IMMEDIATE" if write else "BEGIN"),
                timeout_s=BUSY_TIMEOUT_S,
                what=self.path,
            )
            try:
                yield _SqliteTx(self._conn)
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            retry_busy(
                lambda: self._conn.execute("COMMIT"), timeout_s=BUSY_TIMEOUT_S, what=self.path
            )

    def version(self) -> int:
        with self.tx(write=False) as tx:
            return current_version(tx)

    def close(self) -> None:
        self._conn.close()


__all__ = ["BUSY_TIMEOUT_S", "SqliteState"]
