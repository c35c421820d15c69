"""The SQL domain check: what an entry's SQL action would do vs what its task asks.

:class:`SQLCheck` is registered as ``"sql"`` through the ``memcurator.domain_checks`` entry point
(pyproject.toml). Whether it applies is a pattern on the action, so importing this module costs
no sqlglot: the dry run (:mod:`memcurator.domains.sql.risk`, sqlglot and an in-memory SQLite
copy of the schema) is imported the first time an action really holds an SQL statement.

Examples
--------
>>> from memcurator.trust.domains import ActionEntry
>>> SQLCheck().applies(ActionEntry("tidy the orders", "prune the unused columns before merge"))
False
>>> SQLCheck().applies(ActionEntry("Count rows", "SELECT COUNT(*) FROM t;"))
True
"""

from __future__ import annotations

import re
from typing import Any

from memcurator.domains.sql.spec import SQLTaskSpec
from memcurator.errors import InvalidInput
from memcurator.trust.domains import ActionEntry, RiskReport, parse_action_entry

#: a SQL statement keyword anywhere in an action (else the action is not SQL)
_SQL_START = re.compile(
    r"(?:^|[;\n('\"`])\s*(?:--[^\n]*\n\s*)*(select|insert|update|delete|drop|create|alter|truncate|"
    r"attach|pragma|with|replace)\b",
    re.IGNORECASE,
)

_NAME = r"[\w.\"`\[\]]+"
_OBJECT = r"(?:table|view|index|trigger|database|schema|column|procedure|function)\b"
#: what must follow each keyword (up to the statement's end) for it to start a statement: an
#: imperative sentence that starts with the same word ("Update the identified sections",
#: "Delete the temporary files", "Create a summary", "Select the best option") is prose, and
#: the generic action domain's, not an SQL statement the dry run could judge
_SQL_SYNTAX = {
    k: re.compile(v, re.IGNORECASE)
    for k, v in {
        "select": r"\s*(?:distinct\s+|all\s+)?(?:[*\d(\'\"]|[^;\n]*\bfrom\b|"
        + _NAME
        + r"\s*(?:[(,;=<>+\-*/|]|\bas\b|$))",
        "insert": r"\s*(?:or\s+\w+\s+|ignore\s+)?into\b",
        "replace": r"\s*into\b",
        "update": r"\s*(?:or\s+\w+\s+)?[^;\n]*?\bset\b",
        "delete": r"\s*(?:" + _NAME + r"\s+)?from\b",
        "drop": r"\s*(?:temp\w*\s+)?" + _OBJECT,
        "create": r"\s*(?:or\s+replace\s+)?(?:temp\w*\s+|unique\s+|virtual\s+)*" + _OBJECT,
        "alter": r"\s*" + _OBJECT,
        "truncate": r"\s*(?:table\s+)?" + _NAME + r"\s*(?:;|$)",
        "attach": r"\s*(?:database\s+)?['\"]",
        "pragma": r"\s*" + _NAME + r"\s*(?:[=(;]|$)",
        "with": r"\s*(?:recursive\s+)?" + _NAME + r"(?:\s*\([^)]*\))?\s+as\s*\(",
    }.items()
}


def holds_sql_statement(action: str) -> bool:
    """Whether ``action`` holds an SQL statement: a statement keyword at the start of a
    statement (its first word, or after ``;``, a newline, an opening parenthesis or a quote)
    followed by that statement's syntax (``UPDATE <table> ... SET``, ``DELETE FROM``,
    ``CREATE TABLE``, ...), checked by pattern (no parser is imported).

    Examples
    --------
    >>> holds_sql_statement("UPDATE users SET role = 'admin' WHERE id = 5;")
    True
    >>> holds_sql_statement("write_file('plan.md', 'Update the identified sections of the plan')")
    False
    >>> holds_sql_statement("'; DROP TABLE users; --")
    True
    """
    for m in _SQL_START.finditer(action):
        if _SQL_SYNTAX[m.group(1).lower()].match(action, m.end()):
            return True
    return False


def entry_sql_risk(text: str, *, spec: SQLTaskSpec | None = None) -> RiskReport | None:
    """:func:`~memcurator.domains.sql.risk.sql_risk` of a ``Task:/Action:`` entry (raw or
    insight); None if it holds none.

    The schema is ``spec`` when given, else the raw trajectory's ``Observation:`` table line,
    else synthesised from the statement.

    Examples
    --------
    >>> entry_sql_risk("Task: List all rows.\\nAction: DELETE FROM t; SELECT * FROM t;").risk > 0.9
    True
    >>> entry_sql_risk("Question: who?\\nAnswer: Elvis") is None
    True
    >>> entry_sql_risk("Task: how many episodes?\\nAction: Answer: 23") is None  # no SQL in it
    True
    """
    entry = parse_action_entry(text)
    check = SQLCheck()
    if entry is None or not check.applies(entry):
        return None  # an action that holds no SQL statement at all is judged as text only
    return check.risk(entry, spec=spec)


class SQLCheck:
    """The SQL domain of the trust gate (:class:`~memcurator.trust.domains.DomainCheck`).

    It applies to an entry whose action holds an SQL statement keyword, and judges it with
    :func:`~memcurator.domains.sql.risk.sql_risk` on ``spec`` when given, else on the entry's
    observed ``Table`` line, else on tables synthesised from the statement.

    Examples
    --------
    >>> from memcurator.trust.domains import parse_action_entry
    >>> e = parse_action_entry("Task: Count rows of t.\\nAction: DROP TABLE t;")
    >>> c = SQLCheck()
    >>> c.applies(e), c.risk(e).risk
    (True, 0.97)
    """

    name = "sql"

    def applies(self, entry: ActionEntry) -> bool:
        """Whether the action holds an SQL statement keyword at the start of a statement (its
        first word, or after ``;``, a newline, an opening parenthesis or a quote): prose that merely
        uses the word ("update the inventory", "Update the identified sections") is the generic
        action domain's (:func:`holds_sql_statement`)."""
        return holds_sql_statement(entry.action)

    def risk(self, entry: ActionEntry, *, spec: Any = None) -> RiskReport:
        """:func:`~memcurator.domains.sql.risk.sql_risk` of the entry's task and action.

        Raises
        ------
        InvalidInput
            ``spec`` is neither None nor an :class:`~memcurator.domains.sql.spec.SQLTaskSpec`.
        """
        if spec is not None and not isinstance(spec, SQLTaskSpec):
            raise InvalidInput(f"spec must be an SQLTaskSpec, got {type(spec).__name__}")
        from memcurator.domains.sql.risk import schema_of, sql_risk  # sqlglot: SQL actions only

        schema = schema_of(entry) if spec is None else None
        return sql_risk(entry.task, entry.action, spec=spec, schema=schema)


__all__ = ["SQLCheck", "entry_sql_risk", "holds_sql_statement"]
