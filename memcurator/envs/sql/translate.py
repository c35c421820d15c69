"""Reading reference SQL with sqlglot: MySQL -> SQLite translation, kind and ordering analysis.

LifelongAgentBench's reference SQL is MySQL. Most of it runs on SQLite unchanged; the rest is
translated here. sqlglot transpiles functions and syntax; the two multi-table DML forms SQLite
lacks (``UPDATE t a JOIN ... SET`` and ``DELETE a FROM t a JOIN ...``) are rewritten to a
``WHERE rowid IN (SELECT a.rowid FROM t a JOIN ...)`` filter.
"""

from __future__ import annotations

from typing import cast

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from memcurator.domains.sql.spec import SQLKind
from memcurator.errors import InvalidInput


def parse(sql: str, dialect: str = "sqlite") -> exp.Expression:
    """Parse one SQL statement, trying ``dialect`` first and MySQL second.

    Raises
    ------
    InvalidInput
        If neither dialect parses it, or it holds no or several statements.
    """
    last: Exception | None = None
    for d in dict.fromkeys((dialect, "mysql")):
        try:
            trees = [t for t in sqlglot.parse(sql, read=d) if t is not None]
        except SqlglotError as e:
            last = e
            continue
        if len(trees) != 1:
            raise InvalidInput(f"expected one SQL statement, got {len(trees)}: {sql[:80]!r}")
        return cast(exp.Expression, trees[0])
    raise InvalidInput(f"cannot parse SQL {sql[:80]!r}: {last}")


def sql_kind(sql: str) -> SQLKind:
    """What a statement does: ``"select"``, ``"insert"``, ``"update"`` or ``"delete"``.

    Raises
    ------
    InvalidInput
        For any other statement (DDL, PRAGMA, ...).

    Examples
    --------
    >>> sql_kind("UPDATE t SET a = 1"), sql_kind("WITH x AS (SELECT 1) SELECT * FROM x")
    ('update', 'select')
    """
    tree = parse(sql)
    for cls, kind in (
        (exp.Insert, "insert"),
        (exp.Update, "update"),
        (exp.Delete, "delete"),
        (exp.Query, "select"),
    ):
        if isinstance(tree, cls):
            return kind  # type: ignore[return-value]
    raise InvalidInput(f"not a SELECT/INSERT/UPDATE/DELETE statement: {sql[:80]!r}")


def is_ordered(sql: str) -> bool:
    """Whether a query orders its result at top level.

    A task whose reference query is ordered is checked with its rows in order
    (:attr:`~memcurator.domains.sql.spec.SQLTaskSpec.ordered`); an ``ORDER BY`` inside a
    subquery does not make the result ordered.

    Examples
    --------
    >>> is_ordered("SELECT a FROM t ORDER BY a")
    True
    >>> is_ordered("SELECT a FROM (SELECT a FROM t ORDER BY a)")
    False
    """
    tree = parse(sql)
    return isinstance(tree, exp.Query) and tree.args.get("order") is not None


def order_positions(sql: str, table_columns: tuple[str, ...] = ()) -> tuple[int, ...] | None:
    """Output-column positions of the top-level ``ORDER BY`` keys, when they are all projected.

    With them a checker can accept any order of rows that tie on the sort keys.

    Parameters
    ----------
    sql : str
    table_columns : tuple of str
        Columns of the table, used to expand ``SELECT *``.

    Returns
    -------
    tuple of int or None
        0-based positions, one per key; ``None`` if the query is unordered or a key is an
        expression that is not in the select list.

    Examples
    --------
    >>> order_positions("SELECT name, AVG(x) AS m FROM t GROUP BY name ORDER BY m DESC, 1")
    (1, 0)
    >>> order_positions("SELECT name FROM t ORDER BY age") is None
    True
    """
    tree = parse(sql)
    if not isinstance(tree, exp.Select) or tree.args.get("order") is None:
        return None
    names: list[str | None] = []
    texts: list[str | None] = []
    for e in tree.expressions:
        if isinstance(e, exp.Star) or (isinstance(e, exp.Column) and e.is_star):
            names.extend(c.lower() for c in table_columns)
            texts.extend([None] * len(table_columns))
            if not table_columns:
                return None
            continue
        names.append(e.alias_or_name.lower() or None)
        texts.append((e.this if isinstance(e, exp.Alias) else e).sql("sqlite").lower())
    positions: list[int] = []
    for key in tree.args["order"].expressions:
        node = key.this if isinstance(key, exp.Ordered) else key
        pos: int | None = None
        if isinstance(node, exp.Literal) and not node.is_string and node.name.isdigit():
            pos = int(node.name) - 1 if 0 < int(node.name) <= len(names) else None
        else:
            if isinstance(node, exp.Column) and node.name.lower() in names:
                pos = names.index(node.name.lower())
            text = node.sql("sqlite").lower()
            if pos is None and text in texts:
                pos = texts.index(text)
        if pos is None:
            return None
        positions.append(pos)
    return tuple(positions)


def to_sqlite(sql: str) -> str:
    """Translate one MySQL statement to SQLite.

    Parameters
    ----------
    sql : str
        A MySQL statement.

    Returns
    -------
    str
        SQLite SQL (no trailing ``;``).

    Raises
    ------
    InvalidInput
        If sqlglot cannot parse it or it uses a form with no SQLite rewrite here.

    Examples
    --------
    >>> to_sqlite("DELETE d FROM t d JOIN u ON d.id = u.id WHERE u.x > 1")
    'DELETE FROM t WHERE rowid IN (SELECT d.rowid FROM t AS d JOIN u ON d.id = u.id WHERE u.x > 1)'
    """
    tree = parse(sql, dialect="mysql")
    if isinstance(tree, exp.Update) and tree.this.args.get("joins"):
        return _update_join(tree)
    if isinstance(tree, exp.Delete) and (tree.args.get("tables") or tree.this.args.get("joins")):
        return _delete_join(tree)
    try:
        return tree.sql(dialect="sqlite")
    except SqlglotError as e:
        raise InvalidInput(f"cannot write {sql[:80]!r} as SQLite: {e}") from e


def _rowid_filter(target: exp.Table, where: exp.Expression | None) -> str:
    alias = exp.to_identifier(target.alias_or_name).sql("sqlite")
    inner = f"SELECT {alias}.rowid FROM {target.sql('sqlite')}"
    if where is not None:
        inner += f" {where.sql('sqlite')}"
    return f"rowid IN ({inner})"


def _update_join(tree: exp.Update) -> str:
    target = tree.this
    alias = target.alias_or_name.lower()
    sets = []
    for eq in tree.expressions:
        if not isinstance(eq, exp.EQ) or not isinstance(eq.this, exp.Column):
            raise InvalidInput(f"unsupported SET clause {eq.sql('mysql')!r}")
        if eq.this.table and eq.this.table.lower() != alias:
            raise InvalidInput("UPDATE ... JOIN that sets a column of a joined table")
        value = eq.expression.copy()
        for col in value.find_all(exp.Column):
            if col.table and col.table.lower() != alias:
                raise InvalidInput("UPDATE ... JOIN whose SET reads a joined table")
            col.set("table", None)
        sets.append(f"{exp.to_identifier(eq.this.name).sql('sqlite')} = {value.sql('sqlite')}")
    name = exp.to_identifier(target.name).sql("sqlite")
    where = _rowid_filter(target, tree.args.get("where"))
    return f"UPDATE {name} SET {', '.join(sets)} WHERE {where}"


def _delete_join(tree: exp.Delete) -> str:
    target = tree.this
    tables = tree.args.get("tables") or []
    if len(tables) > 1 or (tables and tables[0].name.lower() != target.alias_or_name.lower()):
        raise InvalidInput("DELETE from several tables, or from a joined table")
    name = exp.to_identifier(target.name).sql("sqlite")
    return f"DELETE FROM {name} WHERE {_rowid_filter(target, tree.args.get('where'))}"
