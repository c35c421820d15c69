"""Persistent stores behind one protocol (:class:`~memcurator.store.base.Store`). SQLite
(stdlib) is the embedded default; a ``postgresql://`` URL selects PostgreSQL with pgvector
(:mod:`memcurator.store.postgres`, the ``postgres`` extra)."""

from __future__ import annotations

import os
from typing import Any

from memcurator.store.base import NamespaceInfo, Store
from memcurator.store.sizing import default_sizeof
from memcurator.store.sqlite import SQLiteStore

#: URL schemes of the PostgreSQL backend.
PG_SCHEMES = ("postgresql://", "postgres://")


def is_url(path: str | os.PathLike[str]) -> bool:
    """True if ``path`` is a PostgreSQL URL rather than a file path.

    Examples
    --------
    >>> is_url("postgresql://db/mem"), is_url("memory.db")
    (True, False)
    """
    return str(path).startswith(PG_SCHEMES)


def open_store(path: str | os.PathLike[str], **kw: Any) -> Store:
    """The store at ``path``: a ``postgresql://`` / ``postgres://`` URL opens
    :class:`~memcurator.store.postgres.PostgresStore`, anything else a SQLite file (or
    ``":memory:"``). Keyword arguments go to the backend's constructor.

    Compressed text for a library user: ``open_store(path, compress_text=True)`` and a
    :class:`~memcurator.Memory` on it (``Memory(store=..., namespace=...)``): every namespace
    the store creates keeps its entries' text and meta in one zstd frame with a dictionary
    trained on its own entries, from 64 entries on (docs/bytes.md). A namespace that exists
    already keeps its codec: convert it with ``memcurator compress STORE --namespace NS``
    (or the store's ``train_text_dict``).

    Raises
    ------
    MissingExtra
        A PostgreSQL URL without ``pip install 'memcurator[postgres]'``.
    StoreError
        The backend could not open it.

    Examples
    --------
    >>> type(open_store(":memory:")).__name__
    'SQLiteStore'
    >>> from memcurator import Memory
    >>> from memcurator.embed import HashingEmbedder
    >>> s = open_store(":memory:", compress_text=True)
    >>> mem = Memory(store=s, namespace="a", policy="lru", max_bytes=None,
    ...              embedder=HashingEmbedder(dim=64))
    >>> for i in range(80):
    ...     _ = mem.write(f"Task: count the rows of orders where id > {i}\\nAction: SELECT "
    ...                   f"COUNT(*) FROM orders WHERE id > {i};", meta={"family": "count"})
    >>> s.text_codec("a").codec, s.fixed_bytes("a") > 0, mem.entries()[5].meta["family"]
    ('zstd', True, 'count')
    """
    if is_url(path):
        from memcurator.store.postgres import PostgresStore

        return PostgresStore(str(path), **kw)
    return SQLiteStore(path, **kw)


def migrate_store(path: str | os.PathLike[str]) -> tuple[int, int]:
    """Bring the store at ``path`` to this memcurator's schema; ``(before, after)`` versions
    (0 before: a new store). Idempotent.

    Raises
    ------
    StoreError
        A newer schema, a file that is not a store, an unreachable server.
    """
    if is_url(path):
        from memcurator.store.postgres import migrate_url

        return migrate_url(str(path))
    before = 0
    if str(path) != ":memory:" and os.path.isfile(path) and os.path.getsize(path) > 0:
        ro = SQLiteStore(path, readonly=True)
        before = ro.schema_version()
        ro.close()
    s = SQLiteStore(path)
    after = s.schema_version()
    s.close()
    return before, after


__all__ = [
    "PG_SCHEMES",
    "NamespaceInfo",
    "SQLiteStore",
    "Store",
    "default_sizeof",
    "is_url",
    "migrate_store",
    "open_store",
]
