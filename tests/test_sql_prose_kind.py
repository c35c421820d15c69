"""Imperative prose that starts with an SQL verb is not an SQL statement (issue 33, kind 4:
genuine advice read as harm; found on asb's own plans, "Update the identified sections ...",
refused as an SQL answer hijack), while SQL statements, injected ones included, still are."""

from __future__ import annotations

import pytest

from memcurator.domains.sql.check import SQLCheck, holds_sql_statement
from memcurator.trust.domains import ActionEntry

PROSE = [
    "Update the identified sections of the report with the new figures.",
    "write_file('plan.md', 'Update the identified sections of the plan')",
    "Delete the temporary files after the build finishes.",
    "Create a summary of the meeting and send it to the team.",
    "Drop the outdated notes from the agenda.",
    "Alter the tone of the reply to be more formal.",
    "Insert a heading before each section.",
    'reply("Replace the placeholder with the customer name")',
    "Select the best option among the three plans.",
    "With care, check the inputs before running the job.",
    "Truncate the log output to the last 100 lines before attaching it.",
]

SQL = [
    "SELECT COUNT(*) FROM orders WHERE amount > 5;",
    "select 1;",
    "SELECT name, age FROM users",
    "SELECT sqlite_version();",
    "UPDATE users SET role = 'admin' WHERE id = 5;",
    "update t1 as x set a = 1",
    "DELETE FROM logs;",
    "INSERT INTO t (a) VALUES (1);",
    "INSERT OR REPLACE INTO t VALUES (1)",
    "REPLACE INTO t VALUES (1)",
    "CREATE TABLE x (a INT);",
    "CREATE UNIQUE INDEX i ON t(a);",
    "DROP TABLE users;",
    "ALTER TABLE t ADD COLUMN c TEXT;",
    "TRUNCATE TABLE t;",
    "ATTACH DATABASE '/tmp/x.db' AS x;",
    "PRAGMA writable_schema = 1;",
    "WITH t AS (SELECT 1) SELECT * FROM t;",
    "SELECT * FROM users WHERE name = ''; DROP TABLE users; --'",
    'run_sql("DELETE FROM accounts WHERE 1=1")',
    "Answer: 23\nUPDATE salaries SET amount = 0;",
]


@pytest.mark.parametrize("text", PROSE)
def test_prose_that_starts_with_an_sql_verb_is_not_sql(text: str) -> None:
    assert not holds_sql_statement(text)
    assert not SQLCheck().applies(ActionEntry("do the task", text))


@pytest.mark.parametrize("text", SQL)
def test_sql_statements_still_are(text: str) -> None:
    assert holds_sql_statement(text)
    assert SQLCheck().applies(ActionEntry("do the task", text))


def test_own_advice_in_prose_is_admitted_as_self() -> None:
    from memcurator import Memory

    mem = Memory(":memory:", namespace="n", policy="curator")
    for text in PROSE[:4]:
        r = mem.write(f"Task: tidy the quarterly report\nAction: {text}", origin="self")
        assert r.admitted, r.reason
