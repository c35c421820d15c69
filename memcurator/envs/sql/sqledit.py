"""Position-exact edits of SQL text, driven by the sqlglot AST.

sqlglot records where each identifier and literal came from (``node.meta["start"/"end"]``,
inclusive character offsets). Variants and drift decide *what* to change on the AST and then
splice only those spans, so the rest of the reference SQL stays byte-for-byte the same.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlglot import exp

from memcurator.errors import InvalidInput


def span(node: exp.Expression) -> tuple[int, int] | None:
    """Inclusive ``(start, end)`` character offsets of a parsed identifier or literal, if known."""
    meta = node.meta if node.meta else {}
    if "start" in meta and "end" in meta:
        return int(meta["start"]), int(meta["end"])
    return None


def splice(sql: str, edits: Iterable[tuple[int, int, str]]) -> str:
    """Replace inclusive spans ``sql[start:end + 1]`` by new text.

    Parameters
    ----------
    sql : str
    edits : iterable of (int, int, str)
        ``(start, end, text)``; duplicates of the same span are applied once.

    Returns
    -------
    str

    Raises
    ------
    InvalidInput
        If two different spans overlap or a span is out of range.

    Examples
    --------
    >>> splice("SELECT a FROM t WHERE b = 1", [(26, 26, "7"), (7, 7, "x")])
    'SELECT x FROM t WHERE b = 7'
    """
    unique = sorted(set(edits))
    out: list[str] = []
    pos = 0
    for start, end, text in unique:
        if start < pos or end < start or end >= len(sql):
            raise InvalidInput(f"bad or overlapping edit span ({start}, {end}) in {sql[:60]!r}")
        out.append(sql[pos:start])
        out.append(text)
        pos = end + 1
    out.append(sql[pos:])
    return "".join(out)


def sql_string(value: str) -> str:
    """An SQL string literal for ``value`` (single quotes, inner quotes doubled).

    Examples
    --------
    >>> sql_string("it's")
    "'it''s'"
    """
    return "'" + value.replace("'", "''") + "'"


def ident_text(name: str, like: str) -> str:
    """Identifier text for ``name``, quoted the way the original token ``like`` was.

    Examples
    --------
    >>> ident_text("new_col", "`old`"), ident_text("new_col", "old")
    ('`new_col`', 'new_col')
    """
    if like[:1] in ('"', "`", "["):
        close = {"[": "]"}.get(like[0], like[0])
        return like[0] + name.replace(close, close * 2) + close
    return name
