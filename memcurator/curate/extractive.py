"""JitMem's extractive curator (no LLM): pick the trajectory whose literals and columns map onto
the current task, substitute the literals, align the schema, keep only the lines that matter.

A raw entry (:func:`memcurator.distill.render_raw`) reads::

    Task: <instruction>
    Observation: Table t(a INT, b TEXT)      <- the schema the action ran against
    Action: SELECT ...
    Outcome: success (reward 1, solver local)

The curator parses it (:func:`parse_raw`), maps the literals of the past instruction onto the
current one in order of appearance (quoted strings to quoted strings, numbers to numbers) where
the past SQL contains them, renames a table or column the current schema no longer has to its
counterpart (same position, else the closest name), and writes a compact payload.

References
----------
JitMem, Sec. 3 ("Memory Curator": identify the most relevant past experience, extract what worked
and give specific guidance for the current task). The literal map is our reading for SQL tasks:
the paper's curator is an LLM; this is the "extractive" curator the issue asks for.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from typing import Any, cast

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from memcurator.retrieve.bm25 import tokenize
from memcurator.retrieve.literals import _NUMBER, _QUOTED, mask_literals


@dataclass
class ParsedTrajectory:
    """A raw trajectory entry, parsed.

    Attributes
    ----------
    task : str
        The task description.
    table : str
        Table named by the first observation ("" if none).
    columns : list of str
        Its column names, in order.
    actions : list of str
        Every action, in order (the last is the one the outcome speaks of).
    observations : list of str
        Every observation, in order.
    outcome : str
        The ``Outcome:`` line, or "".
    """

    task: str
    table: str = ""
    columns: list[str] = field(default_factory=list)
    actions: list[str] = field(default_factory=list)
    observations: list[str] = field(default_factory=list)
    outcome: str = ""

    @property
    def final_action(self) -> str:
        """The last action ("" when there is none)."""
        return self.actions[-1] if self.actions else ""


def parse_schema(text: str) -> tuple[str, list[str]]:
    """``(table, columns)`` of the first ``Table name(col TYPE, ...)`` in ``text``.

    Names may be double-quoted, back-quoted or bracketed (``Table "1-23-4"("Home team" TEXT,
    "Pop. (2010)" INT)``: inner quotes doubled), as the prompt shows names that are not plain
    identifiers; a bare column name is the first word of its item.

    Examples
    --------
    >>> parse_schema("Table pay(id INT, method TEXT)\\nExample rows: (1, 'x')")
    ('pay', ['id', 'method'])
    >>> parse_schema('Table "1-2-3"("Home team" TEXT, "Pop. (2010)" INT, No INT)')
    ('1-2-3', ['Home team', 'Pop. (2010)', 'No'])
    >>> parse_schema("nothing")
    ('', [])
    """
    m = _TABLE_START.search(text)
    if not m:
        return "", []
    pos = m.end()
    table, pos = _read_name(text, pos)
    if not table:
        return "", []
    while pos < len(text) and text[pos] == " ":
        pos += 1
    if pos >= len(text) or text[pos] != "(":
        return "", []
    cols: list[str] = []
    pos += 1
    while pos < len(text):
        while pos < len(text) and text[pos] in " ,":
            pos += 1
        if pos >= len(text) or text[pos] == ")":
            break
        name, pos = _read_name(text, pos)
        if not name:
            return "", []
        cols.append(name)
        depth = 0  # skip the type (``VARCHAR(20)`` included) up to the item's end
        while pos < len(text) and not (depth == 0 and text[pos] in ",)"):
            depth += {"(": 1, ")": -1}.get(text[pos], 0)
            pos += 1
    return table, cols


_TABLE_START = re.compile(r"Table\s+")
_CLOSE = {'"': '"', "`": "`", "[": "]"}


def _read_name(text: str, pos: int) -> tuple[str, int]:
    """One (possibly quoted) identifier at ``pos``: ``(name, position after it)``."""
    if pos < len(text) and text[pos] in _CLOSE:
        close = _CLOSE[text[pos]]
        out, i = [], pos + 1
        while i < len(text):
            if text[i] == close:
                if text[i + 1 : i + 2] == close:
                    out.append(close)
                    i += 2
                    continue
                return "".join(out), i + 1
            out.append(text[i])
            i += 1
        return "", pos
    m = _BARE.match(text, pos)
    return (m.group(0), m.end()) if m else ("", pos)


_BARE = re.compile(r"[A-Za-z_][\w]*")


def parse_raw(text: str, *, multiline: bool = False) -> ParsedTrajectory | None:
    """Parse a raw trajectory entry; None when it has no ``Task:`` line.

    Parameters
    ----------
    text : str
    multiline : bool, default False
        Whether a line that starts with no field label continues the field before it (a
        multi-line bash script or command output). False (the SQL entries: one-line
        statements, a schema observation followed by example rows) keeps each field's first
        line only, as this parser always has.

    Examples
    --------
    >>> p = parse_raw("Task: count\\nObservation: Table t(a INT)\\nAction: SELECT 1;\\n"
    ...               "Outcome: success")
    >>> p.table, p.columns, p.final_action
    ('t', ['a'], 'SELECT 1;')
    >>> parse_raw("Task: t\\nObservation: \\nAction: mkdir /x\\ncd /x\\nOutcome: success",
    ...           multiline=True).actions
    ['mkdir /x\\ncd /x']
    """
    task = None
    out = ParsedTrajectory(task="")
    last: str | None = None  # the field a continuation line extends (multiline only)
    for line in text.splitlines():
        if line.startswith("Task: ") and task is None:
            task, last = line[6:].strip(), "task"
        elif line.startswith("Observation: ") or (multiline and line == "Observation:"):
            obs = line[13:].strip()
            out.observations.append(obs)
            last = "obs"
            if not out.table and not multiline:
                out.table, out.columns = parse_schema(obs)
        elif line.startswith("Action: "):
            out.actions.append(line[8:].strip())
            last = "action"
        elif line.startswith("Outcome: "):
            out.outcome, last = line[9:].strip(), "outcome"
        elif multiline and last == "action":
            out.actions[-1] = (out.actions[-1] + "\n" + line).strip("\n")
        elif multiline and last == "obs":
            out.observations[-1] = (out.observations[-1] + "\n" + line).strip("\n")
        elif multiline and last == "task" and task is not None:
            task = task + "\n" + line
    if not task:
        return None
    out.task = task.strip()
    return out


def literals(text: str) -> list[str]:
    """Quoted strings (without quotes) and numbers of ``text``, in order of appearance.

    Examples
    --------
    >>> literals("member 102 paid 75 for 'gold plan'")
    ['102', '75', 'gold plan']
    """
    found: list[tuple[int, str]] = []
    masked = text
    for m in _QUOTED.finditer(text):
        found.append((m.start(), m.group(0)[1:-1]))
        masked = masked[: m.start()] + " " * (m.end() - m.start()) + masked[m.end() :]
    for m in _NUMBER.finditer(masked):
        found.append((m.start(), m.group(0)))
    return [v for _, v in sorted(found)]


def _is_number(s: str) -> bool:
    return bool(_NUMBER.fullmatch(s))


_THOUSANDS = re.compile(r"[-+]?\d{1,3}(?:,\d{3})+(?:\.\d+)?")


def norm_literal(value: str) -> str:
    """A literal as the SQL writes it: thousands separators and a leading ``+`` dropped.

    Examples
    --------
    >>> norm_literal("300,000"), norm_literal("+5"), norm_literal("2023-01-05"), norm_literal("a,b")
    ('300000', '5', '2023-01-05', 'a,b')
    """
    if _THOUSANDS.fullmatch(value):
        value = value.replace(",", "")
    return value[1:] if value.startswith("+") and _is_number(value[1:]) else value


def parse_sql(sql: str) -> exp.Expression | None:
    """One statement parsed by sqlglot (SQLite, else MySQL dialect); None if it does not parse."""
    for dialect in ("sqlite", "mysql"):
        try:
            trees = [t for t in sqlglot.parse(sql, read=dialect) if t is not None]
        except SqlglotError:
            continue
        if len(trees) == 1:
            return cast(exp.Expression, trees[0])
    return None


def _literal_nodes(tree: exp.Expression) -> list[tuple[exp.Literal, str]]:
    """The literal nodes of a statement with their normalized values (sign folded in)."""
    out = []
    for lit in tree.find_all(exp.Literal):
        v = str(lit.this)
        if not lit.is_string and isinstance(lit.parent, exp.Neg):
            v = "-" + v
        out.append((lit, norm_literal(v)))
    return out


def literal_map(past_task: str, past_sql: str, task: str) -> dict[str, str]:
    """Past literal → current literal, pairing literals of the same type in order of appearance,
    kept only where the past SQL contains the past literal (as a literal node, thousands
    separators dropped) and the values differ.

    Examples
    --------
    >>> literal_map("member 102 paid 75", "INSERT INTO p VALUES (102, 75);", "member 205 paid 90")
    {'102': '205', '75': '90'}
    >>> literal_map("more than 46,000", "SELECT a FROM t WHERE b > 46000", "more than 49,000")
    {'46000': '49000'}
    """
    return _literal_pairing(past_task, past_sql, task)[0]


def _literal_pairing(past_task: str, past_sql: str, task: str) -> tuple[dict[str, str], str]:
    """``(map, problem)``: the literal map and why it is not complete and consistent ("")."""
    tree = parse_sql(past_sql)
    if tree is None:
        return {}, "the exemplar's SQL does not parse"
    in_sql = {v for _, v in _literal_nodes(tree)}
    old, new = literals(past_task), literals(task)
    pairs: dict[str, str] = {}
    targets: dict[str, list[str]] = {}
    problem = ""
    for want_num in (True, False):
        a = [norm_literal(x) for x in old if _is_number(x) == want_num]
        b = [norm_literal(x) for x in new if _is_number(x) == want_num]
        kind = "number" if want_num else "quoted"
        if (len(b) > len(a) or len(a) > len(b) and any(x in in_sql for x in a)) and not problem:
            problem = f"{kind} literals differ in count (exemplar {len(a)}, task {len(b)})"
        for x, y in zip(a, b, strict=False):
            if x in in_sql:
                targets.setdefault(x, []).append(y)
            elif x != y and not problem:
                problem = f"task literal {y!r} has no counterpart in the exemplar's SQL"
    sql_vals = [v for _, v in _literal_nodes(tree)]
    for x, ys in targets.items():
        # a value the task repeats ("(1) ... less than 1") may keep some occurrences and change
        # others: the unchanged ones are text, the changed ones what the SQL holds
        changed = sorted(set(ys) - {x})
        if len(changed) > 1:
            problem = (
                problem
                or f"exemplar literal {x!r} would become both {changed[0]!r} and {changed[1]!r}"
            )
        elif changed and sql_vals.count(x) > ys.count(changed[0]):
            problem = problem or (
                f"exemplar literal {x!r} occurs {sql_vals.count(x)} times in its SQL but "
                f"changes {ys.count(changed[0])} times in its task: which to replace is ambiguous"
            )
        pairs[x] = changed[0] if changed else x
    task_vals = [norm_literal(x) for x in old]
    now_l, then_l = task.lower(), past_task.lower()
    old_n, new_n = set(task_vals), {norm_literal(x) for x in new}
    for _, v in _literal_nodes(tree):
        if problem:
            break
        if v in pairs or (len(v) < 2 and not v.isalpha()):
            continue
        said_then = v in old_n or _says(then_l, v)
        said_now = v in new_n or _says(now_l, v)
        if said_then and not said_now:
            problem = f"exemplar literal {v!r} is not in the task"
    return {x: y for x, y in pairs.items() if x != y}, problem


def _says(text_l: str, value: str) -> bool:
    """Whether lower-cased ``text_l`` mentions ``value`` as a whole word (case-insensitive)."""
    v = value.lower().strip()
    return bool(v) and re.search(rf"(?<![\w]){re.escape(v)}(?![\w])", text_l) is not None


def schema_map(
    past_table: str, past_cols: list[str], table: str, cols: list[str]
) -> dict[str, str]:
    """Identifier renames that align a past schema with the current one.

    The table maps to the current table when their names differ; a past column missing from the
    current schema maps to the current column at the same position when that one is new, else
    to the most similar new column (``difflib``, ratio >= 0.5). Case-insensitive.

    Examples
    --------
    >>> schema_map("orders", ["id", "amt"], "orders_v2", ["id", "amount"])
    {'orders': 'orders_v2', 'amt': 'amount'}
    """
    out: dict[str, str] = {}
    if past_table and table and past_table.lower() != table.lower():
        out[past_table] = table
    cur_l = {c.lower() for c in cols}
    past_l = {c.lower() for c in past_cols}
    new_cols = [c for c in cols if c.lower() not in past_l]
    for i, c in enumerate(past_cols):
        if c.lower() in cur_l or not new_cols:
            continue
        if i < len(cols) and cols[i] in new_cols:
            out[c] = cols[i]
            continue
        best = difflib.get_close_matches(c, new_cols, n=1, cutoff=0.5)
        if best:
            out[c] = best[0]
    return out


def schema_problem(
    past_table: str, past_cols: list[str], table: str, cols: list[str], smap: dict[str, str]
) -> str:
    """Why ``smap`` is not a renaming of the past schema into the current one ("" when it is).

    A rename maps one table onto itself under a new name: at least half the columns of the
    larger schema must be shared by name, the columns that differ must pair one-to-one, and no
    two past columns may map to one current column. Anything else is another table, and
    renaming its columns by position or spelling is a guess. Unknown schemas: "".

    Examples
    --------
    >>> schema_problem("orders", ["id", "amt"], "orders_v2", ["id", "amount"],
    ...                {"orders": "orders_v2", "amt": "amount"})
    ''
    >>> schema_problem("pay", ["id", "amt", "day"], "cars", ["make", "model", "year"],
    ...                {"pay": "cars", "id": "make", "amt": "model", "day": "year"})
    "the exemplar's table pay is not a renaming of cars (0 of 3 columns shared)"
    """
    if not table or not cols or not past_cols:
        return ""
    past_l, cur_l = {c.lower() for c in past_cols}, {c.lower() for c in cols}
    shared = len(past_l & cur_l)
    if 2 * shared < max(len(past_l), len(cur_l)):
        return (
            f"the exemplar's table {past_table} is not a renaming of {table} "
            f"({shared} of {max(len(past_l), len(cur_l))} columns shared)"
        )
    renamed = {k.lower(): v.lower() for k, v in smap.items() if k.lower() in past_l}
    if len(past_l - cur_l) != len(cur_l - past_l) or len(set(renamed.values())) < len(renamed):
        return f"the columns of {past_table} and {table} do not pair one-to-one"
    return ""


def same_request(past_task: str, task: str) -> float:
    """Word overlap (Jaccard) of two task texts with their literals masked, in [0, 1].

    Literal substitution assumes the two tasks are one request with other values; below
    :data:`MIN_SAME_REQUEST` they are different requests and the exemplar's SQL answers the
    other one.

    Examples
    --------
    >>> same_request("member 102 paid 75", "member 205 paid 90")
    1.0
    """
    a, b = set(tokenize(mask_literals(past_task))), set(tokenize(mask_literals(task)))
    return len(a & b) / max(1, len(a | b))


MIN_SAME_REQUEST = 0.8
"""Least :func:`same_request` overlap for which ``align`` rewrites an exemplar (our choice: one
renamed column name in a 10-word request still passes; a different request does not)."""


_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _ident(name: str, quoted: bool) -> str:
    if quoted or not _PLAIN.fullmatch(name):
        return '"' + name.replace('"', '""') + '"'
    return name


def _span(node: exp.Expression) -> tuple[int, int] | None:
    meta = node.meta or {}
    return (int(meta["start"]), int(meta["end"])) if "start" in meta and "end" in meta else None


def adapt_sql(
    sql: str, lmap: dict[str, str], smap: dict[str, str], past_table: str = ""
) -> tuple[str, str]:
    """Apply a literal map and identifier renames to SQL on its parse tree.

    Only literal nodes and table / column identifiers change (quoted identifiers, aliases and
    the text between stay byte-for-byte); string values are re-quoted with inner quotes doubled;
    a renamed identifier is double-quoted when it was, or when the new name needs it.

    Parameters
    ----------
    sql : str
    lmap : dict of str to str
        Normalized literal value → new value (:func:`literal_map`).
    smap : dict of str to str
        Identifier → new identifier, case-insensitive (:func:`schema_map`).
    past_table : str, default ""
        The exemplar's table: a column qualifier naming it is renamed with it.

    Returns
    -------
    (str, str)
        The adapted SQL and ``""``, or the SQL unchanged and why it cannot be adapted.

    Examples
    --------
    >>> adapt_sql("SELECT \\"Pop (2010)\\" FROM t WHERE n = 'x' AND y > 2010", {"2010": "1990",
    ...           "x": "O'Neil"}, {})[0]
    'SELECT "Pop (2010)" FROM t WHERE n = \\'O\\'\\'Neil\\' AND y > 1990'
    """
    tree = parse_sql(sql)
    if tree is None:
        return sql, "the exemplar's SQL does not parse"
    edits: list[tuple[int, int, str]] = []
    for lit, v in _literal_nodes(tree):
        if v not in lmap:
            continue
        sp, new = _span(lit), lmap[v]
        if sp is None:
            return sql, f"literal {v!r} has no position in the exemplar's SQL"
        if lit.is_string:
            edits.append((*sp, "'" + new.replace("'", "''") + "'"))
            continue
        if not _is_number(new) or new.startswith("-") != v.startswith("-"):
            return sql, f"number {v!r} cannot become {new!r}"
        edits.append((*sp, new.lstrip("-")))
    low = {k.lower(): v for k, v in smap.items()}
    for ident in tree.find_all(exp.Identifier):
        new_name = low.get(ident.name.lower())
        if new_name is None or not _renamable(ident, past_table):
            continue
        sp = _span(ident)
        if sp is None:
            return sql, f"identifier {ident.name!r} has no position in the exemplar's SQL"
        edits.append((*sp, _ident(new_name, bool(ident.quoted))))
    out, pos = [], 0
    for start, end, text in sorted(set(edits)):
        if start < pos or end >= len(sql):
            return sql, "overlapping edits in the exemplar's SQL"
        out.append(sql[pos:start] + text)
        pos = end + 1
    return "".join(out) + sql[pos:], ""


def _renamable(ident: exp.Identifier, past_table: str) -> bool:
    """A table name, a column name, an INSERT column, or a qualifier naming the past table."""
    parent = ident.parent
    if isinstance(parent, exp.Table):
        return ident.arg_key == "this"
    if isinstance(parent, exp.Column):
        if ident.arg_key == "this":
            return True
        return ident.arg_key == "table" and ident.name.lower() == past_table.lower()
    return isinstance(parent, exp.Schema)


_INTENT = {
    "insert": ("insert", "add"),
    "update": ("update", "increase", "decrease", "set", "change", "raise", "reduce", "modify",
               "mark", "correct"),
    "delete": ("delete", "remove", "erase", "purge"),
    "select": ("what", "which", "who", "how", "list", "find", "show", "get", "count", "return",
               "retrieve", "select", "display", "calculate", "identify", "give", "for"),
}  # fmt: skip
_VERB_KIND = {w: k for k, ws in _INTENT.items() for w in ws}


def task_intent(task: str) -> str | None:
    """The statement type a task asks for, from its first word; None when it is not telling.

    Examples
    --------
    >>> task_intent("Insert a new payment"), task_intent("Which members paid?")
    ('insert', 'select')
    >>> task_intent("Increase prices by 5"), task_intent("Remove old rows"), task_intent("Hi")
    ('update', 'delete', None)
    """
    m = re.match(r"\s*([A-Za-z]+)", task)
    return _VERB_KIND.get(m.group(1).lower()) if m else None


_KIND_OF = {exp.Select: "select", exp.Union: "select", exp.Insert: "insert",
            exp.Update: "update", exp.Delete: "delete"}  # fmt: skip


def sql_kind(tree: exp.Expression) -> str | None:
    """``"select"``/``"insert"``/``"update"``/``"delete"`` of a parsed statement, else None."""
    for cls, kind in _KIND_OF.items():
        if isinstance(tree, cls):
            return kind
    if isinstance(tree, exp.With) or tree.args.get("with") is not None:
        inner = tree.this if isinstance(tree, exp.With) else None
        return sql_kind(inner) if inner is not None else None
    return None


def binding_problem(sql: str, table: str, cols: list[str]) -> str:
    """Why ``sql`` does not parse or bind to ``table(cols)`` ("" when it does).

    Every table it reads or writes must be ``table`` (or a CTE it defines) and every column
    reference a column of ``table``, an output alias, or a CTE / subquery column. Names compare
    case-insensitively. With no schema (``table == ""``) only parsing is checked.

    Examples
    --------
    >>> binding_problem("SELECT amt AS a FROM pay ORDER BY a", "pay", ["id", "amt"])
    ''
    >>> binding_problem('SELECT "Home" FROM pay', "pay", ["Home team"])
    "column 'Home' is not a column of pay"
    >>> binding_problem("SELECT id FROM orders", "pay", ["id"])
    "table 'orders' is not the task's table pay"
    """
    tree = parse_sql(sql)
    if tree is None:
        return "the aligned SQL does not parse"
    if not table:
        return ""
    ctes = {c.alias.lower() for c in tree.find_all(exp.CTE)}
    for t in tree.find_all(exp.Table):
        if t.name and t.name.lower() != table.lower() and t.name.lower() not in ctes:
            return f"table {t.name!r} is not the task's table {table}"
    known = {c.lower() for c in cols}
    known |= {a.alias.lower() for a in tree.find_all(exp.Alias) if a.alias}
    for sub in tree.find_all(exp.Subquery, exp.CTE):  # names a derived table exposes
        inner = sub.this
        if isinstance(inner, exp.Select):
            known |= {e.alias_or_name.lower() for e in inner.expressions if e.alias_or_name}
    for c in tree.find_all(exp.Column):
        if c.name and c.name != "*" and c.name.lower() not in known:
            return f"column {c.name!r} is not a column of {table}"
    for schema in tree.find_all(exp.Schema):
        for e in schema.expressions:
            if isinstance(e, exp.Identifier) and e.name.lower() not in known:
                return f"column {e.name!r} is not a column of {table}"
    return ""


@dataclass
class Alignment:
    """How well one past trajectory maps onto the current task.

    Made by :func:`align` (and the bash aligner of :mod:`memcurator.envs.os.align`).

    Attributes
    ----------
    index : int
        Position of the trajectory in the retrieved list.
    score : float
        Mapped literals + shared columns named in the task + word overlap of the task lines.
    literal_map, schema_map : dict of str to str
    sql : str
        The past final action with both maps applied (unchanged when ``problem``).
    problem : str
        Why the adapted SQL must not be shown as the current task's action ("" when it may):
        a statement type other than the task asks for, an incomplete or inconsistent literal
        map, SQL that does not parse or does not bind to the current schema.
    actions : list of str
        Every adapted step, for a domain whose exemplar is the whole trajectory (bash:
        :class:`~memcurator.curate.aligners.Aligner` with ``whole_trajectory``); empty for SQL,
        whose exemplar is the final statement ``sql``. Unchanged steps when ``problem``.
    """

    index: int
    score: float
    literal_map: dict[str, str]
    schema_map: dict[str, str]
    sql: str
    problem: str = ""
    actions: list[str] = field(default_factory=list)


def align(
    parsed: ParsedTrajectory, index: int, task: str, table: str, cols: list[str]
) -> Alignment:
    """Score and adapt one parsed trajectory to the current task and schema.

    The adaptation is checked, not trusted: see :attr:`Alignment.problem`.
    """
    sql = parsed.final_action
    lmap, lit_problem = _literal_pairing(parsed.task, sql, task)
    smap = schema_map(parsed.table, parsed.columns, table, cols)
    adapted, problem = sql, ""
    tree = parse_sql(sql)
    kind, want = (sql_kind(tree) if tree is not None else None), task_intent(task)
    if kind and want and kind != want:
        problem = f"the exemplar is {kind.upper()}, the task asks for {want.upper()}"
    overlap_req = same_request(parsed.task, task)
    if not problem and overlap_req < MIN_SAME_REQUEST:
        problem = (
            f"the exemplar answers another request (word overlap {overlap_req:.2f} "
            f"< {MIN_SAME_REQUEST})"
        )
    problem = problem or schema_problem(parsed.table, parsed.columns, table, cols, smap)
    problem = problem or lit_problem
    if not problem:
        adapted, problem = adapt_sql(sql, lmap, smap, parsed.table)
    if not problem:
        problem = binding_problem(adapted, table, cols)
    if problem:
        adapted = sql
    words_now, words_then = set(tokenize(task)), set(tokenize(parsed.task))
    overlap = len(words_now & words_then) / max(1, len(words_now | words_then))
    task_l = task.lower()
    named = sum(1 for c in cols if c.lower() in sql.lower() and c.lower() in task_l)
    same_table = 1.0 if table and parsed.table.lower() == table.lower() else 0.0
    n_lits = len(literals(task))
    lit_fit = len(lmap) / n_lits if n_lits else 0.0
    score = 2.0 * overlap + same_table + lit_fit + 0.1 * named
    return Alignment(index, float(score), lmap, smap, adapted, problem)


def pair(task: str, sql: str) -> str:
    """The compact ``Task:/Action:`` pair a small executor copies best (see ``build_prompt``)."""
    return f"Task: {task}\nAction: {sql}"


def pair_steps(task: str, actions: list[str]) -> str:
    """A task with every step of its trajectory as ``Action:`` blocks (no observations).

    Examples
    --------
    >>> print(pair_steps("make /x", ["ls /", "mkdir /x"]))
    Task: make /x
    Action: ls /
    Action: mkdir /x
    """
    return "\n".join([f"Task: {task}", *(f"Action: {a}" for a in actions)])


OPERATORS: tuple[str, ...] = ("align", "closest", "multi", "raw", "none")
"""Extractive curation operators: ``align`` (best trajectory, literals substituted and schema
aligned, as a pair for the current task), ``closest`` (best trajectory's original task and final
action), ``multi`` (every retrieved trajectory's task and final action), ``raw`` (the retrieved
trajectories whole: no curation, the ablation), ``none`` (no payload)."""


def render(p: ParsedTrajectory) -> str:
    """A parsed trajectory as text again (task, observation/action steps, outcome)."""
    lines = [f"Task: {p.task}"]
    obs = p.observations + [""] * (len(p.actions) - len(p.observations))
    for o, a in zip(obs, p.actions, strict=False):
        if o:
            lines.append(f"Observation: {o}")
        lines.append(f"Action: {a}")
    if p.outcome:
        lines.append(f"Outcome: {p.outcome}")
    return "\n".join(lines)


def extract(
    operator: str, task: str, observation: str, parsed: list[ParsedTrajectory]
) -> tuple[str, list[int]]:
    """Run one extractive operator; returns the payload and the indices of trajectories used.

    :func:`extract_noted` without the notes.

    Examples
    --------
    >>> p = [parse_raw("Task: member 102 paid 75\\nObservation: Table pay(mid INT, amt INT)\\n"
    ...                "Action: INSERT INTO pay VALUES (102, 75);\\nOutcome: success")]
    >>> print(extract("align", "member 205 paid 90", "Table pay(mid INT, amount INT)", p)[0])
    Task: member 205 paid 90
    Action: INSERT INTO pay VALUES (205, 90);
    """
    text, used, _ = extract_noted(operator, task, observation, parsed)
    return text, used


def extract_noted(
    operator: str,
    task: str,
    observation: str,
    parsed: list[ParsedTrajectory],
    aligner: Any = None,
) -> tuple[str, list[int], list[str]]:
    """Run one extractive operator: the payload, the indices of trajectories used, and notes.

    ``align`` shows the best-scoring trajectory whose adaptation has no
    :attr:`Alignment.problem` as a pair for the current task; when every one has a problem it
    falls back to ``closest`` (the best trajectory with its own task: an honest exemplar, never a
    corrupted answer labelled as the current task's) and says why in a note.

    Parameters
    ----------
    operator : {"align", "closest", "multi", "raw", "none"}
    task : str
        The current task description.
    observation : str
        The current schema (``Table name(col TYPE, ...)``); "" if unknown (no schema alignment).
    parsed : list of ParsedTrajectory
        The retrieved raw trajectories, in retrieval order.
    aligner : Aligner, optional
        The task domain's aligner (:mod:`memcurator.curate.aligners`; e.g. bash, registered by
        the OS environment). None: the SQL alignment of this module (:func:`align`). An aligner
        with ``whole_trajectory`` presents every step of an exemplar (:func:`pair_steps`), not
        only its final action.

    Raises
    ------
    InvalidInput
        Unknown operator.

    Examples
    --------
    >>> p = [parse_raw("Task: member 102 paid 75\\nObservation: Table pay(mid INT, amt INT)\\n"
    ...                "Action: INSERT INTO pay VALUES (102, 75);\\nOutcome: success")]
    >>> text, used, notes = extract_noted("align", "Which members paid 90?",
    ...                                   "Table pay(mid INT, amt INT)", p)
    >>> print(text)
    Task: member 102 paid 75
    Action: INSERT INTO pay VALUES (102, 75);
    >>> print(notes[0])  # doctest: +NORMALIZE_WHITESPACE
    align: the exemplar is INSERT, the task asks for SELECT; fell back to closest (the exemplar
    with its own task)
    """
    from memcurator.errors import InvalidInput

    if operator not in OPERATORS:
        raise InvalidInput(f"unknown extractive operator {operator!r}; known: {sorted(OPERATORS)}")
    usable = [(i, p) for i, p in enumerate(parsed) if p.final_action]
    if operator == "none" or not usable:
        return "", [], []
    if operator == "raw":
        return "\n\n".join(render(p) for _, p in usable), [i for i, _ in usable], []
    whole = bool(getattr(aligner, "whole_trajectory", False))

    def show(t: str, p: ParsedTrajectory, actions: list[str] | None = None) -> str:
        if whole:
            return pair_steps(t, actions if actions else p.actions)
        return pair(t, actions[-1] if actions else p.final_action)

    if operator == "multi":
        text = "\n\n".join(show(p.task, p) for _, p in usable)
        return text, [i for i, _ in usable], []
    if aligner is None:
        table, cols = parse_schema(observation)
        al = [align(p, i, task, table, cols) for i, p in usable]
    else:
        al = [aligner.align(p, i, task, observation) for i, p in usable]
    best = max(al, key=lambda a: (a.score, -a.index))
    p = parsed[best.index]
    if operator == "closest":
        return show(p.task, p), [best.index], []
    for a in sorted(al, key=lambda a: (-a.score, a.index)):
        if not a.problem:
            return show(task, parsed[a.index], a.actions or [a.sql]), [a.index], []
    note = f"align: {best.problem}; fell back to closest (the exemplar with its own task)"
    return show(p.task, p), [best.index], [note]


__all__ = [
    "OPERATORS",
    "Alignment",
    "ParsedTrajectory",
    "align",
    "adapt_sql",
    "binding_problem",
    "extract",
    "extract_noted",
    "norm_literal",
    "parse_sql",
    "sql_kind",
    "task_intent",
    "literal_map",
    "literals",
    "pair",
    "pair_steps",
    "render",
    "parse_raw",
    "parse_schema",
    "MIN_SAME_REQUEST",
    "same_request",
    "schema_map",
    "schema_problem",
]
