"""State that the replicas of ``memcurator serve`` share, kept in the store's backend.

What one server process used to hold for itself (the API keys, the peers' hub queue, the rate
limiter's buckets and the recall ids a feedback refers to) lives in tables of its own, so any
number of replicas serve one store and a restart loses nothing:

- a **SQLite** store keeps them in its key file (``<store>.keys``; several processes on one
  file: WAL, a busy timeout, every change in one ``BEGIN IMMEDIATE`` transaction);
- a **PostgreSQL** store keeps them in its database, beside the store's tables (any number of
  replicas on one database; row locks serialize a hub group's pushes and a key's bucket).

The tables and their version bookkeeping are this package's own (:mod:`.schema`, table
``svc_state``), apart from the store's schema. One small protocol, :class:`StateBackend`, is
all the users (:mod:`memcurator.service.keys`, :mod:`memcurator.service.hub`,
:mod:`memcurator.service.tenants`) see: a transaction that runs SQL written once (``?``
placeholders; the PostgreSQL backend rewrites them).

Examples
--------
>>> st = open_state(":memory:", ":memory:")
>>> st.kind, st.version()
('sqlite', 3)
>>> with st.tx() as tx:
...     tx.q("SELECT COUNT(*) FROM api_keys")
[(0,)]
>>> st.close()
"""

from __future__ import annotations

import os
from contextlib import AbstractContextManager
from typing import Any, Protocol

from memcurator.errors import InvalidInput


class Tx(Protocol):
    """One open transaction of a :class:`StateBackend`."""

    def q(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """Rows of a query (``?`` placeholders)."""
        ...

    def x(self, sql: str, args: tuple[Any, ...] = ()) -> int:
        """Run a statement; the number of rows it changed."""
        ...


class StateBackend(Protocol):
    """Where the shared state lives: a SQLite file or a PostgreSQL database.

    ``tx()`` opens one transaction (committed when the block ends, rolled back on an error);
    ``SELECT ... FOR UPDATE`` locks the rows it reads until then (SQLite's ``BEGIN IMMEDIATE``
    already holds the file's write lock, so it drops the clause). ``tx(write=False)`` is for a
    transaction that only reads (SQLite then takes no write lock).
    """

    kind: str
    where: str

    def tx(self, write: bool = True) -> AbstractContextManager[Tx]: ...

    def version(self) -> int: ...

    def close(self) -> None: ...


def is_state_url(store_url: str) -> bool:
    """True for a store whose state lives in its database (``postgresql://``)."""
    return store_url.startswith(("postgresql://", "postgres://"))


def open_state(store_url: str, keys_path: str | os.PathLike[str] | None = None) -> StateBackend:
    """The shared state of the service over ``store_url``.

    Parameters
    ----------
    store_url : str
        The served store. A ``postgresql://`` URL keeps the state in that database; any other
        store (a SQLite path, ``:memory:``) keeps it in the key file.
    keys_path : str or path, optional
        The key file. For a SQLite store: the state file (default ``<store>.keys``; created
        mode 0600; a key file of an older version is upgraded in place, its keys kept). For a
        PostgreSQL store: a key file whose keys (and revocations) are imported into the
        database now (the database wins for a key both hold; the file is not changed).

    Raises
    ------
    InvalidInput
        No key file for an in-memory store or a URL that is not PostgreSQL; a file that is not
        a key file.
    StoreError
        The database cannot be reached, or holds state of a newer version.
    """
    if is_state_url(store_url):
        from memcurator.service.state.postgres import PostgresState

        pg = PostgresState(store_url)
        if keys_path is not None:
            from memcurator.service.state.schema import import_key_file

            try:
                import_key_file(pg, os.fspath(keys_path))
            except BaseException:
                pg.close()
                raise
        return pg
    from memcurator.service.state.sqlite import SqliteState

    if keys_path is None:
        if store_url == ":memory:" or "://" in store_url:
            raise InvalidInput(
                f"no default key file for {store_url!r}; pass --keys PATH (a local file, mode 0600)"
            )
        keys_path = f"{store_url}.keys"
    return SqliteState(os.fspath(keys_path))


__all__ = ["StateBackend", "Tx", "is_state_url", "open_state"]
