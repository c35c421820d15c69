"""Compact schema text for the agent prompt."""

from __future__ import annotations

import re
from typing import Any

from memcurator.domains.sql.db import quote_ident
from memcurator.domains.sql.spec import SQLTaskSpec
from memcurator.envs.sql.sqledit import sql_string


def _literal(x: Any) -> str:
    if x is None:
        return "NULL"
    if isinstance(x, str):
        return sql_string(x)
    return str(x)


_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def ident(name: str) -> str:
    """``name`` as the prompt shows it: bare when it is a plain identifier, else double-quoted
    (inner quotes doubled), so names with spaces, punctuation or a leading digit stay readable
    and copyable as SQL.

    Examples
    --------
    >>> ident("payment_id"), ident("Pop. (2010)"), ident("1-234-5")
    ('payment_id', '"Pop. (2010)"', '"1-234-5"')
    """
    return name if _PLAIN.fullmatch(name) else quote_ident(name)


def schema_text(spec: SQLTaskSpec, n_rows: int = 2) -> str:
    """One line of schema plus up to ``n_rows`` example rows; names that are not plain
    identifiers are double-quoted (:func:`ident`).

    Parameters
    ----------
    spec : SQLTaskSpec
    n_rows : int, default 2
        Example rows to show (0 for none).

    Returns
    -------
    str
        The ``Table`` line, then an ``Example rows`` line when ``n_rows`` > 0 and rows exist.

    Examples
    --------
    >>> s = SQLTaskSpec(family="lab000", instruction="", table="payments",
    ...                 columns=(("id", "INT"), ("method", "TEXT")),
    ...                 rows=((1, "Cash"), (2, "Card"), (3, "Cash")), sql="SELECT 1",
    ...                 kind="select")
    >>> print(schema_text(s))
    Table payments(id INT, method TEXT)
    Example rows: (1, 'Cash'), (2, 'Card')
    """
    cols = ", ".join(f"{ident(name)} {typ}" for name, typ in spec.columns)
    text = f"Table {ident(spec.table)}({cols})"
    rows = spec.rows[: max(0, n_rows)]
    if rows:
        shown = ", ".join("(" + ", ".join(_literal(v) for v in r) + ")" for r in rows)
        text += f"\nExample rows: {shown}"
    return text
