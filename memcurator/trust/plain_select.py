"""One plain SELECT read without sqlglot: the facts the SQL checks need of it (issue 31).

The SQL domain check (:func:`~memcurator.domains.sql.risk.sql_risk`) judges an action from
sqlglot's parse tree, and the generic action check (:func:`~memcurator.trust.action_risk.non_sql`)
asks sqlglot whether a part of an action is an SQL statement; importing sqlglot is most of what a
cold first write of an SQL action costs (about 70 of 120 ms). The commonest action, one SELECT of
columns or aggregates from one table filtered by comparisons with literals, needs little of the
tree: that it is a SELECT, its literals (value, kind, role), and the table's columns with the
literals each is compared with. :func:`parse_simple_select` reads exactly that narrow grammar and
returns None for anything else, which the checks then parse with sqlglot as before; on what it
accepts, the facts are the ones sqlglot's tree gives (tests/test_sql_simple.py compares the facts
and the SQL check's reports of the two paths over generated statements). It lives in the trust
package, below both checks, and knows nothing of either's findings.

The grammar (keywords in any case; a name is ``[A-Za-z_][A-Za-z0-9_]*`` and no SQL keyword)::

    SELECT [DISTINCT] item {, item} FROM name
        [WHERE cond {AND|OR cond}] [GROUP BY col {, col}]
        [ORDER BY col [ASC|DESC] {, col [ASC|DESC]}] [LIMIT int] [;]
    item := * | col [AS name] | COUNT|SUM|AVG|MIN|MAX ( * | col ) [AS name]
    col  := name | name.name
    cond := col (= | != | <> | < | <= | > | >=) lit | col LIKE 'text'
          | col IN (lit {, lit}) | col BETWEEN lit AND lit
    lit  := digits[.digits] (at most 15 digits) | 'text' (no quote, backslash or line break)

Text holding a comment marker (``--``, ``/*``), a double quote or a backtick anywhere is
never accepted, so the check's comment findings are empty for whatever is.

Examples
--------
>>> s = parse_simple_select("SELECT COUNT(*) FROM orders WHERE cid = 5;")
>>> s.tables, s.literals
({'orders': {'cid': [5]}}, (Lit(value='5', is_string=False, role='filter'),))
>>> parse_simple_select("SELECT * FROM t; DROP TABLE t") is None
True
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

#: words sqlglot's SQLite tokenizer reads as keywords, and the few its parser treats specially
#: without parentheses (tests/test_sql_simple.py checks the list against the installed sqlglot):
#: none of them is accepted as a name
RESERVED = frozenset(
    """
    ALL ALTER ANALYZE AND ANTI ANY APPLY ARRAY AS ASC ASOF ATTACH AUTOINCREMENT AUTO_INCREMENT
    BEGIN BETWEEN BIGDECIMAL BIGINT BIGNUM BIGNUMERIC BINARY BIT BLOB BOOL BOOLEAN BPCHAR BYTE
    BYTEA CACHE CALL CASE CHAR CHARACTER CLOB COLLATE COLUMN COMMENT COMMIT CONSTRAINT COPY
    CREATE CROSS CUBE CURRENT_CATALOG CURRENT_DATE CURRENT_SCHEMA CURRENT_TIME
    CURRENT_TIMESTAMP CURRENT_USER DATABASE DATE DATEMULTIRANGE DATERANGE DATETIME DEC DECFLOAT
    DECIMAL DECIMAL128 DECIMAL256 DECIMAL32 DECIMAL64 DEFAULT DELETE DESC DESCRIBE DETACH
    DISTINCT DIV DOUBLE DROP ELSE END ENUM ESCAPE EXCEPT EXECUTE EXISTS EXPLAIN FALSE FETCH
    FILE FILTER FIRST FIXED FLOAT FLOAT4 FLOAT8 FOR FORMAT FROM FULL FUNCTION GEOGRAPHY
    GEOMETRY GLOB GRANT HAVING HUGEINT ILIKE IN INDEX INET INNER INSERT INT INT1 INT128 INT16
    INT2 INT256 INT32 INT4 INT4MULTIRANGE INT4RANGE INT64 INT8 INT8MULTIRANGE INT8RANGE INTEGER
    INTERSECT INTERVAL INTO IS ISNULL JOIN JSON JSONB KEEP KILL LATERAL LEFT LIKE LIMIT LIST
    LOAD LOCALTIME LOCALTIMESTAMP LOCK LONG LONGBLOB LONGTEXT LONGVARCHAR MAP MATCH MEDIUMBLOB
    MEDIUMINT MEDIUMTEXT MERGE NAMESPACE NATURAL NCHAR NEXT NOT NOTNULL NULL NULLABLE NUMBER
    NUMERIC NUMMULTIRANGE NUMRANGE NVARCHAR NVARCHAR2 OBJECT OFFSET ON OPERATOR OPTIMIZE OR
    ORDINALITY OUT OUTER OVER OVERLAPS OVERWRITE PARTITION PARTITIONED_BY PERCENT PIVOT PRAGMA
    PREPARE PROCEDURE QUALIFY RANGE REAL RECURSIVE REF REFERENCES REGEXP REINDEX RELEASE RENAME
    REPLACE RETURNING REVOKE RIGHT RLIKE ROLLBACK ROLLUP ROW ROWS SAVEPOINT SCHEMA SELECT SEMI
    SEQUENCE SESSION SESSION_USER SET SETTINGS SHORT SHOW SMALLINT SOME STR STRAIGHT_JOIN
    STRING STRUCT TABLE TABLESAMPLE TEMP TEMPORARY TEXT THEN TIME TIMESTAMP TIMESTAMPLTZ
    TIMESTAMPNTZ TIMESTAMPTZ TIMESTAMP_LTZ TIMESTAMP_NTZ TIMETZ TIME_NS TINYBLOB TINYINT
    TINYTEXT TRIGGER TRUE TRUNCATE TSMULTIRANGE TSRANGE TSTZMULTIRANGE TSTZRANGE UHUGEINT UINT
    UINT128 UINT256 UNCACHE UNION UNIQUE UNKNOWN UNNEST UNPIVOT UPDATE USE USING UUID VACUUM
    VALUES VARBINARY VARCHAR VARCHAR2 VARIANT VECTOR VIEW VOLATILE WHEN WHERE WINDOW WITH XOR
    CONNECT_BY_ROOT IF
    """.split()
)

_AGGREGATES = frozenset({"COUNT", "SUM", "AVG", "MIN", "MAX"})
_COMPARE = frozenset({"=", "!=", "<>", "<", "<=", ">", ">="})
_TOKEN = re.compile(
    r"[ \t\n\r]*(?:(?P<num>[0-9]+(?:\.[0-9]+)?)(?![\w.])|'(?P<str>[^'\\\n\r]*)'|"
    r"(?P<name>[A-Za-z_][A-Za-z0-9_]*)|(?P<op><=|>=|<>|!=|[=<>*,();.]))"
)
_MAX_DIGITS = 15


@dataclass(frozen=True)
class Lit:
    """A literal of the statement: its text, whether it is a string, and its role
    (``"filter"``, ``"write"``, ``"limit"`` or ``"other"``)."""

    value: str
    is_string: bool
    role: str


@dataclass(frozen=True)
class SimpleSelect:
    """What the SQL check needs of one plain SELECT.

    Attributes
    ----------
    tables : dict
        The table's name to its columns (as written, in order of first mention) to the literals
        compared with each (numbers as int or float, strings with a LIKE pattern's ``%`` cut).
    literals : tuple of Lit
        Every literal of the statement.
    """

    tables: dict[str, dict[str, list[Any]]]
    literals: tuple[Lit, ...]


def norm_num(s: str) -> float | None:
    """The number a literal's text writes (thousands commas dropped), or None."""
    try:
        return float(s.replace(",", ""))
    except ValueError:
        return None


def _value(lit: Lit) -> Any:
    if lit.is_string:
        return lit.value
    v = norm_num(lit.value)
    return int(v) if v is not None and v.is_integer() else v


class _Reader:
    """Tokens of the statement, read left to right; every ``expect`` failure is a refusal."""

    def __init__(self, tokens: list[tuple[str, str]]):
        self.tokens = tokens
        self.i = 0

    def peek(self, offset: int = 0) -> tuple[str, str]:
        j = self.i + offset
        return self.tokens[j] if j < len(self.tokens) else ("end", "")

    def word(self, *words: str) -> bool:
        kind, text = self.peek()
        if kind == "name" and text.upper() in words:
            self.i += 1
            return True
        return False

    def op(self, *ops: str) -> bool:
        kind, text = self.peek()
        if kind == "op" and text in ops:
            self.i += 1
            return True
        return False

    def name(self) -> str:
        kind, text = self.peek()
        if kind != "name" or text.upper() in RESERVED or text.upper() in _AGGREGATES:
            raise _Refuse
        self.i += 1
        return text

    def literal(self) -> tuple[str, bool]:
        kind, text = self.peek()
        if kind not in ("num", "str"):
            raise _Refuse
        self.i += 1
        return text, kind == "str"


class _Refuse(Exception):
    """The statement is outside the grammar."""


def _tokens(sql: str) -> list[tuple[str, str]] | None:
    out: list[tuple[str, str]] = []
    pos = 0
    while pos < len(sql):
        m = _TOKEN.match(sql, pos)
        if m is None:
            return None if sql[pos:].strip(" \t\n\r") else out
        kind = m.lastgroup or ""
        if kind == "num" and len(m.group(kind).replace(".", "")) > _MAX_DIGITS:
            return None
        out.append((kind, m.group(kind)))
        pos = m.end()
    return out


def parse_simple_select(sql: str) -> SimpleSelect | None:
    """The facts of sql when it is one SELECT of the module's grammar, else None.

    Parameters
    ----------
    sql : str
        An entry's action.

    Returns
    -------
    SimpleSelect or None
        None for anything outside the grammar (the caller parses it with sqlglot).
    """
    if not isinstance(sql, str) or any(m in sql for m in ("--", "/*", '"', "`")):
        return None
    tokens = _tokens(sql)
    if not tokens:
        return None
    try:
        return _select(_Reader(tokens))
    except _Refuse:
        return None


def _select(r: _Reader) -> SimpleSelect:
    columns: list[str] = []
    literals: list[Lit] = []
    compared: dict[str, list[Any]] = {}
    if not r.word("SELECT"):
        raise _Refuse
    r.word("DISTINCT")
    while True:
        if r.op("*"):
            pass
        elif _is_aggregate(r):
            r.i += 2
            if not r.op("*"):
                columns.append(_column(r))
            if not r.op(")"):
                raise _Refuse
            _alias(r)
        else:
            columns.append(_column(r))
            _alias(r)
        if not r.op(","):
            break
    if not r.word("FROM"):
        raise _Refuse
    table = r.name()
    if r.word("WHERE"):
        while True:
            col = _column(r)
            columns.append(col)
            like, lits = _condition(r)
            for lit in lits:
                literals.append(lit)
                v = _value(lit)
                compared.setdefault(col, []).append(v.strip("%") if like else v)
            if not r.word("AND", "OR"):
                break
    if r.word("GROUP"):
        _by_list(r, columns, ordered=False)
    if r.word("ORDER"):
        _by_list(r, columns, ordered=True)
    if r.word("LIMIT"):
        text, is_string = r.literal()
        if is_string or "." in text:
            raise _Refuse
        literals.append(Lit(text, False, "limit"))
    r.op(";")
    if r.peek()[0] != "end":
        raise _Refuse
    if len({c.lower() for c in columns}) != len(set(columns)):
        raise _Refuse  # one column written in two cases: the full path decides
    cols: dict[str, list[Any]] = {}
    for c in columns:
        cols.setdefault(c, []).extend(compared.pop(c, []))
    return SimpleSelect({table: cols}, tuple(literals))


def _is_aggregate(r: _Reader) -> bool:
    kind, text = r.peek()
    return kind == "name" and text.upper() in _AGGREGATES and r.peek(1) == ("op", "(")


def _column(r: _Reader) -> str:
    name = r.name()
    if r.op("."):
        name = r.name()  # the qualifier is the one table (or is resolved to it)
    return name


def _alias(r: _Reader) -> None:
    if r.word("AS"):
        r.name()


def _condition(r: _Reader) -> tuple[bool, list[Lit]]:
    """Whether the condition is a LIKE, and its literals (all of role "filter")."""
    if r.op(*_COMPARE):
        return False, [Lit(*r.literal(), "filter")]
    if r.word("LIKE"):
        text, is_string = r.literal()
        if not is_string:
            raise _Refuse
        return True, [Lit(text, True, "filter")]
    if r.word("IN"):
        if not r.op("("):
            raise _Refuse
        out = [Lit(*r.literal(), "filter")]
        while r.op(","):
            out.append(Lit(*r.literal(), "filter"))
        if not r.op(")"):
            raise _Refuse
        return False, out
    if r.word("BETWEEN"):
        low = Lit(*r.literal(), "filter")
        if not r.word("AND"):
            raise _Refuse
        return False, [low, Lit(*r.literal(), "filter")]
    raise _Refuse


def _by_list(r: _Reader, columns: list[str], *, ordered: bool) -> None:
    if not r.word("BY"):
        raise _Refuse
    while True:
        columns.append(_column(r))
        if ordered:
            r.word("ASC", "DESC")
        if not r.op(","):
            return


__all__ = ["RESERVED", "Lit", "SimpleSelect", "norm_num", "parse_simple_select"]
