"""The task specification every part of the SQL environment speaks.

A :class:`SQLTaskSpec` is one self-contained SQL task: a single table (schema and rows), the
natural-language request, and the SQLite reference SQL whose execution defines the ground truth.
It is immutable and hashable, so checkers can cache the reference result per spec.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from memcurator.errors import InvalidInput

SQLKind = Literal["select", "insert", "update", "delete"]
KINDS: tuple[str, ...] = ("select", "insert", "update", "delete")
COLUMN_TYPES: tuple[str, ...] = ("INT", "TEXT")


@dataclass(frozen=True)
class SQLTaskSpec:
    """One SQL task over one table.

    Parameters
    ----------
    family : str
        Id of the LifelongAgentBench task it derives from, e.g. ``"lab017"``.
    instruction : str
        The natural-language request shown to the agent.
    table : str
        Name of the single table.
    columns : tuple of (str, str)
        ``(name, type)`` pairs in table order; type is ``"INT"`` or ``"TEXT"``.
    rows : tuple of tuple
        Initial table content, one tuple per row, aligned with ``columns``.
    sql : str
        Reference SQL, runnable on SQLite; its execution on a fresh database is the ground truth.
    kind : {"select", "insert", "update", "delete"}
        What the reference SQL does.
    answer_rows : tuple of tuple or None
        The dataset's stored answer rows (MySQL) for a SELECT of the original task; ``None`` for
        DML and for derived specs (variants), whose ground truth is the reference execution.
    answer_md5 : str or None
        The dataset's stored table hash after a DML of the original task, else ``None``.
    ordered : bool
        Whether the reference SQL orders its result at top level (``ORDER BY``).
    skills : tuple of str
        LifelongAgentBench skill labels.
    origin : str
        ``"original"``, ``"variant"`` or ``"drifted"`` (drift of either).
    source_sql : str
        The dataset's reference SQL before any translation (MySQL dialect).
    meta : tuple of (str, str)
        Free provenance pairs (substitutions, renames), kept as a tuple so the spec stays hashable.

    Raises
    ------
    InvalidInput
        If ``kind`` or a column type is unknown, or a row's width differs from the schema's.

    Examples
    --------
    >>> s = SQLTaskSpec(family="lab000", instruction="List names.", table="t",
    ...                 columns=(("id", "INT"), ("name", "TEXT")), rows=((1, "a"),),
    ...                 sql="SELECT name FROM t;", kind="select")
    >>> s.column_names
    ('id', 'name')
    """

    family: str
    instruction: str
    table: str
    columns: tuple[tuple[str, str], ...]
    rows: tuple[tuple[Any, ...], ...]
    sql: str
    kind: SQLKind
    answer_rows: tuple[tuple[Any, ...], ...] | None = None
    answer_md5: str | None = None
    ordered: bool = False
    skills: tuple[str, ...] = ()
    origin: str = "original"
    source_sql: str = ""
    meta: tuple[tuple[str, str], ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise InvalidInput(f"kind must be one of {KINDS}, got {self.kind!r}")
        if not self.table or not self.columns:
            raise InvalidInput("a spec needs a table name and at least one column")
        for name, typ in self.columns:
            if typ not in COLUMN_TYPES:
                raise InvalidInput(f"column {name!r} has type {typ!r}; expected {COLUMN_TYPES}")
        width = len(self.columns)
        for row in self.rows:
            if len(row) != width:
                raise InvalidInput(f"row {row!r} has {len(row)} values; the schema has {width}")

    @property
    def column_names(self) -> tuple[str, ...]:
        """Column names in table order."""
        return tuple(name for name, _ in self.columns)

    def column_type(self, name: str) -> str:
        """Declared type (``"INT"`` / ``"TEXT"``) of column ``name`` (case-insensitive).

        Raises
        ------
        InvalidInput
            If the table has no such column.
        """
        for col, typ in self.columns:
            if col.lower() == name.lower():
                return typ
        raise InvalidInput(f"table {self.table!r} has no column {name!r}; has {self.column_names}")

    def column_values(self, name: str) -> list[Any]:
        """Values of column ``name`` in row order (case-insensitive name).

        Raises
        ------
        InvalidInput
            If the table has no such column.
        """
        lowered = [c.lower() for c in self.column_names]
        if name.lower() not in lowered:
            raise InvalidInput(f"table {self.table!r} has no column {name!r}")
        idx = lowered.index(name.lower())
        return [row[idx] for row in self.rows]
