"""Export and import a namespace as JSON Lines, through the public memory API only.

An export is one JSON object a line (strict JSON, UTF-8), readable with ``jq`` or any JSON
reader:

- line 1, the header: ``{"type": "memcurator-export", "version": 1, "namespace": ...,
  "entries": n, "decisions": m}``;
- one ``{"type": "entry", ...}`` line per resident entry: id, kind, text, origin,
  origin_detail, meta, bytes, raw_bytes, reinforcement, uses, successes, failures,
  created_step, last_used_step, stats, and ``trust``: its trust state as an object of internal
  keys (:meth:`memcurator.types.TrustState.legacy`; ``meta`` is the user's alone);
- with ``decisions=True``, one ``{"type": "decision", ...}`` line per decision-log row.

Embeddings are not exported; the importing memory embeds the text again with its own embedder.
An import offers every entry to :meth:`memcurator.memory.Memory.write`, so it passes the
policy's admission gate (CURATOR's Trust for peer and external origins) and the byte budget like
any other write; :class:`ImportReport` says what was admitted and what was rejected and why.
The trust state of an imported entry is the importing memory's own judgement: of an exported
``trust`` object only the user scope (``_user``, ``_personal``) is carried over, and an export
written before the state had its own field (underscore keys in ``meta``) is read the same way
(those keys never land in ``meta``).
Decision-log lines are read but not replayed: a store's log records only what happened in it
(the import's own admits and rejects are logged as they happen).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import IO, Any, Protocol

from memcurator.errors import BudgetExceeded, InvalidInput
from memcurator.files import dumps_strict
from memcurator.types import TrustState, split_meta

FORMAT = "memcurator-export"
VERSION = 1

_ENTRY_FIELDS = (
    "id",
    "kind",
    "text",
    "origin",
    "origin_detail",
    "meta",
    "bytes",
    "raw_bytes",
    "reinforcement",
    "uses",
    "successes",
    "failures",
    "created_step",
    "last_used_step",
    "stats",
)
#: meta keys the memory computes itself (never imported from a file)
_DERIVED_META = ("text_sha1", "specificity", "instr")


class MemoryLike(Protocol):
    """What :func:`export_namespace` reads: a :class:`~memcurator.memory.Memory`, or a read-only
    view with the same two methods."""

    namespace: str

    def entries(self) -> list[Any]: ...

    def decisions(self) -> list[Any]: ...


@dataclass
class ImportReport:
    """What :func:`import_namespace` did.

    Attributes
    ----------
    admitted : list of (old id, new id)
        Entries the memory took as new entries.
    reinforced : list of (old id, resident id)
        Entries whose text was already resident (e.g. a second import of the same file): the
        memory reinforced the resident entry instead of storing a copy.
    rejected : list of (line number, old id, reason)
        Entries refused by the admission gate or the budget, or lines that are not valid entries.
    decisions_skipped : int
        Decision-log lines read but not replayed.
    """

    admitted: list[tuple[str, str]] = field(default_factory=list)
    reinforced: list[tuple[str, str]] = field(default_factory=list)
    rejected: list[tuple[int, str, str]] = field(default_factory=list)
    decisions_skipped: int = 0


def export_namespace(mem: MemoryLike, fh: IO[str], *, decisions: bool = False) -> int:
    """Write the resident entries (and optionally the decision log) of ``mem`` as JSON Lines.

    Parameters
    ----------
    mem : Memory or MemoryLike
        Read through ``entries()`` and ``decisions()`` only.
    fh : text file
        Destination (opened for writing, UTF-8).
    decisions : bool, default False
        Also write the decision log.

    Returns
    -------
    int
        Lines written (header included).

    Examples
    --------
    >>> import io
    >>> from memcurator import Memory
    >>> mem = Memory(policy="keep-all")
    >>> _ = mem.write("Task: count rows\\nAction: SELECT COUNT(*) FROM t;", meta={"family": "t"})
    >>> buf = io.StringIO()
    >>> export_namespace(mem, buf)
    2
    >>> json.loads(buf.getvalue().splitlines()[1])["meta"]["family"]
    't'
    """
    ents = mem.entries()
    log = mem.decisions() if decisions else []
    header = {
        "type": FORMAT,
        "version": VERSION,
        "namespace": mem.namespace,
        "entries": len(ents),
        "decisions": len(log) if decisions else None,
    }
    fh.write(dumps_strict(header, ensure_ascii=False) + "\n")
    for m in ents:
        row = {"type": "entry", **{k: getattr(m, k) for k in _ENTRY_FIELDS}}
        row["trust"] = m.trust.legacy()
        fh.write(dumps_strict(row, ensure_ascii=False) + "\n")
    for d in log:
        fh.write(dumps_strict({"type": "decision", **asdict(d)}, ensure_ascii=False) + "\n")
    return 1 + len(ents) + len(log)


def _header(line: str) -> dict[str, Any]:
    try:
        head = json.loads(line)
    except json.JSONDecodeError:
        head = None
    if not isinstance(head, dict) or head.get("type") != FORMAT:
        raise InvalidInput(
            f'not a memcurator export: the first line must be a {{"type": "{FORMAT}", ...}} header'
        )
    if head.get("version") != VERSION:
        raise InvalidInput(
            f"export version {head.get('version')!r} is not supported (this memcurator reads "
            f"version {VERSION})"
        )
    return head


def _write_row(mem: Any, row: dict[str, Any]) -> Any:
    """Offer one entry line to ``mem.write``: its user metadata (less what the memory derives)
    and its user scope; any other trust state is the importing memory's own judgement.

    Raises
    ------
    InvalidInput
        ``meta`` or ``trust`` is not an object, or the write refused the entry.
    BudgetExceeded
        The entry can never fit the budget.
    """
    meta, trust = row.get("meta") or {}, row.get("trust") or {}
    if not isinstance(meta, dict) or not isinstance(trust, dict):
        raise InvalidInput(
            "meta is not an object" if isinstance(trust, dict) else "trust is not an object"
        )
    meta, scope = split_meta(meta)  # an older export kept the trust state in meta
    scope = TrustState.from_legacy(scope.legacy() | trust)
    return mem.write(
        row.get("text"),
        origin=row.get("origin", "self"),
        kind=row.get("kind", "insight"),
        origin_detail=str(row.get("origin_detail") or ""),
        meta={k: v for k, v in meta.items() if k not in _DERIVED_META},
        user=scope.user,
        personal=bool(scope.personal),
    )


def import_namespace(mem: Any, lines: Iterable[str]) -> ImportReport:
    """Offer every entry of an export to ``mem.write``; returns what was admitted and rejected.

    Parameters
    ----------
    mem : Memory
        The destination; its policy's admission gate and byte budget apply to every entry.
    lines : iterable of str
        The export's lines (a text file opened for reading works).

    Returns
    -------
    ImportReport
        New entries, reinforced duplicates and rejections, each with its line's old id.

    Raises
    ------
    InvalidInput
        The first line is not an export header, or the export version is unknown.

    Examples
    --------
    >>> import io
    >>> from memcurator import Memory
    >>> src = Memory(policy="keep-all")
    >>> _ = src.write("Task: count rows\\nAction: SELECT COUNT(*) FROM t;")
    >>> buf = io.StringIO()
    >>> _ = export_namespace(src, buf)
    >>> dst = Memory(policy="keep-all", namespace="copy")
    >>> rep = import_namespace(dst, io.StringIO(buf.getvalue()))
    >>> len(rep.admitted), rep.rejected, len(dst)
    (1, [], 1)
    >>> again = import_namespace(dst, io.StringIO(buf.getvalue()))
    >>> len(again.admitted), len(again.reinforced), len(dst)
    (0, 1, 1)
    """
    it = iter(lines)
    try:
        first = next(it)
    except StopIteration:
        raise InvalidInput("not a memcurator export: the file is empty") from None
    _header(first)
    rep = ImportReport()
    # a write that returns an id resident before it reinforced that entry (same text)
    resident = {m.id for m in mem.entries()}
    for no, line in enumerate(it, start=2):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            rep.rejected.append((no, "", f"not JSON: {e.msg}"))
            continue
        if not isinstance(row, dict) or row.get("type") not in ("entry", "decision"):
            rep.rejected.append((no, "", "neither an entry nor a decision line"))
            continue
        if row["type"] == "decision":
            rep.decisions_skipped += 1
            continue
        old = str(row.get("id", ""))
        try:
            r = _write_row(mem, row)
        except (InvalidInput, BudgetExceeded) as e:
            rep.rejected.append((no, old, str(e)))
            continue
        if r.admitted and r.id in resident:
            rep.reinforced.append((old, str(r.id)))
        elif r.admitted:
            rep.admitted.append((old, str(r.id)))
            resident.add(str(r.id))
        else:
            rep.rejected.append((no, old, r.reason))
    return rep
