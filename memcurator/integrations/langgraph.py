"""LangGraph's store interface over a governed memory: :class:`MemcuratorStore`.

A LangGraph agent gets memcurator's budget, policy, Trust gate and decision log by changing the
line that builds its store::

    store = MemcuratorStore(Memory("agent.db", policy="curator", max_bytes=200_000))
    graph = builder.compile(store=store)

Needs the ``langgraph`` extra (``pip install 'memcurator[langgraph]'``).

How LangGraph's model maps onto one :class:`~memcurator.Memory` (one memcurator namespace, one
byte budget and one decision log for the whole store):

* an item ``(namespace, key)`` is one entry, found again through its meta (``lg_ns``,
  ``lg_key``): ``put`` on an existing key replaces the entry (the old one is forgotten, then the
  new one written; both logged), it never duplicates;
* the item's ``value`` is kept whole in the entry's meta (``lg_value``, JSON, counted in the
  entry's bytes); the entry's text is ``Task: <indexed text>`` plus an ``Observation:`` line
  naming the key and a digest of the value, so that recall embeds the indexed text only, the
  Trust gate reads the indexed text as the task (the key line is a field of its own, not part
  of it), and two keys, or two values of one key, are never merged as duplicates;
* the indexed text is the value's fields named by ``index`` (``put(..., index=[...])``, else the
  store's ``index`` fields; default: every string and number in the value, where LangGraph's
  stores embed its JSON), joined;
  ``index=False`` stores the item unindexed: ``get`` and filter-only ``search`` see it, a
  ``query`` never ranks it (it fills the page after ranked items, scoreless, as LangGraph's
  ``InMemoryStore`` does);
* ``search(query=...)`` is :meth:`Memory.recall` with the namespace prefix and ``filter`` as
  eligibility (a ``where`` test), so the policy ranks; without a query, matching items are
  listed oldest first, ``score`` None;
* ``delete`` is :meth:`Memory.forget`: a hard delete with a tombstone in the decision log.

What governance does shows through LangGraph's interface as absence, and in the log: a ``put``
the policy or the Trust gate rejects, or that the budget evicts later, leaves no item (``get``
returns None, ``search`` does not find it); :attr:`MemcuratorStore.last_writes` holds the
:class:`~memcurator.lifecycle.write.WriteResult` of each put of the latest batch (``admitted``,
``reason``, ``evicted``), and ``memory.decisions()`` the reasons. An entry on probation (a
non-self origin under curator's Trust gate) is returned by ``get`` but not recalled by a query.
TTLs are not supported (``supports_ttl`` is False; LangGraph refuses a ``ttl`` then).

Provenance of what the agent read: LangGraph hands a store only the items a node puts, never
the graph's state, so the store cannot see a tool's output by itself. The application reports
it: :meth:`MemcuratorStore.observe` (one text and its source) or
:meth:`MemcuratorStore.observe_messages` (the tool messages of a message list, e.g.
``state["messages"]`` in the node that writes memory, or in a node after the tool node). Both
record a fingerprint in the memory's read window (:meth:`Memory.observe_read
<memcurator.Memory.observe_read>`; calls made on the memory directly count too). A ``put``
whose value's text (every string in it, indexed or not) copies an observed read is written as
derived from that source: handled as its channel (``downgrade`` row, on probation under a Trust
gate), the match in the entry's ``lg_observed`` meta. (The match is made here because the
entry's text puts the item in its request line, which the library's copy test leaves out.)
Limits: what was never observed (an output the application did not report, a message already
trimmed from the state), a paraphrase, and what fell out of the window are not seen; the
window lives in this process, with the memory handle.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import time
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from memcurator.embed.text import has_content
from memcurator.errors import InvalidInput, MissingExtra
from memcurator.lifecycle.handle_lock import handle_lock
from memcurator.lifecycle.reads import observed_reason, observed_sources
from memcurator.lifecycle.write import WriteResult
from memcurator.memory import Memory
from memcurator.types import Entry

try:
    from langgraph.store.base import (
        BaseStore,
        GetOp,
        Item,
        ListNamespacesOp,
        MatchCondition,
        Op,
        PutOp,
        Result,
        SearchItem,
        SearchOp,
        get_text_at_path,
        tokenize_path,
    )
except ImportError as e:  # pragma: no cover - exercised only without the extra
    raise MissingExtra(
        f"MemcuratorStore needs langgraph ({e.name} is missing): "
        "pip install 'memcurator[langgraph]'"
    ) from None

#: meta keys the adapter keeps on each entry
NS, KEY, VALUE, INDEXED, CREATED, UPDATED = (
    "lg_ns",
    "lg_key",
    "lg_value",
    "lg_index",
    "lg_created",
    "lg_updated",
)
#: meta key of a put that copies an observed read: the match (``copies N words observed ...``)
OBSERVED = "lg_observed"
_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "$eq": lambda a, b: a == b,
    "$ne": lambda a, b: a != b,
    "$gt": lambda a, b: a > b,
    "$gte": lambda a, b: a >= b,
    "$lt": lambda a, b: a < b,
    "$lte": lambda a, b: a <= b,
}


class MemcuratorStore(BaseStore):
    """LangGraph's ``BaseStore`` over one :class:`~memcurator.Memory` (see the module notes).

    Parameters
    ----------
    memory : Memory
        The governed memory every item lives in; its policy, byte budget and Trust gate apply
        to every ``put``.
    index : list of str, optional
        Default fields (LangGraph's path syntax: ``"a.b"``, ``"xs[*].text"``) whose text is
        embedded when ``put`` gives no ``index``; None or ``["$"]``: every string and number in
        the value.
    origin : {"self", "peer", "external"}, default "self"
        The origin every put claims (under a memory with a key ring, a self claim needs the
        owner's signature, which this adapter makes with :meth:`Memory.sign`).
    clock : callable () -> float, seconds, default time.time
        Unix seconds for ``created_at`` / ``updated_at`` (tests pass a fake clock).

    Raises
    ------
    MissingExtra
        On import, when ``langgraph`` is not installed.
    InvalidInput
        ``memory`` is not a Memory, or ``index`` is not a list of non-empty strings.

    Examples
    --------
    >>> store = MemcuratorStore(Memory(policy="keep-all"))
    >>> store.put(("users", "u1"), "tea", {"text": "prefers green tea"})
    >>> store.get(("users", "u1"), "tea").value
    {'text': 'prefers green tea'}
    >>> [i.key for i in store.search(("users",), query="what does u1 drink")]
    ['tea']
    """

    def __init__(
        self,
        memory: Memory,
        *,
        index: list[str] | None = None,
        origin: str = "self",
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not isinstance(memory, Memory):
            raise InvalidInput(f"memory must be a memcurator Memory, got {type(memory).__name__}")
        if index is not None and (
            not isinstance(index, list) or not all(isinstance(p, str) and p for p in index)
        ):
            raise InvalidInput(f"index must be a list of field paths, got {index!r}")
        self.memory = memory
        self.index = index
        self.origin = origin
        self.clock = clock
        self.last_writes: list[WriteResult] = []
        # the memory's own lock: a batch (list the items, replace one, read it back) is one
        # step for every user of the handle -- other stores over it, and direct calls
        self._lock = handle_lock(memory)

    # ------------------------------------------------------------------ the two primitives
    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run LangGraph operations in order, under one lock (one result per operation).

        Raises
        ------
        InvalidInput
            A value that is not a JSON-able mapping, a filter with an unknown operator, an
            item with nothing to index; :class:`~memcurator.errors.BudgetExceeded` for an item
            larger than the whole budget. Operations before the failing one have run.
        """
        with self._lock:
            self.last_writes = []
            found = self._items()
            out: list[Result] = []
            for op in ops:
                if isinstance(op, GetOp):
                    e = found.get((tuple(op.namespace), op.key))
                    out.append(None if e is None else _item(e))
                elif isinstance(op, PutOp):
                    self._put(op, found)
                    out.append(None)
                elif isinstance(op, SearchOp):
                    out.append(self._search(op, list(found.values())))
                elif isinstance(op, ListNamespacesOp):
                    out.append(_list_namespaces(op, found))
                else:
                    raise InvalidInput(f"unknown LangGraph operation {type(op).__name__}")
            return out

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """:meth:`batch` in a worker thread (the memory's store calls block)."""
        return await asyncio.to_thread(self.batch, list(ops))

    # ------------------------------------------------------------------ operations
    def _items(self) -> dict[tuple[tuple[str, ...], str], Entry]:
        """Resident items by (namespace, key); entries not written by this adapter are skipped."""
        found: dict[tuple[tuple[str, ...], str], Entry] = {}
        for e in self.memory.entries():
            if NS in e.meta and KEY in e.meta:
                found[(tuple(e.meta[NS]), e.meta[KEY])] = e
        return found

    def _put(self, op: PutOp, found: dict[tuple[tuple[str, ...], str], Entry]) -> None:
        ns, key = tuple(op.namespace), str(op.key)
        old = found.pop((ns, key), None)
        if op.value is None:  # delete
            if old is not None:
                self.memory.forget(old.id, reason=f"langgraph delete {_path(ns, key)}")
            return
        if not isinstance(op.value, Mapping):
            raise InvalidInput(
                f"a LangGraph value must be a mapping, got {type(op.value).__name__}"
            )
        value = dict(op.value)
        try:
            blob = json.dumps(value, sort_keys=True, ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError) as err:
            raise InvalidInput(
                f"value of {_path(ns, key)} is not JSON-serialisable: {err}"
            ) from err
        indexed = op.index is not False
        fields = None if op.index is None or op.index is False else list(op.index)
        text = self._text(value, fields) if indexed else ""
        if indexed and not has_content(text):
            raise InvalidInput(
                f"{_path(ns, key)}: the indexed fields {op.index or self.index or ['$']} hold "
                "no text to embed; index other fields, or put with index=False"
            )
        digest = hashlib.sha1(blob.encode("utf-8")).hexdigest()[:16]
        body = (
            f"Task: {' '.join(text.split()) if indexed else 'unindexed item ' + key}\n"
            f"Observation: langgraph item {_path(ns, key)} {digest}"
        )
        now = float(self.clock())
        created = now if old is None else float(old.meta.get(CREATED, now))
        meta = {NS: list(ns), KEY: key, VALUE: value, INDEXED: indexed}
        meta |= {CREATED: created, UPDATED: now}
        derived = self._copied(value, meta)
        if old is not None:
            self.memory.forget(old.id, reason=f"langgraph put replaces {_path(ns, key)}")
        sig = None
        if self.memory.keyring is not None and self.origin == "self":
            sig = self.memory.sign(body)
        r = self.memory.write(
            body, origin=self.origin, meta=meta, signature=sig, derived_from=derived
        )
        self.last_writes.append(r)
        for gone in r.evicted:  # the Keep pass this write ran may evict any item
            for k, e in list(found.items()):
                if e.id == gone:
                    del found[k]
        if r.admitted and r.id is not None and r.id not in r.evicted:
            found[(ns, key)] = self.memory.get(r.id)

    def _copied(self, value: dict[str, Any], meta: dict[str, Any]) -> list[str] | None:
        """The observed sources the value's text copies (None when none), the match noted in
        ``meta`` (see the module notes: the memory's read window, the library's match)."""
        window = self.memory._ctx.reads  # the handle's read window (Memory.observe_read's)
        found, m = observed_sources(window, "\n".join(_leaves(value)), None)
        if m is None:
            return None
        meta[OBSERVED] = observed_reason(m)
        return [f"{s['kind']}:{s['id']}" if s["id"] else s["kind"] for s in found]

    # ------------------------------------------------------------------ what the agent read
    def observe(self, text: str | bytes, source: str = "tool_output") -> int:
        """Record that the agent read ``text`` from ``source`` (``"kind"`` or
        ``"kind:id"``, e.g. ``"web:https://x.test/a"``): :meth:`Memory.observe_read
        <memcurator.Memory.observe_read>` (its errors; nothing is written).

        Returns
        -------
        int
            Shingles recorded.

        Examples
        --------
        >>> store = MemcuratorStore(Memory(max_bytes=None))
        >>> page = ("Release notes: version 4.2 drops the legacy sync endpoint; clients must "
        ...         "move to the batch API before the end of June.")
        >>> store.observe(page, "web:vendor.test/notes")
        18
        >>> store.put(("notes",), "sync", {"text": page})
        >>> store.memory.decisions(action="downgrade")[0].reason  # doctest: +ELLIPSIS
        'taint: self claim for content derived from web:vendor.test/notes; handled as external'
        """
        with self._lock:
            return self.memory.observe_read(text, source)

    def observe_messages(self, messages: Iterable[Any]) -> int:
        r"""Observe the tool outputs in ``messages`` (LangChain ``ToolMessage``\ s, or dicts
        with ``"role"``/``"type"`` ``"tool"``): each as ``tool_output:<tool name>`` (else its
        ``tool_call_id``). Other messages (the user's, the model's) are not observed.

        Returns
        -------
        int
            Tool messages observed (those with text).

        Raises
        ------
        InvalidInput
            ``messages`` is not a list of messages; a tool output over the read limit.
        """
        if isinstance(messages, str | bytes | Mapping) or not isinstance(messages, Iterable):
            raise InvalidInput(f"messages must be a list of messages, got {type(messages)}")
        seen = 0
        for msg in messages:
            get = msg.get if isinstance(msg, Mapping) else lambda a, o=msg: getattr(o, a, None)
            if get("type") != "tool" and get("role") != "tool":
                continue
            text = _content_text(get("content"))
            if not has_content(text):
                continue
            label = get("name") or get("tool_call_id")
            self.observe(text, f"tool_output:{label}" if label else "tool_output")
            seen += 1
        return seen

    def _text(self, value: dict[str, Any], index: list[str] | None) -> str:
        """The indexed text of ``value``: its fields at ``index`` (else the store's), one a
        line; for none or ``["$"]``, every string and number in the value, in order (not its
        JSON: braces, quotes and colons would read as clauses to the Trust gate's trigger
        test, :func:`memcurator.trust.text_risk.trigger_score`)."""
        paths = index if index is not None else self.index
        if not paths or paths == ["$"]:
            return "\n".join(_leaves(value))
        texts: list[str] = []
        for p in paths:
            texts.extend(get_text_at_path(value, tokenize_path(p)))
        return "\n".join(t for t in texts if t)

    def _search(self, op: SearchOp, items: list[Entry]) -> list[SearchItem]:
        if op.limit < 0 or op.offset < 0:
            raise InvalidInput(f"limit and offset must be >= 0, got {op.limit}, {op.offset}")
        prefix = tuple(op.namespace_prefix)
        flt = dict(op.filter or {})
        for cond in flt.values():
            _check_filter(cond)

        def eligible(e: Entry) -> bool:
            return (
                NS in e.meta
                and tuple(e.meta[NS])[: len(prefix)] == prefix
                and all(_matches(e.meta[VALUE].get(k), v) for k, v in flt.items())
            )

        want = op.offset + op.limit
        if not op.query:
            hits = [e for e in items if eligible(e)]
            return [_item(e, None) for e in hits[op.offset : want]]
        ranked: list[tuple[Entry, float | None]] = []
        if want > 0:
            r = self.memory.recall(
                op.query, k=want, where=lambda e: eligible(e) and bool(e.meta.get(INDEXED, True))
            )
            ranked = [(e, float(s)) for e, s in zip(r.entries, r.scores, strict=True)]
        page = ranked[op.offset : want]
        if len(page) < op.limit:  # unindexed items fill the page, scoreless
            skip = max(0, op.offset - len(ranked))
            rest = [e for e in items if eligible(e) and not e.meta.get(INDEXED, True)]
            page += [(e, None) for e in rest[skip : skip + op.limit - len(page)]]
        return [_item(e, s) for e, s in page]

    def __repr__(self) -> str:
        return f"MemcuratorStore({self.memory!r}, index={self.index!r}, origin={self.origin!r})"


def _leaves(x: Any) -> list[str]:
    """The strings and numbers of a JSON value, depth first (booleans and nulls are not text)."""
    if isinstance(x, str):
        return [x]
    if isinstance(x, bool) or x is None:
        return []
    if isinstance(x, int | float):
        return [str(x)]
    if isinstance(x, dict):
        return [t for v in x.values() for t in _leaves(v)]
    if isinstance(x, list | tuple):
        return [t for v in x for t in _leaves(v)]
    return []


def _content_text(content: Any) -> str:
    """A message's text: a string, or the text parts of a list of content blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [c if isinstance(c, str) else c.get("text") for c in content if _is_text(c)]
        return "\n".join(p for p in parts if isinstance(p, str))
    return ""


def _is_text(block: Any) -> bool:
    """A content block that is text (a string, or ``{"type": "text", "text": ...}``)."""
    return isinstance(block, str) or (isinstance(block, Mapping) and block.get("type") == "text")


def _path(ns: tuple[str, ...], key: str) -> str:
    return "/".join(ns) + "/" + key


def _stamp(x: Any) -> datetime:
    return datetime.fromtimestamp(float(x), tz=UTC)


def _item(e: Entry, score: float | None | bool = False) -> Any:
    m = e.meta
    common = {
        "namespace": tuple(m[NS]),
        "key": m[KEY],
        "value": dict(m[VALUE]),
        "created_at": _stamp(m[CREATED]),
        "updated_at": _stamp(m[UPDATED]),
    }
    if score is False:
        return Item(**common)
    s = None if score is None or not math.isfinite(float(score)) else float(score)
    return SearchItem(**common, score=s)


def _check_filter(cond: Any) -> None:
    if isinstance(cond, dict):
        for k, v in cond.items():
            if k.startswith("$") and k not in _OPS:
                raise InvalidInput(f"unknown filter operator {k!r}; known: {sorted(_OPS)}")
            _check_filter(v)


def _matches(have: Any, cond: Any) -> bool:
    """LangGraph's filter semantics: equality, ``$eq/$ne/$gt/$gte/$lt/$lte``, nested dicts."""
    if isinstance(cond, dict):
        if any(k.startswith("$") for k in cond):
            try:
                return all(_OPS[k](have, v) for k, v in cond.items())
            except TypeError:  # ordering a missing value or another type: not a match
                return False
        return isinstance(have, dict) and all(_matches(have.get(k), v) for k, v in cond.items())
    if isinstance(cond, list | tuple):
        return (
            isinstance(have, list | tuple)
            and len(have) == len(cond)
            and all(_matches(a, b) for a, b in zip(have, cond, strict=True))
        )
    return bool(have == cond)


def _does_match(cond: MatchCondition, ns: tuple[str, ...]) -> bool:
    path = tuple(cond.path)
    if len(ns) < len(path):
        return False
    part = ns[: len(path)] if cond.match_type == "prefix" else ns[len(ns) - len(path) :]
    return all(p == "*" or p == n for p, n in zip(path, part, strict=True))


def _list_namespaces(
    op: ListNamespacesOp, found: dict[tuple[tuple[str, ...], str], Entry]
) -> list[tuple[str, ...]]:
    spaces = {ns for ns, _ in found}
    spaces = {ns for ns in spaces if all(_does_match(c, ns) for c in op.match_conditions or ())}
    if op.max_depth is not None:
        spaces = {ns[: op.max_depth] for ns in spaces}
    return sorted(spaces)[op.offset : op.offset + op.limit]


__all__ = ["MemcuratorStore"]
