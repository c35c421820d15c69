"""Locate and load the LifelongAgentBench DB tasks as :class:`SQLTaskSpec`.

The data lives outside the repository (``shared/data/lifelongagentbench-db/entry_dict.json``) and
is read in place. Reference SQL that SQLite cannot run is translated with sqlglot and kept only if
the translation reproduces the stored answer; the rest is skipped, with a reason per family.
"""

from __future__ import annotations

import json
import os
from functools import lru_cache
from pathlib import Path
from typing import Any, NamedTuple

from memcurator.domains.sql.spec import SQLTaskSpec
from memcurator.envs.sql.checker import check
from memcurator.envs.sql.translate import is_ordered, sql_kind, to_sqlite
from memcurator.errors import InvalidInput, MemcuratorError

DATA_ENV = "MEMCURATOR_DATA_DIR"
"""Environment variable naming a folder that holds ``lifelongagentbench-db/``."""
DATA_REL = Path("lifelongagentbench-db") / "entry_dict.json"


class DataNotFound(MemcuratorError, FileNotFoundError):
    """The LifelongAgentBench data file could not be found."""


class SpecSet(NamedTuple):
    """Result of :func:`load_specs`.

    Attributes
    ----------
    specs : tuple of SQLTaskSpec
        Loaded tasks whose reference SQL runs on SQLite, in ``sample_index`` order.
    skipped : dict of str to str
        Family id -> why it was skipped.
    translated : tuple of str
        Families whose reference SQL was translated from MySQL.
    total : int
        Tasks in the file.
    path : Path
        The file read.
    """

    specs: tuple[SQLTaskSpec, ...]
    skipped: dict[str, str]
    translated: tuple[str, ...]
    total: int
    path: Path

    def by_family(self) -> dict[str, SQLTaskSpec]:
        """Specs keyed by family id."""
        return {s.family: s for s in self.specs}


def find_data(path: str | os.PathLike[str] | None = None) -> Path:
    """Locate ``entry_dict.json``.

    Looks, in order, at ``path`` (the file, or a folder holding it or ``lifelongagentbench-db/``),
    at ``$MEMCURATOR_DATA_DIR/lifelongagentbench-db/entry_dict.json``, then upward from this
    package and then from the current directory for
    ``shared/data/lifelongagentbench-db/entry_dict.json`` (or ``data/...``).

    Parameters
    ----------
    path : str or PathLike, optional

    Returns
    -------
    Path
        An existing file.

    Raises
    ------
    DataNotFound
        If no candidate exists, or ``$MEMCURATOR_DATA_DIR`` is set but holds no data; the
        message lists where it looked.
    """
    return find_entry_dict(path, DATA_REL, "LifelongAgentBench data", Path(__file__))


def find_entry_dict(path: str | os.PathLike[str] | None, rel: Path, what: str, here: Path) -> Path:
    """Locate a benchmark's ``entry_dict.json`` (the SQL tasks' and the OS tasks' alike).

    Looks at ``path`` (the file, or a folder holding it or ``rel``), at
    ``$MEMCURATOR_DATA_DIR/rel``, then upward from ``here`` (the calling module's file) and from
    the current directory for ``shared/data/rel`` (or ``data/rel``).

    Parameters
    ----------
    path : str or PathLike, optional
    rel : Path
        ``<benchmark folder>/entry_dict.json``.
    what : str
        What the data is, for the message when ``path`` holds none.
    here : Path
        The module file to search upward from first.

    Raises
    ------
    DataNotFound
        If no candidate exists, or ``$MEMCURATOR_DATA_DIR`` is set but holds no data; the
        message lists where it looked.
    """
    search = (Path("shared") / "data" / rel, Path("data") / rel)
    looked: list[Path] = []
    if path is not None:
        p = Path(path)
        for cand in (p, p / "entry_dict.json", p / rel):
            looked.append(cand)
            if cand.is_file():
                return cand
        raise DataNotFound(f"no {what} at {path}; looked at {', '.join(map(str, looked))}")
    env = os.environ.get(DATA_ENV)
    if env:
        cand = Path(env) / rel
        if cand.is_file():
            return cand
        # a set but wrong variable is a mistake to report, not a reason to read other data
        raise DataNotFound(f"${DATA_ENV}={env} holds no {rel} (looked at {cand})")
    # the package's own checkout first: a cwd under e.g. /tmp must not pick up a stray copy
    for start in (here.resolve().parent, Path.cwd()):
        for base in (start, *start.parents):
            for sub in search:
                cand = base / sub
                if cand.is_file():
                    return cand
        looked.append(start / "..." / search[0])
    raise DataNotFound(
        f"cannot find {rel}; pass --data (CLI) or path= (Python), or set {DATA_ENV} to the "
        f"folder holding {rel.parent}/; looked at {', '.join(map(str, looked))}"
    )


def family_id(sample_index: int) -> str:
    """Family id of a dataset task, e.g. ``17 -> "lab017"``.

    Examples
    --------
    >>> family_id(17)
    'lab017'
    """
    return f"lab{int(sample_index):03d}"


def load_specs(path: str | os.PathLike[str] | None = None) -> SpecSet:
    """Load every task as a :class:`SQLTaskSpec`, translating or skipping MySQL-only SQL.

    Parameters
    ----------
    path : str or PathLike, optional
        See :func:`find_data`.

    Returns
    -------
    SpecSet
        Specs, skipped families with reasons, translated families, and counts.

    Raises
    ------
    DataNotFound
        If the file cannot be found.
    InvalidInput
        If the file is not the expected JSON.
    """
    file = find_data(path).resolve()
    loaded = _load_cached(str(file), file.stat().st_mtime_ns)
    return loaded._replace(skipped=dict(loaded.skipped))


@lru_cache(maxsize=4)
def _load_cached(file: str, _mtime_ns: int) -> SpecSet:
    try:
        with open(file, encoding="utf-8") as fh:
            raw = json.load(fh)
    except (OSError, json.JSONDecodeError) as e:
        raise InvalidInput(f"cannot read {file}: {e}") from e
    if not isinstance(raw, dict):
        raise InvalidInput(f"{file}: expected a JSON object of tasks")
    entries = sorted(raw.values(), key=lambda e: int(e["sample_index"]))
    specs: list[SQLTaskSpec] = []
    skipped: dict[str, str] = {}
    translated: list[str] = []
    for entry in entries:
        spec, note = _to_spec(entry)
        fam = family_id(entry["sample_index"])
        if spec is None:
            skipped[fam] = note
            continue
        if note == "translated":
            translated.append(fam)
        specs.append(spec)
    return SpecSet(tuple(specs), skipped, tuple(translated), len(entries), Path(file))


def _to_spec(entry: dict[str, Any]) -> tuple[SQLTaskSpec | None, str]:
    """Build the spec of one dataset entry; ``(None, reason)`` if SQLite cannot reproduce it."""
    info, answer = entry["table_info"], entry["answer_info"]
    source = answer["sql"].strip()
    direct = answer.get("direct")
    base = dict(
        family=family_id(entry["sample_index"]),
        instruction=entry["instruction"],
        table=info["name"],
        columns=tuple((c["name"], c["type"]) for c in info["column_info_list"]),
        rows=tuple(tuple(r) for r in info["row_list"]),
        answer_rows=None if direct is None else tuple(tuple(r) for r in direct),
        answer_md5=answer.get("md5"),
        skills=tuple(entry.get("skill_list") or ()),
        source_sql=source,
    )
    kind: str | None
    try:
        kind = sql_kind(source)
    except InvalidInput:
        kind = "select" if direct is not None else _first_word_kind(source)
    if kind is None:
        return None, "reference SQL is not a SELECT/INSERT/UPDATE/DELETE"

    def build(sql: str) -> SQLTaskSpec:
        try:
            ordered = kind == "select" and is_ordered(sql)
        except InvalidInput:
            ordered = False
        return SQLTaskSpec(sql=sql, kind=kind, ordered=ordered, **base)  # type: ignore[arg-type]

    original = build(source)
    first = check(original, source, against="stored")
    if first.ok:
        return original, "original"
    try:
        sqlite_sql = to_sqlite(source)
    except InvalidInput as e:
        sqlite_sql, why = None, f"no SQLite translation ({e})"
    if sqlite_sql is not None and sqlite_sql.rstrip(";") != source.rstrip(";"):
        candidate = build(sqlite_sql)
        second = check(candidate, sqlite_sql, against="stored")
        if second.ok:
            return candidate, "translated"
        why = f"translation does not reproduce the answer ({second.reason})"
    elif sqlite_sql is not None:
        why = "translation leaves the SQL unchanged"
    if first.error is None:
        return original, "original"  # runs on SQLite; its SQLite result is the ground truth
    return None, f"MySQL-only SQL: {first.error}; {why}"


def _first_word_kind(sql: str) -> str | None:
    word = sql.split(None, 1)[0].lower() if sql.split() else ""
    return word if word in ("select", "insert", "update", "delete") else None
