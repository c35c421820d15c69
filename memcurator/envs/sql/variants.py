"""Task families and their variants (DESIGN.md, "The first real testbed").

A family is one dataset task. A variant re-instantiates it by substituting the literals (numbers,
quoted strings) that occur in BOTH the instruction and the reference SQL, consistently in both and
nothing else, with values drawn from a numpy Generator: a filter value becomes another value of the
same column, a LIMIT another small count, a free number a nearby number of the same granularity, a
date a nearby date. A variant is kept only if its reference result is non-degenerate (a SELECT
returns at least one row; a DML changes the table; a DELETE does not all but empty it). Its ground
truth is the substituted reference SQL executed on SQLite.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import zlib
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

import numpy as np
from sqlglot import exp

from memcurator.domains.sql.db import execute, make_db, read_table
from memcurator.domains.sql.spec import SQLTaskSpec
from memcurator.envs.sql.checker import run
from memcurator.envs.sql.hashing import table_md5
from memcurator.envs.sql.sqledit import span, splice, sql_string
from memcurator.envs.sql.translate import parse
from memcurator.errors import InvalidInput
from memcurator.types import Subset, Task

_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_INT = re.compile(r"^\d+$")
_DEC = re.compile(r"^\d+\.(\d+)$")
_COMPARISONS = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.Like, exp.ILike)
_AGGS = (exp.Avg, exp.Sum, exp.Max, exp.Min)
_EMPTIED = 0.1  # a DELETE variant may not leave fewer than this fraction of rows (poison.py)


@dataclass(frozen=True)
class LiteralSite:
    """One literal of the reference SQL and what it is compared with or written to.

    Attributes
    ----------
    value : str
        The literal's value (unquoted for strings, the source text for numbers).
    is_string : bool
    start, end : int
        Inclusive character span in the SQL (quotes included for strings).
    column : str or None
        Table column it filters, is inserted into or assigned to.
    role : str
        ``"filter"``, ``"like"``, ``"insert"``, ``"set"``, ``"limit"``, ``"offset"`` or
        ``"other"``.
    """

    value: str
    is_string: bool
    start: int
    end: int
    column: str | None
    role: str


def family_rng(seed: int, family: str, stream: int = 0) -> np.random.Generator:
    """A Generator that depends only on ``(seed, family, stream)`` (stable across runs).

    Examples
    --------
    >>> int(family_rng(0, "lab001").integers(1000)) == int(family_rng(0, "lab001").integers(1000))
    True
    """
    return np.random.default_rng([int(seed), zlib.crc32(family.encode("utf-8")), int(stream)])


def literal_sites(spec: SQLTaskSpec) -> list[LiteralSite]:
    """Literals of the reference SQL with their column and role, in AST order.

    Parameters
    ----------
    spec : SQLTaskSpec

    Returns
    -------
    list of LiteralSite
        Literals whose position in the text is known.
    """
    return list(_literal_sites(spec.sql, spec.column_names))


@lru_cache(maxsize=8192)
def _literal_sites(sql: str, column_names: tuple[str, ...]) -> tuple[LiteralSite, ...]:
    tree = parse(sql)
    columns = {c.lower(): c for c in column_names}
    out = []
    for lit in tree.find_all(exp.Literal):
        pos = span(lit)
        if pos is None:
            continue
        column, role = _context(lit, columns, column_names)
        out.append(LiteralSite(lit.name, lit.is_string, pos[0], pos[1], column, role))
    return tuple(out)


def _context(
    lit: exp.Literal, columns: dict[str, str], ordered_cols: tuple[str, ...]
) -> tuple[str | None, str]:
    parent = lit.parent

    def col_of(node: exp.Expression | None) -> str | None:
        if isinstance(node, _AGGS):
            node = node.this
        if isinstance(node, exp.Column):
            return columns.get(node.name.lower())
        return None

    if isinstance(parent, exp.Neg):
        return None, "other"
    if isinstance(parent, exp.Limit):
        return None, "limit"
    if isinstance(parent, exp.Offset):
        return None, "offset"
    if isinstance(parent, exp.Tuple) and isinstance(parent.parent, exp.Values):
        insert = parent.parent.parent
        if isinstance(insert, exp.Insert):
            idx = next(i for i, e in enumerate(parent.expressions) if e is lit)
            target = insert.this
            names = (
                [i.name for i in target.expressions]
                if isinstance(target, exp.Schema)
                else list(ordered_cols)
            )
            name = names[idx] if idx < len(names) else None
            return (columns.get(name.lower()) if name else None), "insert"
    if isinstance(parent, _COMPARISONS):
        other = parent.this if parent.expression is lit else parent.expression
        if isinstance(parent, (exp.Like, exp.ILike)):
            return col_of(other), "like"
        if isinstance(parent, exp.EQ) and isinstance(parent.parent, exp.Update):
            return col_of(other), "set"
        return col_of(other), "filter"
    if isinstance(parent, (exp.In, exp.Between)):
        return col_of(parent.this), "filter"
    return None, "other"


def _number_pattern(text: str) -> str:
    return r"(?<![\w.,\-])" + re.escape(text) + r"(?!\w|[.,]\d|-\d)"


def _surface_forms(value: str, is_string: bool, instruction: str) -> list[tuple[str, str]]:
    """``(pattern, kind)`` pairs under which a literal occurs in the instruction."""
    forms: list[tuple[str, str]] = []
    if is_string:
        if len(value) <= 2:
            for q in ("'", '"'):
                pat = re.escape(q + value + q)
                if re.search(pat, instruction):
                    forms.append((pat, "quoted" + q))
        else:
            pat = r"(?<!\w)" + re.escape(value) + r"(?!\w)"
            if re.search(pat, instruction):
                forms.append((pat, "plain"))
        return forms
    pat = _number_pattern(value)
    if re.search(pat, instruction):
        forms.append((pat, "plain"))
    if _INT.match(value) and int(value) >= 1000:
        grouped = f"{int(value):,}"
        pat = _number_pattern(grouped)
        if re.search(pat, instruction):
            forms.append((pat, "grouped"))
    return forms


def shared_literals(spec: SQLTaskSpec) -> list[LiteralSite]:
    """Literal sites whose value also occurs in the instruction (the substitutable ones).

    A ``LIKE '%x%'`` pattern counts when its core ``x`` occurs.
    """
    out = []
    for site in literal_sites(spec):
        value = _like_core(site.value) if site.role == "like" else site.value
        if value and _surface_forms(value, site.is_string, spec.instruction):
            out.append(site)
    return out


def _like_core(pattern: str) -> str | None:
    core = pattern.strip("%")
    if not core or "%" in core or "_" in core:
        return None
    return core


def _distinct(values: list[Any]) -> list[Any]:
    return sorted(set(values), key=lambda v: (str(type(v)), v))


def _draw_number(spec: SQLTaskSpec, site: LiteralSite, rng: np.random.Generator) -> str | None:
    text = site.value
    dec = _DEC.match(text)
    if not (_INT.match(text) or dec):
        return None
    old = float(text)
    if site.column is not None and site.role in ("filter", "insert", "set"):
        vals = [
            v
            for v in _distinct(spec.column_values(site.column))
            if isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 and v != old
        ]
        if dec is None:
            vals = [v for v in vals if float(v).is_integer()]
        if vals:
            v = vals[int(rng.integers(len(vals)))]
            return f"{float(v):.{len(dec.group(1))}f}" if dec else str(int(v))
    for _ in range(20):
        if dec is not None:
            digits = len(dec.group(1))
            new_f = round(old * float(rng.uniform(0.7, 1.3)), digits)
            if new_f != old and new_f > 0:
                return f"{new_f:.{digits}f}"
            continue
        v = int(text)
        if site.role == "limit":
            new = int(rng.integers(1, max(2 * v, 3) + 1))
        elif site.role == "offset":
            new = int(rng.integers(0, max(2 * v, 2) + 1))
        elif v == 0:
            return None
        else:
            zeros = len(text) - len(text.rstrip("0"))
            grain = 10 ** (zeros - 1) if zeros >= 2 else 10**zeros
            new = int(round(v * float(rng.uniform(0.5, 1.5)) / grain)) * grain
        if new != v and (new > 0 or site.role == "offset"):
            return str(new)
    return None


def _draw_string(spec: SQLTaskSpec, site: LiteralSite, rng: np.random.Generator) -> str | None:
    old = _like_core(site.value) if site.role == "like" else site.value
    if old is None:
        return None
    if site.column is not None:
        vals = [
            v
            for v in _distinct(spec.column_values(site.column))
            if isinstance(v, str) and v and v != old and "\n" not in v and len(v) <= 60
        ]
        if site.role == "like":
            vals = [v for v in vals if "%" not in v and "_" not in v]
        if vals:
            return vals[int(rng.integers(len(vals)))]
    if _DATE.match(old):
        try:
            day = dt.date.fromisoformat(old)
        except ValueError:
            return None
        shift = int(rng.integers(1, 91)) * (1 if rng.random() < 0.5 else -1)
        return (day + dt.timedelta(days=shift)).isoformat()
    return None


def _substitute(spec: SQLTaskSpec, rng: np.random.Generator) -> tuple[str, str, dict] | None:
    """One draw of consistent substitutions: ``(instruction, sql, mapping)`` or ``None``."""
    sites = shared_literals(spec)
    mapping: dict[tuple[str, bool], str] = {}
    surface: dict[str, tuple[str, str]] = {}  # instruction pattern -> (kind, new text)
    for site in sites:
        key = (site.value, site.is_string)
        if key in mapping:
            continue
        if site.is_string:
            new = _draw_string(spec, site, rng)
        else:
            new = _draw_number(spec, site, rng)
        if new is None:
            continue
        shown_old = _like_core(site.value) if site.role == "like" else site.value
        forms = _surface_forms(shown_old or "", site.is_string, spec.instruction)
        if any(pat in surface for pat, _ in forms):
            continue  # the same text already stands for another literal
        mapping[key] = new
        for pat, kind in forms:
            surface[pat] = (kind, new)
    if not mapping:
        return None

    edits = []
    for site in literal_sites(spec):
        key = (site.value, site.is_string)
        if key not in mapping:
            continue
        new = mapping[key]
        if site.is_string:
            if site.role == "like":
                core = _like_core(site.value) or ""
                prefix, suffix = site.value.split(core, 1)
                text = sql_string(prefix + new + suffix)
            else:
                text = sql_string(new)
        else:
            text = new
        edits.append((site.start, site.end, text))
    sql = splice(spec.sql, edits)

    patterns = sorted(surface, key=len, reverse=True)
    combined = re.compile("|".join(f"({p})" for p in patterns))

    def repl(m: re.Match[str]) -> str:
        kind, new = surface[patterns[m.lastindex - 1]]  # type: ignore[operator]
        if kind == "grouped":
            return f"{int(new):,}"
        if kind.startswith("quoted"):
            q = kind[len("quoted") :]
            return q + new + q
        return new

    instruction = combined.sub(repl, spec.instruction)
    readable = {("'" + k[0] + "'" if k[1] else k[0]): v for k, v in mapping.items()}
    return instruction, sql, readable


def is_degenerate(spec: SQLTaskSpec) -> bool:
    """Whether a spec's reference result is degenerate (or its SQL fails).

    A SELECT is degenerate when it returns no rows; a DML when it leaves the table unchanged.
    """
    res, md5 = run(spec, spec.sql)
    if res.error is not None:
        return True
    if spec.kind == "select":
        return not res.rows
    return md5 == table_md5(spec.rows) or md5 is None


def _rows_left(spec: SQLTaskSpec) -> int:
    """Rows left in the table after the reference SQL."""
    conn = make_db(spec)
    try:
        execute(conn, spec.sql)
        return len(read_table(conn, spec.table) or [])
    finally:
        conn.close()


def make_variant(
    spec: SQLTaskSpec, rng: np.random.Generator, max_tries: int = 10
) -> SQLTaskSpec | None:
    """Draw a non-degenerate variant of ``spec``.

    Parameters
    ----------
    spec : SQLTaskSpec
        The family's spec (original, or drifted).
    rng : numpy.random.Generator
        Source of the substituted values; the same state gives the same variant.
    max_tries : int, default 10
        Draws to try before giving up.

    Returns
    -------
    SQLTaskSpec or None
        The variant (``origin="variant"``, no stored answer), or ``None`` if the family admits
        no variant (no shared literal, or every draw was degenerate).

    Raises
    ------
    InvalidInput
        If ``max_tries`` is not positive.

    Examples
    --------
    >>> s = SQLTaskSpec(family="lab900", instruction="Names of people older than 30.", table="p",
    ...                 columns=(("name", "TEXT"), ("age", "INT")),
    ...                 rows=(("ann", 25), ("bob", 35), ("cid", 45)),
    ...                 sql="SELECT name FROM p WHERE age > 30", kind="select")
    >>> v = make_variant(s, np.random.default_rng(0))
    >>> v.instruction, v.sql
    ('Names of people older than 35.', 'SELECT name FROM p WHERE age > 35')
    """
    if max_tries < 1:
        raise InvalidInput(f"max_tries must be positive, got {max_tries}")
    for _ in range(max_tries):
        drawn = _substitute(spec, rng)
        if drawn is None:
            return None
        instruction, sql, mapping = drawn
        variant = replace(
            spec,
            instruction=instruction,
            sql=sql,
            answer_rows=None,
            answer_md5=None,
            origin="variant" if spec.origin == "original" else spec.origin,
            meta=(*spec.meta, ("substitution", json.dumps(mapping, sort_keys=True))),
        )
        if is_degenerate(variant):
            continue
        if variant.kind == "delete" and _rows_left(variant) <= _EMPTIED * len(spec.rows) < (
            _rows_left(spec)
        ):
            continue  # a DELETE that all but empties the table: indistinguishable from an attack
        return variant
    return None


def variant_families(
    specs: list[SQLTaskSpec] | tuple[SQLTaskSpec, ...], seed: int = 0
) -> list[str]:
    """Families that admit at least one non-degenerate variant (with ``family_rng(seed, ...)``).

    Parameters
    ----------
    specs : sequence of SQLTaskSpec
    seed : int, default 0

    Returns
    -------
    list of str
        Family ids, in the order of ``specs``.
    """
    return [s.family for s in specs if make_variant(s, family_rng(seed, s.family)) is not None]


def to_task(spec: SQLTaskSpec, task_id: str, subset: Subset = "clean") -> Task:
    """Wrap a spec as a :class:`memcurator.types.Task` (the spec is ``payload["spec"]``).

    Examples
    --------
    >>> s = SQLTaskSpec(family="lab000", instruction="Count rows.", table="t",
    ...                 columns=(("id", "INT"),), rows=((1,),), sql="SELECT COUNT(*) FROM t",
    ...                 kind="select")
    >>> t = to_task(s, "lab000/v0")
    >>> t.family, t.payload["kind"], t.payload["spec"] is s
    ('lab000', 'select', True)
    """
    payload = {"spec": spec, "table": spec.table, "kind": spec.kind, "sql": spec.sql}
    return Task(
        id=task_id, instruction=spec.instruction, family=spec.family, payload=payload, subset=subset
    )
