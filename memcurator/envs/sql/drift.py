"""Schema drift: a family's table or one of its columns is renamed at a phase boundary.

The rename is applied to the database schema and to the reference SQL alike (on the sqlglot AST,
splicing only the renamed identifiers), so the migrated reference SQL reproduces the same ground
truth under the new names; the instruction text stays as the user says it. Exemplars written
before the drift now reference a name that no longer exists: they are stale and harmful.

:func:`rename_map` depends only on the family and a seed, so every later variant of a family
migrates identically (a family migrates once).
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Literal, NamedTuple

import numpy as np
from sqlglot import exp
from sqlglot.tokens import Tokenizer

from memcurator.domains.sql.spec import SQLTaskSpec
from memcurator.envs.sql.checker import reference_result, rows_match
from memcurator.envs.sql.sqledit import ident_text, span, splice
from memcurator.envs.sql.translate import parse
from memcurator.envs.sql.variants import family_rng
from memcurator.errors import InvalidInput

DriftKind = Literal["column", "table"]

_SYNONYMS: dict[str, tuple[str, ...]] = {
    "id": ("ref", "no", "code"),
    "name": ("title", "label", "fullname"),
    "date": ("dt", "day", "on"),
    "time": ("ts", "at", "clock"),
    "amount": ("value", "sum", "total"),
    "status": ("state", "stage", "condition"),
    "type": ("kind", "category", "class"),
    "price": ("cost", "rate", "fee"),
    "cost": ("price", "expense", "charge"),
    "count": ("num", "qty", "tally"),
    "quantity": ("qty", "units", "volume"),
    "rating": ("score", "stars", "grade"),
    "score": ("rating", "points", "mark"),
    "salary": ("pay", "wage", "compensation"),
    "hours": ("hrs", "duration", "time_spent"),
    "department": ("dept", "division", "unit"),
    "location": ("site", "place", "venue"),
    "description": ("details", "notes", "summary"),
    "email": ("mail", "email_address", "contact_email"),
    "city": ("town", "municipality", "locality"),
    "records": ("entries", "log", "history"),
    "logs": ("history", "journal", "entries"),
    "data": ("info", "details", "facts"),
    "info": ("data", "details", "profile"),
}
_COLUMN_SUFFIXES = {"INT": ("_num", "_val", "_qty"), "TEXT": ("_txt", "_label", "_str")}
_TABLE_FORMS = ("{t}_v2", "tbl_{t}", "{t}_new", "{t}_main")
_EXTRA_RESERVED = {"KEY", "VALUE", "VALUES", "ORDER", "GROUP", "INDEX", "TABLE", "ON", "AT"}
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class Rename(NamedTuple):
    """One schema rename.

    Attributes
    ----------
    kind : {"column", "table"}
    old, new : str
        Names before and after.
    """

    kind: str
    old: str
    new: str


def _reserved(name: str) -> bool:
    return name.upper() in Tokenizer.KEYWORDS or name.upper() in _EXTRA_RESERVED


def _table_refs(tree: exp.Expression, table: str) -> tuple[list[exp.Table], set[str]]:
    """Table nodes naming ``table`` and every name (alias or bare) that refers to it."""
    nodes = [t for t in tree.find_all(exp.Table) if t.name.lower() == table.lower()]
    return nodes, {t.alias_or_name.lower() for t in nodes} | {table.lower()}


def _aliases(tree: exp.Expression) -> set[str]:
    """Names defined as column aliases or derived-table/CTE names in the query."""
    names = {a.alias.lower() for a in tree.find_all(exp.Alias) if a.alias}
    names |= {a.name.lower() for a in tree.find_all(exp.TableAlias) if a.name}
    return names


def renamable_columns(spec: SQLTaskSpec) -> list[str]:
    """Columns of the table that the reference SQL names (candidates for a column rename).

    :func:`draw_rename` keeps only a rename that reproduces the reference result.

    Returns
    -------
    list of str
        Column names in table order.
    """
    tree = parse(spec.sql)
    used = {c.name.lower() for c in tree.find_all(exp.Column)}
    for schema in tree.find_all(exp.Schema):
        used |= {i.name.lower() for i in schema.expressions if isinstance(i, exp.Identifier)}
    return [c for c in spec.column_names if c.lower() in used]


def _new_column_name(old: str, typ: str, taken: set[str], rng: np.random.Generator) -> str:
    # no synonym fits: a typed suffix
    fallback = [old + s for s in _COLUMN_SUFFIXES.get(typ, ("_val",))]
    return _new_name(old, fallback, taken, rng)


def _new_table_name(old: str, taken: set[str], rng: np.random.Generator) -> str:
    return _new_name(old, [f.format(t=old) for f in _TABLE_FORMS], taken, rng)


def _new_name(old: str, fallback: list[str], taken: set[str], rng: np.random.Generator) -> str:
    """A random new name for ``old``: one word swapped for a synonym, else one of
    ``fallback``, else ``old + "_renamed"``; never one in ``taken`` (lower case)."""
    parts = old.split("_")
    options: list[str] = []
    for i, part in enumerate(parts):
        for syn in _SYNONYMS.get(part.lower(), ()):
            options.append("_".join([*parts[:i], syn, *parts[i + 1 :]]))
    options = [o for o in options if o.lower() not in taken and not _reserved(o)]
    if not options:
        options = [o for o in fallback if o.lower() not in taken] or [old + "_renamed"]
    return options[int(rng.integers(len(options)))]


def draw_rename(spec: SQLTaskSpec, kind: DriftKind, rng: np.random.Generator) -> Rename:
    """Draw a rename of the table, or of a column the reference SQL uses, that keeps the
    reference result; tries columns in a random order.

    Raises
    ------
    InvalidInput
        If ``kind`` is unknown, or for ``"column"`` no column can be renamed safely (use
        ``"table"``).
    """
    taken = {c.lower() for c in spec.column_names} | {spec.table.lower()}
    if kind == "table":
        return Rename("table", spec.table, _new_table_name(spec.table, taken, rng))
    if kind != "column":
        raise InvalidInput(f"drift kind must be 'column' or 'table', got {kind!r}")
    cols = renamable_columns(spec)
    for i in rng.permutation(len(cols)):
        old = cols[int(i)]
        rename = Rename("column", old, _new_column_name(old, spec.column_type(old), taken, rng))
        try:
            apply_rename(spec, rename)
        except InvalidInput:
            continue
        return rename
    raise InvalidInput(
        f"{spec.family}: no column of {spec.table!r} is named in its reference SQL and safely "
        "renamable; use kind='table'"
    )


def rename_map(spec: SQLTaskSpec, seed: int, kind: DriftKind = "column") -> Rename:
    """The family's rename, a function of ``(seed, family, kind)`` only.

    Every variant of a family has the same SQL structure, so applying the rename drawn from the
    family's spec to any of its variants migrates them identically.

    Parameters
    ----------
    spec : SQLTaskSpec
        The family's spec (original or any variant).
    seed : int
    kind : {"column", "table"}, default "column"

    Returns
    -------
    Rename

    Raises
    ------
    InvalidInput
        See :func:`draw_rename`.
    """
    stream = 1 if kind == "column" else 2
    return draw_rename(spec, kind, family_rng(seed, spec.family, stream))


def _rename_sql(sql: str, table: str, rename: Rename) -> str:
    tree = parse(sql)
    tables, refs = _table_refs(tree, table)
    idents: list[exp.Identifier] = []
    if rename.kind == "table":
        idents += [t.this for t in tables]
        bare = {t.name.lower() for t in tables if not t.alias}
        for col in tree.find_all(exp.Column):
            qual = col.args.get("table")
            if isinstance(qual, exp.Identifier) and qual.name.lower() in bare:
                idents.append(qual)
    else:
        old = rename.old.lower()
        derived = _aliases(tree)
        # A name that is also an alias: only references qualified by the table itself (and the
        # INSERT column list) surely mean the column; otherwise a derived column that passes
        # the table's column through keeps pointing at it under the new name.
        shadowed = old in derived
        for col in tree.find_all(exp.Column):
            qual = col.table.lower()
            ours = qual in refs if shadowed else (not qual or qual in refs or qual in derived)
            if col.name.lower() == old and ours:
                idents.append(col.this)
        for schema in tree.find_all(exp.Schema):
            target = schema.this
            if isinstance(target, exp.Table) and target.name.lower() == table.lower():
                idents += [
                    i
                    for i in schema.expressions
                    if isinstance(i, exp.Identifier) and i.name.lower() == old
                ]
        for join in tree.find_all(exp.Join):
            idents += [
                i
                for i in join.args.get("using") or []
                if isinstance(i, exp.Identifier) and i.name.lower() == old
            ]
    edits = []
    for ident in idents:
        pos = span(ident)
        if pos is None:  # no source position: rename on the AST and regenerate the text
            for node in idents:
                node.set("this", rename.new)
            return tree.sql(dialect="sqlite")
        edits.append((pos[0], pos[1], ident_text(rename.new, sql[pos[0] : pos[1] + 1])))
    return splice(sql, edits)


def apply_rename(spec: SQLTaskSpec, rename: Rename) -> SQLTaskSpec:
    """Apply a rename to the schema and the reference SQL, checking the result is unchanged.

    Raises
    ------
    InvalidInput
        If the names are invalid, the column does not exist, or the migrated reference SQL does
        not reproduce the original ground truth.
    """
    if not _IDENT.match(rename.new) or _reserved(rename.new):
        raise InvalidInput(f"invalid new name {rename.new!r}")
    if rename.kind == "table":
        if rename.old.lower() != spec.table.lower():
            raise InvalidInput(f"{spec.family}: table is {spec.table!r}, not {rename.old!r}")
        columns = spec.columns
        table = rename.new
    elif rename.kind == "column":
        spec.column_type(rename.old)  # raises if missing
        if rename.new.lower() in {c.lower() for c in spec.column_names}:
            raise InvalidInput(f"column {rename.new!r} already exists in {spec.table!r}")
        columns = tuple(
            (rename.new if n.lower() == rename.old.lower() else n, t) for n, t in spec.columns
        )
        table = spec.table
    else:
        raise InvalidInput(f"rename kind must be 'column' or 'table', got {rename.kind!r}")
    migrated = replace(
        spec,
        table=table,
        columns=columns,
        sql=_rename_sql(spec.sql, spec.table, rename),
        origin="drifted",
        meta=(*spec.meta, ("rename", f"{rename.kind}:{rename.old}->{rename.new}")),
    )
    before, after = reference_result(spec), reference_result(migrated)
    if spec.kind == "select":
        same = before.rows is not None and after.rows is not None
        same = same and rows_match(after.rows, before.rows, ordered=True)[0]  # type: ignore[arg-type]
    else:
        same = before.md5 == after.md5
    if not same:
        raise InvalidInput(f"{spec.family}: renaming {rename} changes the reference result")
    return migrated


def migrate(
    spec: SQLTaskSpec,
    kind: DriftKind = "column",
    rng: np.random.Generator | None = None,
    *,
    rename: Rename | None = None,
) -> SQLTaskSpec:
    """Migrate a spec's schema: rename its table or a column its reference SQL uses.

    Parameters
    ----------
    spec : SQLTaskSpec
    kind : {"column", "table"}, default "column"
        What to rename (ignored when ``rename`` is given).
    rng : numpy.random.Generator, optional
        Draws the rename when ``rename`` is not given.
    rename : Rename, optional
        A fixed rename, e.g. ``rename_map(family_spec, seed)`` so all variants of a family
        migrate identically.

    Returns
    -------
    SQLTaskSpec
        ``origin="drifted"``; same instruction and stored answers (the hash covers values only).

    Raises
    ------
    InvalidInput
        If neither ``rng`` nor ``rename`` is given, or the rename is impossible (see
        :func:`draw_rename`, :func:`apply_rename`).

    Examples
    --------
    >>> s = SQLTaskSpec(family="lab900", instruction="Total amount paid.", table="payments",
    ...                 columns=(("id", "INT"), ("amount", "INT")), rows=((1, 5), (2, 7)),
    ...                 sql="SELECT SUM(amount) FROM payments", kind="select")
    >>> migrate(s, "column", rename=Rename("column", "amount", "amount_paid")).sql
    'SELECT SUM(amount_paid) FROM payments'
    >>> migrate(s, "table", rename=Rename("table", "payments", "payments_v2")).sql
    'SELECT SUM(amount) FROM payments_v2'
    """
    if rename is None:
        if rng is None:
            raise InvalidInput("migrate needs rng= (to draw a rename) or rename=")
        rename = draw_rename(spec, kind, rng)
    return apply_rename(spec, rename)
