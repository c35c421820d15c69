"""The shared state's tables and their versions, apart from the store's schema.

Table ``svc_state`` holds ``('version', N)``; :func:`migrate` runs every step above ``N`` in one
transaction (PostgreSQL: under an advisory lock, so replicas starting together migrate once).
A state newer than this code knows is refused, never guessed at.

Step 1 (both backends): ``api_keys`` and ``tenant_namespaces`` (the key file's tables of
earlier versions, unchanged, so an old key file is upgraded in place with every key kept),
the hub (``svc_hub_groups``, ``svc_hub_messages``, ``svc_hub_sketches``), the rate limiter's
buckets (``svc_rate``) and the kept recalls (``svc_recalls``).

Step 2 (both backends): each peer's hub cursor (``svc_hub_cursors``: where its last pull
ended, so a pull without ``since`` goes on from there through any replica) and the signing key
ring every replica shares (``svc_ring_keys``, :mod:`memcurator.service.ring`).

Step 3 (both backends): what each key's sessions observed (``svc_observations``,
:mod:`memcurator.service.observations`): one row per observation with the hashed shingles of
the text read (never the text), so a write through any replica is matched against what was
observed through any other.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from memcurator.errors import InvalidInput, StoreError

#: the newest state version this code writes
STATE_VERSION = 3

_KEYS = """
CREATE TABLE IF NOT EXISTS api_keys (
    key_id TEXT PRIMARY KEY,
    secret_sha256 TEXT NOT NULL,
    namespace TEXT NOT NULL,
    name TEXT NOT NULL,
    origin TEXT NOT NULL,
    scopes TEXT NOT NULL,
    rate_per_min {real},
    created_at {real} NOT NULL,
    revoked_at {real},
    revoked_reason TEXT
);
CREATE TABLE IF NOT EXISTS tenant_namespaces (
    name TEXT PRIMARY KEY,
    policy TEXT,
    max_bytes {int}
);
CREATE TABLE IF NOT EXISTS svc_hub_groups (
    grp TEXT PRIMARY KEY,
    next_seq {int} NOT NULL,
    dropped_through {int} NOT NULL,
    nbytes {int} NOT NULL
);
CREATE TABLE IF NOT EXISTS svc_hub_messages (
    grp TEXT NOT NULL,
    seq {int} NOT NULL,
    sender TEXT NOT NULL,
    recipient TEXT,
    round {int} NOT NULL,
    body TEXT NOT NULL,
    nbytes {int} NOT NULL,
    at {real} NOT NULL,
    PRIMARY KEY (grp, seq)
);
CREATE INDEX IF NOT EXISTS svc_hub_messages_sender ON svc_hub_messages (grp, sender);
CREATE TABLE IF NOT EXISTS svc_hub_sketches (
    grp TEXT NOT NULL,
    peer TEXT NOT NULL,
    round {int} NOT NULL,
    sketch TEXT NOT NULL,
    PRIMARY KEY (grp, peer)
);
CREATE TABLE IF NOT EXISTS svc_rate (
    key_id TEXT PRIMARY KEY,
    tokens {real} NOT NULL,
    at {real} NOT NULL
);
CREATE TABLE IF NOT EXISTS svc_recalls (
    seq {serial},
    rid TEXT NOT NULL UNIQUE,
    namespace TEXT NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS svc_recalls_ns ON svc_recalls (namespace, seq);
"""

_STEP2 = """
CREATE TABLE IF NOT EXISTS svc_hub_cursors (
    grp TEXT NOT NULL,
    peer TEXT NOT NULL,
    seq {int} NOT NULL,
    PRIMARY KEY (grp, peer)
);
CREATE TABLE IF NOT EXISTS svc_ring_keys (
    key_id TEXT PRIMARY KEY,
    principal TEXT NOT NULL,
    secret TEXT NOT NULL,
    created_at {real} NOT NULL,
    revoked TEXT
);
"""

_STEP3 = """
CREATE TABLE IF NOT EXISTS svc_observations (
    seq {serial},
    key_id TEXT NOT NULL,
    session TEXT NOT NULL,
    shingles TEXT NOT NULL,
    source TEXT NOT NULL,
    reader TEXT,
    nbytes {int} NOT NULL,
    at {real} NOT NULL
);
CREATE INDEX IF NOT EXISTS svc_observations_session ON svc_observations (key_id, session, seq)
"""

_TYPES = {
    "sqlite": {"real": "REAL", "int": "INTEGER", "serial": "INTEGER PRIMARY KEY AUTOINCREMENT"},
    "postgres": {
        "real": "DOUBLE PRECISION",
        "int": "BIGINT",
        "serial": "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY",
    },
}

#: version -> the statements of that step, per backend kind
STEPS: dict[int, dict[str, list[str]]] = {
    1: {
        kind: [s.strip() for s in _KEYS.format(**t).split(";") if s.strip()]
        for kind, t in _TYPES.items()
    },
    2: {
        kind: [s.strip() for s in _STEP2.format(**t).split(";") if s.strip()]
        for kind, t in _TYPES.items()
    },
    3: {
        kind: [s.strip() for s in _STEP3.format(**t).split(";") if s.strip()]
        for kind, t in _TYPES.items()
    },
}


def current_version(tx: Any) -> int:
    """The version recorded in ``svc_state`` (0: none yet)."""
    rows = tx.q("SELECT value FROM svc_state WHERE name='version'")
    return int(rows[0][0]) if rows else 0


def migrate(tx: Any, kind: str, where: str) -> int:
    """Bring the state up to :data:`STATE_VERSION` inside the open transaction ``tx``.

    Raises
    ------
    StoreError
        The state is newer than this code.
    """
    tx.x("CREATE TABLE IF NOT EXISTS svc_state (name TEXT PRIMARY KEY, value TEXT NOT NULL)")
    v = current_version(tx)
    if v > STATE_VERSION:
        raise StoreError(
            f"the service state in {where} is version {v}, newer than this memcurator "
            f"knows ({STATE_VERSION}); upgrade memcurator"
        )
    for step in range(v + 1, STATE_VERSION + 1):
        for sql in STEPS[step][kind]:
            tx.x(sql)
    if v < STATE_VERSION:
        tx.x(
            "INSERT INTO svc_state(name, value) VALUES ('version', ?) "
            "ON CONFLICT(name) DO UPDATE SET value=excluded.value",
            (str(STATE_VERSION),),
        )
    return STATE_VERSION


_KEY_COLS = (
    "key_id, secret_sha256, namespace, name, origin, scopes, rate_per_min, created_at, "
    "revoked_at, revoked_reason"
)


def import_key_file(state: Any, path: str) -> tuple[int, int]:
    """Copy the keys and namespace settings of a key file into ``state`` (a database).

    A key the database lacks is added; a key the file revoked is revoked in the database
    too; everything else the database holds wins (it may have been changed since). Run on
    every start with the file: importing twice changes nothing.

    Returns
    -------
    (int, int)
        Keys added, keys revoked.

    Raises
    ------
    InvalidInput
        Not a key file (a file that does not exist imports nothing).
    """
    if not Path(path).exists():
        return 0, 0
    try:
        src = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            keys = src.execute(f"SELECT {_KEY_COLS} FROM api_keys").fetchall()
            spaces = src.execute("SELECT name, policy, max_bytes FROM tenant_namespaces").fetchall()
        finally:
            src.close()
    except sqlite3.DatabaseError as e:
        raise InvalidInput(f"{path} is not a memcurator key file: {e}") from None
    added = revoked = 0
    with state.tx() as tx:
        for r in keys:
            added += tx.x(
                f"INSERT INTO api_keys({_KEY_COLS}) VALUES (?,?,?,?,?,?,?,?,?,?) "
                "ON CONFLICT(key_id) DO NOTHING",
                tuple(r),
            )
            if r[8] is not None:
                revoked += tx.x(
                    "UPDATE api_keys SET revoked_at=?, revoked_reason=? "
                    "WHERE key_id=? AND revoked_at IS NULL",
                    (r[8], r[9], r[0]),
                )
        for name, policy, max_bytes in spaces:
            tx.x(
                "INSERT INTO tenant_namespaces(name, policy, max_bytes) VALUES (?,?,?) "
                "ON CONFLICT(name) DO NOTHING",
                (name, policy, max_bytes),
            )
    return added, revoked


__all__ = ["STATE_VERSION", "STEPS", "current_version", "import_key_file", "migrate"]
