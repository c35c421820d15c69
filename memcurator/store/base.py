"""The store protocol: what the lifecycle needs from a backend, and nothing backend-specific.

:class:`~memcurator.store.sqlite.SQLiteStore` implements it and
:class:`~memcurator.store.postgres.PostgresStore` implements the same methods; the lifecycle,
:class:`~memcurator.Memory` and re-embedding run on either unchanged. Every backend passes
one contract suite (``tests/test_store_contract.py``): budget held across two handles of one
namespace, hard delete, namespace isolation, crash safety.

What a backend owes the lifecycle:

- **Transactions** (:meth:`Store.transaction`) that yield nothing: nested calls join the outer
  one; an exception inside rolls every change back and propagates.
- **A change token** (:meth:`Store.change_token`): an opaque value that differs after any
  commit or rollback, from this handle or any other connection or process. Callers compare it
  for equality only (the resident set reloads when it changed); after its own commit a cache
  records :meth:`Store.committed_token`.
- **A change feed per namespace** (:meth:`Store.changes_since`): a sequence number that grows
  with every committed change to the namespace's entries, and the ids of the entries inserted,
  updated or deleted after a given number (each id once, at its latest change), kept in the
  store itself (a trigger on the entries table writes it, so no write path can miss it). A
  resident set catches up on another handle's commits by reading only those ids
  (:meth:`memcurator.lifecycle.resident.ResidentSet.sync`); ``None`` (the feed no longer
  reaches back, :meth:`Store.trim_changes`) makes it reload the namespace.
- **Secure delete** (:meth:`Store.delete` then :meth:`Store.secure_erase`): a deleted entry's
  text leaves every read path at commit, and its bytes leave the persistent medium (pages,
  journals) when :meth:`Store.secure_erase` returns True.
- **Vector rows for re-embedding** (:meth:`Store.vector_rows`): entries in insertion order by an
  increasing position, so a batch walk can resume after the last committed position.
"""

from __future__ import annotations

from collections.abc import Hashable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol, runtime_checkable

import numpy as np

from memcurator.store.vectors import DEFAULT_DTYPE
from memcurator.types import Decision, Entry

#: Sentinel for :meth:`Store.create_namespace`: keep the stored budget (or precision).
KEEP: Any = type("_Keep", (), {"__repr__": lambda self: "KEEP"})()

#: Prefix of a namespace's embedder field while ``memcurator reembed`` has not finished
#: (:mod:`memcurator.store.reembed`).
REEMBED_PENDING = "reembedding:"


@dataclass(frozen=True)
class NamespaceInfo:
    """What a namespace records about itself: its embedder and dimension, its budget and the
    precision its entries' vectors are stored in (:mod:`memcurator.store.vectors`)."""

    name: str
    embedder: str
    dim: int
    max_bytes: int | None
    created_at: float
    vector_dtype: str = DEFAULT_DTYPE


class NamespaceStats(NamedTuple):
    """One row of :meth:`Store.namespace_stats`."""

    name: str
    entries: int
    used_bytes: int
    max_bytes: int | None
    embedder: str
    dim: int
    decisions: int
    policy: str | None
    vector_dtype: str = DEFAULT_DTYPE


class VectorRow(NamedTuple):
    """One entry as re-embedding reads it (:meth:`Store.vector_rows`).

    Attributes
    ----------
    pos : int
        Position in insertion order (increasing; a batch walk resumes after it).
    id : str
    text : str
    bytes : int
        The entry's accounted bytes ``b(m)``.
    vector_bytes : int
        Bytes of its stored vector (in the precision its row records).
    """

    pos: int
    id: str
    text: str
    bytes: int
    vector_bytes: int


class Changes(NamedTuple):
    """What :meth:`Store.changes_since` returns.

    Attributes
    ----------
    seq : int
        The namespace's change sequence number now (pass it as ``since`` next time).
    ids : list of str
        Entries inserted, updated or deleted after ``since``, each once, oldest change first.
    """

    seq: int
    ids: list[str]


#: Feed rows of deleted entries kept per namespace (:meth:`Store.trim_changes`): a handle
#: further behind than this many changes reloads the namespace instead of catching up.
FEED_HORIZON = 100_000


@runtime_checkable
class Store(Protocol):
    """A persistent entry store: namespaces, entries, policy state and the decision log.

    The store owns the truth and decides nothing; the lifecycle
    (:mod:`memcurator.lifecycle`) asks the policy and applies its answers here, inside
    :meth:`transaction`. Errors are memcurator's: :class:`~memcurator.errors.StoreError`
    (locked past the timeout, corrupt or closed), :class:`~memcurator.errors.EntryNotFound`,
    :class:`~memcurator.errors.NamespaceNotFound`, :class:`~memcurator.errors.InvalidInput`,
    :class:`~memcurator.errors.DimensionMismatch`.

    Examples
    --------
    >>> from memcurator.store.sqlite import SQLiteStore
    >>> isinstance(SQLiteStore(":memory:"), Store)
    True
    """

    path: str

    # --- transactions and change detection ------------------------------------------
    def transaction(self, namespace: str | None = None) -> AbstractContextManager[None]:
        """One write transaction; nested calls join the outer one; an exception rolls back.

        ``namespace`` names the namespace it writes: a backend with per-namespace locks takes
        that lock first, so what the transaction reads is every earlier commit to it and no
        other writer changes it until this commits. None: the whole store's lock.
        """
        ...

    def change_token(self) -> Hashable:
        """Opaque; differs after any commit or rollback by any handle or process."""
        ...

    def committed_token(self) -> Hashable:
        """The change token as this handle's last commit left it: what :meth:`change_token`
        returns unless another connection or process committed since. A cache that applied
        its own commit records this one; recording :meth:`change_token` after the commit
        could take in a foreign commit made in between, which the cache never read."""
        ...

    def change_seq(self, namespace: str) -> int:
        """The namespace's change sequence number: grows with every commit that changed one
        of its entries (0 for a namespace never written)."""
        ...

    def changes_since(self, namespace: str, since: int) -> Changes | None:
        """The ids of ``namespace``'s entries changed (inserted, updated, deleted) after
        sequence number ``since``, and the number now; None when the feed no longer reaches
        back to ``since`` (trimmed, or the namespace deleted since): the caller reloads.
        Reads only the changed rows (an index on ``(namespace, seq)``)."""
        ...

    def trim_changes(self, namespace: str, *, keep: int = FEED_HORIZON) -> int:
        """Drop the feed rows of deleted entries older than the last ``keep`` changes (the
        decision log keeps the tombstones); a handle behind the cut then reloads. Returns the
        rows dropped. :meth:`compact_log` calls it with the default."""
        ...

    def secure_erase(self) -> bool:
        """Make deleted bytes leave the persistent medium; False when it could not complete
        (inside a transaction, or another reader holds a snapshot that still needs them)."""
        ...

    def close(self) -> None: ...

    # --- namespaces -----------------------------------------------------------------
    def create_namespace(
        self, name: str, *, embedder: str, dim: int, max_bytes: Any = ..., vector_dtype: Any = ...
    ) -> None: ...

    def namespace(self, name: str) -> NamespaceInfo: ...

    def namespaces(self) -> list[str]: ...

    def namespace_stats(self) -> list[NamespaceStats]: ...

    def delete_namespace(self, name: str, *, reason: str = ...) -> int: ...

    # --- entries --------------------------------------------------------------------
    def insert(self, entry: Entry) -> None: ...

    def get(self, namespace: str, entry_id: str) -> Entry: ...

    def get_many(self, namespace: str, ids: list[str]) -> list[Entry]:
        """The resident entries among ``ids``, in the order of ``ids`` (absent ids skipped)."""
        ...

    def entries(self, namespace: str) -> list[Entry]: ...

    def update(self, entry: Entry) -> None: ...

    def delete(self, namespace: str, entry_id: str) -> int:
        """Hard-delete one entry; its freed bytes. The text leaves every read path at commit
        and the persistent medium at :meth:`secure_erase`."""
        ...

    def used_bytes(self, namespace: str) -> int: ...

    def count(self, namespace: str) -> int: ...

    def known_ids(self, namespace: str, ids: list[str]) -> set[str]:
        """Those of ``ids`` that are or were entries of ``namespace`` (resident, or named in
        its decision log); every id when the log was compacted and cannot tell."""
        ...

    # --- policy state ---------------------------------------------------------------
    def save_state(self, namespace: str, policy: str, step: int, state: dict[str, Any]) -> None: ...

    def load_state(self, namespace: str) -> tuple[str, int, dict[str, Any]] | None: ...

    # --- decision log ---------------------------------------------------------------
    def log(
        self,
        namespace: str,
        *,
        step: int,
        action: str,
        entry_id: str,
        score: float = ...,
        reason: str = ...,
        policy: str = ...,
        nbytes: int = ...,
        at: float | None = ...,
    ) -> None: ...

    def last_seq(self) -> int: ...

    def decisions(
        self, namespace: str, *, since: int = ..., action: str | None = ...
    ) -> list[Decision]: ...

    def decision_count(self, namespace: str) -> int: ...

    def deleted_namespace_log(
        self, namespace: str, *, action: str | None = ...
    ) -> list[Decision]: ...

    def compact_log(
        self,
        namespace: str,
        *,
        keep: int | None = ...,
        max_age_s: float | None = ...,
        step: int = ...,
    ) -> int: ...

    # --- peers ----------------------------------------------------------------------
    def mark_shared(self, namespace: str, entry_id: str, peer: str) -> None: ...

    def mark_forgotten(self, namespace: str, entry_id: str) -> int: ...

    def pending_notices(self, namespace: str, peer: str) -> list[str]: ...

    def notice_sent(self, namespace: str, entry_id: str, peer: str) -> None: ...

    # --- re-embedding ---------------------------------------------------------------
    def vector_rows(
        self,
        namespace: str,
        *,
        after: int = ...,
        limit: int | None = ...,
        other_than: tuple[str, int] | None = ...,
    ) -> list[VectorRow]:
        """Entries after position ``after`` in insertion order, at most ``limit``; with
        ``other_than=(dtype, nbytes)`` only those whose stored vector is in another precision
        or of another size."""
        ...

    def set_embedder(
        self, namespace: str, embedder: str, dim: int, vector_dtype: str | None = ...
    ) -> None: ...

    def set_embedding(
        self,
        namespace: str,
        entry_id: str,
        embedding: np.ndarray,
        nbytes: int,
        vector_dtype: str | None = ...,
    ) -> None: ...


class Hit(NamedTuple):
    """One row of a search leg: the entry's insertion position, its id and the leg's score."""

    pos: int
    id: str
    score: float


class SearchHits(NamedTuple):
    """The two candidate legs of :meth:`SearchableStore.search`, each best first.

    ``dense``: score = cosine with the query vector. ``lexical``: score = the full-text rank
    (non-negative; larger is better; comparable only within one search).
    """

    dense: list[Hit]
    lexical: list[Hit]


@runtime_checkable
class SearchableStore(Protocol):
    """An optional capability: a store that finds recall candidates itself, so that a
    namespace too large for one process's memory can be recalled without loading it
    (:mod:`memcurator.lifecycle.store_recall`). :class:`~memcurator.store.postgres.PostgresStore`
    has it (pgvector HNSW + full-text); SQLite does not (its recall ranks the resident set in
    memory).
    """

    def search(
        self,
        namespace: str,
        text: str,
        query: np.ndarray,
        k: int,
        *,
        user: str | None = None,
        meta: dict[str, Any] | None = None,
        min_score: float | None = None,
        exact: bool = False,
        ef_search: int | None = None,
    ) -> SearchHits:
        """The best ``k`` eligible entries of each leg (dense by ``query``, shape (d,);
        full-text by ``text``), eligibility applied before the cut: entries scoped to another
        user, on probation, whose ``meta`` does not contain ``meta``'s pairs, or with cosine
        below ``min_score`` are never returned, and each leg returns ``k`` hits whenever ``k``
        eligible entries match it."""
        ...

    def get_many(self, namespace: str, ids: list[str]) -> list[Entry]:
        """The resident entries among ``ids``, in the order of ``ids`` (absent ids skipped)."""
        ...


__all__ = [
    "FEED_HORIZON",
    "KEEP",
    "REEMBED_PENDING",
    "Changes",
    "Hit",
    "NamespaceInfo",
    "NamespaceStats",
    "SearchHits",
    "SearchableStore",
    "Store",
    "VectorRow",
]
