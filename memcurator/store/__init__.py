"""Persistent stores. SQLite (stdlib) is the embedded default."""

from memcurator.store.sizing import default_sizeof
from memcurator.store.sqlite import NamespaceInfo, SQLiteStore

__all__ = ["SQLiteStore", "NamespaceInfo", "default_sizeof"]
