"""The store on PostgreSQL with pgvector: many processes and hosts on one memory.

Chosen by URL (:func:`memcurator.store.open_store`): ``Memory("postgresql://user@host/db")``.
The same protocol as :class:`~memcurator.store.sqlite.SQLiteStore`
(:class:`~memcurator.store.base.Store`), the same contract suite, and what SQLite gives a single
host PostgreSQL gives many:

- **One writer per namespace at a time.** Every write transaction takes the advisory lock of
  the namespace it writes (``pg_advisory_xact_lock``) before it reads anything, so the resident
  set it checks the budget against is the committed one: the budget holds across processes,
  and a duplicate check and the insert it guards are one atomic step (Mem0 #6515). Writers of
  different namespaces run in parallel; a transaction that names no namespace takes the
  store-wide lock (exclusive; namespace transactions hold it shared).
- **Change token.** Each write transaction bumps its namespaces' counters in ``mc_changes``
  before it commits; :meth:`change_token` is their sum with this handle's own rollbacks, so a
  forget committed by any process changes every other process's token and their next read
  reloads (no process serves a forgotten entry from its resident set).
- **A pool, never one shared connection**: ``psycopg_pool.ConnectionPool``; each thread's
  transaction holds one connection from it, reads outside a transaction borrow one per call.
  Connections are checked when borrowed, so after a server restart the pool reconnects; an
  operation cut off by the restart raises :class:`~memcurator.errors.StoreError` (never a raw
  psycopg error) and changes nothing (its transaction rolled back).
- **Secure erase** (:meth:`secure_erase`): see ``docs/storage.md`` for what PostgreSQL keeps
  after ``DELETE`` and what this does about it.

Requires ``pip install 'memcurator[postgres]'`` (psycopg 3 and psycopg_pool) and the
``vector`` extension on the server (created by the first migration when the role may).
"""

from __future__ import annotations

import itertools
import json
import math
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, NamedTuple

import numpy as np

from memcurator.errors import (
    EntryNotFound,
    InvalidInput,
    MissingExtra,
    NamespaceNotFound,
    StoreError,
)
from memcurator.store.base import (
    FEED_HORIZON,
    KEEP,
    Changes,
    Hit,
    NamespaceInfo,
    NamespaceStats,
    SearchableStore,
    SearchHits,
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
from memcurator.store.pgschema import (
    LOCK_CREATE,
    LOCK_NAMESPACE,
    LOCK_STORE,
    RTSV_OF_PARAM,
    current_version,
    migrate,
    partition_name,
)
from memcurator.store.rowlogic import (
    DECISION_COLS,
    N_TRUST_COLS,
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
from memcurator.store.textcodec import TextCodec
from memcurator.store.vectors import check_dtype, decode, encode
from memcurator.types import Decision, Entry

#: URL schemes that select this backend.
SCHEMES = ("postgresql://", "postgres://")

_ENTRY_COLS = (
    "id, namespace, kind, text, bytes, raw_bytes, vec::text, hvec::text, qvec, vec_dtype, "
    "origin, origin_detail, reinforcement, uses, successes, failures, created_step, "
    "last_used_step, meta, stats, ztext, " + TRUST_COLS
)


def _psycopg() -> tuple[Any, Any]:
    """(psycopg, psycopg_pool), or :class:`MissingExtra` naming the extra."""
    try:
        import psycopg
        import psycopg_pool
    except ImportError as e:
        raise MissingExtra(
            "a postgresql:// store needs psycopg 3 and psycopg_pool: "
            "pip install 'memcurator[postgres]'"
        ) from e
    return psycopg, psycopg_pool


#: Longest wait for one connection attempt, seconds (a wrong host or port fails fast).
CONNECT_TIMEOUT_S = 5.0


def open_pool(
    url: str,
    *,
    where: str,
    timeout_s: float,
    pool_size: int,
    name: str,
    conn_kwargs: dict[str, Any],
    hint: str = "",
) -> Any:
    """Probe ``url`` once, then open a ``psycopg_pool.ConnectionPool`` of 1 to ``pool_size``
    connections (the entry store's and the service state's pools).

    The probe connects before the pool does, so that a refused connection raises at once with
    its real cause (:func:`~memcurator.store.pgerrors.connect_cause`); a cause that can pass (a
    server starting up, no free slot) is retried every 0.5 s until ``timeout_s`` seconds.

    Parameters
    ----------
    url : str
        ``postgresql://`` URL.
    where : str
        The URL with its password redacted (:func:`redact`), for messages.
    timeout_s : float
        Seconds to wait for the server and for the pool's first connection.
    pool_size : int
        Most connections in the pool (at least 1).
    name : str
        The pool's name (psycopg_pool's logs).
    conn_kwargs : dict
        Passed to each ``psycopg.connect`` of the pool (``autocommit``, ``options``).
    hint : str, default ""
        Appended to the message when the pool's first connection times out.

    Returns
    -------
    psycopg_pool.ConnectionPool
        Open; the caller closes it.

    Raises
    ------
    StoreError
        The server refused the connection, or none came within ``timeout_s``.
    MissingExtra
        psycopg / psycopg_pool not installed.
    """
    from memcurator.store.pgerrors import connect_cause

    psycopg, psycopg_pool = _psycopg()
    deadline = time.monotonic() + timeout_s
    each = max(1, int(min(CONNECT_TIMEOUT_S, timeout_s)))
    while True:
        try:
            psycopg.connect(url, autocommit=True, connect_timeout=each).close()
            break
        except psycopg.Error as e:
            cause, transient = connect_cause(e)
            if not transient or time.monotonic() + 0.5 > deadline:
                raise StoreError(f"cannot connect to PostgreSQL at {where}: {cause}") from None
            time.sleep(0.5)
    pool = psycopg_pool.ConnectionPool(
        url,
        min_size=1,
        max_size=max(1, int(pool_size)),
        kwargs=conn_kwargs,
        check=psycopg_pool.ConnectionPool.check_connection,
        timeout=timeout_s,
        open=False,
        name=name,
    )
    try:
        pool.open(wait=True, timeout=timeout_s)
    except psycopg_pool.PoolTimeout as e:
        pool.close()
        raise StoreError(
            f"cannot connect to PostgreSQL at {where} within {timeout_s:g} s{hint}"
        ) from e
    return pool


def hash_ns(namespace: str) -> int:
    """A stable 63-bit hash of a namespace (index names).

    Examples
    --------
    >>> hash_ns("a") == hash_ns("a") != hash_ns("b")
    True
    """
    import hashlib

    return int.from_bytes(hashlib.sha1(namespace.encode("utf-8")).digest()[:8], "big") >> 1


def redact(url: str) -> str:
    """``url`` without its password (for messages and :attr:`PostgresStore.path`).

    Examples
    --------
    >>> redact("postgresql://bob:s3cret@db:5432/mem")
    'postgresql://bob:***@db:5432/mem'
    """
    return re.sub(r"^(\w+://[^:/@]+):[^@]*@", r"\1:***@", url)


def _vec_text(e: np.ndarray) -> str:
    """pgvector's text form; exact: a float32 (or float16) value's shortest repr reads back as
    the same value."""
    return "[" + ",".join(map(repr, e.tolist())) + "]"


def _parse_vec(s: str, dtype: str) -> np.ndarray:
    out = np.array(s[1:-1].split(","), dtype=np.float32)
    return out.astype(np.float16).astype(np.float32) if dtype == "float16" else out


def _row_to_entry(r: tuple[Any, ...]) -> Entry:
    dtype = r[9]
    if dtype in ("int8", "binary"):  # qvec: the BLOB layout
        emb = decode(bytes(r[8]), dtype)
    else:
        emb = _parse_vec(r[6] if dtype == "float32" else r[7], dtype)
    return entry_from_row(r[:6], emb, r[10:20], r[21:])  # r[20]: ztext


def _bits_expr(dim: int) -> str:
    """A binary row's sign bits (``qvec``, :func:`memcurator.store.vectors.sign_code`) as
    pgvector's ``bit(dim)``. Bytes map to bits most significant first, where the code packs
    dimension ``i`` little-endian: the same permutation of the bits for every row and for the
    query, so Hamming distances are those of the codes."""
    return f"(('x' || encode(qvec, 'hex'))::bit({int(dim)}))"


def _text_args(value: str | bytes) -> tuple[str, bytes | None]:
    """(text, ztext) column values of a stored text value (``compression.stored_entry``)."""
    return (value, None) if isinstance(value, str) else ("", value)


def _vec_args(emb: np.ndarray, dtype: str) -> tuple[str | None, str | None, bytes | None]:
    """(vec, hvec, qvec) column values of ``emb`` stored in ``dtype``."""
    blob = encode(emb, dtype)  # checks float16's range like SQLite does
    if dtype == "float32":
        return _vec_text(np.asarray(emb, dtype=np.float32)), None, None
    if dtype == "float16":
        return None, _vec_text(decode(blob, "float16")), None
    return None, None, blob


def _no_nul(*texts: Any) -> None:
    if any(isinstance(t, str) and "\x00" in t for t in texts):
        raise InvalidInput("text contains a NUL character (\\x00), which PostgreSQL cannot store")


def _trust_args(entry: Entry) -> tuple[Any, ...]:
    """The values of :data:`~memcurator.store.rowlogic.TRUST_COLS` for ``entry``.

    Raises
    ------
    InvalidInput
        A value with a NUL character (PostgreSQL's text cannot hold one).
    """
    vals = trust_values(entry.trust)
    _no_nul(*vals)
    return vals


class _TxState(threading.local):
    conn: Any = None
    infos: dict[str, NamespaceInfo]
    store_wide = False
    locked: set[str]
    touched: set[str]
    retrained = False


class PostgresStore(CodecCache, DecisionLogReads):
    """Entries, namespaces and the decision log in one PostgreSQL database (pgvector).

    Parameters
    ----------
    url : str
        ``postgresql://`` or ``postgres://`` connection URL (libpq syntax; ``?options=...``
        may set a ``search_path`` to keep the store in a schema of its own).
    timeout_s : float, default 30.0
        How long to wait for a connection from the pool or a lock held by another writer
        (``lock_timeout``) before :class:`StoreError`.
    clock : callable, default time.time
        Wall clock for decision timestamps (seconds since the epoch).
    pool_size : int, default 4
        Most connections this handle holds.
    readonly : bool, default False
        No migration; writes raise :class:`StoreError`.

    Raises
    ------
    MissingExtra
        psycopg / psycopg_pool not installed.
    StoreError
        The server cannot be reached within ``timeout_s``, the schema is newer than this
        memcurator's, the ``vector`` extension cannot be created, or (``readonly``) the
        database holds no memcurator store.
    """

    def __init__(
        self,
        url: str,
        *,
        timeout_s: float = 30.0,
        clock: Callable[[], float] = time.time,
        pool_size: int = 4,
        readonly: bool = False,
        compress_text: bool = False,
        text_dict: bytes | None = None,
    ):
        psycopg, psycopg_pool = _psycopg()
        #: new namespaces store their text zstd-compressed (:mod:`.compression`)
        self.compress_text = bool(compress_text)
        #: a dictionary new compressing namespaces start with (else trained at AUTO_TRAIN)
        self.text_dict = None if text_dict is None else bytes(text_dict)
        self._codecs: dict[str, tuple[Any, NamespaceCodec]] = {}
        self._inserts: dict[str, int] = {}
        self._has_codec = True
        self._pg = psycopg
        self._pgpool = psycopg_pool
        self.url = url
        self.path = redact(url)
        self.timeout_s = float(timeout_s)
        self.clock = clock
        self.readonly = readonly
        self._tx = _TxState()
        self._events = itertools.count(1)
        self._event = 0  # local rollbacks and commits (part of the change token)
        self._event_lock = threading.Lock()
        self._closed = False
        self._hnsw: set[str] = set()  # namespaces whose HNSW index this handle ensured
        self._erase: set[str] = set()  # namespaces deleted from since the last secure_erase
        self._wstats: dict[str, tuple[float, tuple[dict[str, float], float, float]]] = {}
        #: what the last :meth:`secure_erase` found (why it returned False, if it did)
        self.erase_report = ""
        lock_ms = int(self.timeout_s * 1000)
        self._pool = open_pool(
            url,
            where=self.path,
            timeout_s=self.timeout_s,
            pool_size=pool_size,
            name="memcurator",
            conn_kwargs={
                "autocommit": True,
                # custom plans only: a generic plan of a query on the partitioned entries
                # table locks every namespace's partition, so it would wait behind another
                # namespace's VACUUM FULL; a custom plan locks the one it reads
                "options": f"-c lock_timeout={lock_ms} -c plan_cache_mode=force_custom_plan",
            },
            hint="; is the server running and the URL right?",
        )
        with self._conn() as c:
            if readonly:
                v = self._run(lambda: current_version(c))
                if v == 0:
                    self.close()
                    raise StoreError(f"no memcurator store at {self.path}")
                self._has_codec = v >= 7
            else:
                self._run(lambda: migrate(c))

    # ------------------------------------------------------------------ plumbing
    def _lock_message(self) -> str:
        """Who holds the locks a writer waits for, asked on a connection of its own (the
        waiting one is in an aborted transaction); best effort, a few seconds at most."""
        from memcurator.store.pgerrors import lock_holders

        try:
            with self._pg.connect(self.url, autocommit=True, connect_timeout=2) as c:
                c.execute("SET statement_timeout = 2000")
                held = lock_holders(c)
        except self._pg.Error as e:
            return f"(could not ask who held it: {str(e).strip()})"
        if not held:
            return "(no session held one when asked right after: it was released meanwhile)"
        return "held by " + "; ".join(held)

    def _run(self, fn: Callable[[], Any]) -> Any:
        """Call ``fn``; a psycopg error becomes memcurator's (no raw driver error escapes)."""
        pg = self._pg
        try:
            return fn()
        except pg.errors.LockNotAvailable as e:
            raise StoreError(
                f"store {self.path}: waited more than {self.timeout_s:g} s (timeout_s) for a "
                f"lock, {self._lock_message()}"
            ) from e
        except pg.OperationalError as e:
            raise StoreError(
                f"lost the connection to PostgreSQL at {self.path} ({str(e).strip()}); the "
                "operation did not complete and its transaction rolled back; the next call "
                "reconnects"
            ) from e
        except pg.errors.UndefinedFile as e:
            raise StoreError(f"PostgreSQL at {self.path}: {e} (is pgvector installed?)") from e
        except (pg.DataError, pg.IntegrityError) as e:
            raise InvalidInput(f"PostgreSQL refused the value: {str(e).strip()}") from e
        except pg.Error as e:
            raise StoreError(f"PostgreSQL error on {self.path}: {str(e).strip()}") from e

    @contextmanager
    def _conn(self) -> Iterator[Any]:
        """This thread's transaction connection, else one borrowed from the pool."""
        if self._closed:
            raise StoreError(f"store {self.path} is closed")
        if self._tx.conn is not None:
            yield self._tx.conn
            return
        try:
            with self._pool.connection() as c:
                yield c
        except self._pgpool.PoolTimeout as e:
            raise StoreError(
                f"no connection to PostgreSQL at {self.path} within {self.timeout_s:g} s "
                "(server down, or every pooled connection busy)"
            ) from e
        except self._pg.OperationalError as e:
            raise StoreError(
                f"lost the connection to PostgreSQL at {self.path} ({str(e).strip()}); the next "
                "call reconnects"
            ) from e

    def _q(self, sql: str, args: Any = None) -> list[tuple[Any, ...]]:
        """Rows of one statement (on this thread's transaction if one is open)."""
        with self._conn() as c:
            return self._run(lambda: c.execute(sql, args).fetchall())

    def _one(self, sql: str, args: Any = None) -> tuple[Any, ...] | None:
        rows = self._q(sql, args)
        return rows[0] if rows else None

    def _x(self, sql: str, args: Any = None) -> int:
        """Execute one statement inside the current transaction; its row count."""
        c = self._tx.conn
        return int(self._run(lambda: c.execute(sql, args).rowcount))

    def _write(self, namespace: str) -> None:
        """Inside a transaction: lock ``namespace`` (once) and mark it changed."""
        self._lock_ns(namespace)
        self._tx.touched.add(namespace)

    def _lock_ns(self, namespace: str) -> None:
        """Inside a transaction: take ``namespace``'s lock (once; none under the store-wide
        one)."""
        tx = self._tx
        if not tx.store_wide and namespace not in tx.locked:
            c = tx.conn
            self._run(
                lambda: c.execute(
                    "SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (LOCK_NAMESPACE, namespace)
                )
            )
            tx.locked.add(namespace)

    def _bump_event(self) -> int:
        with self._event_lock:
            self._event = next(self._events)
            return self._event

    @contextmanager
    def _writing(self, namespace: str) -> Iterator[None]:
        """A transaction (joined if one is open) that writes ``namespace``."""
        with self.transaction(namespace=namespace):
            self._write(namespace)
            yield

    @contextmanager
    def transaction(self, namespace: str | None = None) -> Iterator[None]:
        """One write transaction; nested calls (same thread) join the outer one.

        Parameters
        ----------
        namespace : str, optional
            The namespace it writes: its lock is taken first, so everything read inside sees
            every earlier commit to it and no other process writes it until this commits.
            None takes the store-wide lock instead (every namespace waits).

        Raises
        ------
        StoreError
            Read-only or closed store; a lock not granted within ``timeout_s``; the
            connection lost (the transaction rolled back; the outcome of a commit cut off
            mid-way is the server's).
        """
        tx = self._tx
        if tx.conn is not None:
            if namespace is not None:
                self._lock_ns(namespace)
            yield
            return
        if self.readonly:
            raise StoreError(f"store {self.path} is open read-only")
        from psycopg import sql

        with self._conn() as c:
            tx.conn, tx.locked, tx.touched, tx.infos = c, set(), set(), {}
            tx.store_wide = namespace is None
            ok = False
            try:
                # one round trip: begin, then the store-wide lock (exclusive without a
                # namespace, shared with one) and the namespace's lock
                if namespace is None:
                    begin = sql.SQL(
                        "BEGIN ISOLATION LEVEL READ COMMITTED; SELECT pg_advisory_xact_lock({}, 0)"
                    ).format(sql.Literal(LOCK_STORE))
                else:
                    begin = sql.SQL(
                        "BEGIN ISOLATION LEVEL READ COMMITTED; "
                        "SELECT pg_advisory_xact_lock_shared({}, 0); "
                        "SELECT pg_advisory_xact_lock({}, hashtext({}))"
                    ).format(
                        sql.Literal(LOCK_STORE), sql.Literal(LOCK_NAMESPACE), sql.Literal(namespace)
                    )
                    tx.locked.add(namespace)
                self._run(lambda: c.execute(begin))
                yield
                # bump the counters of the namespaces written and read the token this commit
                # leaves (the CTE's rows are not visible to its SELECT: add one per bump)
                total = self._run(
                    lambda: c.execute(
                        "WITH b AS (INSERT INTO mc_changes(namespace, v) "
                        "SELECT unnest(%s::text[]), 1 ON CONFLICT (namespace) "
                        "DO UPDATE SET v = mc_changes.v + 1 RETURNING 1) "
                        "SELECT COALESCE(sum(v), 0) + (SELECT count(*) FROM b) FROM mc_changes",
                        (sorted(tx.touched),),
                    ).fetchone()[0]
                )
                self._run(lambda: c.execute("COMMIT"))
                ok = True
                tx.own = (int(total), self._bump_event() if tx.touched else self._event)
                if tx.retrained:  # rows this handle did not write changed: it catches up
                    tx.own, tx.retrained = (-1, -1), False
            finally:
                tx.conn = None
                if not ok:
                    tx.retrained = False
                    try:
                        c.execute("ROLLBACK")
                    except self._pg.Error:
                        pass  # a broken connection: the pool discards it
                    self._bump_event()  # what handles cached from inside it is void

    def change_token(self) -> tuple[int, int]:
        """``(sum of mc_changes counters, local commits and rollbacks)``: changes when any
        process commits a change to any namespace, and on this handle's rollbacks."""
        row = self._one("SELECT COALESCE(sum(v), 0) FROM mc_changes")
        assert row is not None
        return (int(row[0]), self._event)

    def committed_token(self) -> tuple[int, int]:
        """The change token as this thread's last commit left it (what :meth:`change_token`
        returns unless another connection committed since); see
        :meth:`memcurator.store.base.Store.committed_token`."""
        own = getattr(self._tx, "own", None)
        return own if own is not None else self.change_token()

    # ------------------------------------------------------------------ change feed
    def change_seq(self, namespace: str) -> int:
        """``namespace``'s change sequence number (:meth:`Store.change_seq`): its
        ``mc_changes`` counter, bumped once by every transaction that wrote it."""
        row = self._one("SELECT v FROM mc_changes WHERE namespace=%s", (namespace,))
        return 0 if row is None else int(row[0])

    def changes_since(self, namespace: str, since: int) -> Changes | None:
        """Ids of ``namespace``'s entries changed after ``since`` (:meth:`Store.changes_since`);
        one statement, so the number and the ids are of one snapshot."""
        row = self._one(
            "SELECT COALESCE(c.v, 0), COALESCE(c.floor, 0), ARRAY(SELECT entry_id FROM mc_feed "
            "WHERE namespace=%s AND seq>%s ORDER BY seq) FROM (SELECT 1) one "
            "LEFT JOIN mc_changes c ON c.namespace=%s",
            (namespace, int(since), namespace),
        )
        assert row is not None
        seq, floor = int(row[0]), int(row[1])
        if since < floor or since > seq:
            return None
        return Changes(seq, list(row[2]))

    def trim_changes(self, namespace: str, *, keep: int = FEED_HORIZON) -> int:
        """Drop feed rows of deleted entries older than the last ``keep`` changes
        (:meth:`Store.trim_changes`)."""
        with self._writing(namespace):
            cut = self.change_seq(namespace) - max(0, int(keep))
            if cut <= 0:
                return 0
            n = self._x(
                "DELETE FROM mc_feed f WHERE f.namespace=%s AND f.seq<=%s AND NOT EXISTS "
                "(SELECT 1 FROM entries e WHERE e.namespace=f.namespace AND e.id=f.entry_id)",
                (namespace, cut),
            )
            self._x(
                "UPDATE mc_changes SET floor=GREATEST(floor, %s) WHERE namespace=%s",
                (cut, namespace),
            )
        return n

    def schema_version(self) -> int:
        with self._conn() as c:
            return int(self._run(lambda: current_version(c)))

    def secure_erase(self) -> bool:
        """Make deleted text leave the database's files; True when it could guarantee that.

        ``DELETE`` leaves the row's bytes in its heap page (a dead tuple), plain ``VACUUM``
        marks the space reusable without zeroing it, and the WAL keeps the inserted row until
        its segment is removed. So this runs ``VACUUM FULL`` of the partitions of the
        namespaces this handle deleted from (schema v4: one table per namespace, so no other
        namespace is locked; every partition in turn when it recorded none): a new copy of
        the table, its TOAST and its indexes without dead rows; the old files are unlinked at
        the next checkpoint; ``ANALYZE entries`` and ``VACUUM FULL pg_statistic`` (the column
        statistics hold sampled words of the full-text column, schema v2), ``pg_switch_wal()``
        and ``CHECKPOINT`` (WAL segments before it are
        removed). The guarantee needs ``wal_recycle=off`` (otherwise old segments are renamed
        for reuse with their contents), no WAL archiving, no replication slot and no standby
        (copies elsewhere), and the privileges to run these commands: when any is
        missing it still vacuums, returns False and says why in :attr:`erase_report`.
        False too inside a transaction or when another session's lock outlasted
        ``timeout_s``. Freed disk blocks are not overwritten (a filesystem matter: use
        encrypted storage for that). ``docs/storage.md`` has the details.
        """
        if self._tx.conn is not None:
            self.erase_report = "inside a transaction"
            return False
        why: list[str] = []
        with self._conn() as c:
            try:
                cfg = dict(
                    c.execute(
                        "SELECT name, setting FROM pg_settings WHERE name IN "
                        "('wal_recycle', 'archive_mode')"
                    ).fetchall()
                )
                if cfg.get("wal_recycle") != "off":
                    why.append("wal_recycle is on (old WAL segments are reused, not removed)")
                if cfg.get("archive_mode", "off") != "off":
                    why.append("WAL archiving is on (archived segments hold the text)")
                slots = c.execute("SELECT count(*) FROM pg_replication_slots").fetchone()[0]
                senders = c.execute("SELECT count(*) FROM pg_stat_replication").fetchone()[0]
                if slots or senders:
                    why.append("a replication slot or standby holds or received the WAL")
                # only the partitions of namespaces this handle deleted from (and the default
                # one): each rewrite locks its own namespace's table, no other tenant's
                from psycopg import sql

                erase, self._erase = sorted(self._erase), set()
                parts = [
                    t
                    for t in [*map(partition_name, erase), "entries_default"]
                    if erase and c.execute("SELECT to_regclass(%s)", (t,)).fetchone()[0]
                ]
                for t in parts:
                    c.execute(sql.SQL("VACUUM FULL {}").format(sql.Identifier(t)))
                    c.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(t)))
                if not parts:  # nothing known: every partition, one after another
                    c.execute("VACUUM FULL entries")
                # ANALYZE keeps sampled values in pg_statistic (rtsv's common words, schema
                # v2): gather them again from the rows left (the erased partitions above;
                # the parent's inherited sample only where someone gathered one: autovacuum
                # never does, and it reads every partition), then rewrite the catalog
                parent = c.execute(
                    "SELECT 1 FROM pg_stats WHERE tablename = 'entries' "
                    "AND schemaname = current_schema() LIMIT 1"
                ).fetchone()
                if not parts or parent:
                    c.execute("ANALYZE entries")
                c.execute("VACUUM FULL pg_statistic")
                self._wstats.clear()
                c.execute("CHECKPOINT")
                c.execute("SELECT pg_switch_wal()")
                c.execute("CHECKPOINT")
            except self._pg.errors.InsufficientPrivilege as e:
                why.append(f"not permitted: {str(e).strip()}")
            except self._pg.errors.LockNotAvailable:
                why.append(f"another session held the entries table past {self.timeout_s:g} s")
            except self._pg.OperationalError as e:
                raise StoreError(
                    f"lost the connection to PostgreSQL at {self.path} during secure_erase "
                    f"({str(e).strip()})"
                ) from e
        self.erase_report = "; ".join(why) if why else "erased"
        return not why

    def close(self) -> None:
        """Close the pool; any later call raises :class:`StoreError`."""
        if not self._closed:
            self._closed = True
            self._pool.close()

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
        """Create ``name`` if absent; if present, check that its embedder and dimension match
        (:meth:`memcurator.store.sqlite.SQLiteStore.create_namespace`).

        Raises
        ------
        InvalidInput, DimensionMismatch
        """
        args = namespace_args(name, dim, max_bytes, vector_dtype)
        _no_nul(name, embedder)
        with self.transaction(namespace=name):  # changed (token moves) only if it writes
            row = self._one(
                "SELECT embedder, dim, vector_dtype FROM namespaces WHERE name=%s", (name,)
            )
            if row is None:
                # new namespaces one at a time: each holds its row lock on ``namespaces`` while
                # its partition needs ACCESS EXCLUSIVE on ``entries`` (and the foreign key
                # SHARE ROW EXCLUSIVE on ``namespaces``), so two creators deadlocked
                self._run(
                    lambda: self._tx.conn.execute(
                        "SELECT pg_advisory_xact_lock(%s, 0)", (LOCK_CREATE,)
                    )
                )
                row = self._one(
                    "SELECT embedder, dim, vector_dtype FROM namespaces WHERE name=%s", (name,)
                )
            if row is None:
                self._write(name)
                self._x(
                    "INSERT INTO namespaces(name, embedder, dim, max_bytes, created_at, "
                    "vector_dtype) VALUES (%s,%s,%s,%s,%s,%s)",
                    (name, embedder, int(dim), args.max_bytes, self.clock(), args.dtype),
                )
                self._partition(name)
                self._tx.infos.clear()
                if self.compress_text:
                    self.set_text_codec(name, "zstd")
                    self._seed_dict(name)
                return
            check_reopen(name, row, embedder, dim, args)
            if not args.keep_budget:
                self._write(name)
                self._x("UPDATE namespaces SET max_bytes=%s WHERE name=%s", (args.max_bytes, name))
                self._tx.infos.clear()

    def _partition(self, name: str) -> None:
        """Inside a transaction: the table of ``name``'s entries (schema v4), if absent. Takes
        the entries table's ACCESS EXCLUSIVE lock for a moment (new namespaces only)."""
        from psycopg import sql

        self._x(
            sql.SQL("CREATE TABLE IF NOT EXISTS {} PARTITION OF entries FOR VALUES IN ({})")
            .format(sql.Identifier(partition_name(name)), sql.Literal(name))
            .as_string(self._tx.conn)
        )

    def namespace(self, name: str) -> NamespaceInfo:
        """Raises :class:`NamespaceNotFound` if ``name`` does not exist.

        Inside a transaction that holds ``name``'s lock (or the store-wide one) the answer is
        kept until the transaction writes the namespaces table: no other writer can change
        it meanwhile.
        """
        tx = self._tx
        cacheable = tx.conn is not None and (tx.store_wide or name in tx.locked)
        if cacheable and name in tx.infos:
            return tx.infos[name]
        row = self._one(
            "SELECT name, embedder, dim, max_bytes, created_at, vector_dtype FROM namespaces "
            "WHERE name=%s",
            (name,),
        )
        if row is None:
            raise NamespaceNotFound(
                f"namespace {name!r} does not exist; known: {self.namespaces()}"
            )
        mb = None if row[3] is None else int(row[3])
        info = NamespaceInfo(row[0], row[1], int(row[2]), mb, float(row[4]), row[5])
        if cacheable:
            tx.infos[name] = info
        return info

    def namespaces(self) -> list[str]:
        return [r[0] for r in self._q("SELECT name FROM namespaces ORDER BY name")]

    def namespace_stats(self) -> list[NamespaceStats]:
        """Every namespace with its resident entries and bytes, budget and log length."""
        rows = self._q(
            "SELECT n.name, "
            "(SELECT COUNT(*) FROM entries e WHERE e.namespace = n.name), "
            "(SELECT COALESCE(SUM(bytes), 0) FROM entries e WHERE e.namespace = n.name)"
            + (
                " + (SELECT COALESCE(SUM(length(dict)), 0) FROM mc_text_dicts t WHERE "
                "t.namespace = n.name)"
                if self._has_codec
                else ""
            )
            + ", n.max_bytes, n.embedder, n.dim, "
            "(SELECT COUNT(*) FROM decisions d WHERE d.namespace = n.name), "
            "(SELECT policy FROM policy_state p WHERE p.namespace = n.name), "
            "n.vector_dtype FROM namespaces n ORDER BY n.name"
        )
        return [
            NamespaceStats(
                r[0],
                int(r[1]),
                int(r[2]),
                None if r[3] is None else int(r[3]),
                r[4],
                int(r[5]),
                int(r[6]),
                r[7],
                r[8],
            )
            for r in rows
        ]

    def delete_namespace(self, name: str, *, reason: str = "namespace deleted") -> int:
        """Delete a namespace, its entries and policy state; a ``forget`` tombstone per entry
        and one for the namespace stay in the log (as on SQLite). Returns the bytes freed.

        Raises
        ------
        NamespaceNotFound
        """
        with self._writing(name):
            self.namespace(name)
            rows = self._q("SELECT id, bytes FROM entries WHERE namespace=%s ORDER BY pos", (name,))
            st = self._one("SELECT step FROM policy_state WHERE namespace=%s", (name,))
            step = int(st[0]) if st else 0
            freed = self._tombstones(name, rows, step, reason)
            self._x("DELETE FROM entries WHERE namespace=%s", (name,))
            self._erase.add(name)
            self._x("UPDATE shared_out SET forgotten=true WHERE namespace=%s", (name,))
            self._x("DELETE FROM policy_state WHERE namespace=%s", (name,))
            freed += self._drop_dict(name)
            self._x("DELETE FROM namespaces WHERE name=%s", (name,))
            # the feed of a deleted namespace reaches back nowhere: its handles reload (v + 1:
            # the number this transaction's commit leaves)
            self._x("DELETE FROM mc_feed WHERE namespace=%s", (name,))
            self._x(
                "INSERT INTO mc_changes(namespace, v, floor) VALUES (%s, 0, 1) ON CONFLICT "
                "(namespace) DO UPDATE SET floor = mc_changes.v + 1",
                (name,),
            )
            self._tx.infos.clear()
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
        _no_nul(entry.id, entry.text, entry.origin_detail)
        vec, hvec, qvec = _vec_args(emb, info.vector_dtype)
        args: tuple[Any, ...] = (
            entry.id,
            entry.namespace,
            entry.kind,
            int(entry.bytes),
            int(entry.raw_bytes),
            vec,
            hvec,
            qvec,
            info.vector_dtype,
            entry.origin,
            entry.origin_detail,
            entry.reinforcement,
            entry.uses,
            entry.successes,
            entry.failures,
            entry.created_step,
            entry.last_used_step,
        )
        mj = meta_json(entry)
        with self._writing(entry.namespace):
            # text and meta as stored: one zstd frame in a compressing namespace (schema v8)
            value, meta = stored_entry(self._write_codec(entry.namespace), entry.text, mj)
            text, ztext = _text_args(value)
            args = (*args[:3], text, *args[3:], meta, finite_stats(entry.stats), ztext,
                    entry.text, entry.text, mj, *_trust_args(entry))  # fmt: skip
            if self._one(
                "SELECT 1 FROM entries WHERE namespace=%s AND id=%s", (entry.namespace, entry.id)
            ):
                raise InvalidInput(f"entry id {entry.id!r} already exists")
            self._x(
                "INSERT INTO entries(id, namespace, kind, text, bytes, raw_bytes, vec, hvec, "
                "qvec, vec_dtype, origin, origin_detail, reinforcement, uses, successes, "
                "failures, created_step, last_used_step, meta, stats, ztext, rtsv, metab, "
                f"{TRUST_COLS}) VALUES (%s,%s,%s,%s,%s,%s,%s::vector,%s::halfvec,%s,%s,%s,%s,%s,"
                "%s,%s,%s,%s,%s,%s,%s,%s,"
                + RTSV_OF_PARAM
                + ",%s::jsonb"
                + ",%s" * N_TRUST_COLS
                + ")",
                args,
            )
            self._auto_train(entry.namespace)

    def get(self, namespace: str, entry_id: str) -> Entry:
        """Raises :class:`EntryNotFound` for an unknown id (never returns None)."""
        row = self._one(
            f"SELECT {_ENTRY_COLS} FROM entries WHERE namespace=%s AND id=%s",
            (namespace, entry_id),
        )
        if row is None:
            self.namespace(namespace)
            raise EntryNotFound(f"no entry {entry_id!r} in namespace {namespace!r}")
        return self._entry(row)

    def entries(self, namespace: str) -> list[Entry]:
        """All resident entries of ``namespace`` in insertion order (one statement: one
        snapshot, never half of another process's commit)."""
        rows = self._q(
            f"SELECT {_ENTRY_COLS} FROM entries WHERE namespace=%s ORDER BY pos", (namespace,)
        )
        if not rows:
            self.namespace(namespace)
        return [self._entry(r) for r in rows]

    def update(self, entry: Entry) -> None:
        """Write back an entry's mutable fields.

        Raises
        ------
        EntryNotFound, NamespaceNotFound, InvalidInput
        """
        _no_nul(entry.text)
        with self._writing(entry.namespace):
            dtype = self.namespace(entry.namespace).vector_dtype
            emb = np.asarray(entry.embedding, dtype=np.float32)
            vec, hvec, qvec = _vec_args(emb, dtype)
            mj = meta_json(entry)
            value, meta = stored_entry(self._write_codec(entry.namespace), entry.text, mj)
            text, ztext = _text_args(value)
            n = self._x(
                "UPDATE entries SET kind=%s, text=%s, bytes=%s, raw_bytes=%s, vec=%s::vector, "
                "hvec=%s::halfvec, qvec=%s, vec_dtype=%s, reinforcement=%s, uses=%s, "
                "successes=%s, failures=%s, last_used_step=%s, meta=%s, stats=%s, ztext=%s, "
                "rtsv="
                + RTSV_OF_PARAM
                + ", metab=%s::jsonb, "
                + ", ".join(f"{c}=%s" for c in TRUST_COLS.split(", "))
                + " WHERE namespace=%s AND id=%s",
                (
                    entry.kind,
                    text,
                    int(entry.bytes),
                    int(entry.raw_bytes),
                    vec,
                    hvec,
                    qvec,
                    dtype,
                    *counts_of(entry),
                    meta,
                    finite_stats(entry.stats),
                    ztext,
                    entry.text,
                    entry.text,
                    mj,
                    *_trust_args(entry),
                    entry.namespace,
                    entry.id,
                ),
            )
            if n == 0:
                raise EntryNotFound(f"no entry {entry.id!r} in namespace {entry.namespace!r}")

    def delete(self, namespace: str, entry_id: str) -> int:
        """Hard-delete one entry; its freed bytes. Gone from every read path at commit; from
        the database files after :meth:`secure_erase`.

        Raises
        ------
        EntryNotFound
        """
        with self._writing(namespace):
            row = self._one(
                "DELETE FROM entries WHERE namespace=%s AND id=%s RETURNING bytes",
                (namespace, entry_id),
            )
            if row is None:
                raise EntryNotFound(f"no entry {entry_id!r} in namespace {namespace!r}")
            self._drop_trained_dict(namespace)
        self._erase.add(namespace)
        return int(row[0])

    def known_ids(self, namespace: str, ids: list[str]) -> set[str]:
        """Those of ``ids`` that are or were entries of ``namespace`` (resident, or in its
        decision log); every id once the log was compacted."""
        want = list(dict.fromkeys(str(i) for i in ids))
        if not want:
            return set()
        if self._one(
            "SELECT 1 FROM decisions WHERE namespace=%s AND action='compact' LIMIT 1", (namespace,)
        ):
            return set(want)
        rows = self._q(
            "SELECT id FROM entries WHERE namespace=%s AND id = ANY(%s) UNION "
            "SELECT entry_id FROM decisions WHERE namespace=%s AND entry_id = ANY(%s)",
            (namespace, want, namespace, want),
        )
        return {str(r[0]) for r in rows}

    def vector_rows(
        self,
        namespace: str,
        *,
        after: int = 0,
        limit: int | None = None,
        other_than: tuple[str, int] | None = None,
    ) -> list[VectorRow]:
        """Entries after position ``after`` in insertion order, at most ``limit``; with
        ``other_than=(dtype, nbytes)`` only those stored in another precision or size."""
        vbytes = (
            "CASE vec_dtype WHEN 'float32' THEN 4 * vector_dims(vec) "
            "WHEN 'float16' THEN 2 * vector_dims(hvec) ELSE length(qvec) END"
        )
        q = (
            f"SELECT pos, id, text, bytes, {vbytes}, ztext FROM entries "
            "WHERE namespace=%s AND pos>%s"
        )
        args: list[Any] = [namespace, int(after)]
        if other_than is not None:
            q += f" AND (vec_dtype != %s OR {vbytes} != %s)"
            args += [str(other_than[0]), int(other_than[1])]
        q += " ORDER BY pos"
        if limit is not None:
            q += " LIMIT %s"
            args.append(int(limit))
        rows = self._q(q, args)
        codec = self._read_codec(namespace) if any(r[5] is not None for r in rows) else None
        return [
            VectorRow(
                int(r[0]),
                str(r[1]),
                str(r[2]) if r[5] is None else read_text(codec, r[5]),
                int(r[3]),
                int(r[4]),
            )
            for r in rows
        ]

    def used_bytes(self, namespace: str) -> int:
        """Resident bytes ``sum(b(m))`` of the namespace."""
        self.namespace(namespace)
        row = self._one(
            "SELECT COALESCE(SUM(bytes), 0) FROM entries WHERE namespace=%s", (namespace,)
        )
        return (int(row[0]) if row else 0) + self.fixed_bytes(namespace)

    def count(self, namespace: str) -> int:
        """Number of resident entries. Raises :class:`NamespaceNotFound`."""
        self.namespace(namespace)
        row = self._one("SELECT COUNT(*) FROM entries WHERE namespace=%s", (namespace,))
        return int(row[0]) if row else 0

    # ------------------------------------------------------------------ policy state
    def save_state(self, namespace: str, policy: str, step: int, state: dict[str, Any]) -> None:
        """Persist a policy's learned state (JSON) and the logical step, in one row."""
        with self._writing(namespace):
            self._x(
                "INSERT INTO policy_state(namespace, policy, step, state) VALUES (%s,%s,%s,%s) "
                "ON CONFLICT (namespace) DO UPDATE SET policy=excluded.policy, "
                "step=excluded.step, state=excluded.state",
                (namespace, policy, int(step), json.dumps(state)),
            )

    def load_state(self, namespace: str) -> tuple[str, int, dict[str, Any]] | None:
        """(policy name, step, state) saved for ``namespace``, or None."""
        row = self._one(
            "SELECT policy, step, state FROM policy_state WHERE namespace=%s", (namespace,)
        )
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
        """Append one decision (NaN ``score`` is stored as NULL; ``at`` defaults to now)."""
        _no_nul(reason, entry_id)
        with self._writing(namespace):
            self._x(
                "INSERT INTO decisions(namespace, step, action, entry_id, score, reason, policy, "
                "bytes, at) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s)",
                decision_values(
                    namespace, step, action, entry_id, score, reason, policy, nbytes, at, self.clock
                ),
            )

    def last_seq(self) -> int:
        """Sequence number of the newest decision in the whole store (0 when none)."""
        row = self._one("SELECT COALESCE(MAX(seq), 0) FROM decisions")
        return int(row[0]) if row else 0

    def _decision_rows(self, namespace: str, since: int, action: str | None) -> list[Decision]:
        q = f"SELECT {DECISION_COLS} FROM decisions WHERE namespace=%s AND seq>%s"
        args: list[Any] = [namespace, int(since)]
        if action is not None:
            q += " AND action=%s"
            args.append(action)
        rows = self._q(q + " ORDER BY seq", args)
        return [decision_from_row(r) for r in rows]

    def decision_count(self, namespace: str) -> int:
        """Rows of ``namespace``'s decision log (summary rows included)."""
        row = self._one("SELECT COUNT(*) FROM decisions WHERE namespace=%s", (namespace,))
        return int(row[0]) if row else 0

    def compact_log(
        self,
        namespace: str,
        *,
        keep: int | None = None,
        max_age_s: float | None = None,
        step: int = 0,
    ) -> int:
        """Apply a retention to ``namespace``'s decision log; returns the rows dropped
        (:meth:`memcurator.store.sqlite.SQLiteStore.compact_log`)."""
        if keep is not None and (isinstance(keep, bool) or int(keep) < 1):
            raise InvalidInput(f"keep must be a positive integer or None, got {keep!r}")
        with self._writing(namespace):
            self.namespace(namespace)
            cut = 0
            if keep is not None:
                row = self._one(
                    "SELECT seq FROM decisions WHERE namespace=%s ORDER BY seq DESC LIMIT 1 "
                    "OFFSET %s",
                    (namespace, int(keep)),
                )
                cut = int(row[0]) if row else 0
            cond = "namespace=%s AND (seq<=%s"
            args: list[Any] = [namespace, cut]
            if max_age_s is not None:
                cond += " OR at<%s"
                args.append(self.clock() - float(max_age_s))
            cond += ")"
            groups = self._q(
                f"SELECT action, COUNT(*), COALESCE(SUM(bytes),0), MIN(seq), MAX(seq) "
                f"FROM decisions WHERE {cond} AND action != 'compact' GROUP BY action",
                args,
            )
            n = sum(int(g[1]) for g in groups)
            if n == 0:
                return 0
            for action, cnt, nb, lo, hi in groups:
                self._x(
                    "INSERT INTO log_dropped(namespace, action, n, bytes, first_seq, last_seq) "
                    "VALUES (%s,%s,%s,%s,%s,%s) ON CONFLICT (namespace, action) DO UPDATE SET "
                    "n=log_dropped.n+excluded.n, bytes=log_dropped.bytes+excluded.bytes, "
                    "first_seq=LEAST(log_dropped.first_seq, excluded.first_seq), "
                    "last_seq=GREATEST(log_dropped.last_seq, excluded.last_seq)",
                    (namespace, action, int(cnt), int(nb), int(lo), int(hi)),
                )
            tot = self._q(
                "SELECT action, n, bytes, first_seq, last_seq FROM log_dropped "
                "WHERE namespace=%s ORDER BY action",
                (namespace,),
            )
            reason, nbytes = compaction_note(tot, n)
            self._x("SELECT set_config('memcurator.compacting', 'on', true)")
            try:
                self._x(
                    f"DELETE FROM decisions WHERE ({cond}) OR (namespace=%s AND action='compact')",
                    [*args, namespace],
                )
            finally:
                self._x("SELECT set_config('memcurator.compacting', 'off', true)")
            self.log(
                namespace, step=step, action="compact", entry_id="", reason=reason, nbytes=nbytes
            )
            self.trim_changes(namespace)  # the feed's tombstones are bounded with the log
        return n

    # ------------------------------------------------------------------ peers
    def mark_shared(self, namespace: str, entry_id: str, peer: str) -> None:
        """Remember that ``entry_id`` was sent to ``peer`` (for forget notices)."""
        with self._writing(namespace):
            self._x(
                "INSERT INTO shared_out(namespace, entry_id, peer) VALUES (%s,%s,%s) "
                "ON CONFLICT DO NOTHING",
                (namespace, entry_id, peer),
            )

    def mark_forgotten(self, namespace: str, entry_id: str) -> int:
        """Flag every copy of ``entry_id`` sent to a peer as owed a forget notice."""
        with self._writing(namespace):
            return self._x(
                "UPDATE shared_out SET forgotten=true WHERE namespace=%s AND entry_id=%s",
                (namespace, entry_id),
            )

    def pending_notices(self, namespace: str, peer: str) -> list[str]:
        """Ids sent to ``peer`` (or shared without a peer name) and forgotten since."""
        rows = self._q(
            "SELECT entry_id FROM shared_out WHERE namespace=%s AND forgotten "
            "AND peer IN (%s, '') ORDER BY entry_id",
            (namespace, peer),
        )
        return [str(r[0]) for r in rows]

    def notice_sent(self, namespace: str, entry_id: str, peer: str) -> None:
        """A forget notice for ``entry_id`` went to ``peer``: nothing more is owed there."""
        with self._writing(namespace):
            self._x(
                "DELETE FROM shared_out WHERE namespace=%s AND entry_id=%s AND peer IN (%s, '')",
                (namespace, entry_id, peer),
            )

    # ------------------------------------------------------------------ re-embedding
    def set_embedder(
        self, namespace: str, embedder: str, dim: int, vector_dtype: str | None = None
    ) -> None:
        """Record that every entry of ``namespace`` is now embedded by ``embedder`` (dim)."""
        with self._writing(namespace):
            info = self.namespace(namespace)
            dtype = info.vector_dtype if vector_dtype is None else check_dtype(vector_dtype)
            self._x(
                "UPDATE namespaces SET embedder=%s, dim=%s, vector_dtype=%s WHERE name=%s",
                (embedder, int(dim), dtype, namespace),
            )
            self._tx.infos.clear()

    def set_embedding(
        self,
        namespace: str,
        entry_id: str,
        embedding: np.ndarray,
        nbytes: int,
        vector_dtype: str | None = None,
    ) -> None:
        """Replace one entry's embedding and stored bytes (re-embedding); no other field."""
        emb = np.asarray(embedding, dtype=np.float32)
        if not np.all(np.isfinite(emb)):
            raise InvalidInput("embedding contains NaN or infinite values")
        with self._writing(namespace):
            dtype = (
                self.namespace(namespace).vector_dtype
                if vector_dtype is None
                else check_dtype(vector_dtype)
            )
            vec, hvec, qvec = _vec_args(emb, dtype)
            n = self._x(
                "UPDATE entries SET vec=%s::vector, hvec=%s::halfvec, qvec=%s, vec_dtype=%s, "
                "bytes=%s WHERE namespace=%s AND id=%s",
                (vec, hvec, qvec, dtype, int(nbytes), namespace, entry_id),
            )
            if n == 0:
                raise EntryNotFound(f"no entry {entry_id!r} in namespace {namespace!r}")

    # ------------------------------------------------------------------ vector search
    def _vec_expr(self, namespace: str, codes: bool = False) -> tuple[str, str, str]:
        """(column expression, operator class, query cast) of ``namespace``'s vectors; with
        ``codes``, a binary namespace's sign bits as pgvector ``bit`` (Hamming distance)."""
        info = self.namespace(namespace)
        if info.vector_dtype == "float32":
            return f"(vec::vector({info.dim}))", "vector_cosine_ops", f"vector({info.dim})"
        if info.vector_dtype == "float16":
            return f"(hvec::halfvec({info.dim}))", "halfvec_cosine_ops", f"halfvec({info.dim})"
        if info.vector_dtype == "binary" and codes:
            return _bits_expr(info.dim), "bit_hamming_ops", f"bit({info.dim})"
        raise InvalidInput(
            f"namespace {namespace!r} stores {info.vector_dtype} vectors (bytea): no pgvector "
            "index; convert it with memcurator reembed --vector-dtype float16 or float32"
        )

    def ensure_hnsw(self, namespace: str, *, m: int = 16, ef_construction: int = 64) -> str:
        """Build (if absent) an HNSW index over ``namespace``'s vectors (cosine); its name.

        An expression index on the namespace's partition (schema v4; the column has no
        dimension, the index casts to the namespace's), built ``CONCURRENTLY`` when called
        outside a transaction: writers of every namespace go on while it builds. ``m``: links
        per node per layer (pgvector default 16; more raises recall and memory).
        ``ef_construction``: candidate list while building (default 64; more builds slower
        and better). Query-time breadth is ``ef_search`` of :meth:`nearest`. Not used by
        ``Memory.recall`` (which ranks its resident set in memory); for namespaces too large
        to hold in a process.

        Raises
        ------
        InvalidInput
            An int8 namespace (no pgvector type holds it).
        """
        from psycopg import sql

        expr, ops, _ = self._vec_expr(namespace, codes=True)
        dtype = self.namespace(namespace).vector_dtype
        name = "entries_hnsw_" + format(abs(hash_ns(namespace)), "x")
        # CONCURRENTLY (outside a transaction): the build takes SHARE UPDATE EXCLUSIVE, which
        # no write waits for, so other namespaces (and this one) keep writing while it runs;
        # a plain CREATE INDEX would hold SHARE on the whole table, stopping every writer
        concurrent = self._tx.conn is None
        ddl = sql.SQL(
            "CREATE INDEX " + ("CONCURRENTLY " if concurrent else "") + "IF NOT EXISTS {} ON "
            "{} USING hnsw (" + expr + " " + ops + ") "
            "WITH (m = {}, ef_construction = {}) WHERE vec_dtype = {}"
        ).format(
            sql.Identifier(name),
            sql.Identifier(partition_name(namespace)),
            sql.Literal(int(m)),
            sql.Literal(int(ef_construction)),
            sql.Literal(dtype),
        )
        with self._conn() as c:
            # a concurrent build cut off (lost connection, timeout) leaves an invalid index
            # that IF NOT EXISTS would keep: drop it and build again
            bad = self._run(
                lambda: c.execute(
                    "SELECT NOT i.indisvalid FROM pg_index i JOIN pg_class x ON x.oid = "
                    "i.indexrelid WHERE x.relname = %s",
                    (name,),
                ).fetchone()
            )
            if bad and bad[0]:
                drop = "DROP INDEX " + ("CONCURRENTLY " if concurrent else "") + "IF EXISTS {}"
                self._run(lambda: c.execute(sql.SQL(drop).format(sql.Identifier(name))))
            self._run(lambda: c.execute(ddl))
            if concurrent:  # the partition's row count, so the planner weighs the new index
                part = sql.SQL("ANALYZE {}").format(sql.Identifier(partition_name(namespace)))
                self._run(lambda: c.execute(part))
        return name

    def nearest(
        self,
        namespace: str,
        query: np.ndarray,
        k: int,
        *,
        where: str | None = None,
        params: tuple[Any, ...] = (),
        ef_search: int = 40,
        iterative: bool = True,
        index: bool | None = None,
    ) -> list[Nearest]:
        """The ``k`` entries of ``namespace`` nearest to ``query`` (cosine) that pass ``where``.

        Parameters
        ----------
        query : ndarray of shape (dim,)
        k : int
        where : str, optional
            A SQL condition over the ``entries`` columns with ``%s`` placeholders for
            ``params`` (e.g. ``"(meta::jsonb ->> 'user') = %s"``). Trusted SQL from the
            caller, never user text: the values go in ``params``.
        ef_search : int, default 40
            ``hnsw.ef_search``: candidates the index scan keeps (recall vs time).
        iterative : bool, default True
            ``hnsw.iterative_scan = relaxed_order`` (pgvector >= 0.8): the index scan goes on
            until ``k`` rows pass the filter. Without it pgvector filters the ``ef_search``
            candidates after the scan, so a filter passing 10% of the rows leaves about
            ``ef_search / 10`` results, fewer than ``k``.
        index : bool or None
            None: the planner chooses; True: avoid sequential scans (use the HNSW index of
            :meth:`ensure_hnsw`); False: exact search (no index scan).

        Returns
        -------
        list of Nearest
            Best first, at most ``k``.

        Raises
        ------
        InvalidInput
            ``k < 1``, a query of the wrong shape, an int8 namespace.
        """
        from psycopg import sql

        if isinstance(k, bool) or int(k) < 1:
            raise InvalidInput(f"k must be a positive integer, got {k!r}")
        expr, _, cast = self._vec_expr(namespace)
        dim = self.namespace(namespace).dim
        q = np.asarray(query, dtype=np.float32)
        if q.shape != (dim,) or not np.all(np.isfinite(q)):
            raise InvalidInput(f"query must be a finite vector of shape ({dim},), got {q.shape}")
        qtext = _vec_text(q if cast.startswith("vector") else q.astype(np.float16))
        cond = "" if where is None else f" AND ({where})"
        stmt = sql.SQL(
            # the namespace's own table (schema v4): a condition on the namespace would make
            # its (namespace, pos) index look as good as the HNSW one to the planner
            "SELECT id, 1 - (" + expr + " <=> %s::" + cast + ") FROM {} entries WHERE "
            "vec_dtype = {}" + cond + " ORDER BY " + expr + " <=> %s::" + cast + " LIMIT %s"
        ).format(
            sql.Identifier(partition_name(namespace)),
            sql.Literal(self.namespace(namespace).vector_dtype),
        )
        with self._conn() as c:

            def go() -> list[Any]:
                with c.transaction():
                    c.execute("SELECT set_config('hnsw.ef_search', %s, true)", (str(ef_search),))
                    if iterative:
                        c.execute("SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true)")
                    if index is True:
                        c.execute("SET LOCAL enable_seqscan = off")
                    elif index is False:
                        c.execute("SET LOCAL enable_indexscan = off")
                    args = (qtext, *params, qtext, int(k))
                    return c.execute(stmt, args, prepare=False).fetchall()

            rows = self._run(go)
        out = [Nearest(str(r[0]), float(r[1])) for r in rows]
        if iterative:  # relaxed order: results may be slightly out of order
            out.sort(key=lambda n: -n.cosine)
        return out

    # ------------------------------------------------------------------ in-database recall
    #: ``hnsw.ef_search`` of :meth:`search` (pgvector's default is 40; 100 measured
    #: recall@10 >= 0.95 against exact search, benchmarks/recall_scale.py).
    ef_search = 100
    #: Document frequency up to which a query word proposes candidates to the full-text leg,
    #: and the most rows it scores when no word is that rare (:meth:`search`).
    lexical_scan = 1000

    #: A binary namespace's dense leg: a Hamming short list of this many times ``k`` (the
    #: caller rescores it exactly: :func:`memcurator.lifecycle.store_recall.recall_in_store`).
    code_shortlist = 10

    def _eligible(
        self,
        user: str | None,
        meta: dict[str, Any] | None,
        min_score: float | None,
        expr: str,
        cast: str,
        qtext: str,
    ) -> tuple[str, list[Any]]:
        """SQL condition (and its parameters) of the rows a recall may return."""
        conds = [
            "probation IS NULL",  # trust probation (trust.provenance.injectable)
            "(scope_user IS NULL" + (" OR scope_user = %s)" if user is not None else ")"),
        ]
        args: list[Any] = [] if user is None else [str(user)]
        if meta:
            for key, v in meta.items():
                if not isinstance(key, str) or not (v is None or isinstance(v, str | int | float)):
                    raise InvalidInput(
                        f"meta filter {key!r}: {v!r}; only str keys with str, number, bool "
                        "or None values can be matched"
                    )
            conds.append("metab @> %s::jsonb")
            args.append(json.dumps(meta, sort_keys=True))
        if min_score is not None:
            conds.append(f"({expr} <=> %s::{cast}) <= %s")
            args += [qtext, 1.0 - float(min_score)]
        return " AND ".join(conds), args

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
        """Recall candidates found in the database: the ``k`` best eligible entries of a
        dense leg and of a full-text leg (:class:`~memcurator.store.base.SearchHits`).

        **Eligible**: not on trust probation (the ``probation`` column), not scoped to another
        user (``scope_user`` unset or ``user``), containing every ``meta`` pair (JSON
        equality of top-level values), cosine >= ``min_score``. The conditions are in the SQL,
        so each leg returns ``k`` hits whenever ``k`` eligible entries match it.

        **Dense leg**: cosine order through the namespace's HNSW index (built on first use,
        :meth:`ensure_hnsw`) with ``hnsw.ef_search`` = ``ef_search`` (default
        :attr:`ef_search`) and ``hnsw.iterative_scan = relaxed_order``: the scan goes on past
        ``ef_search`` candidates until ``k`` pass the filter (pgvector >= 0.8). It stops after
        ``hnsw.max_scan_tuples`` (default 20,000) visited rows; when that leaves fewer than
        ``k`` hits (a filter passing under ~0.05% of a large namespace) the leg is run again
        exactly (no index: a scan of the namespace), so a rare filter costs time, never
        results. ``exact``: exact search from the start (the reference of recall@10). Entries
        with a zero vector (no content) have no cosine and are never returned.

        **Full-text leg**: the ``'simple'`` full-text form of ``text`` (words lower-cased, no
        stemming) matched against each entry's recall text (``rtsv``, GIN index, schema v2).
        An entry scores the sum of the BM25 IDF ``ln(1 + (N - df_w + 0.5) / (df_w + 0.5))``
        over the query words ``w`` it holds (Robertson & Zaragoza 2009, Eq. 3.3; no
        term-frequency or length saturation), ``df_w`` and ``N`` estimated from the table's
        statistics (``pg_stats.most_common_elems`` of the last ANALYZE, table-wide, cached 60
        s; a word not listed is rarer than every listed one; before any ANALYZE every word
        weighs 1). So a rare exact term (an error code, a name) outranks common words as in
        BM25. Candidates: every eligible entry holding a query word with ``df_w <=``
        :attr:`lexical_scan` (small GIN posting lists); when every query word is commoner,
        entries holding all of them, at most :attr:`lexical_scan`. Bounded work per query at
        any size; an entry holding only common words can be missed by this leg (the dense
        leg still finds it).

        Parameters
        ----------
        namespace : str
        text : str
            The query's recall text (:func:`memcurator.retrieve.hybrid.recall_text`).
        query : ndarray of shape (dim,)
            Its embedding (unit norm).
        k : int
            Hits per leg.
        user, meta, min_score
            Eligibility (above).
        exact : bool, default False
        ef_search : int, optional

        Returns
        -------
        SearchHits
            ``dense`` (score: cosine) and ``lexical`` (score: capped-IDF sum), best first,
            ties by insertion position. A binary namespace's dense leg is the Hamming short
            list of its sign bits (``code_shortlist * k`` hits, score ``1 - 2 h / d`` for
            Hamming distance ``h``; ``min_score`` is not applied in SQL): the caller rescores
            it with exact vectors (:func:`~memcurator.lifecycle.store_recall.recall_in_store`
            with ``derive``).

        Raises
        ------
        InvalidInput
            ``k < 1``, a query of the wrong shape or not finite, an int8 namespace, a ``meta``
            value that is not a scalar.
        NamespaceNotFound
        """
        if isinstance(k, bool) or int(k) < 1:
            raise InvalidInput(f"k must be a positive integer, got {k!r}")
        stmt, dargs, limit, elig, eargs = self._dense_statement(
            namespace, query, int(k), user, meta, min_score
        )
        if not exact and namespace not in self._hnsw:
            self.ensure_hnsw(namespace)
            self._hnsw.add(namespace)
        ef = int(self.ef_search if ef_search is None else ef_search)
        with self._conn() as c:
            rows = self._run(lambda: self._dense_rows(c, stmt, dargs, ef, not exact))
            if not exact and len(rows) < limit:
                # the scan stopped early: exact
                rows = self._run(lambda: self._dense_rows(c, stmt, dargs, ef, False))
            words = self._run(
                lambda: c.execute(
                    "SELECT tsvector_to_array(to_tsvector('simple'::regconfig, %s))", (text,)
                ).fetchone()[0]
            )
            lex: list[Any] = []
            if words:
                lex = self._run(lambda: self._lexical(c, namespace, words, elig, eargs, int(k)))
        dense_hits = [Hit(int(r[0]), str(r[1]), float(r[2])) for r in rows]
        dense_hits = [h for h in dense_hits if math.isfinite(h.score)]
        # relaxed order: the index may return near-ties slightly out of order; ties by position
        dense_hits.sort(key=lambda h: (-h.score, h.pos))
        return SearchHits(dense_hits, [Hit(int(r[0]), str(r[1]), float(r[2])) for r in lex])

    def _dense_statement(
        self,
        namespace: str,
        query: np.ndarray,
        k: int,
        user: str | None,
        meta: dict[str, Any] | None,
        min_score: float | None,
    ) -> tuple[Any, tuple[Any, ...], int, str, list[Any]]:
        """:meth:`search`'s dense leg: ``(statement, its args, limit, eligibility SQL, its args)``.

        Raises
        ------
        InvalidInput
            A query of the wrong shape or not finite, an int8 namespace, a bad ``meta``.
        NamespaceNotFound
        """
        from psycopg import sql

        info = self.namespace(namespace)
        binary = info.vector_dtype == "binary"
        expr, _, cast = self._vec_expr(namespace, codes=binary)
        q = np.asarray(query, dtype=np.float32)
        if q.shape != (info.dim,) or not np.all(np.isfinite(q)):
            raise InvalidInput(
                f"query must be a finite vector of shape ({info.dim},), got {q.shape}"
            )
        if binary:  # sign bits by Hamming distance; score: the codes' cosine estimate
            from memcurator.store.vectors import sign_code

            qtext = sign_code(q).tobytes().hex()
            dist = f"({expr} <~> ('x' || %s)::{cast})"
            score, limit = f"1 - 2 * {dist} / {info.dim}", k * self.code_shortlist
            elig, eargs = self._eligible(user, meta, None, expr, cast, qtext)
        else:
            qtext = _vec_text(q if cast.startswith("vector") else q.astype(np.float16))
            dist = f"({expr} <=> %s::{cast})"
            score, limit = f"1 - {dist}", k
            elig, eargs = self._eligible(user, meta, min_score, expr, cast, qtext)
        stmt = sql.SQL(
            "SELECT pos, id, "
            + score
            + " FROM {} entries WHERE vec_dtype = {} AND "
            + elig
            + " ORDER BY "
            + dist
            + " LIMIT %s"
        ).format(sql.Identifier(partition_name(namespace)), sql.Literal(info.vector_dtype))
        return stmt, (qtext, *eargs, qtext, limit), limit, elig, eargs

    @staticmethod
    def _dense_rows(
        c: Any, stmt: Any, args: tuple[Any, ...], ef: int, use_index: bool
    ) -> list[Any]:
        """Run :meth:`search`'s dense statement through the HNSW index or exactly (a scan)."""
        with c.transaction():
            if use_index:
                # the planner guesses the jsonb filters' selectivity low (0.1%) and
                # would read every row of the namespace and sort; the iterative scan
                # handles filters, the exact fallback below the rest (one round trip)
                c.execute(
                    "SELECT set_config('hnsw.ef_search', %s, true), "
                    "set_config('hnsw.iterative_scan', 'relaxed_order', true), "
                    "set_config('enable_seqscan', 'off', true), "
                    "set_config('enable_bitmapscan', 'off', true), "
                    "set_config('enable_sort', 'off', true)",
                    (str(ef),),
                )
            else:
                c.execute("SET LOCAL enable_indexscan = off")
            return c.execute(stmt, args, prepare=False).fetchall()

    def _word_stats(self, c: Any, namespace: str) -> tuple[dict[str, float], float, float]:
        """(frequency of each common word, frequency below which words are not listed, rows)
        of the namespace's full-text column, from ``pg_stats`` of its partition (schema v4;
        the last ANALYZE, autovacuum keeps it current: the same per-namespace document
        frequencies as the in-memory BM25), cached for 60 s. Empty before the first ANALYZE."""
        now = time.monotonic()
        cached = self._wstats.get(namespace)
        if cached is not None and now - cached[0] < 60.0:
            return cached[1]
        part = partition_name(namespace)
        row = c.execute(
            "SELECT s.most_common_elems::text::text[], s.most_common_elem_freqs, c.reltuples "
            "FROM pg_class c LEFT JOIN pg_stats s ON s.tablename = %s "
            "AND s.attname = 'rtsv' AND s.schemaname = current_schema() "
            "WHERE c.oid = to_regclass(%s)",
            (part, part),
        ).fetchone()
        words: dict[str, float] = {}
        floor, rows = 0.0, 0.0
        if row is not None and row[0] is not None and row[1] is not None:
            freqs = list(row[1])
            words = dict(zip(row[0], freqs[: len(row[0])], strict=True))
            floor = float(freqs[len(row[0])]) if len(freqs) > len(row[0]) else 0.0
            rows = max(float(row[2] or 0.0), 0.0)
        out = (words, floor, rows)
        self._wstats[namespace] = (now, out)
        return out

    def _lexical(
        self, c: Any, namespace: str, words: list[str], elig: str, eargs: list[Any], k: int
    ) -> list[Any]:
        """The full-text leg of :meth:`search` on connection ``c``: rows (pos, id, score)."""
        cap = int(self.lexical_scan)
        freq, floor, n = self._word_stats(c, namespace)
        weights, selective = [], []
        for w in words:
            # df from the table's statistics: a listed word's frequency; an unlisted one is
            # rarer than the least frequent listed word (half of it, at least 1 row)
            df = max(freq[w] * n if w in freq else 0.5 * floor * n, 1.0)
            weights.append(math.log(1.0 + (max(n, df) - df + 0.5) / (df + 0.5)) if n else 1.0)
            if df <= cap:
                selective.append(w)
        match = "rtsv @@ plainto_tsquery('simple'::regconfig, %s)"
        score = " + ".join(f"%s * ({match})::int" for _ in words)
        args: list[Any] = []
        for w, wt in zip(words, weights, strict=True):
            args += [wt, w]
        if selective:  # every entry holding a rare word (small posting lists)
            cond = "(" + " OR ".join(match for _ in selective) + ")"
            args += [namespace, *selective]
        else:  # only common words: entries holding all of them, at most cap
            cond = match
            args += [namespace, " ".join(words)]
        args += [*eargs, cap, k]
        stmt = (
            f"SELECT pos, id, s FROM (SELECT pos, id, {score} AS s FROM entries "
            f"WHERE namespace = %s AND {cond} AND {elig} LIMIT %s) c ORDER BY s DESC, pos LIMIT %s"
        )
        return list(c.execute(stmt, args).fetchall())

    def get_many(self, namespace: str, ids: list[str]) -> list[Entry]:
        """The resident entries among ``ids``, in the order of ``ids`` (one statement;
        absent ids are skipped)."""
        want = list(dict.fromkeys(str(i) for i in ids))
        if not want:
            return []
        rows = self._q(
            f"SELECT {_ENTRY_COLS} FROM entries WHERE namespace=%s AND id = ANY(%s)",
            (namespace, want),
        )
        got = {r[0]: self._entry(r) for r in rows}
        return [got[i] for i in want if i in got]

    # ------------------------------------------------------------------ binary codes
    def hamming_shortlist(
        self, namespace: str, query: np.ndarray, n: int, *, index: bool | None = None
    ) -> list[tuple[str, str]]:
        """The ``n`` entries of a binary namespace whose sign bits are nearest to ``query``'s
        by Hamming distance (pgvector ``<~>`` on ``bit(dim)``; the HNSW index of
        :meth:`ensure_hnsw` when the planner takes it), as ``(id, text)``, nearest first: a
        short list to rescore exactly (:meth:`search_codes`).

        Raises
        ------
        InvalidInput
            ``n < 1``, a query of the wrong shape, a namespace not stored as binary.
        """
        from psycopg import sql

        from memcurator.store.vectors import sign_code

        if isinstance(n, bool) or int(n) < 1:
            raise InvalidInput(f"n must be a positive integer, got {n!r}")
        info = self.namespace(namespace)
        if info.vector_dtype != "binary":
            raise InvalidInput(f"namespace {namespace!r} stores {info.vector_dtype} vectors")
        expr, _, cast = self._vec_expr(namespace, codes=True)
        q = np.asarray(query, dtype=np.float32)
        if q.shape != (info.dim,) or not np.all(np.isfinite(q)):
            raise InvalidInput(f"query must be a finite vector of shape ({info.dim},)")
        qbits = "('x' || %s)::" + cast
        stmt = sql.SQL(
            "SELECT id, text, ztext FROM {} entries WHERE vec_dtype = 'binary' ORDER BY "
            + expr
            + " <~> "
            + qbits
            + " LIMIT %s"
        ).format(sql.Identifier(partition_name(namespace)))
        with self._conn() as c:
            if index is not None:
                self._run(lambda: c.execute(f"SET enable_seqscan = {'off' if index else 'on'}"))
            try:
                rows = self._run(
                    lambda: c.execute(stmt, (sign_code(q).tobytes().hex(), int(n))).fetchall()
                )
            finally:
                if index is not None:
                    self._run(lambda: c.execute("RESET enable_seqscan"))
        codec = self._read_codec(namespace) if any(r[2] is not None for r in rows) else None
        return [(str(r[0]), str(r[1]) if r[2] is None else read_text(codec, r[2])) for r in rows]

    def search_codes(
        self,
        namespace: str,
        query: np.ndarray,
        k: int,
        embed: Callable[[list[str]], np.ndarray],
        *,
        shortlist: int | None = None,
        index: bool | None = None,
    ) -> list[Nearest]:
        """The ``k`` entries of a binary namespace nearest to ``query`` (cosine): a Hamming
        short list of ``shortlist`` (default ``30 * k``) from the database, rescored with the
        exact vectors derived from the short list's texts (``embed``: recall texts -> (n, d)
        unit vectors, the namespace's deterministic embedder, as
        :mod:`memcurator.lifecycle.derive` does on load).

        Recall@10 against float32 exact search on the SQL stream, 10^4 entries: see
        docs/bytes.md (``benchmarks/bytes_per_entry.py --stores postgres``).

        Raises
        ------
        InvalidInput
            As :meth:`hamming_shortlist`; ``k < 1``.
        """
        from memcurator.retrieve.dense import rescore_shortlist
        from memcurator.retrieve.hybrid import recall_text

        if isinstance(k, bool) or int(k) < 1:
            raise InvalidInput(f"k must be a positive integer, got {k!r}")
        rows = self.hamming_shortlist(namespace, query, int(shortlist or 30 * int(k)), index=index)
        if not rows:
            return []
        X = np.asarray(embed([recall_text(t) for _, t in rows]), dtype=np.float32)
        q = np.asarray(query, dtype=np.float32)
        ids, sc = rescore_shortlist(np.arange(len(rows)), X, q, int(k))
        return [Nearest(rows[int(i)][0], float(s)) for i, s in zip(ids, sc, strict=True)]

    # ------------------------------------------------------------------ text compression
    def _entry(self, r: tuple[Any, ...]) -> Entry:
        """An entry from a row of ``_ENTRY_COLS``, its text decompressed when stored so."""
        if r[20] is not None:
            text, meta = read_entry(self._read_codec(str(r[1])), r[20], r[18])
            r = (*r[:3], text, *r[4:18], meta, *r[19:])
        return _row_to_entry(r)

    def _load_codec(self, namespace: str) -> NamespaceCodec:
        if not self._has_codec:
            return NamespaceCodec()
        row = self._one(
            "SELECT n.text_codec, d.at, d.samples FROM namespaces n LEFT JOIN mc_text_dicts d "
            "ON d.namespace = n.name WHERE n.name=%s",
            (namespace,),
        )
        if row is None:
            return NamespaceCodec()
        key = (row[0], row[1])
        cached = self._codecs.get(namespace)
        if cached is not None and cached[0] == key:
            return cached[1]
        d = None
        if row[1] is not None:
            got = self._one("SELECT dict FROM mc_text_dicts WHERE namespace=%s", (namespace,))
            d = None if got is None else TextCodec(bytes(got[0]))
        codec = NamespaceCodec(str(row[0]), d, int(row[2] or 0))
        self._codecs[namespace] = (key, codec)
        return codec

    def fixed_bytes(self, namespace: str) -> int:
        """Bytes ``namespace`` stores besides its entries: its text dictionary (0 if none)."""
        if not self._has_codec:
            return 0
        row = self._one("SELECT length(dict) FROM mc_text_dicts WHERE namespace=%s", (namespace,))
        return 0 if row is None else int(row[0])

    def _seed_dict(self, namespace: str) -> None:
        if self.text_dict is not None:
            TextCodec(self.text_dict)  # a clear error for bytes that are not a dictionary
            self._x(
                "INSERT INTO mc_text_dicts(namespace, dict, samples, at) VALUES (%s,%s,0,%s)",
                (namespace, self.text_dict, time.time()),
            )

    def _drop_trained_dict(self, namespace: str) -> None:
        """A dictionary trained on the namespace's texts holds fragments of them: it leaves
        with the last entry (the namespace trains again when it fills up)."""
        if self._load_codec(namespace).samples == 0:
            return
        if self._one("SELECT 1 FROM entries WHERE namespace=%s LIMIT 1", (namespace,)):
            return
        self._drop_dict(namespace)
        self._codecs.pop(namespace, None)
        self._tx.retrained = True  # handles catch up: the namespace's bytes changed

    def _drop_dict(self, namespace: str) -> int:
        n = self.fixed_bytes(namespace)
        if n:
            self._x("DELETE FROM mc_text_dicts WHERE namespace=%s", (namespace,))
        return n

    # the dialect of the shared codec steps (:class:`~.compression.CodecCache`)
    _dict_table = "mc_text_dicts"

    def _codec_tx(self, namespace: str) -> Any:
        return self._writing(namespace)

    def _codec_x(self, sql: str, args: tuple[Any, ...]) -> None:
        self._x(sql.replace("?", "%s"), args)

    def _stored_rows(self, namespace: str) -> list[tuple[Any, ...]]:
        return [
            (eid, text if z is None else z, meta, nb)
            for eid, text, z, meta, nb in self._q(
                "SELECT id, text, ztext, meta, bytes FROM entries WHERE namespace=%s ORDER BY pos",
                (namespace,),
            )
        ]

    def _store_row(
        self, namespace: str, eid: str, value: str | bytes, meta: str, nbytes: int
    ) -> None:
        t, z = _text_args(value)
        self._x(
            "UPDATE entries SET text=%s, ztext=%s, meta=%s, bytes=%s WHERE namespace=%s AND id=%s",
            (t, z, meta, nbytes, namespace, eid),
        )

    def _mark_retrained(self) -> None:
        self._tx.retrained = True


class Nearest(NamedTuple):
    """One row of :meth:`PostgresStore.nearest`: an entry id and its cosine to the query."""

    id: str
    cosine: float


def migrate_url(url: str, *, timeout_s: float = 30.0) -> tuple[int, int]:
    """Bring the database at ``url`` to this memcurator's schema; ``(before, after)``.

    Raises
    ------
    MissingExtra, StoreError
    """
    psycopg, _ = _psycopg()
    try:
        with psycopg.connect(url, autocommit=True, connect_timeout=int(timeout_s)) as c:
            return migrate(c)
    except psycopg.Error as e:
        raise StoreError(f"cannot migrate PostgreSQL at {redact(url)}: {str(e).strip()}") from e


def _implements_store(store: PostgresStore) -> Store:
    """Never called: mypy checks here that :class:`PostgresStore` implements the protocol."""
    return store


def _implements_search(store: PostgresStore) -> SearchableStore:
    """Never called: mypy checks here that :class:`PostgresStore` can search."""
    return store


__all__ = ["SCHEMES", "Nearest", "PostgresStore", "hash_ns", "migrate_url", "redact"]
