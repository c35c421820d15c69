"""The SQLite connection the store runs on: lock retries, a closed stand-in, and errors of a
damaged file translated to :class:`~memcurator.errors.StoreError`."""

from __future__ import annotations

import random
import sqlite3
import time
from collections.abc import Callable, Iterator
from typing import Any

from memcurator.errors import StoreError


def _corrupt(e: sqlite3.DatabaseError) -> bool:
    """A damaged file (``SQLITE_CORRUPT``, ``SQLITE_NOTADB``), not a lock, a constraint or SQL."""
    return not isinstance(
        e, sqlite3.OperationalError | sqlite3.IntegrityError | sqlite3.ProgrammingError
    )


class GuardedCursor:
    """A cursor whose row fetches raise :class:`StoreError` for a damaged file."""

    def __init__(self, cur: sqlite3.Cursor, path: str):
        self._cur = cur
        self._path = path

    def _fetch(self, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except sqlite3.DatabaseError as e:
            if _corrupt(e):
                raise StoreError(f"store {self._path!r} is damaged: {e}") from e
            raise

    def fetchone(self) -> Any:
        return self._fetch(self._cur.fetchone)

    def fetchall(self) -> list[Any]:
        return list(self._fetch(self._cur.fetchall))

    def __iter__(self) -> Iterator[Any]:
        return iter(self.fetchall())

    @property
    def rowcount(self) -> int:
        return int(self._cur.rowcount)


class GuardedConnection:
    """The store's connection: a damaged file (valid header, corrupt pages) raises
    :class:`StoreError` from any statement or fetch instead of a raw ``sqlite3.DatabaseError``;
    locks, constraints and SQL errors pass through unchanged (the callers handle those)."""

    def __init__(self, conn: sqlite3.Connection, path: str):
        self._raw = conn
        self._path = path

    def execute(self, sql: str, args: Any = ()) -> GuardedCursor:
        try:
            return GuardedCursor(self._raw.execute(sql, args), self._path)
        except sqlite3.DatabaseError as e:
            if _corrupt(e):
                raise StoreError(f"store {self._path!r} is damaged: {e}") from e
            raise

    def __getattr__(self, name: str) -> Any:
        return getattr(self._raw, name)


class ClosedConnection:
    """Stands in for the connection of a closed store: every use raises StoreError."""

    def __init__(self, path: str):
        self._path = path

    def __getattr__(self, name: str) -> Any:
        raise StoreError(f"store {self._path!r} is closed")

    def close(self) -> None:
        pass


def retry_busy(
    fn: Callable[[], Any], *, timeout_s: float, what: str, rng: random.Random | None = None
) -> Any:
    """Call ``fn`` until SQLite stops answering "database is locked" / "busy", or time runs out.

    SQLite's busy handler does not cover every lock upgrade (switching a new file to WAL, for
    one), so opening and writing retry here with jittered exponential back-off (5 ms doubling to
    200 ms).

    Parameters
    ----------
    fn : callable
        The SQLite operation; its return value is passed through.
    timeout_s : float
        Seconds to keep retrying.
    what : str
        Names the file in error messages.
    rng : random.Random, optional
        Jitter source (seeded for reproducible tests).

    Raises
    ------
    StoreError
        Any other SQLite error, or still locked after ``timeout_s`` seconds.

    Examples
    --------
    >>> retry_busy(lambda: 42, timeout_s=1.0, what="demo")
    42
    """
    rng = rng or random.Random()
    deadline = time.monotonic() + timeout_s
    delay = 0.005
    while True:
        try:
            return fn()
        except sqlite3.OperationalError as e:
            msg = str(e)
            if "locked" not in msg and "busy" not in msg:
                raise StoreError(f"SQLite error on {what}: {msg}") from e
            if time.monotonic() > deadline:
                raise StoreError(
                    f"{what} stayed locked by another writer for more than "
                    f"{timeout_s} s; raise the timeout or reduce concurrent writers"
                ) from e
            time.sleep(delay * (1 + rng.random()))
            delay = min(delay * 2, 0.2)


__all__ = ["ClosedConnection", "GuardedConnection", "GuardedCursor", "retry_busy"]
