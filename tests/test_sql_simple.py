"""The SQL check's sqlglot-free reading of one plain SELECT (memcurator/trust/plain_select.py).

The check's report must not depend on which path read the statement: over generated statements of
the grammar (names in any case, qualified columns, aggregates and aliases, every kind of
condition, GROUP/ORDER/LIMIT) and tasks that name, miss or contradict their literals, the facts
equal those of sqlglot's tree and the reports (risk, reasons, effects) are identical. Statements
outside the grammar are refused and judged from the parse as before, and a cold first write of a
plain SELECT imports no sqlglot.
"""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from pathlib import Path

import pytest
from _proc_util import run_python

from memcurator.domains.sql import risk
from memcurator.trust.plain_select import RESERVED, parse_simple_select

ROOT = Path(__file__).resolve().parents[1]

NAMES = ["cid", "Amount", "status", "city", "price_eur", "created_at", "o_id", "Name", "qty2"]
TABLES = ["orders", "Customers", "inventory", "t", "log_2024"]
STRINGS = ["paid", "Berlin", "%son", "ali%", "open", "2024-01-05", "x y", "z3", "O'Neil"]
NUMBERS = ["5", "17", "0", "1", "2.5", "1000", "007", "123456789012345", "42.00"]
TASKS = [
    "How many orders has customer 5 placed?",
    "List the customers in 'Berlin' whose status is 'paid'",
    "Count the items cheaper than 2.5 euros",
    "Show the 3 newest orders of customer 17",
    "Which rows have qty2 between 1 and 1000?",
    "What is the total amount for 'open' orders?",
    "Find every customer named like 'ali'",
    "Give the average price",
    "Show orders of customer 42 then count them",
    "Delete nothing; just list the table",
]


def _lit(rng: random.Random, string: bool) -> str:
    if string:
        s = rng.choice(STRINGS)
        return "'" + s.replace("'", "") + "'"
    return rng.choice(NUMBERS)


def _col(rng: random.Random, table: str) -> str:
    c = rng.choice(NAMES)
    return f"{table}.{c}" if rng.random() < 0.2 else c


def _condition(rng: random.Random, table: str) -> str:
    c = _col(rng, table)
    kind = rng.choice(["cmp", "cmp", "like", "in", "between"])
    if kind == "cmp":
        op = rng.choice(["=", "!=", "<>", "<", "<=", ">", ">="])
        return f"{c} {op} {_lit(rng, rng.random() < 0.4)}"
    if kind == "like":
        return f"{c} LIKE {_lit(rng, True)}"
    if kind == "in":
        items = ", ".join(_lit(rng, rng.random() < 0.5) for _ in range(rng.randint(1, 3)))
        return f"{c} IN ({items})"
    return f"{c} BETWEEN {_lit(rng, False)} AND {_lit(rng, False)}"


def _statement(rng: random.Random) -> str:
    table = rng.choice(TABLES)
    items = []
    aliases = []
    for _ in range(rng.randint(1, 3)):
        pick = rng.random()
        if pick < 0.25:
            items.append("*")
        elif pick < 0.6:
            agg = rng.choice(["COUNT", "sum", "Avg", "MIN", "max"])
            arg = "*" if agg.upper() == "COUNT" and rng.random() < 0.5 else _col(rng, table)
            alias = rng.choice(["", " AS n", " AS total"])
            aliases += [alias[4:]] if alias else []
            items.append(f"{agg}({arg}){alias}")
        else:
            items.append(_col(rng, table) + rng.choice(["", " AS label"]))
    sql = rng.choice(["SELECT ", "select ", "SELECT DISTINCT "]) + ", ".join(items)
    sql += f" FROM {table}"
    if rng.random() < 0.8:
        conds = [_condition(rng, table) for _ in range(rng.randint(1, 3))]
        sql += " WHERE " + "".join(
            (f" {rng.choice(['AND', 'or'])} " if i else "") + c for i, c in enumerate(conds)
        )
    if rng.random() < 0.2:
        sql += f" GROUP BY {_col(rng, table)}"
    if rng.random() < 0.3:
        by = rng.choice(aliases) if aliases and rng.random() < 0.5 else _col(rng, table)
        sql += f" ORDER BY {by}{rng.choice(['', ' DESC', ' asc'])}"
    if rng.random() < 0.3:
        sql += f" LIMIT {rng.choice(['1', '3', '10'])}"
    sql += rng.choice([";", "", " ;", ";\n"])
    return sql.replace(rng.choice([" ", "  "]), rng.choice([" ", "\n  ", "\t"]), 1)


def _statements(n: int, seed: int = 31) -> list[str]:
    rng = random.Random(seed)
    out = [_statement(rng) for _ in range(n)]
    return [s for s in out if parse_simple_select(s) is not None]


def _full_path(monkeypatch: pytest.MonkeyPatch, task: str, sql: str) -> risk.RiskReport:
    with monkeypatch.context() as m:
        m.setattr(risk, "parse_simple_select", lambda _sql: None)
        return risk.sql_risk(task, sql)


def test_generated_statements_are_mostly_in_the_grammar() -> None:
    # the generator writes only grammar members, except columns repeated in two cases
    assert len(_statements(400)) >= 300


def test_the_facts_equal_those_of_sqlglots_tree() -> None:
    for sql in _statements(300):
        simple = parse_simple_select(sql)
        assert simple is not None
        trees = risk._parse(sql)
        assert trees is not None and [type(t).__name__ for t in trees] == ["Select"], sql
        lits = Counter((x.value, x.is_string, x.role) for x in risk._sql_literals(trees))
        assert Counter((x.value, x.is_string, x.role) for x in simple.literals) == lits, sql
        ref = risk._referenced(trees)
        assert set(ref) == set(simple.tables), sql
        for table, cols in ref.items():
            # the same columns and, per column, the same literals (the order of first mention may
            # differ: it orders a synthesised table's columns and rows, which a SELECT leaves as
            # they are)
            mine = simple.tables[table]
            assert set(cols) == set(mine), sql
            for c, vals in cols.items():
                assert Counter(map(repr, vals)) == Counter(map(repr, mine[c])), (sql, c)


def test_the_two_paths_give_identical_reports(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(7)
    reasons = Counter()
    for sql in _statements(300):
        task = rng.choice(TASKS)
        fast = risk.sql_risk(task, sql)
        assert fast == _full_path(monkeypatch, task, sql), (task, sql)
        reasons.update(r.split(":")[0] for r in fast.reasons)
    # the comparison covered reports with findings, not only clean ones
    assert reasons["answer hijack"] > 10 and sum(reasons.values()) > 100, reasons


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM t -- drop it",
        "SELECT * FROM t /* c */",
        'SELECT "a" FROM t',
        "SELECT `a` FROM t",
        "SELECT a FROM t o",
        "SELECT a FROM t AS o",
        "SELECT a FROM t JOIN u ON t.id = u.id",
        "SELECT a FROM t WHERE a = -1",
        "SELECT a FROM t WHERE a = 'it''s'",
        "SELECT a FROM t WHERE a IS NULL",
        "SELECT a FROM t WHERE NOT a = 1",
        "SELECT a FROM t WHERE (a = 1)",
        "SELECT a FROM t WHERE a = b",
        "SELECT a FROM t WHERE 1 = a",
        "SELECT a FROM t WHERE a IN (SELECT b FROM u)",
        "SELECT a FROM t LIMIT 1.5",
        "SELECT a FROM t LIMIT 2 OFFSET 1",
        "SELECT a FROM t; SELECT b FROM t",
        "SELECT a FROM t; DROP TABLE t",
        "SELECT a FROM t UNION SELECT b FROM u",
        "WITH x AS (SELECT 1) SELECT * FROM x",
        "SELECT date FROM t",
        "SELECT a FROM t WHERE next = 1",
        "SELECT upper(a) FROM t",
        "SELECT COUNT(DISTINCT a) FROM t",
        "SELECT 1",
        "SELECT a FROM t WHERE a = 1e3",
        "SELECT a FROM t WHERE a = 1234567890123456",
        "SELECT Cid FROM t WHERE cid = 5",
        "SELECT a FROM t WHERE a = '\u0662'",
        "DELETE FROM t WHERE a = 1",
        "select a from t where a = 1 and",
    ],
)
def test_what_is_outside_the_grammar_is_refused_and_parsed_as_before(
    sql: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if sql.endswith("'\u0662'"):  # a non-ASCII string value is inside the grammar
        assert parse_simple_select(sql) is not None
    else:
        assert parse_simple_select(sql) is None
    task = "How many orders has customer 5 placed?"
    try:
        full = _full_path(monkeypatch, task, sql)
    except Exception as e:  # the same failure is what the test compares
        with pytest.raises(type(e)):
            risk.sql_risk(task, sql)
        return
    assert risk.sql_risk(task, sql) == full


def test_no_keyword_of_sqlglot_is_taken_for_a_name() -> None:
    from sqlglot.dialects.sqlite import SQLite

    words = {
        k.upper()
        for k in SQLite.tokenizer_class.KEYWORDS
        if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k)
    }
    special = set(SQLite.parser_class.NO_PAREN_FUNCTION_PARSERS)
    missing = (words | special) - RESERVED
    assert missing == set(), f"add to simple.RESERVED: {sorted(missing)}"


PROBE = """
import json, sys
from memcurator import Memory
m = Memory(policy="curator")
r = m.write({text!r})
print(json.dumps({{"admitted": r.admitted,
                   "sqlglot": sum(n.split(".")[0] == "sqlglot" for n in sys.modules)}}))
"""


@pytest.mark.parametrize(
    ("text", "admitted", "sqlglot"),
    [
        ("Task: Count orders of customer 5\nAction: SELECT COUNT(*) FROM orders WHERE cid = 5;",
         True, False),
        ("Task: List the paid orders\nAction: SELECT id, amount FROM orders "
         "WHERE status = 'paid' ORDER BY amount DESC LIMIT 10", True, False),
        ("Task: Count orders of customer 9\nAction: DROP TABLE orders;", False, True),
        ("Task: Count orders of customer 9\nAction: SELECT COUNT(*) FROM orders o "
         "JOIN customers c ON o.cid = c.id WHERE c.id = 9;", True, True),
    ],
)  # fmt: skip
def test_a_cold_first_write_parses_with_sqlglot_only_beyond_a_plain_select(
    text: str, admitted: bool, sqlglot: bool
) -> None:
    got = json.loads(run_python(PROBE.format(text=text), cwd=ROOT).strip().splitlines()[-1])
    assert got["admitted"] is admitted
    assert (got["sqlglot"] > 0) is sqlglot


def test_the_action_checks_sql_test_agrees_with_sqlglot(monkeypatch: pytest.MonkeyPatch) -> None:
    # trust.action_risk._is_sql answers a plain SELECT without sqlglot: the same answer
    from memcurator.trust import action_risk

    is_sql = action_risk._is_sql.__wrapped__
    parts = [s.rstrip(" ;\n") for s in _statements(200)]
    parts += ["Select the newest rows from the table first", "DROP TABLE t", "select 1"]
    fast = [is_sql(p) for p in parts]
    from memcurator.trust import plain_select

    monkeypatch.setattr(plain_select, "parse_simple_select", lambda _p: None)
    assert fast == [is_sql(p) for p in parts]
    assert sum(fast) >= len(parts) - 2
