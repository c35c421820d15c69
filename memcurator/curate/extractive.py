"""JitMem's extractive curator (no LLM): pick the trajectory whose literals and columns map onto
the current task, substitute the literals, align the schema, keep only the lines that matter.

A raw entry (:func:`memcurator.curate.distill.render_raw`) reads::

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

from memcurator.retrieve.bm25 import tokenize
from memcurator.retrieve.literals import _NUMBER, _QUOTED

_TABLE = re.compile(r"Table\s+([A-Za-z_][\w]*)\s*\(([^)]*)\)")


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

    Examples
    --------
    >>> parse_schema("Table pay(id INT, method TEXT)\\nExample rows: (1, 'x')")
    ('pay', ['id', 'method'])
    >>> parse_schema("nothing")
    ('', [])
    """
    m = _TABLE.search(text)
    if not m:
        return "", []
    cols = [c.strip().split()[0] for c in m.group(2).split(",") if c.strip()]
    return m.group(1), cols


def parse_raw(text: str) -> ParsedTrajectory | None:
    """Parse a raw trajectory entry; None when it has no ``Task:`` line.

    Examples
    --------
    >>> p = parse_raw("Task: count\\nObservation: Table t(a INT)\\nAction: SELECT 1;\\n"
    ...               "Outcome: success")
    >>> p.table, p.columns, p.final_action
    ('t', ['a'], 'SELECT 1;')
    """
    task = None
    out = ParsedTrajectory(task="")
    for line in text.splitlines():
        if line.startswith("Task: ") and task is None:
            task = line[6:].strip()
        elif line.startswith("Observation: "):
            obs = line[13:].strip()
            out.observations.append(obs)
            if not out.table:
                out.table, out.columns = parse_schema(obs)
        elif line.startswith("Action: "):
            out.actions.append(line[8:].strip())
        elif line.startswith("Outcome: "):
            out.outcome = line[9:].strip()
    if not task:
        return None
    out.task = task
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


def literal_map(past_task: str, past_sql: str, task: str) -> dict[str, str]:
    """Past literal → current literal, pairing literals of the same type in order of appearance,
    kept only where the past SQL contains the past literal and the values differ.

    Examples
    --------
    >>> literal_map("member 102 paid 75", "INSERT INTO p VALUES (102, 75);", "member 205 paid 90")
    {'102': '205', '75': '90'}
    """
    old, new = literals(past_task), literals(task)
    out: dict[str, str] = {}
    for want_num in (True, False):
        a = [x for x in old if _is_number(x) == want_num]
        b = [x for x in new if _is_number(x) == want_num]
        for x, y in zip(a, b, strict=False):
            if x != y and x not in out and _in_sql(x, past_sql, want_num):
                out[x] = y
    return out


def _in_sql(value: str, sql: str, number: bool) -> bool:
    if number:
        return re.search(rf"(?<![\w.]){re.escape(value)}(?![\w])", sql) is not None
    return f"'{value}'" in sql or f'"{value}"' in sql


def substitute(sql: str, mapping: dict[str, str]) -> str:
    """Apply a literal map to SQL in one pass (numbers as whole tokens, strings inside quotes).

    Examples
    --------
    >>> substitute("SELECT * FROM t WHERE a = 10 AND b = 'x' AND c = 100", {"10": "7", "x": "y"})
    "SELECT * FROM t WHERE a = 7 AND b = 'y' AND c = 100"
    """
    if not mapping:
        return sql
    parts = []
    for old in sorted(mapping, key=len, reverse=True):
        if _is_number(old):
            parts.append(rf"(?<![\w.]){re.escape(old)}(?![\w])")
        else:
            parts.append(rf"(?<=['\"]){re.escape(old)}(?=['\"])")
    pattern = re.compile("|".join(parts))
    return pattern.sub(lambda m: mapping.get(m.group(0), m.group(0)), sql)


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


def rename_identifiers(sql: str, mapping: dict[str, str]) -> str:
    """Rename whole-word identifiers outside quoted strings.

    Examples
    --------
    >>> rename_identifiers("SELECT amt FROM orders WHERE note = 'amt'", {"amt": "amount"})
    "SELECT amount FROM orders WHERE note = 'amt'"
    """
    if not mapping:
        return sql
    low = {k.lower(): v for k, v in mapping.items()}
    pat = re.compile(r"\b(" + "|".join(re.escape(k) for k in mapping) + r")\b", re.IGNORECASE)
    out, last = [], 0
    for q in _QUOTED.finditer(sql):
        out.append(pat.sub(lambda m: low[m.group(0).lower()], sql[last : q.start()]))
        out.append(q.group(0))
        last = q.end()
    out.append(pat.sub(lambda m: low[m.group(0).lower()], sql[last:]))
    return "".join(out)


@dataclass
class Alignment:
    """How well one past trajectory maps onto the current task.

    Attributes
    ----------
    index : int
        Position of the trajectory in the retrieved list.
    score : float
        Mapped literals + shared columns named in the task + word overlap of the task lines.
    literal_map, schema_map : dict of str to str
    sql : str
        The past final action with both maps applied.
    """

    index: int
    score: float
    literal_map: dict[str, str]
    schema_map: dict[str, str]
    sql: str


def align(
    parsed: ParsedTrajectory, index: int, task: str, table: str, cols: list[str]
) -> Alignment:
    """Score and adapt one parsed trajectory to the current task and schema."""
    sql = parsed.final_action
    lmap = literal_map(parsed.task, sql, task)
    smap = schema_map(parsed.table, parsed.columns, table, cols)
    adapted = rename_identifiers(substitute(sql, lmap), smap)
    words_now, words_then = set(tokenize(task)), set(tokenize(parsed.task))
    overlap = len(words_now & words_then) / max(1, len(words_now | words_then))
    task_l = task.lower()
    named = sum(1 for c in cols if c.lower() in sql.lower() and c.lower() in task_l)
    same_table = 1.0 if table and parsed.table.lower() == table.lower() else 0.0
    n_lits = len(literals(task))
    lit_fit = len(lmap) / n_lits if n_lits else 0.0
    score = 2.0 * overlap + same_table + lit_fit + 0.1 * named
    return Alignment(index, float(score), lmap, smap, adapted)


def pair(task: str, sql: str) -> str:
    """The compact ``Task:/Action:`` pair a small executor copies best (see ``build_prompt``)."""
    return f"Task: {task}\nAction: {sql}"


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

    Parameters
    ----------
    operator : {"align", "closest", "multi", "raw", "none"}
    task : str
        The current task description.
    observation : str
        The current schema (``Table name(col TYPE, ...)``); "" if unknown (no schema alignment).
    parsed : list of ParsedTrajectory
        The retrieved raw trajectories, in retrieval order.

    Raises
    ------
    InvalidInput
        Unknown operator.

    Examples
    --------
    >>> p = [parse_raw("Task: member 102 paid 75\\nObservation: Table pay(mid INT, amt INT)\\n"
    ...                "Action: INSERT INTO pay VALUES (102, 75);\\nOutcome: success")]
    >>> print(extract("align", "member 205 paid 90", "Table pay(mid INT, amount INT)", p)[0])
    Task: member 205 paid 90
    Action: INSERT INTO pay VALUES (205, 90);
    """
    from memcurator.errors import InvalidInput

    if operator not in OPERATORS:
        raise InvalidInput(f"unknown extractive operator {operator!r}; known: {sorted(OPERATORS)}")
    usable = [(i, p) for i, p in enumerate(parsed) if p.final_action]
    if operator == "none" or not usable:
        return "", []
    if operator == "raw":
        return "\n\n".join(render(p) for _, p in usable), [i for i, _ in usable]
    if operator == "multi":
        return "\n\n".join(pair(p.task, p.final_action) for _, p in usable), [i for i, _ in usable]
    table, cols = parse_schema(observation)
    al = [align(p, i, task, table, cols) for i, p in usable]
    best = max(al, key=lambda a: (a.score, -a.index))
    p = parsed[best.index]
    if operator == "closest":
        return pair(p.task, p.final_action), [best.index]
    return pair(task, best.sql), [best.index]


__all__ = [
    "OPERATORS",
    "Alignment",
    "ParsedTrajectory",
    "align",
    "extract",
    "literal_map",
    "literals",
    "pair",
    "render",
    "parse_raw",
    "parse_schema",
    "rename_identifiers",
    "schema_map",
    "substitute",
]
