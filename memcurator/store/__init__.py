"""Persistent stores behind one protocol (:class:`~memcurator.store.base.Store`). SQLite
(stdlib) is the embedded default."""

from memcurator.store.base import NamespaceInfo, Store
from memcurator.store.sizing import default_sizeof
from memcurator.store.sqlite import SQLiteStore

__all__ = ["NamespaceInfo", "SQLiteStore", "Store", "default_sizeof"]
