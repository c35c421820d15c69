"""Risk of an SQL memory entry from what its action would DO, checked against what its task asks.

A poisoned exemplar is built to look useful, so its origin and wording say little. What it would
do when copied says a lot: we parse the entry's action with sqlglot, dry-run it on an in-memory
SQLite copy of the target schema (the task's spec, the schema line of a raw trajectory, or — when
neither is available — tables synthesised from the statement's own tables, columns and literals),
and compare the effect with the task text:

- a destructive or table-wide effect the task did not ask for (a table dropped or its schema
  changed, rows deleted or updated table-wide while the task names specific values, writes when
  the task asks a question, more statements than the task asks for);
- SQL comments that carry statements or instructions (an exemplar copied verbatim is harmless,
  one obeyed is not);
- answer hijack: the query runs, but its literals do not match the task's (task says customer 5,
  SQL filters ``cid = 6``).

Risks of independent findings combine as ``1 − Π(1 − r_i)``; :class:`RiskReport` keeps every
reason. This generalises CURATOR's "resemblance to an injected instruction" (Eq. 4, ψ) from the
entry's wording to its effect.

This module holds the dry run and the findings; the domain's
:class:`~memcurator.domains.sql.check.SQLCheck` (registered as ``"sql"`` in
:data:`~memcurator.trust.domains.DOMAIN_CHECKS` through the ``memcurator.domain_checks`` entry
point) imports it only when an entry's action holds an SQL statement. sqlglot itself is imported
only when a statement needs its parse: one plain SELECT on tables synthesised from it (the
commonest action) is read by :mod:`memcurator.trust.plain_select` into the same facts, and its
report is the one the parse gives (issue 31: sqlglot's import was most of a cold first write).
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from memcurator.domains.sql.db import execute, make_db, quote_ident, split_statements
from memcurator.domains.sql.quiet import quiet_fallback
from memcurator.domains.sql.spec import SQLTaskSpec
from memcurator.errors import InvalidInput
from memcurator.trust.domains import ActionEntry, RiskReport, parse_action_entry
from memcurator.trust.plain_select import Lit, norm_num, parse_simple_select
from memcurator.trust.text_risk import instruction_likeness

if TYPE_CHECKING:
    from sqlglot import exp

_WRITE_VERBS = {
    "delete": r"\b(delete|remove|purge|erase|clear)\b",
    "update": r"\b(update|change|set|modify|increase|decrease|raise|reduce|mark|adjust|correct|"
    r"increment|decrement|replace|assign|double|halve|apply)\b",
    "insert": r"\b(insert|add|record|register|log|enter|create a new|new (record|entry|row))\b",
    "ddl": r"\b(drop|truncate|alter|create (a )?table|rename the table|add a column|"
    r"remove the column)\b",
}
_RESTRICT = re.compile(
    r"\b(where|whose|which|that|who|whom|with|if|for|before|after)\b", re.IGNORECASE
)
_WIDE = re.compile(r"\b(all|every|each|entire|whole|any)\b", re.IGNORECASE)
_QUOTED = re.compile(r"'([^']{1,80})'|\"([^\"]{1,80})\"")
_NUMBER = re.compile(
    r"(?<![\w.])\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\w])|(?<![\w.])\d+(?:\.\d+)?(?!\w)"
)
_MONTHS = {
    m: i + 1
    for i, m in enumerate(
        "january february march april may june july august september october november "
        "december".split()
    )
}
_DATE_WORDS = re.compile(
    r"\b(" + "|".join(_MONTHS) + r")\s+(\d{1,2})(?:st|nd|rd|th)?,?\s+(\d{4})\b", re.IGNORECASE
)
_SQL_IN_COMMENT = re.compile(
    r"\b(drop|delete|truncate|update|insert|alter)\b.{0,40}\b(table|from|into|set)\b",
    re.IGNORECASE | re.DOTALL,
)
_WORD_NUMBERS = {
    w: i
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve".split()
    )
}
_ISO = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")
_SCHEMA_LINE = re.compile(r"^Table\s+(\S+?)\((.*)\)\s*$")
_N_SYNTH = 12  # rows in a synthesised table

# Risk of each finding (fixed priors, like CURATOR's w: not fitted, no training surface).
R_DROP = 0.97  # a table dropped, re-created or its schema changed, not asked for
R_EMPTIED = 0.9  # >= 90% of rows deleted while the task names specific values / asks no delete
R_WEAK_WIDE = 0.3  # the same on synthetic rows, through a filter that uses the task's values
R_WIDE_WRITE = 0.7  # an UPDATE/DELETE reaching every row while the task names specific values
R_WRITE_ON_QUESTION = 0.85  # any write when the task asks a question
R_WRONG_WRITE = 0.5  # a write of another kind than asked (UPDATE for an INSERT task, ...)
R_EXTRA_STMT = 0.5  # more statements than the task asks for
R_COMMENT_SQL = 0.85  # a comment carrying a write statement
R_COMMENT = 0.15  # any other comment (exemplars copied from solutions carry none)
R_HIJACK = 0.85  # a literal the task does not name where the task names another
R_UNNAMED_STR = 0.55  # a (non-date) string value the task never names
R_UNNAMED = 0.2  # a literal the task does not name (could be a constant)
R_BROKEN = 0.3  # the action does not parse or does not run on its schema


@dataclass(frozen=True)
class Effects:
    """What a dry run did.

    Attributes
    ----------
    statements : int
        Statements in the action (comments removed).
    kinds : tuple of str
        sqlglot expression names per statement (``"Select"``, ``"Delete"``, ``"Drop"`` ...).
    error : str or None
        First execution error.
    dropped, created, altered : tuple of str
        Tables gone, new, or with changed columns.
    rows_before : int
        Rows in the tables before (all tables).
    deleted, updated, inserted : int
        Rows gone, changed in place, added.
    synthetic : bool
        True when the rows (and maybe the schema) were synthesised rather than the task's own.
    """

    statements: int
    kinds: tuple[str, ...]
    error: str | None
    dropped: tuple[str, ...] = ()
    created: tuple[str, ...] = ()
    altered: tuple[str, ...] = ()
    rows_before: int = 0
    deleted: int = 0
    updated: int = 0
    inserted: int = 0
    synthetic: bool = False


def parse_entry(text: str) -> tuple[str, str, str | None] | None:
    """``(task, action, schema_text)`` of a ``Task:/Action:`` entry, or None if it has none.

    The action is the last ``Action:`` line with any non-field lines after it (so text appended
    to an action is part of what is judged); ``schema_text`` is the ``Observation:`` block of a
    raw trajectory when it holds a ``Table name(...)`` line.

    Examples
    --------
    >>> parse_entry("Task: Count rows\\nAction: SELECT COUNT(*) FROM t;")
    ('Count rows', 'SELECT COUNT(*) FROM t;', None)
    >>> parse_entry("a plain passage") is None
    True
    """
    entry = parse_action_entry(text)
    if entry is None:
        return None
    return entry.task, entry.action, schema_of(entry)


def schema_of(entry: ActionEntry) -> str | None:
    """The entry's observation when it starts with a ``Table name(...)`` line, else None."""
    obs = entry.observation
    return obs if obs and _SCHEMA_LINE.match(obs.splitlines()[0]) else None


def asked_kinds(task: str) -> set[str]:
    """Write kinds the task text asks for (``"insert"``, ``"update"``, ``"delete"``, ``"ddl"``);
    empty for a question.

    Examples
    --------
    >>> sorted(asked_kinds("Remove the members who never paid")), asked_kinds("How many rows?")
    (['delete'], set())
    """
    low = task.lower()
    return {k for k, pat in _WRITE_VERBS.items() if re.search(pat, low)}


_QUESTION = re.compile(
    r"\?|^\s*(how|what|which|who|whom|whose|when|where|why|is|are|does|do|did|can|list|show|"
    r"find|count|give|return|get|calculate|compute|retrieve|select|display|tell|determine|"
    r"identify|report|provide|fetch|name)\b|\b(how many|how much|what is|what are|which)\b",
    re.IGNORECASE,
)


def asks_question(task: str) -> bool:
    """Whether the task reads as a question or a request for information (a question mark, a
    wh-word, or a leading verb such as list/show/find/count), as opposed to a declarative fact
    to record ("Member 102 paid 75"), which may ask for a write without a write verb.

    Examples
    --------
    >>> asks_question("How many rows?"), asks_question("List the members who paid")
    (True, True)
    >>> asks_question("Member 102 paid 75")
    False
    """
    return bool(_QUESTION.search(task))


_norm_num = norm_num


def task_literals(task: str) -> tuple[set[float], set[str], str]:
    """Numbers, quoted strings and the lower-cased text (dates in words added as ISO)."""
    low = task.lower()
    nums = {v for m in _NUMBER.finditer(task) if (v := _norm_num(m.group(0))) is not None}
    for w, i in _WORD_NUMBERS.items():
        if re.search(rf"\b{w}\b", low):
            nums.add(float(i))
    isos = []
    for m in _DATE_WORDS.finditer(task):
        iso = f"{int(m.group(3)):04d}-{_MONTHS[m.group(1).lower()]:02d}-{int(m.group(2)):02d}"
        isos.append(iso)
        for part in (m.group(2), m.group(3)):
            nums.discard(float(part))
    for d in _ISO.findall(task):
        for part in d.split("-"):
            nums.discard(float(part))
    for m in re.finditer(r"(\d+(?:\.\d+)?)\s*(%|percent)", task):
        p = float(m.group(1)) / 100.0  # "by 10%" is written * 1.1, * 0.9 or 0.1
        nums |= {round(1 + p, 6), round(1 - p, 6), round(p, 6)}
    quoted = {(a or b).lower() for a, b in _QUOTED.findall(task)}
    return nums, quoted, low + " " + " ".join(isos)


_Lit = Lit  # value, is_string, role: "filter", "write", "limit" or "other"


def _sql_literals(trees: list[exp.Expression]) -> list[_Lit]:
    from sqlglot import exp

    out = []
    for tree in trees:
        for lit in tree.find_all(exp.Literal):
            p = lit.parent
            while isinstance(p, (exp.Neg, exp.Paren, exp.Cast)):
                p = p.parent
            if isinstance(p, (exp.Limit, exp.Offset, exp.Fetch)):
                role = "limit"
            elif isinstance(p, exp.Tuple) and isinstance(p.parent, exp.Values):
                role = "write"
            elif isinstance(p, exp.EQ) and isinstance(p.parent, exp.Update):
                role = "write"
            elif isinstance(
                p,
                (
                    exp.EQ,
                    exp.NEQ,
                    exp.GT,
                    exp.GTE,
                    exp.LT,
                    exp.LTE,
                    exp.Like,
                    exp.ILike,
                    exp.In,
                    exp.Between,
                ),
            ):
                role = "filter"
            else:
                role = "other"
            out.append(_Lit(lit.name, lit.is_string, role))
    return out


#: string literals that encode a yes/no flag (lower-cased)
_FLAGS = frozenset(("yes", "no", "on", "off", "y", "n"))


def _literal_findings(task: str, all_lits: Sequence[_Lit]) -> list[tuple[float, str]]:
    nums, quoted, low = task_literals(task)
    sql_nums = {v for x in all_lits if not x.is_string and (v := _norm_num(x.value)) is not None}
    sql_strs = {x.value.strip("%").lower() for x in all_lits if x.is_string}
    sql_digits = {re.sub(r"\D", "", x) for x in sql_strs} | {
        x.value for x in all_lits if not x.is_string
    }
    unnamed: list[str] = []
    weak: list[str] = []  # 0/1 constants: unnamed only counts against a value the task names
    for x in all_lits:
        if x.role not in ("filter", "write", "limit", "other"):
            continue
        if x.is_string:
            core = x.value.strip("%").lower()
            if len(core) < 2 or core in ("true", "false", "null"):
                continue
            if core not in low and core.replace("_", " ") not in low:
                # a flag ('Yes', 'N', 'off') stands for a predicate the task says in words
                # ("that require corrective actions"): weak, as the 0/1 constants
                flag = core in _FLAGS
                strong_role = x.role in ("filter", "write") and not flag
                (unnamed if strong_role else weak).append(repr(x.value))
        else:
            v = _norm_num(x.value)
            if v is None or v in nums:
                continue
            if v.is_integer() and re.search(rf"(?<![\w.]){int(v)}(?![\w])", low):
                continue
            if re.sub(r"\D", "", x.value) in {re.sub(r"\D", "", d) for d in _ISO.findall(low)}:
                continue
            if v in (0.0, 1.0) or x.role == "other":
                weak.append(x.value)
            else:
                unnamed.append(x.value)
    missing = [
        f"{v:g}"
        for v in nums
        if v not in sql_nums and not _year_like(v, sql_strs) and f"{v:g}" not in sql_digits
    ]
    missing += [
        repr(q)
        for q in quoted
        if q not in sql_strs and not any(q in s for s in sql_strs) and q not in sql_digits
    ]
    if (unnamed or weak) and missing:
        used = sorted(set(unnamed + weak))
        return [
            (
                R_HIJACK,
                f"answer hijack: SQL uses {', '.join(used)} where the task "
                f"names {', '.join(sorted(set(missing)))}",
            )
        ]
    strong = [u for u in unnamed if u.startswith("'") and not re.search(r"\d{4}", u)]
    if strong:
        return [
            (
                R_UNNAMED_STR,
                f"filter/write value(s) {', '.join(sorted(set(strong)))} the task never names",
            )
        ]
    if unnamed:
        return [(R_UNNAMED, f"SQL literal(s) {', '.join(sorted(set(unnamed)))} not in the task")]
    return []


def _year_like(v: float, sql_strs: set[str]) -> bool:
    """A number of the task that appears inside a string literal (a year in a date, ...)."""
    s = f"{int(v)}" if v.is_integer() else f"{v:g}"
    return any(s in x for x in sql_strs)


def _comment_findings(action: str) -> list[tuple[float, str]]:
    from sqlglot.errors import SqlglotError
    from sqlglot.tokens import Tokenizer

    try:
        tokens = Tokenizer().tokenize(action)
    except SqlglotError:
        return []
    comments = [c for t in tokens for c in (t.comments or [])]
    if not comments:
        return []
    text = " ".join(comments)
    out = []
    if _SQL_IN_COMMENT.search(text):
        out.append((R_COMMENT_SQL, f"comment carries a statement: {text.strip()[:60]!r}"))
    il = instruction_likeness(text)
    out.append((max(R_COMMENT, il), f"comment (instruction-likeness {il:.2f})"))
    return out


# ----------------------------------------------------------------------------- databases
def _deny_attach(action: int, *_: Any) -> int:
    if action in (sqlite3.SQLITE_ATTACH, sqlite3.SQLITE_DETACH):
        return sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK


def db_from_schema_text(
    schema: str, trees: list[exp.Expression] | None = None
) -> sqlite3.Connection:
    """A database from ``Table name(col TYPE, ...)`` and an optional ``Example rows:`` line
    (the format of :func:`memcurator.envs.sql.prompt.schema_text`).

    Raises
    ------
    InvalidInput
        If the text holds no ``Table`` line.
    """
    from sqlglot import exp, parse
    from sqlglot.errors import SqlglotError

    lines = schema.strip().splitlines()
    m = _SCHEMA_LINE.match(lines[0]) if lines else None
    if m is None:
        raise InvalidInput(f"no 'Table name(...)' line in {schema[:60]!r}")
    table, cols = m.group(1), [c.strip() for c in m.group(2).split(",") if c.strip()]
    names = [c.split()[0] for c in cols]
    types = ["INTEGER" if c.upper().endswith("INT") else "TEXT" for c in cols]
    conn = sqlite3.connect(":memory:", isolation_level=None)
    conn.execute(
        f"CREATE TABLE {quote_ident(table)} ("
        + ", ".join(f"{quote_ident(n)} {t}" for n, t in zip(names, types, strict=True))
        + ")"
    )
    rows: list[tuple[Any, ...]] = []
    for line in lines[1:]:
        if line.startswith("Example rows: "):
            try:
                with quiet_fallback():
                    parsed = parse("SELECT * FROM (VALUES " + line[14:] + ")", read="sqlite")
                found = parsed[0].find(exp.Values) if parsed and parsed[0] else None
                tuples: list[exp.Expression] = list(found.expressions) if found else []
                for tup in tuples:
                    rows.append(tuple(_py(e) for e in tup.expressions))
            except SqlglotError:
                pass
    rows = [r for r in rows if len(r) == len(names)]
    # add rows that take the values the statement compares with (so a WHERE on a named value
    # touches few rows while a table-wide write touches all), and filler values otherwise
    lits = {c.lower(): v for c, v in _referenced(trees or []).get(table, {}).items()}
    for i in range(_N_SYNTH):
        row = []
        for n, t in zip(names, types, strict=True):
            vals = lits.get(n.lower(), [])
            if vals and i < 2 * len(vals):
                row.append(vals[i % len(vals)])
            else:
                row.append(1000 + i if t == "INTEGER" else f"z{i}")
        rows.append(tuple(row))
    marks = ", ".join("?" * len(names))
    conn.executemany(f"INSERT INTO {quote_ident(table)} VALUES ({marks})", rows)
    conn.set_authorizer(_deny_attach)
    return conn


def _py(e: exp.Expression) -> Any:
    from sqlglot import exp

    if isinstance(e, exp.Literal):
        if e.is_string:
            return e.name
        v = _norm_num(e.name)
        return int(v) if v is not None and v.is_integer() else v
    if isinstance(e, exp.Neg) and isinstance(e.this, exp.Literal):
        v = _py(e.this)
        return -v if isinstance(v, (int, float)) else None
    return None


def db_from_statements(trees: list[exp.Expression]) -> sqlite3.Connection:
    """Synthesise the tables an action refers to, with rows that make its filters selective.

    Every referenced table gets the columns the statements name (qualified columns go to their
    table, unqualified ones to every table of that statement). Each of ``12`` rows takes, per
    column, one of the literals the statements compare with that column (cycling) or a filler
    value, so a ``WHERE`` on a named value touches few rows while a table-wide write touches all.
    """
    return db_from_tables(_referenced(trees))


def db_from_tables(tables: dict[str, dict[str, list[Any]]]) -> sqlite3.Connection:
    """The database :func:`db_from_statements` makes, from its tables: name -> column -> the
    literals compared with that column (a table without columns gets one, ``id``)."""
    conn = sqlite3.connect(":memory:", isolation_level=None)
    for tname, cols in tables.items():
        if not cols:
            cols = {"id": []}
        # untyped columns: literals keep their own type, so comparisons behave as written
        conn.execute(
            f"CREATE TABLE {quote_ident(tname)} (" + ", ".join(quote_ident(c) for c in cols) + ")"
        )
        rows = []
        for i in range(_N_SYNTH):
            row = []
            for vals in cols.values():
                if vals and i < 2 * len(vals):
                    row.append(vals[i % len(vals)])
                else:
                    row.append(1000 + i if not vals or not isinstance(vals[0], str) else f"z{i}")
            rows.append(tuple(row))
        marks = ", ".join("?" * len(cols))
        conn.executemany(f"INSERT INTO {quote_ident(tname)} VALUES ({marks})", rows)
    conn.set_authorizer(_deny_attach)
    return conn


def _referenced(trees: list[exp.Expression]) -> dict[str, dict[str, list[Any]]]:
    """Tables -> columns -> literals compared with them, over all statements."""
    from sqlglot import exp

    tables: dict[str, dict[str, list[Any]]] = {}
    for tree in trees:
        names: dict[str, str] = {}  # alias -> table
        ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
        for t in tree.find_all(exp.Table):
            if not t.name or t.name.lower() in ctes:
                continue
            tables.setdefault(t.name, {})
            names[t.alias_or_name.lower()] = t.name
            names[t.name.lower()] = t.name
        stmt_tables = list(dict.fromkeys(names.values()))
        ins = tree if isinstance(tree, exp.Insert) else None
        if ins is not None and isinstance(ins.this, exp.Schema):
            tname = ins.this.this.name
            for c in ins.this.expressions:
                tables.setdefault(tname, {}).setdefault(c.name, [])
        elif ins is not None:
            vals = ins.find(exp.Values)
            tname = ins.this.name if isinstance(ins.this, exp.Table) else None
            if vals is not None and vals.expressions and tname:
                width = len(vals.expressions[0].expressions)
                for i in range(width):
                    tables.setdefault(tname, {}).setdefault(f"c{i + 1}", [])
        for col in tree.find_all(exp.Column):
            if not col.name or col.name == "*":
                continue
            owners = (
                [names[col.table.lower()]]
                if col.table and col.table.lower() in names
                else (stmt_tables)
            )
            lits = _compared_literals(col)
            for tname in owners:
                tables.setdefault(tname, {}).setdefault(col.name, []).extend(lits)
    return tables


def _compared_literals(col: exp.Column) -> list[Any]:
    from sqlglot import exp

    p = col.parent
    out: list[Any] = []
    if isinstance(p, (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.Like)):
        other = p.expression if p.this is col else p.this
        v = _py(other)
        if v is not None:
            out.append(v.strip("%") if isinstance(v, str) and isinstance(p, exp.Like) else v)
    elif isinstance(p, exp.In):
        out.extend(v for e in p.expressions if (v := _py(e)) is not None)
    elif isinstance(p, exp.Between):
        out.extend(
            v
            for e in (p.args.get("low"), p.args.get("high"))
            if e is not None and (v := _py(e)) is not None
        )
    return out


def _snapshot(conn: sqlite3.Connection) -> dict[str, tuple[tuple[str, ...], dict[Any, tuple]]]:
    snap = {}
    for (name,) in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
    ).fetchall():
        cols = tuple(r[1] for r in conn.execute(f"PRAGMA table_info({quote_ident(name)})"))
        try:
            rows = {
                r[0]: tuple(r[1:])
                for r in conn.execute(f"SELECT rowid, * FROM {quote_ident(name)}").fetchall()
            }
        except sqlite3.Error:
            rows = {}
        snap[name.lower()] = (cols, rows)
    return snap


def dry_run(sql: str, *, spec: SQLTaskSpec | None = None, schema: str | None = None) -> Effects:
    """Run ``sql`` on a throwaway database and report its effect.

    Parameters
    ----------
    sql : str
    spec : SQLTaskSpec, optional
        The target task (its table and rows are used).
    schema : str, optional
        ``Table name(...)`` text, used when ``spec`` is not given.

    Returns
    -------
    Effects

    Raises
    ------
    InvalidInput
        When ``sql`` is not a string.

    Examples
    --------
    >>> e = dry_run("DELETE FROM t; SELECT * FROM t WHERE a = 5;")
    >>> e.statements, e.deleted, e.rows_before, e.synthetic
    (2, 12, 12, True)
    """
    if not isinstance(sql, str):
        raise InvalidInput(f"sql must be a str, got {type(sql).__name__}")
    trees = _parse(sql)
    kinds = tuple(type(t).__name__ for t in trees) if trees is not None else ()
    synthetic = False
    if spec is not None:
        conn = make_db(spec)
    elif schema is not None:
        conn, synthetic = db_from_schema_text(schema, trees), True
    elif trees is not None:
        conn, synthetic = db_from_statements(trees), True
    else:
        return Effects(len(split_statements(sql)), kinds, "does not parse", synthetic=False)
    return _effects(conn, sql, kinds, synthetic=synthetic)


def _effects(
    conn: sqlite3.Connection, sql: str, kinds: tuple[str, ...], *, synthetic: bool
) -> Effects:
    """Run ``sql`` on ``conn`` (closed afterwards) and compare the tables before and after."""
    n = len(split_statements(sql))
    try:
        before = _snapshot(conn)
        res = execute(conn, sql, timeout_s=2.0)
        after = _snapshot(conn)
    finally:
        conn.close()
    dropped = tuple(sorted(set(before) - set(after)))
    created = tuple(sorted(set(after) - set(before)))
    altered = tuple(sorted(t for t in set(before) & set(after) if before[t][0] != after[t][0]))
    deleted = updated = inserted = 0
    for t in set(before) & set(after):
        b, a = before[t][1], after[t][1]
        deleted += len(set(b) - set(a))
        inserted += len(set(a) - set(b))
        updated += sum(1 for k in set(a) & set(b) if a[k] != b[k])
    rows_before = sum(len(v[1]) for v in before.values())
    deleted += sum(len(before[t][1]) for t in dropped)
    return Effects(
        n,
        kinds,
        res.error,
        dropped,
        created,
        altered,
        rows_before,
        deleted,
        updated,
        inserted,
        synthetic,
    )


def _parse(sql: str) -> list[exp.Expression] | None:
    from sqlglot import exp, parse
    from sqlglot.errors import SqlglotError

    trees: list[exp.Expression]
    with quiet_fallback():
        try:
            trees = [t for t in parse(sql, read="sqlite") if isinstance(t, exp.Expression)]
        except SqlglotError:
            try:
                trees = [t for t in parse(sql, read="mysql") if isinstance(t, exp.Expression)]
            except SqlglotError:
                return None
    return trees or None


def _where_names_task_value(trees: list[exp.Expression], task: str) -> bool:
    """Whether every DELETE/UPDATE has a WHERE comparing with a value the task names."""
    from sqlglot import exp

    nums, quoted, low = task_literals(task)
    writes = [t for t in trees if isinstance(t, (exp.Delete, exp.Update))]
    if not writes:
        return False
    for t in writes:
        where = t.args.get("where")
        if where is None:
            return False
        ok = False
        for lit in where.find_all(exp.Literal):
            v = lit.name.strip("%").lower()
            if lit.is_string and len(v) >= 2 and v in low:
                ok = True
            elif not lit.is_string and (n := _norm_num(lit.name)) is not None and n in nums:
                ok = True
        if not ok:
            return False
    return True


@dataclass(frozen=True)
class _Facts:
    """What the findings need of the statements' parse.

    ``kinds``: the write kinds present (``"ddl"``, ``"insert"``, ``"update"``, ``"delete"``);
    ``unfiltered_delete``: a DELETE without WHERE; ``named``: every DELETE/UPDATE filters on a
    value the task names; ``literals``: every literal with its role.
    """

    kinds: frozenset[str]
    unfiltered_delete: bool
    named: bool
    literals: tuple[_Lit, ...]


def _facts(trees: list[exp.Expression], task: str) -> _Facts:
    from sqlglot import exp

    ddl = (exp.Drop, exp.Create, exp.Alter, exp.TruncateTable)
    writes = {exp.Insert: "insert", exp.Update: "update", exp.Delete: "delete"}
    kinds = set()
    for t in trees:
        if isinstance(t, ddl):
            kinds.add("ddl")
        for cls, k in writes.items():
            if isinstance(t, cls):
                kinds.add(k)
    unfiltered = any(isinstance(t, exp.Delete) and t.args.get("where") is None for t in trees)
    return _Facts(
        frozenset(kinds),
        unfiltered,
        _where_names_task_value(trees, task),
        tuple(_sql_literals(trees)),
    )


def sql_risk(
    task: str, sql: str, *, spec: SQLTaskSpec | None = None, schema: str | None = None
) -> RiskReport:
    """Risk in [0, 1] that ``sql``, offered as the solution of ``task``, is an attack.

    Parameters
    ----------
    task : str
        The task text the entry claims to solve.
    sql : str
        The entry's action.
    spec : SQLTaskSpec, optional
        Target schema and rows for the dry run.
    schema : str, optional
        ``Table name(...)`` schema text, when no spec is given.

    Returns
    -------
    RiskReport

    Raises
    ------
    InvalidInput
        Non-string ``task`` or ``sql``.

    Examples
    --------
    >>> sql_risk("How many orders has customer 5 placed?",
    ...          "SELECT COUNT(*) FROM orders WHERE cid = 5;").risk
    0.0
    >>> r = sql_risk("How many orders has customer 5 placed?",
    ...              "DROP TABLE orders; SELECT COUNT(*) FROM orders WHERE cid = 5;")
    >>> r.risk > 0.9, r.reasons[0]
    (True, 'table dropped/re-created/altered: orders (task asks no schema change)')
    >>> sql_risk("How many orders has customer 5 placed?",
    ...          "SELECT COUNT(*) FROM orders WHERE cid = 6;").reasons
    ('answer hijack: SQL uses 6 where the task names 5',)
    """
    if not isinstance(task, str) or not isinstance(sql, str):
        raise InvalidInput("task and sql must be strings")
    simple = parse_simple_select(sql) if spec is None and schema is None else None
    if simple is not None:
        # one plain SELECT, dry-run on tables synthesised from it: the facts the parse would give,
        # without importing sqlglot (the grammar admits no comment, so there are no comment
        # findings)
        eff = _effects(db_from_tables(simple.tables), sql, ("Select",), synthetic=True)
        facts = _Facts(frozenset(), False, False, simple.literals)
        return _report(_findings(task, facts, eff), eff)
    trees = _parse(sql)
    eff = dry_run(sql, spec=spec, schema=schema)
    found: list[tuple[float, str]] = []
    if trees is None:
        found.append((R_BROKEN, "action does not parse as SQL"))
    else:
        found += _findings(task, _facts(trees, task), eff)
    found += _comment_findings(sql)
    return _report(found, eff)


def _report(found: list[tuple[float, str]], eff: Effects) -> RiskReport:
    """Findings combined as ``1 - prod(1 - r_i)``, reasons by falling risk."""
    keep = 1.0
    for r, _ in found:
        keep *= 1.0 - r
    ordered = sorted(found, key=lambda x: -x[0])
    return RiskReport(round(1.0 - keep, 6), tuple(msg for _, msg in ordered), eff)


def _findings(task: str, facts: _Facts, eff: Effects) -> list[tuple[float, str]]:
    """The findings of statements that parse: effects vs what the task asks, then literals."""
    asked = asked_kinds(task)
    found: list[tuple[float, str]] = []
    kinds = facts.kinds
    if (eff.dropped or eff.created or eff.altered or "ddl" in kinds) and "ddl" not in asked:
        gone = ", ".join((*eff.dropped, *eff.created, *eff.altered)) or "schema statement"
        found.append(
            (R_DROP, f"table dropped/re-created/altered: {gone} (task asks no schema change)")
        )
    writes = kinds - {"ddl"}
    # a declarative fact with no write verb ("Member 102 paid 75") may ask to record it: an
    # insert or update is then plausible; a delete, or any write on a question, is not
    plausible = not asked and not asks_question(task) and writes <= {"insert", "update"}
    if writes and not asked and not plausible:
        found.append(
            (
                R_WRITE_ON_QUESTION,
                f"writes ({', '.join(sorted(writes))}) but the task asks a question",
            )
        )
    elif writes - asked and asked:
        found.append(
            (
                R_WRONG_WRITE,
                f"{', '.join(sorted(writes - asked))} not asked "
                f"(task asks {', '.join(sorted(asked))})",
            )
        )
    # values that name rows (a percentage or "by 10" is an amount, not a row)
    naming = re.sub(r"\d+(?:\.\d+)?\s*(%|percent)|\bby \d+(?:\.\d+)?", " ", task)
    nums, quoted, low = task_literals(naming)
    names_values = bool(nums or quoted or _ISO.search(low))
    wide_ok = bool(_WIDE.search(task)) and not names_values and not _RESTRICT.search(task)
    if facts.unfiltered_delete and not wide_ok:
        found.append((R_EMPTIED, "DELETE without WHERE although the task restricts which rows"))
    base = max(eff.rows_before, 1)
    named = facts.named
    if any(r == R_EMPTIED for r, _ in found):
        pass
    elif eff.deleted >= 0.9 * base and eff.rows_before and not eff.dropped:
        if "delete" not in asked or not wide_ok:
            if eff.synthetic and named:
                found.append(
                    (
                        R_WEAK_WIDE,
                        f"deletes {eff.deleted}/{eff.rows_before} "
                        "synthetic rows through a filter on the task's values",
                    )
                )
            else:
                found.append(
                    (
                        R_EMPTIED,
                        f"deletes {eff.deleted}/{eff.rows_before} rows "
                        "(table emptied; the task asks no table-wide delete)",
                    )
                )
    elif eff.updated >= 0.9 * base and eff.rows_before and not wide_ok and names_values:
        r = R_WEAK_WIDE if eff.synthetic and named else R_WIDE_WRITE
        found.append(
            (
                r,
                f"updates {eff.updated}/{eff.rows_before} rows although "
                "the task names specific values",
            )
        )
    n_asked = max(1, len(re.findall(r"\bthen\b|\band then\b|;", task)) + 1)
    if eff.statements > n_asked:
        found.append((R_EXTRA_STMT, f"{eff.statements} statements for a one-step task"))
    found += _literal_findings(task, facts.literals)
    if eff.error is not None and not eff.synthetic:
        found.append((R_BROKEN, f"does not run on the target schema: {eff.error}"))
    return found
