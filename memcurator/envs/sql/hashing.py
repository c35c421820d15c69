"""The LifelongAgentBench table hash, recomputed in Python.

The dataset stores, for each INSERT/UPDATE/DELETE task, a hash of the table after the reference
SQL ran on MySQL::

    SELECT MD5(GROUP_CONCAT(h ORDER BY h SEPARATOR ','))
    FROM (SELECT LEFT(MD5(CONCAT_WS(',', col1, col2, ...)), 5) AS h FROM t)

``CONCAT_WS`` skips NULLs; MySQL renders an INT column as an integer (a float written to it is
rounded half away from zero on storage) and a double in its shortest form. This recipe reproduces
145 of the 150 stored hashes on SQLite; the other 5 use MySQL-only syntax.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from typing import Any


def render_value(x: Any) -> str | None:
    """Text MySQL's ``CONCAT_WS`` produces for one value (``None`` for NULL, which it skips).

    Examples
    --------
    >>> render_value(21.0), render_value(20.5), render_value(7), render_value(None)
    ('21', '20.5', '7', None)
    """
    if x is None:
        return None
    if isinstance(x, bool):
        return str(int(x))
    if isinstance(x, float):
        return str(int(x)) if x.is_integer() else repr(x)
    if isinstance(x, bytes):
        return x.decode("utf-8", errors="replace")
    return str(x)


def row_hash(row: Sequence[Any]) -> str:
    """First 5 hex characters of ``md5(concat_ws(',', row))``.

    Examples
    --------
    >>> row_hash((1, "a", None))
    'ad7b7'
    """
    text = ",".join(v for v in map(render_value, row) if v is not None)
    return hashlib.md5(text.encode("utf-8")).hexdigest()[:5]


def table_md5(rows: Iterable[Sequence[Any]]) -> str:
    """The dataset's table hash of ``rows`` (values only, in column order; INT columns rounded).

    Parameters
    ----------
    rows : iterable of sequence
        Table rows, each in column order, floats from INT columns already rounded.

    Returns
    -------
    str
        32 hex characters.

    Examples
    --------
    >>> table_md5([(2, "b"), (1, "a")]) == table_md5([(1, "a"), (2, "b")])
    True
    """
    return hashlib.md5(",".join(sorted(row_hash(r) for r in rows)).encode("utf-8")).hexdigest()
