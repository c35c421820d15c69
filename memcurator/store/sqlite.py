"""Persistent, crash-safe entry store on SQLite (stdlib): WAL, transactions, decision log.

The store owns the truth: entries per namespace, the resident byte count and the append-only
decision log. It does not decide anything; :class:`memcurator.memory.Memory` asks a keep policy
which entries to evict and applies the answer here inside one transaction.
"""

from __future__ import annotations

import json
import os
import random
import sqlite3
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from memcurator.errors import (
    EntryNotFound,
    InvalidInput,
    NamespaceNotFound,
    StoreError,
)
from memcurator.store.base import (
    FEED_HORIZON,
    KEEP,
    Changes,
    NamespaceInfo,
    NamespaceStats,
    Store,
    VectorRow,
)
from memcurator.store.compression import (
    CodecCache,
    NamespaceCodec,
    read_entry,
    read_text,
    stored_entry,
)
from memcurator.store.connection import ClosedConnection, GuardedConnection, retry_busy
from memcurator.store.rowlogic import (
    DECISION_COLS,
    N_TRUST_COLS,
    NO_TRUST_COLS,
    TRUST_COLS,
    DecisionLogReads,
    check_reopen,
    checked_embedding,
    compaction_note,
    counts_of,
    decision_from_row,
    decision_values,
    entry_from_row,
    finite_stats,
    meta_json,
    namespace_args,
    trust_values,
)
from memcurator.store.schema import migrate, migrate_check
from memcurator.store.textcodec import TextCodec
from memcurator.store.vectors import DEFAULT_DTYPE, check_dtype, decode, encode
from memcurator.types import Decision, Entry

_ENTRY_COLS = (
    "id, namespace, kind, text, bytes, raw_bytes, embedding, origin, origin_detail, "
    "reinforcement, uses, successes, failures, created_step, last_used_step, meta, stats"
)


def _row_to_entry(r: tuple[Any, ...]) -> Entry:
    """An entry from a row of ``_ENTRY_COLS``, the row's vector precision and its
    :data:`~memcurator.store.rowlogic.TRUST_COLS`."""
    return entry_from_row(r[:6], decode(r[6], r[17]), r[7:17], r[18:])


class SQLiteStore(CodecCache, DecisionLogReads):
    """Entries, namespaces and the decision log in one SQLite file.

    Parameters
    ----------
    path : str or os.PathLike
        Database file; ``":memory:"`` for a throw-away store.
    timeout_s : float, default 30.0
        How long a writer waits for another process's write lock before :class:`StoreError`.
        SQLite's own busy timeout covers most waits; a retry loop with jitter covers the rest,
        so "database is locked" never escapes to the caller before this time.
    clock : callable, default time.time
        Wall clock for decision timestamps (seconds since the epoch); pass a fake in tests.
    seed : int, default 0
        Seeds the retry jitter only.
    readonly : bool, default False
        Open an existing store for reading only (no WAL switch, no migration); writes raise
        :class:`StoreError`. The CLI's ``decisions`` and ``entries`` read this way.

    Raises
    ------
    StoreError
        ``path`` is a directory, not an SQLite file, another application's SQLite database
        (tables but no memcurator schema version; nothing is written into it), a newer schema,
        or (``readonly``) missing or empty.

    Notes
    -----
    Durability: WAL journal with ``synchronous=FULL``; every mutation runs in a ``BEGIN
    IMMEDIATE`` transaction, so a process killed mid-write leaves the last committed state.
    ``secure_delete`` is on, so :meth:`delete` overwrites the freed text on disk.

    Examples
    --------
    >>> s = SQLiteStore(":memory:")
    >>> s.create_namespace("agent-1", embedder="hashing-4", dim=4, max_bytes=1000)
    >>> s.namespace("agent-1").dim
    4
    >>> s.used_bytes("agent-1")
    0
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        timeout_s: float = 30.0,
        clock: Callable[[], float] = time.time,
        seed: int = 0,
        readonly: bool = False,
        compress_text: bool = False,
        text_dict: bytes | None = None,
    ):
        self.path = str(path)
        #: new namespaces store their text zstd-compressed (:mod:`.compression`)
        self.compress_text = bool(compress_text)
        #: a dictionary new compressing namespaces start with (else trained at AUTO_TRAIN)
        self.text_dict = None if text_dict is None else bytes(text_dict)
        self._codecs: dict[str, tuple[Any, NamespaceCodec]] = {}
        self._inserts: dict[str, int] = {}
        self._retrained = False
        self.timeout_s = timeout_s
        self.clock = clock
        self.seed = seed
        self.readonly = readonly
        self._rng = random.Random(seed)
        self._lock = threading.RLock()
        self._commits = 0
        mem = self.path == ":memory:"
        if not mem and os.path.isdir(self.path):
            raise StoreError(f"{self.path!r} is a directory, not a store file")
        if readonly and not mem and not os.path.isfile(self.path):
            raise StoreError(f"no store at {self.path!r}")
        try:
            if readonly and not mem:
                uri = "file:" + urllib.parse.quote(os.path.abspath(self.path)) + "?mode=ro"
                conn = sqlite3.connect(
                    uri, uri=True, timeout=timeout_s, isolation_level=None, check_same_thread=False
                )
            else:
                conn = sqlite3.connect(
                    self.path, timeout=timeout_s, isolation_level=None, check_same_thread=False
                )
            conn.execute(f"PRAGMA busy_timeout={int(timeout_s * 1000)}")
            version = int(self._retry(lambda: conn.execute("PRAGMA user_version").fetchone()[0]))
            n_tables = int(
                self._retry(
                    lambda: conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
                )
            )
        except sqlite3.Error as e:
            if "not a database" in str(e):
                raise StoreError(f"{self.path!r} is not an SQLite database (not a store)") from e
            raise StoreError(f"cannot open store {self.path!r}: {e}") from e
        if version == 0 and (n_tables > 0 or readonly):
            conn.close()
            raise StoreError(
                f"{self.path!r} is not a memcurator store (no schema version"
                + (", it holds other tables); refusing to write into it" if n_tables else ")")
            )
        self._conn: Any = GuardedConnection(conn, self.path)
        self._set_layout(bool(readonly), version)
        if readonly:
            if version > 0:
                migrate_check(version)
            return
        c = self._conn
        if not mem:
            self._retry(lambda: c.execute("PRAGMA journal_mode=WAL"))
        c.execute("PRAGMA synchronous=FULL")
        c.execute("PRAGMA secure_delete=ON")
        c.execute("PRAGMA foreign_keys=ON")
        with self._tx():
            migrate(conn)

    def _set_layout(self, readonly: bool, version: int) -> None:
        """The columns this handle reads: a writable store was just migrated to this schema;
        a file opened read-only keeps the layout of its ``version`` (it is not migrated)."""
        now = not readonly
        # files before schema v3 store float32 only
        self._vec = "vec_dtype" if now or version >= 3 else f"'{DEFAULT_DTYPE}'"
        self._nsvec = "vector_dtype" if self._vec == "vec_dtype" else self._vec
        # ... and before v6 keep the trust state in meta (split out when read)
        trust = TRUST_COLS if now or version >= 6 else NO_TRUST_COLS
        self._sel = f"{_ENTRY_COLS}, {self._vec}, {trust}"
        self._has_codec = now or version >= 7  # schema v7: text codecs

    # ------------------------------------------------------------------ plumbing
    def _retry(self, fn: Callable[[], Any]) -> Any:
        return retry_busy(fn, timeout_s=self.timeout_s, what=f"store {self.path}", rng=self._rng)

    @contextmanager
    def _tx(self) -> Iterator[Any]:
        """:meth:`transaction` yielding the connection, for this module's statements."""
        with self._lock:
            if self.readonly:
                raise StoreError(f"store {self.path!r} is open read-only")
            if self._conn.in_transaction:
                yield self._conn
                return
            self._retry(lambda: self._conn.execute("BEGIN IMMEDIATE"))
            try:
                yield self._conn
            except BaseException:
                self._conn.execute("ROLLBACK")
                self._commits += 1  # what handles cached from inside it is void
                raise
            else:
                # inside the write lock no other connection commits: the data_version our
                # commit leaves (own commits do not change it on this connection)
                dv = int(self._conn.execute("PRAGMA data_version").fetchone()[0])
                self._retry(lambda: self._conn.execute("COMMIT"))
                self._commits += 1
                self._own = (dv, self._commits)
                if self._retrained:  # rows this handle did not write changed: it catches up
                    self._own, self._retrained = (dv, -1), False

    @contextmanager
    def transaction(self, namespace: str | None = None) -> Iterator[None]:
        """One write transaction (``BEGIN IMMEDIATE``); nested calls join the outer one.

        An exception inside rolls every change back and propagates. ``namespace`` is accepted
        for the protocol and not needed: ``BEGIN IMMEDIATE`` takes the whole file's write lock.

        Raises
        ------
        StoreError
            If the write lock cannot be taken within ``timeout_s``, or the store is read-only.
        """
        with self._tx():
            yield

    def data_version(self) -> int:
        """SQLite's ``PRAGMA data_version``: changes when another connection commits."""
        with self._lock:
            return int(self._conn.execute("PRAGMA data_version").fetchone()[0])

    def change_token(self) -> tuple[int, int]:
        """A token that changes on every commit or rollback, from this connection (any handle
        sharing it) or any other connection or process: ``(data_version, local commits)``.

        Opaque to callers, who compare it for equality only
        (:meth:`memcurator.store.base.Store.change_token`). ``PRAGMA data_version`` alone does
        not change for commits made on the same connection, so two
        :class:`~memcurator.Memory` handles on one store would not see each other.
        """
        with self._lock:
            return (int(self._conn.execute("PRAGMA data_version").fetchone()[0]), self._commits)

    def committed_token(self) -> tuple[int, int]:
        """The change token as this handle's last commit left it
        (:meth:`memcurator.store.base.Store.committed_token`)."""
        with self._lock:
            own = getattr(self, "_own", None)
            return own if own is not None else self.change_token()

    # ------------------------------------------------------------------ change feed
    def change_seq(self, namespace: str) -> int:
        """``namespace``'s change sequence number (:meth:`Store.change_seq`)."""
        with self._lock:
            row = self._conn.execute(
                "SELECT v FROM change_seq WHERE namespace=?", (namespace,)
            ).fetchone()
        return 0 if row is None else int(row[0])

    def changes_since(self, namespace: str, since: int) -> Changes | None:
        """Ids of ``namespace``'s entries changed after ``since`` (:meth:`Store.changes_since`).

        Examples
        --------
        >>> s = SQLiteStore(":memory:")
        >>> s.create_namespace("a", embedder="hashing-4", dim=4)
        >>> s.changes_since("a", 0)
        Changes(seq=0, ids=[])
        """
        with self._lock:
            # one read transaction: the number and the ids come from one snapshot
            own = self._conn.in_transaction
            if not own:
                self._conn.execute("BEGIN")
            try:
                row = self._conn.execute(
                    "SELECT v, floor FROM change_seq WHERE namespace=?", (namespace,)
                ).fetchone()
                seq, floor = (0, 0) if row is None else (int(row[0]), int(row[1]))
                if since < floor or since > seq:
                    return None
                ids = [
                    r[0]
                    for r in self._conn.execute(
                        "SELECT entry_id FROM change_feed WHERE namespace=? AND seq>? ORDER BY seq",
                        (namespace, int(since)),
                    )
                ]
            finally:
                if not own:
                    self._conn.execute("COMMIT")
        return Changes(seq, ids)

    def trim_changes(self, namespace: str, *, keep: int = FEED_HORIZON) -> int:
        """Drop feed rows of deleted entries older than the last ``keep`` changes
        (:meth:`Store.trim_changes`)."""
        with self._tx() as c:
            seq = self.change_seq(namespace)
            cut = seq - max(0, int(keep))
            if cut <= 0:
                return 0
            n = c.execute(
                "DELETE FROM change_feed WHERE namespace=? AND seq<=? AND entry_id NOT IN "
                "(SELECT id FROM entries WHERE namespace=?)",
                (namespace, cut, namespace),
            ).rowcount
            c.execute(
                "UPDATE change_seq SET floor=MAX(floor, ?) WHERE namespace=?", (cut, namespace)
            )
        return int(n)

    def schema_version(self) -> int:
        with self._lock:
            return int(self._conn.execute("PRAGMA user_version").fetchone()[0])

    def secure_erase(self) -> bool:
        """Make deleted text leave the file: copy the WAL into the database file and truncate
        it (``wal_checkpoint(TRUNCATE)``).

        ``secure_delete`` already overwrites freed pages of the database file; the WAL still
        holds page images with the text until this checkpoint. Returns True when the text is
        gone from the file (always for ``":memory:"``); False inside a transaction or when
        another connection's read snapshot blocked the checkpoint (call again once it ends).
        """
        with self._lock:
            if self.path == ":memory:":
                return True
            if self._conn.in_transaction:
                return False
            row = self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        return row is not None and int(row[0]) == 0

    def close(self) -> None:
        """Close the file; any later call raises :class:`StoreError`."""
        with self._lock:
            self._conn.close()
            self._conn = ClosedConnection(self.path)

    # ------------------------------------------------------------------ namespaces
    def create_namespace(
        self,
        name: str,
        *,
        embedder: str,
        dim: int,
        max_bytes: Any = None,
        vector_dtype: Any = KEEP,
    ) -> None:
        """Create ``name`` if absent; if present, check that its embedder and dimension match.

        ``max_bytes`` is stored as the namespace's budget; pass ``KEEP`` to leave the stored
        budget of an existing namespace as it is (a new one is then unbounded).
        ``vector_dtype`` (:data:`memcurator.store.vectors.VECTOR_DTYPES`) is the precision the
        namespace stores its vectors in, fixed when it is created; ``KEEP`` (the default)
        accepts an existing namespace's and gives a new one float32.

        Raises
        ------
        InvalidInput
            Empty name, non-positive dim or max_bytes, an unknown ``vector_dtype``, or one that
            differs from an existing namespace's (convert it with ``memcurator reembed
            --vector-dtype``).
        DimensionMismatch
            The namespace exists with another embedder or dimension.
        """
        args = namespace_args(name, dim, max_bytes, vector_dtype)
        with self._tx() as c:
            row = c.execute(
                "SELECT embedder, dim, vector_dtype FROM namespaces WHERE name=?", (name,)
            ).fetchone()
            if row is None:
                c.execute(
                    "INSERT INTO namespaces(name, embedder, dim, max_bytes, created_at, "
                    "vector_dtype) VALUES (?,?,?,?,?,?)",
                    (name, embedder, int(dim), args.max_bytes, self.clock(), args.dtype),
                )
                if self.compress_text:
                    self.set_text_codec(name, "zstd")
                    self._seed_dict(name)
                return
            check_reopen(name, row, embedder, dim, args)
            if not args.keep_budget:
                c.execute("UPDATE namespaces SET max_bytes=? WHERE name=?", (args.max_bytes, name))

    def namespace(self, name: str) -> NamespaceInfo:
        """Raises :class:`NamespaceNotFound` if ``name`` does not exist."""
        with self._lock:
            row = self._conn.execute(
                f"SELECT name, embedder, dim, max_bytes, created_at, {self._nsvec} "
                "FROM namespaces WHERE name=?",
                (name,),
            ).fetchone()
        if row is None:
            raise NamespaceNotFound(
                f"namespace {name!r} does not exist; known: {self.namespaces()}"
            )
        return NamespaceInfo(row[0], row[1], int(row[2]), row[3], float(row[4]), row[5])

    def namespaces(self) -> list[str]:
        with self._lock:
            return [r[0] for r in self._conn.execute("SELECT name FROM namespaces ORDER BY name")]

    def namespace_stats(self) -> list[NamespaceStats]:
        """Every namespace with its resident entries and bytes, budget and log length (read-only).

        Examples
        --------
        >>> s = SQLiteStore(":memory:")
        >>> s.create_namespace("a", embedder="hashing-4", dim=4, max_bytes=1000)
        >>> s.namespace_stats()[0][:4]
        ('a', 0, 0, 1000)
        """
        q = (
            "SELECT n.name, "
            "(SELECT COUNT(*) FROM entries e WHERE e.namespace = n.name), "
            "(SELECT COALESCE(SUM(bytes), 0) FROM entries e WHERE e.namespace = n.name)"
            + (
                " + (SELECT COALESCE(SUM(length(dict)), 0) FROM text_dicts t WHERE "
                "t.namespace = n.name)"
                if self._has_codec
                else ""
            )
            + ", n.max_bytes, n.embedder, n.dim, "
            "(SELECT COUNT(*) FROM decisions d WHERE d.namespace = n.name), "
            "(SELECT policy FROM policy_state p WHERE p.namespace = n.name), "
            f"{self._nsvec} FROM namespaces n ORDER BY n.name"
        )
        with self._lock:
            rows = self._conn.execute(q).fetchall()
        return [
            NamespaceStats(r[0], int(r[1]), int(r[2]), r[3], r[4], int(r[5]), int(r[6]), r[7], r[8])
            for r in rows
        ]

    def delete_namespace(self, name: str, *, reason: str = "namespace deleted") -> int:
        """Delete a namespace: its entries, its policy state and the namespace itself.

        Nothing leaves silently: each entry gets a ``forget`` tombstone in the decision log (its
        id, bytes and ``reason``), then one ``forget`` row with an empty entry id records the
        namespace's deletion. The log itself is append-only and stays. No other namespace is
        touched. Freed text is overwritten (``secure_delete``) and the WAL checkpointed.

        Returns
        -------
        int
            Bytes freed.

        Raises
        ------
        NamespaceNotFound
            ``name`` does not exist.

        Examples
        --------
        >>> s = SQLiteStore(":memory:")
        >>> s.create_namespace("a", embedder="hashing-4", dim=4)
        >>> s.delete_namespace("a"), s.namespaces()
        (0, [])
        """
        with self._tx() as c:
            self.namespace(name)
            rows = c.execute(
                "SELECT id, bytes FROM entries WHERE namespace=? ORDER BY rowid", (name,)
            ).fetchall()
            st = c.execute("SELECT step FROM policy_state WHERE namespace=?", (name,)).fetchone()
            step = int(st[0]) if st else 0
            freed = self._tombstones(name, rows, step, reason)
            c.execute("DELETE FROM entries WHERE namespace=?", (name,))
            c.execute("UPDATE shared_out SET forgotten=1 WHERE namespace=?", (name,))
            c.execute("DELETE FROM policy_state WHERE namespace=?", (name,))
            freed += self._drop_dict(name)
            c.execute("DELETE FROM namespaces WHERE name=?", (name,))
            # the feed of a deleted namespace reaches back nowhere: its handles reload
            c.execute("DELETE FROM change_feed WHERE namespace=?", (name,))
            c.execute("UPDATE change_seq SET floor=v WHERE namespace=?", (name,))
        self.secure_erase()
        return freed

    # ------------------------------------------------------------------ entries
    def insert(self, entry: Entry) -> None:
        """Insert one entry (caller holds a transaction for multi-step changes).

        Raises
        ------
        NamespaceNotFound, DimensionMismatch, InvalidInput
        """
        info = self.namespace(entry.namespace)
        emb = checked_embedding(entry.embedding, info.dim, entry.namespace)
        with self._tx() as c:
            # text and meta as stored: one zstd frame in a compressing namespace (schema v8)
            text, meta = stored_entry(self._write_codec(entry.namespace), entry.text,
                                      meta_json(entry))  # fmt: skip
            try:
                c.execute(
                    f"INSERT INTO entries({_ENTRY_COLS}, vec_dtype, {TRUST_COLS}) VALUES "
                    f"(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?{',?' * N_TRUST_COLS})",
                    (
                        entry.id,
                        entry.namespace,
                        entry.kind,
                        text,
                        int(entry.bytes),
                        int(entry.raw_bytes),
                        encode(emb, info.vector_dtype),
                        entry.origin,
                        entry.origin_detail,
                        entry.reinforcement,
                        entry.uses,
                        entry.successes,
                        entry.failures,
                        entry.created_step,
                        entry.last_used_step,
                        meta,
                        finite_stats(entry.stats),
                        info.vector_dtype,
                        *trust_values(entry.trust),
                    ),
                )
            except sqlite3.IntegrityError as e:
                raise InvalidInput(f"entry id {entry.id!r} already exists") from e
            self._auto_train(entry.namespace)

    def get(self, namespace: str, entry_id: str) -> Entry:
        """Raises :class:`EntryNotFound` for an unknown id (never returns None)."""
        with self._lock:
            row = self._conn.execute(
                f"SELECT {self._sel} FROM entries WHERE namespace=? AND id=?",
                (namespace, entry_id),
            ).fetchone()
        if row is None:
            self.namespace(namespace)  # a missing namespace is its own error
            raise EntryNotFound(f"no entry {entry_id!r} in namespace {namespace!r}")
        return self._entry(row)

    def get_many(self, namespace: str, ids: list[str]) -> list[Entry]:
        """The resident entries among ``ids``, in the order of ``ids`` (absent ids skipped)."""
        want = list(dict.fromkeys(str(i) for i in ids))
        got: dict[str, Entry] = {}
        with self._lock:
            for lo in range(0, len(want), 500):
                part = want[lo : lo + 500]
                rows = self._conn.execute(
                    f"SELECT {self._sel} FROM entries WHERE namespace=? AND id IN "
                    f"({','.join('?' * len(part))})",
                    (namespace, *part),
                ).fetchall()
                got.update((r[0], self._entry(r)) for r in rows)
        return [got[i] for i in want if i in got]

    def entries(self, namespace: str) -> list[Entry]:
        """All resident entries of ``namespace`` in insertion order."""
        self.namespace(namespace)
        with self._lock:
            rows = self._conn.execute(
                f"SELECT {self._sel} FROM entries WHERE namespace=? ORDER BY rowid",
                (namespace,),
            ).fetchall()
        return [self._entry(r) for r in rows]

    def find_text(self, namespace: str, text_hash: str) -> str | None:
        """Id of an entry whose text hash equals ``text_hash`` (for reinforcement), or None."""
        with self._lock:
            row = self._conn.execute(
                "SELECT id FROM entries WHERE namespace=? AND CASE WHEN meta = '' THEN NULL "
                "ELSE json_extract(meta,'$.text_sha1') END = ?",
                (namespace, text_hash),
            ).fetchone()
            # a compressing namespace keeps meta inside the text frame (empty meta column)
            folded = [] if row is not None else self._conn.execute(
                "SELECT id, text FROM entries WHERE namespace=? AND meta = ''", (namespace,)
            ).fetchall()  # fmt: skip
        if row is not None:
            return str(row[0])
        codec = self._read_codec(namespace)
        for eid, value in folded:
            if json.loads(read_entry(codec, value, "{}")[1]).get("text_sha1") == text_hash:
                return str(eid)
        return None

    def update(self, entry: Entry) -> None:
        """Write back an entry's mutable fields (counts, text after distillation, stats).

        The embedding is stored in the namespace's ``vector_dtype``.

        Raises
        ------
        EntryNotFound, NamespaceNotFound
        """
        with self._tx() as c:
            dtype = self.namespace(entry.namespace).vector_dtype
            text, meta = stored_entry(self._write_codec(entry.namespace), entry.text,
                                      meta_json(entry))  # fmt: skip
            cur = c.execute(
                "UPDATE entries SET kind=?, text=?, bytes=?, raw_bytes=?, embedding=?, "
                "vec_dtype=?, reinforcement=?, uses=?, successes=?, failures=?, "
                "last_used_step=?, meta=?, stats=?, "
                + ", ".join(f"{c}=?" for c in TRUST_COLS.split(", "))
                + " WHERE namespace=? AND id=?",
                (
                    entry.kind,
                    text,
                    int(entry.bytes),
                    int(entry.raw_bytes),
                    encode(entry.embedding, dtype),
                    dtype,
                    *counts_of(entry),
                    meta,
                    finite_stats(entry.stats),
                    *trust_values(entry.trust),
                    entry.namespace,
                    entry.id,
                ),
            )
            if cur.rowcount == 0:
                raise EntryNotFound(f"no entry {entry.id!r} in namespace {entry.namespace!r}")

    def delete(self, namespace: str, entry_id: str) -> int:
        """Hard-delete one entry; returns its freed bytes.

        The text leaves every read path at commit; ``secure_delete`` overwrites its page in the
        database file, and :meth:`secure_erase` (after the commit) clears it from the WAL.

        Raises
        ------
        EntryNotFound
        """
        with self._tx() as c:
            row = c.execute(
                "SELECT bytes FROM entries WHERE namespace=? AND id=?", (namespace, entry_id)
            ).fetchone()
            if row is None:
                raise EntryNotFound(f"no entry {entry_id!r} in namespace {namespace!r}")
            c.execute("DELETE FROM entries WHERE namespace=? AND id=?", (namespace, entry_id))
            self._drop_trained_dict(namespace)
        return int(row[0])

    def known_ids(self, namespace: str, ids: list[str]) -> set[str]:
        """Those of ``ids`` that are or were entries of ``namespace``: resident, or named in its
        decision log. Once retention has compacted the log (a ``compact`` row), an id missing
        from it may have been dropped with old rows, so every id counts as known.

        Examples
        --------
        >>> s = SQLiteStore(":memory:")
        >>> s.create_namespace("a", embedder="e", dim=4)
        >>> s.log("a", step=0, action="evict", entry_id="x1")
        >>> sorted(s.known_ids("a", ["x1", "deadbeef"]))
        ['x1']
        """
        want = list(dict.fromkeys(str(i) for i in ids))
        if not want:
            return set()
        found: set[str] = set()
        with self._lock:
            if self._conn.execute(
                "SELECT 1 FROM decisions WHERE namespace=? AND action='compact' LIMIT 1",
                (namespace,),
            ).fetchone():
                return set(want)
            for lo in range(0, len(want), 500):
                part = want[lo : lo + 500]
                marks = ",".join("?" * len(part))
                for table, col in (("entries", "id"), ("decisions", "entry_id")):
                    rows = self._conn.execute(
                        f"SELECT DISTINCT {col} FROM {table} WHERE namespace=? AND {col} IN "
                        f"({marks})",
                        [namespace, *part],
                    ).fetchall()
                    found.update(str(r[0]) for r in rows)
        return found

    def vector_rows(
        self,
        namespace: str,
        *,
        after: int = 0,
        limit: int | None = None,
        other_than: tuple[str, int] | None = None,
    ) -> list[VectorRow]:
        """Entries of ``namespace`` after position ``after`` (the rowid) in insertion order, at
        most ``limit``; with ``other_than=(dtype, nbytes)`` only those whose stored vector is
        in another precision or of another byte length (what re-embedding still has to do).

        Examples
        --------
        >>> s = SQLiteStore(":memory:")
        >>> s.create_namespace("a", embedder="e", dim=4)
        >>> s.vector_rows("a")
        []
        """
        q = (
            "SELECT rowid, id, text, bytes, length(embedding) FROM entries "
            "WHERE namespace=? AND rowid>?"
        )
        args: list[Any] = [namespace, int(after)]
        if other_than is not None:
            q += f" AND ({self._vec} != ? OR length(embedding) != ?)"
            args += [str(other_than[0]), int(other_than[1])]
        q += " ORDER BY rowid"
        if limit is not None:
            q += " LIMIT ?"
            args.append(int(limit))
        with self._lock:
            rows = self._conn.execute(q, args).fetchall()
        codec = self.text_codec(namespace)
        return [
            VectorRow(int(r[0]), str(r[1]), read_text(codec, r[2]), int(r[3]), int(r[4]))
            for r in rows
        ]

    def _entries_total(self, namespace: str, aggregate: str) -> int:
        """``aggregate`` (an SQL aggregate) over the namespace's entries, after checking it."""
        self.namespace(namespace)
        with self._lock:
            row = self._conn.execute(
                f"SELECT {aggregate} FROM entries WHERE namespace=?", (namespace,)
            ).fetchone()
        return int(row[0])

    def used_bytes(self, namespace: str) -> int:
        """Resident bytes ``sum(b(m))`` of the namespace."""
        total = self._entries_total(namespace, "COALESCE(SUM(bytes),0)")
        return total + self.fixed_bytes(namespace)

    def count(self, namespace: str) -> int:
        """Number of resident entries. Raises :class:`NamespaceNotFound`."""
        return self._entries_total(namespace, "COUNT(*)")

    # ------------------------------------------------------------------ policy state
    def save_state(self, namespace: str, policy: str, step: int, state: dict[str, Any]) -> None:
        """Persist a policy's learned state (JSON) and the logical step, in one row."""
        with self._tx() as c:
            c.execute(
                "INSERT INTO policy_state(namespace, policy, step, state) VALUES (?,?,?,?) "
                "ON CONFLICT(namespace) DO UPDATE SET policy=excluded.policy, "
                "step=excluded.step, state=excluded.state",
                (namespace, policy, int(step), json.dumps(state)),
            )

    def load_state(self, namespace: str) -> tuple[str, int, dict[str, Any]] | None:
        """(policy name, step, state) saved for ``namespace``, or None."""
        with self._lock:
            row = self._conn.execute(
                "SELECT policy, step, state FROM policy_state WHERE namespace=?", (namespace,)
            ).fetchone()
        return None if row is None else (row[0], int(row[1]), json.loads(row[2]))

    # ------------------------------------------------------------------ decision log
    def log(
        self,
        namespace: str,
        *,
        step: int,
        action: str,
        entry_id: str,
        score: float = float("nan"),
        reason: str = "",
        policy: str = "",
        nbytes: int = 0,
        at: float | None = None,
    ) -> None:
        """Append one decision. NaN ``score`` means "no score applies" and is stored as NULL;
        ``at`` (seconds since the epoch) defaults to the store clock's now (a copy between
        stores passes the original's)."""
        with self._tx() as c:
            c.execute(
                "INSERT INTO decisions(namespace, step, action, entry_id, score, reason, policy, "
                "bytes, at) VALUES (?,?,?,?,?,?,?,?,?)",
                decision_values(
                    namespace, step, action, entry_id, score, reason, policy, nbytes, at, self.clock
                ),
            )

    def last_seq(self) -> int:
        """Sequence number of the newest decision in the whole store (0 when none)."""
        with self._lock:
            row = self._conn.execute("SELECT COALESCE(MAX(seq), 0) FROM decisions").fetchone()
        return int(row[0])

    def _decision_rows(self, namespace: str, since: int, action: str | None) -> list[Decision]:
        """The log rows of ``namespace`` with ``seq > since`` (and ``action``), oldest first."""
        q = f"SELECT {DECISION_COLS} FROM decisions WHERE namespace=? AND seq>?"
        args: list[Any] = [namespace, since]
        if action is not None:
            q += " AND action=?"
            args.append(action)
        with self._lock:
            rows = self._conn.execute(q + " ORDER BY seq", args).fetchall()
        return [decision_from_row(r) for r in rows]

    def decision_count(self, namespace: str) -> int:
        """Rows of ``namespace``'s decision log (summary rows included)."""
        with self._lock:
            row = self._conn.execute(
                "SELECT COUNT(*) FROM decisions WHERE namespace=?", (namespace,)
            ).fetchone()
        return int(row[0])

    def compact_log(
        self,
        namespace: str,
        *,
        keep: int | None = None,
        max_age_s: float | None = None,
        step: int = 0,
    ) -> int:
        """Apply a retention to ``namespace``'s decision log; returns the rows dropped.

        Rows beyond the newest ``keep``, and rows older than ``max_age_s`` seconds by the store
        clock, are deleted and, in the same transaction, added to the namespace's running totals
        of dropped rows by action (table ``log_dropped``); one ``compact`` row (replacing the
        previous one) states those totals, with their bytes and ``seq`` range. No other
        namespace is touched; outside this method the log stays append-only (a trigger refuses
        any other delete).

        Parameters
        ----------
        namespace : str
        keep : int or None
            Rows to keep (the newest); None for no count limit.
        max_age_s : float or None
            Drop rows older than this; None for no age limit.
        step : int
            Logical step written on the summary row.

        Returns
        -------
        int
            Rows dropped (0: nothing to do, no summary written).

        Examples
        --------
        >>> s = SQLiteStore(":memory:")
        >>> s.create_namespace("a", embedder="hashing-4", dim=4)
        >>> for i in range(5):
        ...     s.log("a", step=i, action="admit", entry_id=f"e{i}", nbytes=10)
        >>> s.compact_log("a", keep=2)
        3
        >>> [d.action for d in s.decisions("a")]
        ['admit', 'admit', 'compact']
        """
        if keep is not None and (isinstance(keep, bool) or int(keep) < 1):
            raise InvalidInput(f"keep must be a positive integer or None, got {keep!r}")
        with self._tx() as c:
            self.namespace(namespace)
            cut = 0
            if keep is not None:
                row = c.execute(
                    "SELECT seq FROM decisions WHERE namespace=? ORDER BY seq DESC LIMIT 1 "
                    "OFFSET ?",
                    (namespace, int(keep)),
                ).fetchone()
                cut = int(row[0]) if row else 0
            cond = "namespace=? AND (seq<=?"
            args: list[Any] = [namespace, cut]
            if max_age_s is not None:
                cond += " OR at<?"
                args.append(self.clock() - float(max_age_s))
            cond += ")"
            groups = c.execute(
                f"SELECT action, COUNT(*), COALESCE(SUM(bytes),0), MIN(seq), MAX(seq) "
                f"FROM decisions WHERE {cond} AND action != 'compact' GROUP BY action",
                args,
            ).fetchall()
            n = sum(int(g[1]) for g in groups)
            if n == 0:
                return 0
            for action, cnt, nb, lo, hi in groups:
                c.execute(
                    "INSERT INTO log_dropped(namespace, action, n, bytes, first_seq, last_seq) "
                    "VALUES (?,?,?,?,?,?) ON CONFLICT(namespace, action) DO UPDATE SET "
                    "n=n+excluded.n, bytes=bytes+excluded.bytes, "
                    "first_seq=MIN(first_seq, excluded.first_seq), "
                    "last_seq=MAX(last_seq, excluded.last_seq)",
                    (namespace, action, int(cnt), int(nb), int(lo), int(hi)),
                )
            tot = c.execute(
                "SELECT action, n, bytes, first_seq, last_seq FROM log_dropped WHERE namespace=? "
                "ORDER BY action",
                (namespace,),
            ).fetchall()
            reason, nbytes = compaction_note(tot, n)
            c.execute("INSERT INTO log_compaction(active) VALUES (1)")
            try:  # the previous summary is superseded by this one (its totals carry on)
                c.execute(
                    f"DELETE FROM decisions WHERE ({cond}) OR (namespace=? AND action='compact')",
                    [*args, namespace],
                )
            finally:
                c.execute("DELETE FROM log_compaction")
            self.log(
                namespace, step=step, action="compact", entry_id="", reason=reason, nbytes=nbytes
            )
            self.trim_changes(namespace)  # the feed's tombstones are bounded with the log
        return n

    # ------------------------------------------------------------------ peers
    def mark_shared(self, namespace: str, entry_id: str, peer: str) -> None:
        """Remember that ``entry_id`` was sent to ``peer`` (for forget notices)."""
        with self._tx() as c:
            c.execute(
                "INSERT OR IGNORE INTO shared_out(namespace, entry_id, peer) VALUES (?,?,?)",
                (namespace, entry_id, peer),
            )

    def mark_forgotten(self, namespace: str, entry_id: str) -> int:
        """Flag every copy of ``entry_id`` sent to a peer as owed a forget notice; returns how
        many peers are owed one."""
        with self._tx() as c:
            cur = c.execute(
                "UPDATE shared_out SET forgotten=1 WHERE namespace=? AND entry_id=?",
                (namespace, entry_id),
            )
        return int(cur.rowcount)

    def pending_notices(self, namespace: str, peer: str) -> list[str]:
        """Ids sent to ``peer`` (or shared without a peer name) and forgotten since."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT entry_id FROM shared_out WHERE namespace=? AND forgotten=1 "
                "AND peer IN (?, '') ORDER BY entry_id",
                (namespace, peer),
            ).fetchall()
        return [str(r[0]) for r in rows]

    def notice_sent(self, namespace: str, entry_id: str, peer: str) -> None:
        """A forget notice for ``entry_id`` went to ``peer``: nothing more is owed there."""
        with self._tx() as c:
            c.execute(
                "DELETE FROM shared_out WHERE namespace=? AND entry_id=? AND peer IN (?, '')",
                (namespace, entry_id, peer),
            )

    # ------------------------------------------------------------------ re-embedding
    def set_embedder(
        self, namespace: str, embedder: str, dim: int, vector_dtype: str | None = None
    ) -> None:
        """Record that every entry of ``namespace`` is now embedded by ``embedder`` (dim) and,
        when ``vector_dtype`` is given, stored in that precision."""
        with self._tx() as c:
            info = self.namespace(namespace)
            dtype = info.vector_dtype if vector_dtype is None else check_dtype(vector_dtype)
            c.execute(
                "UPDATE namespaces SET embedder=?, dim=?, vector_dtype=? WHERE name=?",
                (embedder, int(dim), dtype, namespace),
            )

    def set_embedding(
        self,
        namespace: str,
        entry_id: str,
        embedding: np.ndarray,
        nbytes: int,
        vector_dtype: str | None = None,
    ) -> None:
        """Replace one entry's embedding and stored bytes (re-embedding); no other field.

        The vector is stored in ``vector_dtype`` (default: the namespace's), which the row
        records.
        """
        emb = np.asarray(embedding, dtype=np.float32)
        if not np.all(np.isfinite(emb)):
            raise InvalidInput("embedding contains NaN or infinite values")
        with self._tx() as c:
            dtype = (
                self.namespace(namespace).vector_dtype
                if vector_dtype is None
                else check_dtype(vector_dtype)
            )
            cur = c.execute(
                "UPDATE entries SET embedding=?, vec_dtype=?, bytes=? WHERE namespace=? AND id=?",
                (encode(emb, dtype), dtype, int(nbytes), namespace, entry_id),
            )
            if cur.rowcount == 0:
                raise EntryNotFound(f"no entry {entry_id!r} in namespace {namespace!r}")

    # ------------------------------------------------------------------ text compression
    def _entry(self, r: tuple[Any, ...]) -> Entry:
        """An entry from a row (``_row_to_entry``), its text decompressed when stored so."""
        if not isinstance(r[3], str):
            text, meta = read_entry(self._read_codec(str(r[1])), r[3], r[15])
            r = (*r[:3], text, *r[4:15], meta, *r[16:])
        return _row_to_entry(r)

    def _load_codec(self, namespace: str) -> NamespaceCodec:
        if not self._has_codec:
            return NamespaceCodec()
        with self._lock:
            row = self._conn.execute(
                "SELECT n.text_codec, d.dict, d.at, d.samples FROM namespaces n "
                "LEFT JOIN text_dicts d "
                "ON d.namespace = n.name WHERE n.name=?",
                (namespace,),
            ).fetchone()
        if row is None:
            return NamespaceCodec()
        key = (row[0], row[2])
        cached = self._codecs.get(namespace)
        if cached is not None and cached[0] == key:
            return cached[1]
        codec = NamespaceCodec(
            str(row[0]),
            None if row[1] is None else TextCodec(bytes(row[1])),
            int(row[3] or 0),
        )
        self._codecs[namespace] = (key, codec)
        return codec

    def fixed_bytes(self, namespace: str) -> int:
        """Bytes ``namespace`` stores besides its entries: its text dictionary (0 if none)."""
        if not self._has_codec:
            return 0
        with self._lock:
            row = self._conn.execute(
                "SELECT length(dict) FROM text_dicts WHERE namespace=?", (namespace,)
            ).fetchone()
        return 0 if row is None else int(row[0])

    def _seed_dict(self, namespace: str) -> None:
        if self.text_dict is not None:
            TextCodec(self.text_dict)  # a clear error for bytes that are not a dictionary
            self._conn.execute(
                "INSERT INTO text_dicts(namespace, dict, samples, at) VALUES (?,?,0,?)",
                (namespace, self.text_dict, time.time()),
            )

    def _drop_trained_dict(self, namespace: str) -> None:
        """A dictionary trained on the namespace's texts holds fragments of them: it leaves
        with the last entry (the namespace trains again when it fills up)."""
        if self._load_codec(namespace).samples == 0:
            return
        if self._conn.execute(
            "SELECT 1 FROM entries WHERE namespace=? LIMIT 1", (namespace,)
        ).fetchone():
            return
        self._drop_dict(namespace)
        self._codecs.pop(namespace, None)
        self._retrained = True  # handles catch up: the namespace's bytes changed

    def _drop_dict(self, namespace: str) -> int:
        n = self.fixed_bytes(namespace)
        if n:
            self._conn.execute("DELETE FROM text_dicts WHERE namespace=?", (namespace,))
        return n

    # the dialect of the shared codec steps (:class:`~.compression.CodecCache`)
    _dict_table = "text_dicts"

    def _codec_tx(self, namespace: str) -> Any:
        return self._tx()

    def _codec_x(self, sql: str, args: tuple[Any, ...]) -> None:
        self._conn.execute(sql, args)

    def _stored_rows(self, namespace: str) -> list[tuple[Any, ...]]:
        return list(
            self._conn.execute(
                "SELECT id, text, meta, bytes FROM entries WHERE namespace=? ORDER BY rowid",
                (namespace,),
            ).fetchall()
        )

    def _store_row(
        self, namespace: str, eid: str, value: str | bytes, meta: str, nbytes: int
    ) -> None:
        self._conn.execute(
            "UPDATE entries SET text=?, meta=?, bytes=? WHERE namespace=? AND id=?",
            (value, meta, nbytes, namespace, eid),
        )

    def _mark_retrained(self) -> None:
        self._retrained = True


def _implements_store(store: SQLiteStore) -> Store:
    """Never called: mypy checks here that :class:`SQLiteStore` implements the protocol."""
    return store
