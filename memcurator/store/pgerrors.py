"""What went wrong with PostgreSQL, said in words: a connection refused for its real cause, and
a lock timeout with the kind of session that held the lock.

libpq reports every failed connection as one ``OperationalError`` without an SQLSTATE (the
server's ``FATAL`` text is in the message), so :func:`connect_cause` reads the message: a wrong
database, role or password, a host that does not resolve, a port where nothing listens, and
something other than PostgreSQL answering each get their own sentence, within the connect
timeout (not after the pool's whole ``timeout_s``). :func:`lock_holders` asks ``pg_locks`` who
holds the locks a writer can wait for, on a connection of its own.
"""

from __future__ import annotations

from typing import Any

from memcurator.store.pgschema import LOCK_CREATE, LOCK_NAMESPACE, LOCK_STORE

#: (text in libpq's message, the cause in words, retry?) in the order they are tested.
_CAUSES: tuple[tuple[str, str, bool], ...] = (
    ("does not exist", "", False),  # database or role: the server's own sentence says which
    ("password authentication failed", "wrong password for the role", False),
    ("no password supplied", "the server asks for a password and the URL gives none", False),
    ("no pg_hba.conf entry", "the server's pg_hba.conf refuses this host, role or database", False),
    ("failed to resolve host", "the host name does not resolve", False),
    ("could not translate host name", "the host name does not resolve", False),
    (
        "Connection refused",
        "nothing listens there: a wrong port, or the server is not running",
        False,
    ),
    ("SSL negotiation", "something other than PostgreSQL answers at that host and port", False),
    ("invalid response", "something other than PostgreSQL answers at that host and port", False),
    ("timeout expired", "no answer from the host within the connect timeout", True),
    ("starting up", "the server is starting up", True),
    ("shutting down", "the server is shutting down", True),
    ("too many clients", "the server has no free connection slot", True),
)


def connect_cause(error: BaseException) -> tuple[str, bool]:
    """The cause of a failed connection in words, and whether waiting may cure it.

    Parameters
    ----------
    error : Exception
        What ``psycopg.connect`` raised.

    Returns
    -------
    (str, bool)
        A sentence (the server's own text for a database or role that does not exist), and
        True for a cause that can pass (a server starting up, no free slot, a timeout).

    Examples
    --------
    >>> connect_cause(OSError('connection failed: ... failed: FATAL:  database "mem" does '
    ...                       'not exist'))
    ('database "mem" does not exist', False)
    >>> connect_cause(OSError("connection failed: ... failed: Connection refused"))[0]
    'nothing listens there: a wrong port, or the server is not running'
    >>> connect_cause(OSError('FATAL:  password authentication failed for user "bob"'))
    ('wrong password for the role', False)
    """
    text = " ".join(str(error).split())
    for needle, cause, transient in _CAUSES:
        if needle in text:
            if not cause:  # 'FATAL: database "x" does not exist' / 'role "x" does not exist'
                cause = text.rsplit("FATAL:", 1)[-1].strip()
            return cause, transient
    return text, False


def _holder(row: tuple[Any, ...]) -> str:
    pid, btype, query, state, locktype, mode, classid, relname = row
    q = " ".join((query or "").split())
    head = q.upper()
    if btype == "autovacuum worker":
        what = f"autovacuum on {relname}"
    elif head.startswith("VACUUM"):
        what = (
            f"a VACUUM ({q[:60]}: a secure erase rewriting the table) holding {mode} on {relname}"
        )
    elif head.startswith("CREATE INDEX") or head.startswith("REINDEX"):
        what = f"an index build ({q[:60]}) holding {mode} on {relname}"
    elif locktype == "advisory" and int(classid) == LOCK_NAMESPACE:
        what = f"another writer of a namespace (a {state or 'open'} transaction: {q[:60]})"
    elif locktype == "advisory" and int(classid) == LOCK_CREATE:
        what = f"another transaction creating a namespace ({q[:60]})"
    elif locktype == "advisory" and int(classid) == LOCK_STORE:
        what = f"a store-wide transaction ({mode}; {q[:60]})"
    else:
        what = f"{q[:60] or btype} holding {mode} on {relname}"
    return f"pid {pid}: {what}"


def lock_holders(conn: Any) -> list[str]:
    """Sessions of this database that hold, right now, a lock a memcurator writer can wait for
    (this store's advisory locks, and table locks stronger than a plain write's), each in
    words: a VACUUM (secure erase), an index build, autovacuum, another namespace writer, the
    creation of a namespace or a store-wide transaction. ``conn`` is a connection of its own
    (autocommit)."""
    rows = conn.execute(
        "SELECT a.pid, a.backend_type, a.query, a.state, l.locktype, l.mode, l.classid, "
        "c.relname FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
        "LEFT JOIN pg_class c ON c.oid = l.relation "
        "WHERE l.granted AND a.pid <> pg_backend_pid() AND a.datname = current_database() AND ("
        "(l.locktype = 'advisory' AND l.classid IN (%s, %s, %s)) OR "
        "(l.locktype = 'relation' AND c.relkind IN ('r', 'p', 'i', 'I') AND "
        "c.relnamespace <> 'pg_catalog'::regnamespace AND l.mode IN "
        "('ShareLock', 'ShareRowExclusiveLock', 'ExclusiveLock', 'AccessExclusiveLock'))) "
        "ORDER BY a.pid",
        (LOCK_NAMESPACE, LOCK_STORE, LOCK_CREATE),
    ).fetchall()
    seen: list[str] = []
    for r in rows:
        h = _holder(tuple(r))
        if h not in seen:
            seen.append(h)
    return seen


__all__ = ["connect_cause", "lock_holders"]
