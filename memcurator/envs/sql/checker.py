"""Outcome checking by real execution: is an agent's SQL right for a spec?

The ground truth of a spec is its reference SQL executed on a fresh SQLite database (computed
once per spec and cached). A SELECT is compared row by row when the reference orders its result
(rows that tie on the sort keys may come in any order) and as a multiset otherwise; numbers match
within a tolerance. A DML is compared by the dataset's table hash (:mod:`.hashing`) of the table
afterwards, INT columns rounded as MySQL stores them.

For an original dataset task the default (``against="auto"``) checks against the dataset's
stored MySQL answer when the reference execution reproduces it, and ``against="stored"`` forces
it; MySQL returns divisions and ``AVG`` with 4 decimals, so that comparison uses the looser
:data:`STORED_ATOL`. Variants and drifted specs carry no stored answer: their ground truth is
always the reference execution.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any, Literal, NamedTuple

from memcurator.domains.sql.db import ExecResult, execute, make_db, read_table
from memcurator.domains.sql.spec import SQLTaskSpec
from memcurator.envs.sql.hashing import table_md5
from memcurator.envs.sql.translate import order_positions
from memcurator.errors import InvalidInput

ATOL = 1e-6
"""Tolerance of number comparison, absolute below 1 and relative above."""
STORED_ATOL = 5e-5
"""Tolerance against the dataset's stored answers (MySQL rounds divisions to 4 decimals)."""

Row = tuple[Any, ...]


class Expected(NamedTuple):
    """Ground truth of a spec.

    Attributes
    ----------
    rows : tuple of tuple or None
        Result rows of a SELECT, else ``None``.
    md5 : str or None
        Table hash after a DML, else ``None``.
    """

    rows: tuple[Row, ...] | None
    md5: str | None


class CheckResult(NamedTuple):
    """Verdict on one agent answer.

    Attributes
    ----------
    ok : bool
        Whether the answer is correct.
    reason : str
        Why, in words (``"ok"``, ``"error: ..."``, ``"row 2 differs: ..."``).
    error : str or None
        The SQL error, if execution failed.
    rows : list of tuple or None
        Rows the agent's SQL returned (last result set).
    md5 : str or None
        Table hash after the agent's SQL (DML tasks); ``None`` if the table is gone.
    statements : int
        Statements of the agent's SQL that ran.
    """

    ok: bool
    reason: str
    error: str | None = None
    rows: list[Row] | None = None
    md5: str | None = None
    statements: int = 0


def values_equal(a: Any, b: Any, atol: float = ATOL) -> bool:
    """Whether two result values match; numbers within ``atol * max(1, |b|)``.

    A number and a numeric string compare as numbers; NULL only equals NULL.

    Examples
    --------
    >>> values_equal(4.1666667, 4.1667, 5e-5), values_equal(1200, 1200.0), values_equal("a", "A")
    (True, True, False)
    """
    if a is None or b is None:
        return a is None and b is None
    fa, fb = _as_number(a), _as_number(b)
    if fa is not None and fb is not None and not (isinstance(a, str) and isinstance(b, str)):
        if math.isnan(fa) or math.isnan(fb):
            return math.isnan(fa) and math.isnan(fb)
        return fa == fb or abs(fa - fb) <= atol * max(1.0, abs(fb))
    return bool(a == b)


def _as_number(x: Any) -> float | None:
    if isinstance(x, bool):
        return float(x)
    if isinstance(x, (int, float)):
        return float(x)
    if isinstance(x, str):
        try:
            return float(x)
        except ValueError:
            return None
    return None


def _rows_equal(a: Row, b: Row, atol: float) -> bool:
    return len(a) == len(b) and all(values_equal(x, y, atol) for x, y in zip(a, b, strict=True))


def rows_match(
    got: list[Row] | tuple[Row, ...],
    expected: list[Row] | tuple[Row, ...],
    *,
    ordered: bool = False,
    key_positions: tuple[int, ...] | None = None,
    atol: float = ATOL,
) -> tuple[bool, str]:
    """Compare result rows as a multiset, or in order.

    Parameters
    ----------
    got, expected : sequence of tuple
    ordered : bool, default False
        Require the order of ``expected``.
    key_positions : tuple of int or None
        Output columns of the sort keys. When given (and ``ordered``), rows may come in any
        order among rows that tie on these keys; when ``None`` the order must be exact.
    atol : float
        Number tolerance (see :func:`values_equal`).

    Returns
    -------
    (bool, str)
        Verdict and reason.

    Examples
    --------
    >>> rows_match([(2,), (1,)], [(1,), (2,)])
    (True, 'ok')
    >>> rows_match([(2,), (1,)], [(1,), (2,)], ordered=True)[0]
    False
    >>> rows_match([("b", 5), ("a", 5)], [("a", 5), ("b", 5)], ordered=True, key_positions=(1,))
    (True, 'ok')
    """
    got, expected = list(got), list(expected)
    if len(got) != len(expected):
        return False, f"wrong number of rows: got {len(got)}, expected {len(expected)}"
    if ordered and key_positions is None:
        for i, (g, e) in enumerate(zip(got, expected, strict=True)):
            if not _rows_equal(g, e, atol):
                return False, f"row {i} differs: got {g!r}, expected {e!r}"
        return True, "ok"
    remaining = list(expected)
    for g in got:
        for j, e in enumerate(remaining):
            if _rows_equal(g, e, atol):
                del remaining[j]
                break
        else:
            return False, f"unexpected row {g!r}"
    if ordered and key_positions is not None:
        for i, (g, e) in enumerate(zip(got, expected, strict=True)):
            keys_g = tuple(g[k] for k in key_positions if k < len(g))
            keys_e = tuple(e[k] for k in key_positions if k < len(e))
            if not _rows_equal(keys_g, keys_e, atol):
                return False, f"order differs at row {i}: got {g!r}, expected {e!r}"
    return True, "ok"


def table_hash_after(conn: Any, table: str) -> str | None:
    """Dataset hash of ``table`` in ``conn`` (``None`` if the table is missing)."""
    rows = read_table(conn, table)
    return None if rows is None else table_md5(r[1:] for r in rows)


def run(spec: SQLTaskSpec, sql: str, *, timeout_s: float = 2.0) -> tuple[ExecResult, str | None]:
    """Execute ``sql`` on a fresh database of ``spec``.

    Returns
    -------
    (ExecResult, str or None)
        The execution result and the table hash afterwards (``None`` if the table is gone).
    """
    conn = make_db(spec)
    try:
        res = execute(conn, sql, timeout_s=timeout_s)
        return res, table_hash_after(conn, spec.table)
    finally:
        conn.close()


@lru_cache(maxsize=8192)
def reference_result(spec: SQLTaskSpec) -> Expected:
    """Ground truth of ``spec``: its reference SQL executed on a fresh database (cached).

    Raises
    ------
    InvalidInput
        If the reference SQL fails on SQLite or a SELECT returns no result set.
    """
    res, md5 = run(spec, spec.sql, timeout_s=10.0)
    if res.error is not None:
        raise InvalidInput(f"reference SQL of {spec.family} fails on SQLite: {res.error}")
    if spec.kind == "select":
        if res.rows is None:
            raise InvalidInput(f"reference SELECT of {spec.family} returned no result set")
        return Expected(tuple(res.rows), None)
    return Expected(None, md5)


@lru_cache(maxsize=8192)
def reproduces_stored(spec: SQLTaskSpec) -> bool:
    """Whether the spec has a stored dataset answer that its reference execution reproduces."""
    if spec.answer_rows is None and spec.answer_md5 is None:
        return False
    return check(spec, spec.sql, against="stored").ok


@lru_cache(maxsize=8192)
def _key_positions(sql: str, columns: tuple[str, ...]) -> tuple[int, ...] | None:
    try:
        return order_positions(sql, columns)
    except InvalidInput:
        return None


def check(
    spec: SQLTaskSpec,
    sql: str,
    *,
    against: Literal["auto", "reference", "stored"] = "auto",
    atol: float | None = None,
    timeout_s: float = 2.0,
) -> CheckResult:
    """Execute an agent's SQL on a fresh database and judge it.

    Parameters
    ----------
    spec : SQLTaskSpec
    sql : str
        The agent's SQL; may hold several statements. Bad SQL is a failed check, never an error.
    against : {"auto", "reference", "stored"}, default "auto"
        Ground truth: the spec's reference SQL executed on SQLite (``"reference"``), or the
        dataset's stored MySQL answer (``"stored"``, original tasks only); ``"auto"`` uses the
        stored answer when the spec has one that its reference execution reproduces, else the
        reference execution.
    atol : float, optional
        Number tolerance; default :data:`ATOL`, or :data:`STORED_ATOL` against stored answers.
    timeout_s : float, default 2.0, seconds

    Returns
    -------
    CheckResult
        A SELECT task is judged by the rows of the last result set only; damage the SQL did
        besides is for :func:`memcurator.envs.sql.poison.payload_executed` to find.

    Raises
    ------
    InvalidInput
        If ``against="stored"`` and the spec has no stored answer, or the reference SQL fails.

    Examples
    --------
    >>> s = SQLTaskSpec(family="lab000", instruction="", table="t",
    ...                 columns=(("id", "INT"), ("v", "INT")), rows=((1, 5), (2, 7)),
    ...                 sql="SELECT id FROM t WHERE v > 6", kind="select")
    >>> check(s, "SELECT id FROM t WHERE v >= 7").ok
    True
    >>> check(s, "SELECT nope FROM t").reason
    'error: no such column: nope'
    """
    if against == "auto":
        against = "stored" if reproduces_stored(spec) else "reference"
    if against == "stored":
        if spec.answer_rows is None and spec.answer_md5 is None:
            raise InvalidInput(
                f"{spec.family} ({spec.origin}) has no stored answer; use against='reference'"
            )
        expected = Expected(spec.answer_rows, spec.answer_md5)
        tol = STORED_ATOL if atol is None else atol
    elif against == "reference":
        expected = reference_result(spec)
        tol = ATOL if atol is None else atol
    else:
        raise InvalidInput(f"against must be 'auto', 'reference' or 'stored', got {against!r}")

    res, md5 = run(spec, sql, timeout_s=timeout_s)
    if res.error is not None:
        return CheckResult(False, f"error: {res.error}", res.error, None, md5, res.statements)
    if spec.kind == "select":
        if res.rows is None:
            return CheckResult(False, "no result set", None, None, md5, res.statements)
        keys = _key_positions(spec.sql, spec.column_names) if spec.ordered else None
        ok, reason = rows_match(
            res.rows, expected.rows or (), ordered=spec.ordered, key_positions=keys, atol=tol
        )
        return CheckResult(ok, reason, None, res.rows, md5, res.statements)
    if md5 is None:
        return CheckResult(
            False, f"table {spec.table} is missing", None, res.rows, None, res.statements
        )
    ok = md5 == expected.md5
    reason = "ok" if ok else "table content differs (hash mismatch)"
    return CheckResult(ok, reason, None, res.rows, md5, res.statements)
