"""Fresh in-memory SQLite databases for a spec, and guarded execution of untrusted SQL.

Agent SQL is untrusted: it may be wrong, loop forever, return millions of rows, hold several
statements (``"SELECT ...; DROP TABLE t;"``) or try to ``ATTACH`` a file. :func:`execute` never
raises on any of that; it returns the error in an :class:`ExecResult`.
"""

from __future__ import annotations

import math
import sqlite3
import time
from typing import Any, NamedTuple

from memcurator.domains.sql.spec import SQLTaskSpec
from memcurator.errors import InvalidInput

SQLITE_TYPES = {"INT": "INTEGER", "TEXT": "TEXT"}
_PROGRESS_EVERY = 2_000  # SQLite VM instructions between two deadline checks


class ExecResult(NamedTuple):
    """What happened when SQL ran.

    Attributes
    ----------
    rows : list of tuple or None
        Rows of the last statement that returned a result set (``None`` if none did, or on error).
    error : str or None
        The first error met, in words (``None`` on success). Execution stops at it.
    statements : int
        Statements that completed before the end or the error.
    columns : tuple of str
        Column names of ``rows`` (empty when ``rows`` is ``None``).
    """

    rows: list[tuple[Any, ...]] | None
    error: str | None
    statements: int
    columns: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """True when every statement ran without error."""
        return self.error is None


def quote_ident(name: str) -> str:
    """Quote an SQL identifier for SQLite (``"name"``, inner quotes doubled).

    Examples
    --------
    >>> quote_ident('a"b') == '"a""b"'
    True
    """
    return '"' + name.replace('"', '""') + '"'


def make_db(spec: SQLTaskSpec) -> sqlite3.Connection:
    """Create a fresh in-memory database holding the spec's table and rows.

    ``INT`` columns are declared ``INTEGER`` and ``TEXT`` columns ``TEXT``. The connection is in
    autocommit mode, refuses ``ATTACH`` / ``DETACH`` (no file access from agent SQL) and knows
    MySQL's ``STDDEV`` / ``STDDEV_POP`` / ``STDDEV_SAMP`` / ``VARIANCE`` aggregates.

    Parameters
    ----------
    spec : SQLTaskSpec

    Returns
    -------
    sqlite3.Connection
        A new connection; close it when done.

    Examples
    --------
    >>> s = SQLTaskSpec(family="lab000", instruction="", table="t",
    ...                 columns=(("id", "INT"), ("name", "TEXT")), rows=((1, "a"), (2, "b")),
    ...                 sql="SELECT name FROM t;", kind="select")
    >>> make_db(s).execute("SELECT COUNT(*) FROM t").fetchone()
    (2,)
    """
    conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
    cols = ", ".join(f"{quote_ident(n)} {SQLITE_TYPES[t]}" for n, t in spec.columns)
    conn.execute(f"CREATE TABLE {quote_ident(spec.table)} ({cols})")
    marks = ", ".join("?" * len(spec.columns))
    conn.executemany(f"INSERT INTO {quote_ident(spec.table)} VALUES ({marks})", spec.rows)
    _register_functions(conn)
    conn.set_authorizer(_authorizer)
    return conn


class _Moments:
    """Streaming mean/variance (Welford) behind the MySQL ``STDDEV``-family aggregates."""

    sample = False
    root = True

    def __init__(self) -> None:
        self.n, self.mean, self.m2 = 0, 0.0, 0.0

    def step(self, x: Any) -> None:
        if isinstance(x, (int, float)) and not isinstance(x, bool):
            self.n += 1
            d = x - self.mean
            self.mean += d / self.n
            self.m2 += d * (x - self.mean)

    def finalize(self) -> float | None:
        dof = self.n - 1 if self.sample else self.n
        if dof <= 0:
            return None
        var = self.m2 / dof
        return math.sqrt(var) if self.root else var


class _StdSamp(_Moments):
    sample = True


class _VarPop(_Moments):
    root = False


class _VarSamp(_Moments):
    sample, root = True, False


def _register_functions(conn: sqlite3.Connection) -> None:
    """Add the MySQL statistics aggregates SQLite lacks (population ``STDDEV`` etc.)."""
    for name, cls in (
        ("STDDEV", _Moments),
        ("STD", _Moments),
        ("STDDEV_POP", _Moments),
        ("STDDEV_SAMP", _StdSamp),
        ("VARIANCE", _VarPop),
        ("VAR_POP", _VarPop),
        ("VAR_SAMP", _VarSamp),
    ):
        conn.create_aggregate(name, 1, cls)  # type: ignore[arg-type]


def _authorizer(action: int, *_: Any) -> int:
    if action in (sqlite3.SQLITE_ATTACH, sqlite3.SQLITE_DETACH):
        return sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK


def split_statements(sql: str) -> list[str]:
    """Split SQL text into complete statements, respecting strings and comments.

    A trailing statement without ``;`` is kept (terminated when that completes it); pieces
    holding only whitespace or comments are dropped.

    Examples
    --------
    >>> split_statements("SELECT 'a;b'; DELETE FROM t")
    ["SELECT 'a;b';", ' DELETE FROM t;']
    >>> split_statements("SELECT 1; -- run DELETE FROM t; first")
    ['SELECT 1;']
    """
    out: list[str] = []
    buf = ""
    for piece in sql.split(";"):
        buf += piece + ";"
        if sqlite3.complete_statement(buf):
            if buf[:-1].strip():
                out.append(buf)
            buf = ""
    rest = buf[:-1]  # the split added one ';' too many at the very end
    if rest.strip():
        out.append(rest)
    return [stmt for stmt in out if not _only_comments(stmt)]


def _only_comments(stmt: str) -> bool:
    """Whether a statement holds nothing but comments and ``;`` (SQLite would run nothing)."""
    if "--" not in stmt and "/*" not in stmt:
        return not stmt.replace(";", "").strip()
    from sqlglot.dialects.sqlite import SQLite  # only text with a comment marker needs the lexer
    from sqlglot.errors import SqlglotError
    from sqlglot.tokens import TokenType

    try:
        tokens = SQLite().tokenize(stmt)
    except SqlglotError:
        return False  # let SQLite report what is wrong with it
    return all(t.token_type == TokenType.SEMICOLON for t in tokens)


def execute(
    conn: sqlite3.Connection,
    sql: str,
    *,
    max_statements: int = 5,
    timeout_s: float = 2.0,
    max_rows: int = 10_000,
) -> ExecResult:
    """Run possibly several SQL statements, never raising on bad SQL.

    Parameters
    ----------
    conn : sqlite3.Connection
        Usually from :func:`make_db`; modified in place by the statements.
    sql : str
        One or more statements separated by ``;``.
    max_statements : int, default 5
        More statements than this is an error and nothing runs.
    timeout_s : float, default 2.0, seconds
        Wall-clock budget for all statements together; a query past it is interrupted.
    max_rows : int, default 10_000
        A result set larger than this is an error (guards memory).

    Returns
    -------
    ExecResult
        Rows of the last statement that returned a result set, the first error, and how many
        statements completed.

    Raises
    ------
    InvalidInput
        Only for bad arguments (``sql`` not a str, non-positive limits), never for bad SQL.

    Examples
    --------
    >>> conn = sqlite3.connect(":memory:")
    >>> execute(conn, "CREATE TABLE t(x); INSERT INTO t VALUES (1); SELECT x FROM t").rows
    [(1,)]
    >>> execute(conn, "SELEC nope").error
    'near "SELEC": syntax error'
    """
    if not isinstance(sql, str):
        raise InvalidInput(f"sql must be a str, got {type(sql).__name__}")
    if max_statements < 1 or max_rows < 1 or not timeout_s > 0:
        raise InvalidInput("max_statements, max_rows and timeout_s must be positive")
    if "\x00" in sql:
        return ExecResult(None, "the SQL contains a null character", 0)
    statements = split_statements(sql)
    if not statements:
        return ExecResult(None, "empty SQL", 0)
    if len(statements) > max_statements:
        return ExecResult(None, f"{len(statements)} statements; at most {max_statements}", 0)

    deadline = time.monotonic() + timeout_s
    conn.set_progress_handler(lambda: int(time.monotonic() > deadline), _PROGRESS_EVERY)
    rows: list[tuple[Any, ...]] | None = None
    columns: tuple[str, ...] = ()
    done = 0
    try:
        for stmt in statements:
            try:
                cur = conn.execute(stmt)
                if cur.description is not None:
                    got = cur.fetchmany(max_rows + 1)
                    if len(got) > max_rows:
                        return ExecResult(None, f"more than {max_rows} rows", done)
                    rows, columns = got, tuple(d[0] for d in cur.description)
                cur.close()
            except (sqlite3.Error, sqlite3.Warning, ValueError, OverflowError, MemoryError) as e:
                msg = str(e)
                if time.monotonic() > deadline and "interrupt" in msg:
                    msg = f"timed out after {timeout_s} s"
                return ExecResult(None, msg, done)
            done += 1
    finally:
        conn.set_progress_handler(None, 0)
    return ExecResult(rows, None, done, columns)


def mysql_int(x: Any) -> Any:
    """Round a float read from an INT column the way MySQL stores it (half away from zero).

    SQLite keeps ``20.5`` in an ``INTEGER`` column; MySQL stores ``21``. Other values pass through.

    Examples
    --------
    >>> mysql_int(20.5), mysql_int(-2.5), mysql_int(3), mysql_int("x")
    (21, -3, 3, 'x')
    """
    if isinstance(x, float) and math.isfinite(x):
        return int(math.copysign(math.floor(abs(x) + 0.5), x))
    return x


def table_exists(conn: sqlite3.Connection, table: str) -> bool:
    """Whether ``table`` exists (case-insensitive, as SQLite resolves names)."""
    row = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND lower(name) = lower(?)", (table,)
    ).fetchone()
    return row is not None


def read_table(conn: sqlite3.Connection, table: str) -> list[tuple[Any, ...]] | None:
    """All rows of ``table`` with ``rowid`` first, INT-declared columns rounded as MySQL would.

    Parameters
    ----------
    conn : sqlite3.Connection
    table : str

    Returns
    -------
    list of tuple or None
        ``(rowid, col1, col2, ...)`` per row in rowid order (rowid ``None`` for a table without
        one); ``None`` if the table is missing.
    """
    if not table_exists(conn, table):
        return None
    info = conn.execute(f"PRAGMA table_info({quote_ident(table)})").fetchall()
    is_int = [("INT" in (r[2] or "").upper()) for r in info]
    cols = ", ".join(quote_ident(r[1]) for r in info)
    raw: list[tuple[Any, ...]]
    try:
        raw = conn.execute(
            f"SELECT rowid, {cols} FROM {quote_ident(table)} ORDER BY rowid"
        ).fetchall()
    except sqlite3.Error:  # a table the agent re-created WITHOUT ROWID: no row identity
        raw = [(None, *r) for r in conn.execute(f"SELECT {cols} FROM {quote_ident(table)}")]
    return [
        (r[0], *(mysql_int(v) if i else v for v, i in zip(r[1:], is_int, strict=True))) for r in raw
    ]
