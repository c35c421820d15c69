"""Read-time alignment falls back instead of corrupting (issue 23).

Each class below is a task shape on which the literal/schema aligner used to present wrong SQL
as the current task's action: quoted identifiers, quoted values, a statement type other than
the task asks for, literals the exemplar cannot carry, another table or another request. Every
member is checked either by executing the aligned SQL on the current task's table (fixable
shapes) or by asserting the honest fallback (the exemplar with its own task) and its note.
"""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest

from memcurator.curate.base import CurateContext
from memcurator.curate.extractive import (
    binding_problem,
    extract,
    extract_noted,
    parse_raw,
    parse_schema,
)
from memcurator.curate.jitmem import JitMemCurator
from memcurator.types import Entry


def raw(task: str, schema: str, sql: str) -> str:
    return f"Task: {task}\nObservation: {schema}\nAction: {sql}\nOutcome: success (reward 1)"


def run_align(past_task: str, past_schema: str, past_sql: str, task: str, schema: str):
    parsed = [parse_raw(raw(past_task, past_schema, past_sql))]
    return extract_noted("align", task, schema, parsed)  # type: ignore[list-item]


def action(payload: str) -> str:
    return next(line[8:] for line in payload.splitlines() if line.startswith("Action: "))


def first_task(payload: str) -> str:
    return next(line[6:] for line in payload.splitlines() if line.startswith("Task: "))


def rows_of(ddl: str, rows: list[tuple], sql: str) -> list[tuple]:
    """Execute ``sql`` on a fresh table (``ddl`` + ``rows``); the result or the table after."""
    con = sqlite3.connect(":memory:")
    con.execute(ddl)
    table = ddl.split("(", 1)[0].split(None, 2)[2]
    marks = ",".join("?" * len(rows[0]))
    con.executemany(f"INSERT INTO {table} VALUES ({marks})", rows)
    cur = con.execute(sql)
    got = cur.fetchall()
    return sorted(got) if got else sorted(con.execute(f"SELECT * FROM {table}").fetchall())


# --------------------------------------------------------------------------- schema lines


@pytest.mark.parametrize(
    "line, table, cols",
    [
        ('Table "1-10015132-11"("Home team" TEXT, Score TEXT)', "1-10015132-11",
         ["Home team", "Score"]),
        ('Table towns("Pop. (2010)" TEXT, "Area (km²)" TEXT, name TEXT)', "towns",
         ["Pop. (2010)", "Area (km²)", "name"]),
        ('Table t(a VARCHAR(20), "b ""x""" INT)', "t", ["a", 'b "x"']),
        ("Table pay(mid INT, amt INT)\nExample rows: (1, 2)", "pay", ["mid", "amt"]),
    ],
)  # fmt: skip
def test_parse_schema_reads_quoted_names(line, table, cols):
    assert parse_schema(line) == (table, cols)


# --------------------------------------------------------------------------- quoted identifiers

WIKI = 'Table "1-234-5"("Town" TEXT, "Pop (2010)" TEXT, "No." INT)'
WIKI_DDL = 'CREATE TABLE "1-234-5" ("Town" TEXT, "Pop (2010)" TEXT, "No." INT)'
WIKI_ROWS = [("Ash", "2500", 1), ("Bay", "3500", 2), ("Cove", "1200", 3)]


@pytest.mark.parametrize(
    "past_task, past_sql, task, want",
    [
        # a number that is also part of a quoted column name stays in the name
        ("Which towns had over 2010 residents?",
         'SELECT "Town" FROM "1-234-5" WHERE "Pop (2010)" > 2010;',
         "Which towns had over 3000 residents?",
         'SELECT "Town" FROM "1-234-5" WHERE "Pop (2010)" > 3000;'),
        # a value equal to a quoted identifier's text is only replaced as a value
        ("Which row number has town 'No.'?",
         """SELECT "No." FROM "1-234-5" WHERE "Town" = 'No.';""",
         "Which row number has town 'Bay'?",
         """SELECT "No." FROM "1-234-5" WHERE "Town" = 'Bay';"""),
        # thousands separators in the task, none in the SQL
        ("Which towns had more than 1,000 people?",
         'SELECT "Town" FROM "1-234-5" WHERE CAST("Pop (2010)" AS INT) > 1000;',
         "Which towns had more than 3,000 people?",
         'SELECT "Town" FROM "1-234-5" WHERE CAST("Pop (2010)" AS INT) > 3000;'),
    ],
)  # fmt: skip
def test_quoted_identifiers_align_without_corruption(past_task, past_sql, task, want):
    payload, _, notes = run_align(past_task, WIKI, past_sql, task, WIKI)
    assert notes == []
    assert first_task(payload) == task
    assert action(payload) == want
    assert rows_of(WIKI_DDL, WIKI_ROWS, action(payload)) == rows_of(WIKI_DDL, WIKI_ROWS, want)


def test_renamed_column_needing_quotes_is_quoted():
    past = "Table pay(mid INT, amt INT)"
    now = 'Table pay(mid INT, "Amount (EUR)" INT)'
    payload, _, notes = run_align(
        "Which members paid more than 50?", past, "SELECT mid FROM pay WHERE amt > 50;",
        "Which members paid more than 70?", now,
    )  # fmt: skip
    assert notes == []
    assert action(payload) == 'SELECT mid FROM pay WHERE "Amount (EUR)" > 70;'
    ddl = 'CREATE TABLE pay (mid INT, "Amount (EUR)" INT)'
    assert rows_of(ddl, [(1, 60), (2, 80)], action(payload)) == [(2,)]


# --------------------------------------------------------------------------- quoted values

PAY = "Table pay(mid INT, name TEXT, amt INT)"
PAY_DDL = "CREATE TABLE pay (mid INT, name TEXT, amt INT)"
PAY_ROWS = [(1, "O'Brien", 50), (2, "Smith's, Jr.", 60), (3, 'The "Best" Cafe', 70)]


@pytest.mark.parametrize("value", ["O'Brien", "Smith's, Jr.", 'The "Best" Cafe'])
def test_quoted_values_are_escaped(value):
    quoted_in_task = f'"{value}"' if "'" in value else f"'{value}'"
    payload, _, notes = run_align(
        "How much did 'Ann' pay?", PAY, "SELECT amt FROM pay WHERE name = 'Ann';",
        f"How much did {quoted_in_task} pay?", PAY,
    )  # fmt: skip
    assert notes == []
    want = next(r[2] for r in PAY_ROWS if r[1] == value)
    assert rows_of(PAY_DDL, PAY_ROWS, action(payload)) == [(want,)]


# --------------------------------------------------------------------------- fallbacks


@pytest.mark.parametrize(
    "past_task, past_sql, task, why",
    [
        # the statement type of the task differs from the exemplar's
        ("Insert a payment of 75 for member 102.",
         "INSERT INTO pay (mid, amt) VALUES (102, 75);",
         "Which members paid 75?", "SELECT"),
        ("Which members paid more than 75?", "SELECT mid FROM pay WHERE amt > 75;",
         "Update the amount to 80 for member 102.", "UPDATE"),
        ("Delete payments of member 102.", "DELETE FROM pay WHERE mid = 102;",
         "Add a payment of 90 for member 103.", "INSERT"),
        ("Increase the amount by 5 for member 102.",
         "UPDATE pay SET amt = amt + 5 WHERE mid = 102;",
         "Remove member 103's payments.", "DELETE"),
        # the task has a literal the exemplar's SQL has no place for
        ("Which members paid more than 50 in 2023?", "SELECT mid FROM pay WHERE amt > 50;",
         "Which members paid more than 50 in 2024?", "no counterpart"),
        # the exemplar's value is written bare in its task: it cannot be mapped
        ("Which members named Ann paid more than 50 in total across all of their payments?",
         "SELECT mid FROM pay WHERE name = 'Ann' GROUP BY mid HAVING SUM(amt) > 50;",
         "Which members named Bob paid more than 60 in total across all of their payments?",
         "'Ann'"),
        # one past value paired with two different current values: inconsistent
        ("Show 5 payments after skipping 5 rows.", "SELECT * FROM pay LIMIT 5 OFFSET 5;",
         "Show 12 payments after skipping 3 rows.", "both"),
        # fewer literals in the task than the exemplar uses
        ("Which members paid between 50 and 70?",
         "SELECT mid FROM pay WHERE amt BETWEEN 50 AND 70;",
         "Which members paid between 60 and more?", "count"),
    ],
)  # fmt: skip
def test_unmappable_exemplar_falls_back(past_task, past_sql, task, why):
    """A task the exemplar cannot be aligned to (another statement type, a literal without a
    counterpart or an inconsistent or incomplete literal map) gets the honest exemplar, with
    one note saying why."""
    payload, used, notes = run_align(past_task, PAY, past_sql, task, PAY)
    assert payload == f"Task: {past_task}\nAction: {past_sql}"  # the honest exemplar
    assert used == [0]
    assert len(notes) == 1 and "fell back" in notes[0] and why in notes[0]


def test_ambiguous_offset_of_the_stream():
    """The stream's own LIMIT/OFFSET family: one value at two places, only one in the task."""
    past = "Limit the results to 5 entries starting from the 6th entry."
    payload, _, notes = run_align(
        past, PAY, "SELECT mid FROM pay LIMIT 5 OFFSET 5;",
        "Limit the results to 12 entries starting from the 6th entry.", PAY,
    )  # fmt: skip
    assert action(payload) == "SELECT mid FROM pay LIMIT 5 OFFSET 5;"
    assert notes and "ambiguous" in notes[0]


# --------------------------------------------------------------------------- other table / request


@pytest.mark.parametrize(
    "past_schema, past_task, past_sql, schema, task",
    [
        ("Table hotel_employees(employee_id INT, name TEXT, hourly_rate INT)",
         "Update the hourly rate to 20 for the employee with ID 105.",
         "UPDATE hotel_employees SET hourly_rate = 20 WHERE employee_id = 105;",
         "Table reservations(reservation_id INT, status TEXT, party_size INT)",
         "Update the party size to 4 for the reservation with ID 1001."),
        ("Table calls(subscriber_id INT, call_duration INT, kind TEXT)",
         "Which subscribers talk longer than average?",
         "SELECT subscriber_id FROM calls WHERE call_duration > (SELECT AVG(call_duration) "
         "FROM calls);",
         "Table calls(user_id INT, duration_seconds INT, call_type TEXT)",
         "Which users talk longer than average?"),
        (PAY, "What are the names of all members, ordered by amount?",
         "SELECT name FROM pay ORDER BY amt;",
         PAY, "What is the average amount per member name, for names seen more than twice?"),
    ],
)  # fmt: skip
def test_other_table_or_request_falls_back(past_schema, past_task, past_sql, schema, task):
    payload, _, notes = run_align(past_task, past_schema, past_sql, task, schema)
    assert payload == f"Task: {past_task}\nAction: {past_sql}"
    assert len(notes) == 1 and "fell back" in notes[0]


# ------------------------------------------------------------------------ the stream still aligns


@pytest.mark.parametrize(
    "past_schema, past_task, past_sql, schema, task, want",
    [
        ("Table pay(mid INT, amt INT)", "member 102 paid 75",
         "INSERT INTO pay VALUES (102, 75);", "Table pay(mid INT, amt INT)",
         "member 205 paid 90", "INSERT INTO pay VALUES (205, 90);"),
        ("Table pay(mid INT, amt INT)", "Which members paid more than 46,000?",
         "SELECT mid FROM pay WHERE amt > 46000;", "Table pay(mid INT, amount INT)",
         "Which members paid more than 49,000?", "SELECT mid FROM pay WHERE amount > 49000;"),
        ("Table pay(mid INT, method TEXT, amt INT)",
         "Which members paid by 'cash' more than 5 times?",
         "SELECT mid FROM pay WHERE method = 'cash' GROUP BY mid HAVING COUNT(*) > 5;",
         "Table payments(mid INT, method TEXT, amt INT)",
         "Which members paid by 'card' more than 7 times?",
         "SELECT mid FROM payments WHERE method = 'card' GROUP BY mid HAVING COUNT(*) > 7;"),
    ],
)  # fmt: skip
def test_stream_shapes_still_align(past_schema, past_task, past_sql, schema, task, want):
    payload, _, notes = run_align(past_task, past_schema, past_sql, task, schema)
    assert notes == []
    assert payload == f"Task: {task}\nAction: {want}"


def test_repeated_value_changed_once_is_the_sql_value():
    """A task repeats a value ("(1) ... less than 1"): the occurrence that changes is the SQL's."""
    past = "Delete rows that (1) average less than 1 and (2) are older than 5 days."
    payload, _, notes = run_align(
        past, PAY, "DELETE FROM pay WHERE amt < 1 OR mid > 5;",
        past.replace("less than 1", "less than 2"), PAY,
    )  # fmt: skip
    assert notes == []
    assert action(payload) == "DELETE FROM pay WHERE amt < 2 OR mid > 5;"


def test_best_valid_candidate_is_used_before_falling_back():
    bad = parse_raw(raw("Insert member 102 paying 75", PAY,
                        "INSERT INTO pay (mid, amt) VALUES (102, 75);"))  # fmt: skip
    good = parse_raw(raw("Which members paid more than 50?", PAY,
                         "SELECT mid FROM pay WHERE amt > 50;"))  # fmt: skip
    text, used = extract("align", "Which members paid more than 60?", PAY, [bad, good])  # type: ignore[list-item]
    assert used == [1]
    assert (
        text
        == "Task: Which members paid more than 60?\nAction: SELECT mid FROM pay WHERE amt > 60;"
    )


# --------------------------------------------------------------------------- binding


@pytest.mark.parametrize(
    "sql, problem",
    [
        ("SELECT mid FROM pay", ""),
        ("SELECT amt AS total FROM pay ORDER BY total", ""),
        ("SELECT x.mid FROM (SELECT mid, amt AS a FROM pay) AS x WHERE x.a > 1", ""),
        ("SELECT mid FROM payments", "table 'payments'"),
        ("SELECT amount FROM pay", "column 'amount'"),
        ("INSERT INTO pay (mid, amount) VALUES (1, 2)", "column 'amount'"),
        ("SELECT mid FROM pay WHERE", "does not parse"),
    ],
)
def test_binding_problem(sql, problem):
    got = binding_problem(sql, "pay", ["mid", "name", "amt"])
    assert (problem in got) if problem else got == ""


# --------------------------------------------------------------------------- the decision trail


def test_fallback_reason_reaches_the_curate_result():
    text = raw("Insert a payment of 75 for member 102.", PAY,
               "INSERT INTO pay (mid, amt) VALUES (102, 75);")  # fmt: skip
    e = Entry("e1", "ns", "raw", text, 100, 100, np.zeros(2, dtype=np.float32))
    cur = JitMemCurator(operators=["align"], judge=False)
    r = cur.curate(CurateContext("Which members paid 75?", lambda q, k: [], bank=lambda: [e],
                                 observation=PAY))  # fmt: skip
    assert r.payload.startswith("Task: Insert a payment of 75 for member 102.")
    assert r.source_ids == ["e1"]
    assert len(r.notes) == 1 and "fell back" in r.notes[0] and "INSERT" in r.notes[0]
