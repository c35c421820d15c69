"""Schema of the PostgreSQL store and its migrations.

Table ``mc_schema`` holds the schema version (one row). :func:`migrate` brings a database up to
:data:`SCHEMA_VERSION` step by step in one transaction under an advisory lock (two processes
opening a new database at once do not both create it), and refuses a newer schema. Version 1
is the SQLite schema v3 (:mod:`memcurator.store.schema`) in PostgreSQL terms:

- vectors in pgvector types: ``vector`` for float32 rows, ``halfvec`` for float16 rows (exact:
  both types hold the IEEE values the SQLite BLOB holds); int8 rows keep the BLOB layout of
  :mod:`memcurator.store.vectors` in ``bytea`` (pgvector has no int8 type with a per-vector
  scale). The columns carry no dimension: a namespace records its own and the store checks it.
- ``pos``: an identity column giving insertion order (``vector_rows`` resumes after it).
- the decision log is append-only by trigger, except inside ``compact_log`` (which sets
  ``memcurator.compacting`` for its own transaction only).
- ``mc_changes``: one version counter per namespace, bumped by every write transaction that
  touched it; the change token is their sum (a row is never deleted, so the sum only grows).
  Version 3 makes it the namespace's change-feed number (``mc_feed``, see ``_V3``).

Version 2 adds what in-database recall (:meth:`memcurator.store.postgres.PostgresStore.search`)
reads, as generated columns so that no writer has to fill them and existing rows get them at
migration:

- ``metab jsonb``: ``meta`` parsed once at write (filters on user scope, probation and
  ``meta`` keys are pushed into SQL without parsing JSON text per row per query).
- ``rtsv tsvector``: the full-text form (``'simple'`` configuration: lower-cased words, no
  stemming, no stop words) of the entry's recall text, its first ``Task:`` line when that is
  not blank, or else the whole text (as :func:`memcurator.retrieve.hybrid.recall_text`), with a
  GIN index and statistics target 1000 (ANALYZE lists up to 10,000 common words with their
  frequency: the full-text leg's IDF).

ANALYZE copies sampled column values into ``pg_statistic`` (histograms, most common values):
entry text there would outlive a delete. v2 sets the statistics target of ``text``, ``meta``,
``metab``, ``stats`` and ``origin_detail`` to 0 (none gathered); ``rtsv``'s common words are
refreshed by :meth:`~memcurator.store.postgres.PostgresStore.secure_erase`.

Version 5 admits the ``binary`` precision (sign bits in ``qvec``, like int8's BLOB layout).

Version 6 moves the trust state out of the user's ``meta`` into the entries' own columns (the
SQLite store's v6, :data:`memcurator.store.schema.V6_COLUMNS`); recall's probation and user
filters read the ``probation`` and ``scope_user`` columns.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from memcurator.errors import StoreError
from memcurator.store.schema import V6_COLUMNS, split_row_meta

SCHEMA_VERSION = 8

#: Advisory-lock class ids (the first key of ``pg_advisory_xact_lock(int, int)``).
LOCK_MIGRATE = 0x6D630001
LOCK_STORE = 0x6D630002
LOCK_NAMESPACE = 0x6D630003
#: Taken by a transaction that creates a namespace, before it inserts the namespace's row:
#: creating its partition takes SHARE ROW EXCLUSIVE on ``namespaces`` (the foreign key), which
#: conflicts with another creator's row insert, so two creators at once deadlocked.
LOCK_CREATE = 0x6D630004

_V1 = """
CREATE EXTENSION IF NOT EXISTS vector;
CREATE TABLE namespaces (
    name TEXT PRIMARY KEY,
    embedder TEXT NOT NULL,
    dim INTEGER NOT NULL CHECK (dim > 0),
    max_bytes BIGINT,
    created_at DOUBLE PRECISION NOT NULL,
    vector_dtype TEXT NOT NULL DEFAULT 'float32'
        CHECK (vector_dtype IN ('float32', 'float16', 'int8'))
);
CREATE TABLE entries (
    pos BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE,
    id TEXT NOT NULL,
    namespace TEXT NOT NULL REFERENCES namespaces(name),
    kind TEXT NOT NULL CHECK (kind IN ('raw', 'insight', 'skill')),
    text TEXT NOT NULL CHECK (length(btrim(text)) > 0),
    bytes BIGINT NOT NULL CHECK (bytes > 0),
    raw_bytes BIGINT NOT NULL CHECK (raw_bytes > 0),
    vec vector,
    hvec halfvec,
    qvec BYTEA,
    vec_dtype TEXT NOT NULL DEFAULT 'float32'
        CHECK (vec_dtype IN ('float32', 'float16', 'int8')),
    origin TEXT NOT NULL CHECK (origin IN ('self', 'peer', 'external')),
    origin_detail TEXT NOT NULL DEFAULT '',
    reinforcement BIGINT NOT NULL DEFAULT 0,
    uses BIGINT NOT NULL DEFAULT 0,
    successes BIGINT NOT NULL DEFAULT 0,
    failures BIGINT NOT NULL DEFAULT 0,
    created_step BIGINT NOT NULL DEFAULT 0,
    last_used_step BIGINT NOT NULL DEFAULT -1,
    meta TEXT NOT NULL DEFAULT '{}',
    stats TEXT NOT NULL DEFAULT '{}',
    PRIMARY KEY (namespace, id),
    CHECK ((vec IS NOT NULL) = (vec_dtype = 'float32')
       AND (hvec IS NOT NULL) = (vec_dtype = 'float16')
       AND (qvec IS NOT NULL) = (vec_dtype = 'int8'))
);
CREATE INDEX entries_ns_pos ON entries(namespace, pos);
CREATE TABLE decisions (
    seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    namespace TEXT NOT NULL,
    step BIGINT NOT NULL,
    action TEXT NOT NULL,
    entry_id TEXT NOT NULL,
    score DOUBLE PRECISION,
    reason TEXT NOT NULL,
    policy TEXT NOT NULL,
    bytes BIGINT NOT NULL,
    at DOUBLE PRECISION NOT NULL
);
CREATE INDEX decisions_ns ON decisions(namespace, seq);
CREATE INDEX decisions_ns_at ON decisions(namespace, at);
CREATE INDEX decisions_ns_entry ON decisions(namespace, entry_id);
CREATE FUNCTION mc_decisions_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' AND current_setting('memcurator.compacting', true) = 'on' THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION 'the decision log is append-only';
END $$;
CREATE TRIGGER decisions_append_only BEFORE UPDATE OR DELETE ON decisions
    FOR EACH ROW EXECUTE FUNCTION mc_decisions_append_only();
CREATE TABLE policy_state (
    namespace TEXT PRIMARY KEY REFERENCES namespaces(name),
    policy TEXT NOT NULL,
    step BIGINT NOT NULL,
    state TEXT NOT NULL
);
CREATE TABLE shared_out (
    namespace TEXT NOT NULL,
    entry_id TEXT NOT NULL,
    peer TEXT NOT NULL,
    forgotten BOOLEAN NOT NULL DEFAULT false,
    PRIMARY KEY (namespace, entry_id, peer)
);
CREATE TABLE log_dropped (
    namespace TEXT NOT NULL,
    action TEXT NOT NULL,
    n BIGINT NOT NULL,
    bytes BIGINT NOT NULL,
    first_seq BIGINT NOT NULL,
    last_seq BIGINT NOT NULL,
    PRIMARY KEY (namespace, action)
);
CREATE TABLE mc_changes (
    namespace TEXT PRIMARY KEY,
    v BIGINT NOT NULL
)
"""

# The recall text in SQL: the first line "Task: <something>" (newline-sensitive match, (?n)),
# else the whole text. Immutable functions only, as a generated column requires.
_RECALL_TEXT = r"COALESCE(NULLIF(btrim(substring(text from '(?n)^Task: (.*)$')), ''), text)"

_V2 = f"""
ALTER TABLE entries ADD COLUMN metab jsonb GENERATED ALWAYS AS (meta::jsonb) STORED;
ALTER TABLE entries ADD COLUMN rtsv tsvector
    GENERATED ALWAYS AS (to_tsvector('simple'::regconfig, {_RECALL_TEXT})) STORED;
CREATE INDEX entries_rtsv ON entries USING gin (rtsv);
ALTER TABLE entries ALTER COLUMN rtsv SET STATISTICS 1000;
ALTER TABLE entries ALTER COLUMN text SET STATISTICS 0;
ALTER TABLE entries ALTER COLUMN meta SET STATISTICS 0;
ALTER TABLE entries ALTER COLUMN metab SET STATISTICS 0;
ALTER TABLE entries ALTER COLUMN stats SET STATISTICS 0;
ALTER TABLE entries ALTER COLUMN origin_detail SET STATISTICS 0
"""

# v3: the change feed (:meth:`memcurator.store.postgres.PostgresStore.changes_since`). A row
# trigger on ``entries`` records each changed id in ``mc_feed`` with the number its transaction
# will leave in ``mc_changes.v`` (v + 1: a writer holds the namespace's lock until it commits,
# and bumps v once at commit, so numbers follow the commit order of the namespace and a reader
# never sees a number whose rows are still to come). ``mc_changes.floor``: below it the feed
# was trimmed. Rows written before v3 are in no feed: a handle opened after the migration
# starts from the number then.
_V3 = """
ALTER TABLE mc_changes ADD COLUMN floor BIGINT NOT NULL DEFAULT 0;
UPDATE mc_changes SET floor = v;
CREATE TABLE mc_feed (
    namespace TEXT NOT NULL,
    entry_id TEXT NOT NULL,
    seq BIGINT NOT NULL,
    PRIMARY KEY (namespace, entry_id)
);
CREATE INDEX mc_feed_seq ON mc_feed(namespace, seq);
CREATE FUNCTION mc_feed_row() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    ns TEXT;
    eid TEXT;
BEGIN
    IF TG_OP = 'DELETE' THEN
        ns := OLD.namespace; eid := OLD.id;
    ELSE
        ns := NEW.namespace; eid := NEW.id;
    END IF;
    INSERT INTO mc_feed(namespace, entry_id, seq)
    VALUES (ns, eid, COALESCE((SELECT v FROM mc_changes WHERE namespace = ns), 0) + 1)
    ON CONFLICT (namespace, entry_id) DO UPDATE SET seq = EXCLUDED.seq;
    RETURN NULL;
END $$;
CREATE TRIGGER entries_feed AFTER INSERT OR UPDATE OR DELETE ON entries
    FOR EACH ROW EXECUTE FUNCTION mc_feed_row()
"""

_COLS = (
    "pos, id, namespace, kind, text, bytes, raw_bytes, vec, hvec, qvec, vec_dtype, origin, "
    "origin_detail, reinforcement, uses, successes, failures, created_step, last_used_step, "
    "meta, stats"
)


def partition_name(namespace: str) -> str:
    """The table holding ``namespace``'s entries (schema v4): ``entries_p_`` + md5 of the name.

    Examples
    --------
    >>> partition_name("a")
    'entries_p_0cc175b9c0f1b6a831c399e269772661'
    """
    import hashlib

    return "entries_p_" + hashlib.md5(namespace.encode("utf-8")).hexdigest()


# v4: one partition per namespace (LIST on ``namespace``), so that what rewrites or indexes
# one namespace's rows locks that namespace's table only: a secure erase's VACUUM FULL and an
# HNSW build (CONCURRENTLY, on the partition) never stop another tenant's reads or writes. The
# rows are copied into the new table (positions kept), the old table dropped (its files are
# unlinked at the next checkpoint). A DEFAULT partition catches a namespace created by older
# code while this runs.
_V4 = f"""
DROP TRIGGER entries_feed ON entries;
ALTER TABLE entries RENAME TO entries_v3;
ALTER INDEX entries_ns_pos RENAME TO entries_v3_ns_pos;
ALTER INDEX entries_rtsv RENAME TO entries_v3_rtsv;
ALTER INDEX entries_pkey RENAME TO entries_v3_pkey;
ALTER INDEX entries_pos_key RENAME TO entries_v3_pos_key;
CREATE TABLE entries (
    pos BIGINT GENERATED ALWAYS AS IDENTITY,
    id TEXT NOT NULL,
    namespace TEXT NOT NULL REFERENCES namespaces(name),
    kind TEXT NOT NULL CHECK (kind IN ('raw', 'insight', 'skill')),
    text TEXT NOT NULL CHECK (length(btrim(text)) > 0),
    bytes BIGINT NOT NULL CHECK (bytes > 0),
    raw_bytes BIGINT NOT NULL CHECK (raw_bytes > 0),
    vec vector,
    hvec halfvec,
    qvec BYTEA,
    vec_dtype TEXT NOT NULL DEFAULT 'float32'
        CHECK (vec_dtype IN ('float32', 'float16', 'int8', 'binary')),
    origin TEXT NOT NULL CHECK (origin IN ('self', 'peer', 'external')),
    origin_detail TEXT NOT NULL DEFAULT '',
    reinforcement BIGINT NOT NULL DEFAULT 0,
    uses BIGINT NOT NULL DEFAULT 0,
    successes BIGINT NOT NULL DEFAULT 0,
    failures BIGINT NOT NULL DEFAULT 0,
    created_step BIGINT NOT NULL DEFAULT 0,
    last_used_step BIGINT NOT NULL DEFAULT -1,
    meta TEXT NOT NULL DEFAULT '{{}}',
    stats TEXT NOT NULL DEFAULT '{{}}',
    metab jsonb GENERATED ALWAYS AS (meta::jsonb) STORED,
    rtsv tsvector GENERATED ALWAYS AS (to_tsvector('simple'::regconfig, {_RECALL_TEXT})) STORED,
    PRIMARY KEY (namespace, id),
    CHECK ((vec IS NOT NULL) = (vec_dtype = 'float32')
       AND (hvec IS NOT NULL) = (vec_dtype = 'float16')
       AND (qvec IS NOT NULL) = (vec_dtype IN ('int8', 'binary')))
) PARTITION BY LIST (namespace);
CREATE TABLE entries_default PARTITION OF entries DEFAULT;
CREATE INDEX entries_ns_pos ON entries(namespace, pos);
CREATE INDEX entries_rtsv ON entries USING gin (rtsv);
ALTER TABLE entries ALTER COLUMN rtsv SET STATISTICS 1000;
ALTER TABLE entries ALTER COLUMN text SET STATISTICS 0;
ALTER TABLE entries ALTER COLUMN meta SET STATISTICS 0;
ALTER TABLE entries ALTER COLUMN metab SET STATISTICS 0;
ALTER TABLE entries ALTER COLUMN stats SET STATISTICS 0;
ALTER TABLE entries ALTER COLUMN origin_detail SET STATISTICS 0;
DO $$
DECLARE r record;
BEGIN
    FOR r IN SELECT name FROM namespaces LOOP
        EXECUTE format('CREATE TABLE %I PARTITION OF entries FOR VALUES IN (%L)',
                       'entries_p_' || md5(r.name), r.name);
    END LOOP;
END $$;
INSERT INTO entries ({_COLS}) OVERRIDING SYSTEM VALUE SELECT {_COLS} FROM entries_v3 ORDER BY pos;
SELECT setval(pg_get_serial_sequence('entries', 'pos'),
              COALESCE((SELECT max(pos) FROM entries_v3), 0) + 1, false);
DROP TABLE entries_v3;
CREATE TRIGGER entries_feed AFTER INSERT OR UPDATE OR DELETE ON entries
    FOR EACH ROW EXECUTE FUNCTION mc_feed_row()
"""

# v5: the ``binary`` precision (sign bits, :mod:`memcurator.store.vectors`), stored in ``qvec``
# with the BLOB layout like int8 (``bytea``; no existing row changes). v4's entries table already
# admits it; the namespaces' CHECK naming the precisions is replaced by a looser one
# (PostgreSQL's default name for v1's constraint).
_V5 = """
ALTER TABLE namespaces DROP CONSTRAINT namespaces_vector_dtype_check;
ALTER TABLE namespaces ADD CONSTRAINT namespaces_vector_dtype_check
    CHECK (vector_dtype IN ('float32', 'float16', 'int8', 'binary'))
"""


def _v6(conn: Any) -> None:
    """v6: the trust-state columns (statistics target 0 where a value may quote entry text; a
    partial index on the entries on probation), then every row's internal ``meta`` keys moved
    into them, and the touched namespaces' change numbers bumped so that open handles reload."""
    alter = ", ".join(f"ADD COLUMN {name} {decl}" for name, decl in V6_COLUMNS)
    conn.execute(f"ALTER TABLE entries {alter}")
    for name, _ in V6_COLUMNS:
        if name not in ("taint", "personal"):
            conn.execute(f"ALTER TABLE entries ALTER COLUMN {name} SET STATISTICS 0")
    conn.execute(
        "CREATE INDEX entries_probation ON entries(namespace, pos) WHERE probation IS NOT NULL"
    )
    rows = conn.execute(
        "SELECT namespace, id, meta FROM entries WHERE EXISTS (SELECT 1 FROM "
        "jsonb_object_keys(CASE WHEN jsonb_typeof(metab) = 'object' THEN metab "
        "ELSE '{}'::jsonb END) k WHERE left(k, 1) = '_' OR k = 'claimed_origin')"
    ).fetchall()
    cols = ", ".join(f"{name}=%s" for name, _ in V6_COLUMNS)
    touched = set()
    for ns, eid, meta in rows:
        moved = split_row_meta(meta)
        if moved is not None:
            conn.execute(
                f"UPDATE entries SET meta=%s, {cols} WHERE namespace=%s AND id=%s",
                (moved[0], *moved[1], ns, eid),
            )
            touched.add(ns)
    if touched:
        conn.execute(
            "UPDATE mc_changes SET v = v + 1 WHERE namespace = ANY(%s)", (sorted(touched),)
        )


# v7: entry text kept zstd-compressed (:mod:`memcurator.store.compression`). The namespace
# records its text codec ('none' before v7); ``mc_text_dicts`` holds a compressing namespace's
# dictionary. A compressed row keeps the tagged zstd frame in ``ztext`` and an empty ``text``
# (the CHECK is loosened for it). ``rtsv`` can no longer be generated from ``text``: it
# becomes a plain column (existing values kept) that the store fills from the uncompressed
# text with the same expression.
_V7 = """
ALTER TABLE namespaces ADD COLUMN text_codec TEXT NOT NULL DEFAULT 'none'
    CHECK (text_codec IN ('none', 'zstd'));
CREATE TABLE mc_text_dicts (
    namespace TEXT PRIMARY KEY REFERENCES namespaces(name),
    dict BYTEA NOT NULL,
    samples BIGINT NOT NULL,
    at DOUBLE PRECISION NOT NULL
);
ALTER TABLE entries ADD COLUMN ztext BYTEA;
ALTER TABLE entries ALTER COLUMN ztext SET STATISTICS 0;
DO $$
DECLARE c record;
BEGIN
    FOR c IN SELECT conname FROM pg_constraint WHERE conrelid = 'entries'::regclass
             AND contype = 'c' AND pg_get_constraintdef(oid) LIKE '%btrim(text)%' LOOP
        EXECUTE format('ALTER TABLE entries DROP CONSTRAINT %I', c.conname);
    END LOOP;
END $$;
ALTER TABLE entries ADD CONSTRAINT entries_text_or_ztext
    CHECK (CASE WHEN ztext IS NULL THEN length(btrim(text)) > 0 ELSE text = '' END);
ALTER TABLE entries ALTER COLUMN rtsv DROP EXPRESSION
"""

#: The full-text form of a text parameter given twice (what v2..v6 generated from ``text``).
RTSV_OF_PARAM = "to_tsvector('simple'::regconfig, " + _RECALL_TEXT.replace("text", "%s::text") + ")"


# v8: a compressing namespace's rows may keep their meta inside the text's zstd frame
# (``ztext``, :mod:`memcurator.store.textcodec` tag 2) with an empty ``meta``. ``metab`` can
# no longer be generated from ``meta``: it becomes a plain column (existing values kept) the
# store fills from the meta JSON it is given, so meta filters work on such rows.
_V8 = """
ALTER TABLE entries ALTER COLUMN metab DROP EXPRESSION
"""


MIGRATIONS: dict[int, str | Callable[[Any], None]] = {
    1: _V1,
    2: _V2,
    3: _V3,
    4: _V4,
    5: _V5,
    6: _v6,
    7: _V7,
    8: _V8,
}


def current_version(conn: Any) -> int:
    """The schema version of the database ``conn`` is connected to (0: no memcurator schema)."""
    row = conn.execute("SELECT to_regclass('mc_schema') IS NOT NULL").fetchone()
    if not row[0]:
        return 0
    row = conn.execute("SELECT max(version) FROM mc_schema").fetchone()
    return int(row[0] or 0)


def migrate(conn: Any) -> tuple[int, int]:
    """Apply the migrations the database lacks, in one transaction; ``(before, after)``.

    ``conn`` is an autocommit psycopg connection. Idempotent: a current database is left
    untouched.

    Raises
    ------
    StoreError
        The schema is newer than this memcurator's.
    """
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s, 0)", (LOCK_MIGRATE,))
        before = current_version(conn)
        if before > SCHEMA_VERSION:
            raise StoreError(
                f"store schema version {before} is newer than this memcurator's "
                f"({SCHEMA_VERSION}); upgrade memcurator"
            )
        if before == 0:
            conn.execute("CREATE TABLE mc_schema (version INTEGER NOT NULL)")
            conn.execute("INSERT INTO mc_schema(version) VALUES (0)")
        for v in range(before + 1, SCHEMA_VERSION + 1):
            step = MIGRATIONS[v]
            if callable(step):
                step(conn)
            else:
                conn.execute(step)  # no parameters: several statements in one call
            conn.execute("UPDATE mc_schema SET version=%s", (v,))
    return before, SCHEMA_VERSION


__all__ = [
    "LOCK_MIGRATE",
    "LOCK_NAMESPACE",
    "LOCK_STORE",
    "MIGRATIONS",
    "RTSV_OF_PARAM",
    "SCHEMA_VERSION",
    "current_version",
    "migrate",
    "partition_name",
]
