"""Schema of the SQLite store and its migrations.

``PRAGMA user_version`` holds the schema version. :func:`migrate` brings any older file up to
:data:`SCHEMA_VERSION` step by step inside the caller's transaction, and refuses a newer file.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable

from memcurator.errors import StoreError
from memcurator.types import is_internal_key, split_meta

SCHEMA_VERSION = 8

_V1 = """
CREATE TABLE IF NOT EXISTS namespaces (
    name TEXT PRIMARY KEY,
    embedder TEXT NOT NULL,
    dim INTEGER NOT NULL CHECK (dim > 0),
    max_bytes INTEGER,
    created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS entries (
    id TEXT NOT NULL,
    namespace TEXT NOT NULL REFERENCES namespaces(name),
    kind TEXT NOT NULL CHECK (kind IN ('raw', 'insight', 'skill')),
    text TEXT NOT NULL CHECK (length(trim(text)) > 0),
    bytes INTEGER NOT NULL CHECK (bytes > 0),
    raw_bytes INTEGER NOT NULL CHECK (raw_bytes > 0),
    embedding BLOB NOT NULL,
    origin TEXT NOT NULL CHECK (origin IN ('self', 'peer', 'external')),
    origin_detail TEXT NOT NULL DEFAULT '',
    reinforcement INTEGER NOT NULL DEFAULT 0,
    uses INTEGER NOT NULL DEFAULT 0,
    successes INTEGER NOT NULL DEFAULT 0,
    failures INTEGER NOT NULL DEFAULT 0,
    created_step INTEGER NOT NULL DEFAULT 0,
    last_used_step INTEGER NOT NULL DEFAULT -1,
    meta TEXT NOT NULL DEFAULT '{}',
    stats TEXT NOT NULL DEFAULT '{}',
    PRIMARY KEY (namespace, id)
);
CREATE TABLE IF NOT EXISTS decisions (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    namespace TEXT NOT NULL,
    step INTEGER NOT NULL,
    action TEXT NOT NULL,
    entry_id TEXT NOT NULL,
    score REAL,
    reason TEXT NOT NULL,
    policy TEXT NOT NULL,
    bytes INTEGER NOT NULL,
    at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS policy_state (
    namespace TEXT PRIMARY KEY REFERENCES namespaces(name),
    policy TEXT NOT NULL,
    step INTEGER NOT NULL,
    state TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS decisions_ns ON decisions(namespace, seq);
CREATE TRIGGER IF NOT EXISTS decisions_append_only_u BEFORE UPDATE ON decisions
BEGIN SELECT RAISE(ABORT, 'the decision log is append-only'); END;
CREATE TRIGGER IF NOT EXISTS decisions_append_only_d BEFORE DELETE ON decisions
BEGIN SELECT RAISE(ABORT, 'the decision log is append-only'); END;
"""

# v2: decision-log retention (rows may be deleted only while ``log_compaction`` holds a row,
# which :meth:`SQLiteStore.compact_log` inserts and removes inside one transaction, writing a
# summary row of what it dropped); entries shared to peers, for forget notices.
_V2 = """
CREATE TABLE IF NOT EXISTS log_compaction (active INTEGER NOT NULL);
DROP TRIGGER IF EXISTS decisions_append_only_d;
CREATE TRIGGER IF NOT EXISTS decisions_append_only_d BEFORE DELETE ON decisions
WHEN (SELECT COUNT(*) FROM log_compaction) = 0
BEGIN SELECT RAISE(ABORT, 'the decision log is append-only'); END;
CREATE TABLE IF NOT EXISTS shared_out (
    namespace TEXT NOT NULL,
    entry_id TEXT NOT NULL,
    peer TEXT NOT NULL,
    forgotten INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (namespace, entry_id, peer)
);
CREATE INDEX IF NOT EXISTS decisions_ns_at ON decisions(namespace, at);
CREATE TABLE IF NOT EXISTS log_dropped (
    namespace TEXT NOT NULL,
    action TEXT NOT NULL,
    n INTEGER NOT NULL,
    bytes INTEGER NOT NULL,
    first_seq INTEGER NOT NULL,
    last_seq INTEGER NOT NULL,
    PRIMARY KEY (namespace, action)
);
"""

# v3: stored vector precision (:mod:`memcurator.store.vectors`). The namespace records the
# precision new entries are stored in; each row records the one its BLOB was written in, so a
# namespace stays readable while ``memcurator reembed --vector-dtype`` converts it. Rows and
# namespaces of older files are float32, the only layout before v3 (nothing is rewritten).
_V3 = """
ALTER TABLE namespaces ADD COLUMN vector_dtype TEXT NOT NULL DEFAULT 'float32'
    CHECK (vector_dtype IN ('float32', 'float16', 'int8'));
ALTER TABLE entries ADD COLUMN vec_dtype TEXT NOT NULL DEFAULT 'float32'
    CHECK (vec_dtype IN ('float32', 'float16', 'int8'));
"""


def _feed_trigger(event: str, row: str) -> str:
    return f"""CREATE TRIGGER IF NOT EXISTS entries_feed_{event[0].lower()} AFTER {event} ON entries
BEGIN
INSERT INTO change_seq(namespace, v) VALUES ({row}.namespace, 1)
    ON CONFLICT(namespace) DO UPDATE SET v = v + 1;
INSERT INTO change_feed(namespace, entry_id, seq)
    VALUES ({row}.namespace, {row}.id,
            (SELECT v FROM change_seq WHERE namespace = {row}.namespace))
    ON CONFLICT(namespace, entry_id) DO UPDATE SET seq = excluded.seq;
END"""


# v4: the change feed (:meth:`SQLiteStore.changes_since`). ``change_seq`` holds each
# namespace's sequence number (bumped per changed row; writes are serialised by the file's
# write lock, so the order is the commit order) and the ``floor`` below which the feed was
# trimmed; ``change_feed`` holds, per entry id ever changed, the number of its latest change.
# Triggers fill both, so every write path (reembed, transfer, ...) is in the feed.
_V4 = ";\n".join(
    [
        """CREATE TABLE IF NOT EXISTS change_seq (
    namespace TEXT PRIMARY KEY,
    v INTEGER NOT NULL,
    floor INTEGER NOT NULL DEFAULT 0
)""",
        """CREATE TABLE IF NOT EXISTS change_feed (
    namespace TEXT NOT NULL,
    entry_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    PRIMARY KEY (namespace, entry_id)
)""",
        "CREATE INDEX IF NOT EXISTS change_feed_seq ON change_feed(namespace, seq)",
        _feed_trigger("INSERT", "NEW"),
        _feed_trigger("UPDATE", "NEW"),
        _feed_trigger("DELETE", "OLD"),
    ]
)


_V3_DTYPES = "IN ('float32', 'float16', 'int8'))"
_V5_DTYPES = "IN ('float32', 'float16', 'int8', 'binary'))"


def _v5(conn: sqlite3.Connection) -> None:
    """v5: the ``binary`` precision (:mod:`memcurator.store.vectors`) passes the two CHECKs of v3.

    SQLite cannot alter a CHECK; loosening one by rewriting the table's stored SQL is the
    documented procedure for it (sqlite.org/lang_altertable.html, "making other kinds of table
    schema changes"): every existing row satisfies the looser CHECK, so no row is rewritten
    and the file stays valid (checked by reading the rewritten schema back before the caller
    commits).
    """
    version = int(conn.execute("PRAGMA schema_version").fetchone()[0])
    conn.execute("PRAGMA writable_schema=ON")
    try:
        conn.execute(
            "UPDATE sqlite_master SET sql=replace(sql, ?, ?) "
            "WHERE type='table' AND name IN ('namespaces', 'entries')",
            (_V3_DTYPES, _V5_DTYPES),
        )
        conn.execute(f"PRAGMA schema_version={version + 1}")
    finally:
        conn.execute("PRAGMA writable_schema=OFF")
    n = conn.execute(
        "SELECT count(*) FROM sqlite_master WHERE type='table' AND name IN ('namespaces', "
        "'entries') AND instr(sql, ?) > 0",
        (_V5_DTYPES,),
    ).fetchone()[0]
    if n != 2:
        raise StoreError(f"schema v5 migration found {n} of the 2 tables to loosen")


# v6: trust state in the entries' own columns (:class:`memcurator.types.TrustState`), out of
# the user's ``meta``. One column per typed field (lists as JSON text, NULL when unset) and
# ``trust_extra`` (JSON object) for any other internal key; :data:`V6_COLUMNS` is shared with
# the PostgreSQL migration.
V6_COLUMNS = (
    ("probation", "TEXT"),
    ("held_for", "TEXT"),
    ("taint", "TEXT"),
    ("claimed_origin", "TEXT"),
    ("derived_from", "TEXT"),
    ("vouched_by", "TEXT"),
    ("corroborated", "TEXT"),
    ("scope_user", "TEXT"),
    ("personal", "BOOLEAN"),
    ("trust_extra", "TEXT NOT NULL DEFAULT '{}'"),
)


def split_row_meta(meta_json: str) -> tuple[str, tuple[object, ...]] | None:
    """``(meta JSON, trust column values)`` of a pre-v6 row's ``meta``, or None when it holds
    no internal key (nothing to move). The user's part is written as the store writes it
    (sorted keys)."""
    from memcurator.store.rowlogic import trust_values

    meta = json.loads(meta_json)
    if not any(isinstance(k, str) and is_internal_key(k) for k in meta):
        return None
    user, state = split_meta(meta)
    return json.dumps(user, sort_keys=True), trust_values(state)


def _v6(conn: sqlite3.Connection) -> None:
    """v6: add the trust-state columns and move every row's internal ``meta`` keys into them
    (the change-feed triggers record each moved row)."""
    for name, decl in V6_COLUMNS:
        sql_type = decl.replace("BOOLEAN", "INTEGER")
        conn.execute(f"ALTER TABLE entries ADD COLUMN {name} {sql_type}")
    conn.execute(
        "CREATE INDEX IF NOT EXISTS entries_probation ON entries(namespace) "
        "WHERE probation IS NOT NULL"
    )
    cols = ", ".join(f"{name}=?" for name, _ in V6_COLUMNS)
    rows = conn.execute(
        "SELECT rowid, meta FROM entries WHERE meta LIKE '%\"\\_%' ESCAPE '\\' "
        "OR meta LIKE '%\"claimed_origin\"%'"
    ).fetchall()
    for rowid, meta in rows:
        moved = split_row_meta(meta)
        if moved is not None:
            conn.execute(
                f"UPDATE entries SET meta=?, {cols} WHERE rowid=?", (moved[0], *moved[1], rowid)
            )


# v7: entry text kept zstd-compressed (:mod:`memcurator.store.compression`). The namespace
# records its text codec ('none': text as is, the only layout before v7); ``text_dicts`` holds
# a compressing namespace's trained dictionary. A compressed entry's ``text`` holds the tagged
# zstd frame as a BLOB (its first byte, the tag, is never blank: the v1 CHECK holds); nothing
# existing is rewritten (``memcurator compress`` converts a namespace).
_V7 = """
ALTER TABLE namespaces ADD COLUMN text_codec TEXT NOT NULL DEFAULT 'none'
    CHECK (text_codec IN ('none', 'zstd'));
CREATE TABLE IF NOT EXISTS text_dicts (
    namespace TEXT PRIMARY KEY REFERENCES namespaces(name),
    dict BLOB NOT NULL,
    samples INTEGER NOT NULL,
    at REAL NOT NULL
);
"""


def _v8(conn: sqlite3.Connection) -> None:
    """v8: a compressing namespace's rows may keep their meta inside the text's zstd frame
    (:mod:`~memcurator.store.textcodec` tag 2) with an empty ``meta`` column; no table
    changes: the version keeps readers that do not know the layout out of the file."""


#: Version -> SQL statements (``;\n``-separated, triggers whole) or a function of the connection.
MIGRATIONS: dict[int, str | Callable[[sqlite3.Connection], None]] = {
    1: _V1,
    2: _V2,
    3: _V3,
    4: _V4,
    5: _v5,
    6: _v6,
    7: _V7,
    8: _v8,
}


def migrate_check(version: int) -> None:
    """Raise :class:`StoreError` if a file's schema ``version`` is newer than this code's."""
    if version > SCHEMA_VERSION:
        raise StoreError(
            f"store schema version {version} is newer than this memcurator's ({SCHEMA_VERSION}); "
            "upgrade memcurator"
        )


def _statements(script: str) -> list[str]:
    """``script`` cut into whole statements (a trigger body's ``;`` does not end one)."""
    out: list[str] = []
    buf = ""
    for line in script.splitlines(keepends=True):
        buf += line
        if sqlite3.complete_statement(buf):
            out.append(buf.strip())
            buf = ""
    if buf.strip():
        out.append(buf.strip())
    return out


def migrate(conn: sqlite3.Connection) -> int:
    """Apply the migrations the file lacks; returns the resulting version.

    Raises
    ------
    StoreError
        If the file was written by a newer memcurator (its version is above ours).
    """
    current = int(conn.execute("PRAGMA user_version").fetchone()[0])
    migrate_check(current)
    for v in range(current + 1, SCHEMA_VERSION + 1):
        step = MIGRATIONS[v]
        if callable(step):
            step(conn)
            conn.execute(f"PRAGMA user_version={v}")
            continue
        for stmt in _statements(step):
            conn.execute(stmt)
        conn.execute(f"PRAGMA user_version={v}")
    return SCHEMA_VERSION
