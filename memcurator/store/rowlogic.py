"""What the two SQL backends do alike: argument checks, row mapping and decision-log rules.

:class:`memcurator.store.sqlite.SQLiteStore` and :class:`memcurator.store.postgres.PostgresStore`
differ in their SQL dialect, connections and locking, not in what a namespace, an entry row or a
decision is. The rules they share live here once, so a fix to one is a fix to both: the checks of
``create_namespace``'s arguments and of a reopened namespace, an embedding's shape, the mapping of
rows to :class:`memcurator.types.Entry` and :class:`memcurator.types.Decision`, and the decision
log's read paths and tombstones (:class:`DecisionLogReads`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, Protocol

import numpy as np

from memcurator.errors import DimensionMismatch, InvalidInput, NamespaceNotFound
from memcurator.store.base import KEEP, REEMBED_PENDING, Store
from memcurator.store.vectors import DEFAULT_DTYPE, check_dtype
from memcurator.types import (
    DECISION_ACTIONS,
    Decision,
    Entry,
    TrustState,
    is_internal_key,
    split_meta,
)

#: The trust-state columns of ``entries`` (schema v6), in the order :func:`trust_values` gives
#: and :func:`trust_from_row` reads: one per typed field of
#: :class:`~memcurator.types.TrustState` (lists as JSON text; NULL when unset) and
#: ``trust_extra``, the JSON object of any other internal key.
TRUST_COLS = (
    "probation, held_for, taint, claimed_origin, derived_from, vouched_by, corroborated, "
    "scope_user, personal, trust_extra"
)
#: how many columns :data:`TRUST_COLS` names
N_TRUST_COLS = 10
#: what a store without the columns (before v6, opened read-only) selects in their place
NO_TRUST_COLS = ", ".join(["NULL"] * (N_TRUST_COLS - 1) + ["'{}'"])
_JSON_FIELDS = ("derived_from", "vouched_by", "corroborated")


def meta_json(entry: Entry) -> str:
    """``entry.meta`` as the JSON a store keeps.

    Raises
    ------
    InvalidInput
        ``meta`` has a top-level internal key (one starting with ``_``, or ``claimed_origin``):
        trust state goes in ``entry.trust``, never in the user's metadata.

    Examples
    --------
    >>> import numpy as np
    >>> meta_json(Entry("a", "ns", "raw", "t", 1, 1, np.ones(2), meta={"b": 1, "a": {"_x": 2}}))
    '{"a": {"_x": 2}, "b": 1}'
    """
    bad = sorted(k for k in entry.meta if isinstance(k, str) and is_internal_key(k))
    if bad:
        raise InvalidInput(
            f"entry {entry.id!r}: meta key {bad[0]!r} is reserved for trust state; set it in "
            "entry.trust (meta is the user's alone)"
        )
    return json.dumps(entry.meta, sort_keys=True)


def trust_values(t: TrustState) -> tuple[Any, ...]:
    """The values of :data:`TRUST_COLS` for ``t``.

    Examples
    --------
    >>> trust_values(TrustState(probation="origin peer", vouched_by=["peer:a"]))
    ('origin peer', None, None, None, None, '["peer:a"]', None, None, None, '{}')
    """
    if not isinstance(t, TrustState):
        raise InvalidInput(f"entry.trust must be a TrustState, got {type(t).__name__}")
    return (
        t.probation,
        t.held_for,
        t.taint,
        t.claimed_origin,
        *(None if (v := getattr(t, f)) is None else json.dumps(v) for f in _JSON_FIELDS),
        t.user,
        True if t.personal else None,
        json.dumps(t.extra, sort_keys=True),
    )


def trust_from_row(r: Sequence[Any]) -> TrustState:
    """The state from the values of :data:`TRUST_COLS` (the inverse of :func:`trust_values`).

    Examples
    --------
    >>> t = TrustState(taint="peer", derived_from=[{"kind": "peer", "id": "p"}], personal=True,
    ...                user="u", extra={"_x": 1})
    >>> trust_from_row(trust_values(t)) == t
    True
    """
    derived, vouched, corr = (None if v is None else json.loads(v) for v in r[4:7])
    return TrustState(
        probation=r[0],
        held_for=r[1],
        taint=r[2],
        claimed_origin=r[3],
        derived_from=derived,
        vouched_by=vouched,
        corroborated=corr,
        user=r[7],
        personal=True if r[8] else None,
        extra=json.loads(r[9]) if r[9] else {},
    )


#: Columns of the ``decisions`` table in the order :func:`decision_from_row` reads them.
DECISION_COLS = "seq, namespace, step, action, entry_id, score, reason, policy, bytes, at"


def finite_stats(stats: dict[str, float]) -> str:
    """``stats`` as the JSON a store keeps.

    Raises
    ------
    InvalidInput
        A value is NaN or infinite (never stored).

    Examples
    --------
    >>> finite_stats({"b": 1.0, "a": 2})
    '{"a": 2, "b": 1.0}'
    """
    for k, v in stats.items():
        if isinstance(v, float) and not math.isfinite(v):
            raise InvalidInput(f"statistic {k!r} is {v!r}; NaN or infinite values are never stored")
    return json.dumps(stats, sort_keys=True)


class NamespaceArgs(NamedTuple):
    """``create_namespace`` arguments after :func:`namespace_args`."""

    keep_budget: bool  # max_bytes was KEEP: an existing namespace keeps its stored budget
    max_bytes: int | None
    keep_dtype: bool  # vector_dtype was KEEP: an existing namespace keeps its precision
    dtype: str


def namespace_args(name: Any, dim: Any, max_bytes: Any, vector_dtype: Any) -> NamespaceArgs:
    """Check ``create_namespace``'s arguments (see
    :meth:`memcurator.store.sqlite.SQLiteStore.create_namespace`).

    Raises
    ------
    InvalidInput
        Empty name, non-positive ``dim`` or ``max_bytes``, an unknown ``vector_dtype``.

    Examples
    --------
    >>> namespace_args("a", 4, KEEP, KEEP)
    NamespaceArgs(keep_budget=True, max_bytes=None, keep_dtype=True, dtype='float32')
    """
    if not isinstance(name, str) or not name.strip():
        raise InvalidInput("namespace must be a non-empty string")
    if int(dim) <= 0:
        raise InvalidInput(f"dim must be positive, got {dim}")
    keep = max_bytes is KEEP
    if keep:
        max_bytes = None
    if max_bytes is not None and int(max_bytes) <= 0:
        raise InvalidInput(f"max_bytes must be positive or None, got {max_bytes}")
    keep_dtype = vector_dtype is KEEP
    dtype = DEFAULT_DTYPE if keep_dtype else check_dtype(vector_dtype)
    return NamespaceArgs(keep, max_bytes, keep_dtype, dtype)


def check_reopen(
    name: str, row: Sequence[Any], embedder: str, dim: int, args: NamespaceArgs
) -> None:
    """Check that an existing namespace (its ``(embedder, dim, vector_dtype)`` row) can be
    opened with ``embedder``, ``dim`` and ``args``.

    Raises
    ------
    DimensionMismatch
        Another embedder or dimension, or an unfinished re-embedding.
    InvalidInput
        An explicit ``vector_dtype`` other than the namespace's.
    """
    if str(row[0]).startswith(REEMBED_PENDING):
        raise DimensionMismatch(
            f"namespace {name!r} is being re-embedded or converted (an unfinished "
            f"`memcurator reembed`, {row[0]!r}); run it again to finish: memcurator "
            f"reembed STORE --namespace {name}"
        )
    if row[0] != embedder or int(row[1]) != int(dim):
        raise DimensionMismatch(
            f"namespace {name!r} was created with embedder {row[0]!r} (dim {row[1]}); "
            f"opened with {embedder!r} (dim {dim}). Open it with the same embedder, use "
            f"a new namespace, or re-embed it: memcurator reembed STORE --namespace {name}"
        )
    if not args.keep_dtype and row[2] != args.dtype:
        raise InvalidInput(
            f"namespace {name!r} stores its vectors as {row[2]}; opened with "
            f"vector_dtype={args.dtype!r}. Open it without vector_dtype (it keeps "
            f"{row[2]}), use a new namespace, or convert it: memcurator reembed STORE "
            f"--namespace {name} --vector-dtype {args.dtype}"
        )


def checked_embedding(embedding: Any, dim: int, namespace: str) -> np.ndarray:
    """``embedding`` as float32 of shape ``(dim,)``.

    Raises
    ------
    DimensionMismatch
        Another shape.
    InvalidInput
        NaN or infinite values.
    """
    emb = np.asarray(embedding, dtype=np.float32)
    if emb.shape != (dim,):
        raise DimensionMismatch(
            f"embedding has shape {emb.shape}; namespace {namespace!r} stores dim {dim}"
        )
    if not np.all(np.isfinite(emb)):
        raise InvalidInput("embedding contains NaN or infinite values")
    return emb


def entry_from_row(
    head: Sequence[Any], embedding: np.ndarray, tail: Sequence[Any], trust: Sequence[Any]
) -> Entry:
    """An entry from its row: ``head`` = (id, namespace, kind, text, bytes, raw_bytes), the
    decoded ``embedding``, ``tail`` = (origin, origin_detail, reinforcement, uses, successes,
    failures, created_step, last_used_step, meta JSON, stats JSON), ``trust`` = the values of
    :data:`TRUST_COLS`. A row written before schema v6 and read without migrating (a read-only
    open) still holds its trust state in ``meta``: it is split out here, so no read path ever
    gives internal keys in ``meta``."""
    meta = json.loads(tail[8])
    state = trust_from_row(trust)
    if any(isinstance(k, str) and is_internal_key(k) for k in meta):
        meta, old = split_meta(meta)
        for k, v in old.legacy().items():
            state.setdefault(k, v)
    return Entry(
        id=head[0],
        namespace=head[1],
        kind=head[2],
        text=head[3],
        bytes=int(head[4]),
        raw_bytes=int(head[5]),
        embedding=embedding,
        origin=tail[0],
        origin_detail=tail[1],
        reinforcement=int(tail[2]),
        uses=int(tail[3]),
        successes=int(tail[4]),
        failures=int(tail[5]),
        created_step=int(tail[6]),
        last_used_step=int(tail[7]),
        meta=meta,
        stats=json.loads(tail[9]),
        trust=state,
    )


def counts_of(entry: Entry) -> tuple[int, int, int, int, int]:
    """(reinforcement, uses, successes, failures, last_used_step): the counters an update
    writes back, in the column order both backends use."""
    return (entry.reinforcement, entry.uses, entry.successes, entry.failures, entry.last_used_step)


def decision_from_row(r: Sequence[Any]) -> Decision:
    """A decision from a row of :data:`DECISION_COLS` (a NULL score is NaN: no score applies)."""
    return Decision(
        int(r[0]),
        r[1],
        int(r[2]),
        r[3],
        r[4],
        float("nan") if r[5] is None else float(r[5]),
        r[6],
        r[7],
        int(r[8]),
        float(r[9]),
    )


def decision_values(
    namespace: str,
    step: int,
    action: str,
    entry_id: str,
    score: float | None,
    reason: str,
    policy: str,
    nbytes: int,
    at: float | None,
    clock: Callable[[], float],
) -> tuple[Any, ...]:
    """The values of one ``decisions`` row, in the order (namespace, step, action, entry_id,
    score, reason, policy, bytes, at): a NaN or missing ``score`` is NULL ("no score
    applies"), ``at`` (seconds since the epoch) defaults to ``clock()``."""
    sc = None if score is None or not math.isfinite(float(score)) else float(score)
    when = clock() if at is None else float(at)
    return (namespace, int(step), action, entry_id, sc, reason, policy, int(nbytes), when)


def check_action(action: str | None) -> None:
    """Raises :class:`InvalidInput` unless ``action`` is None or a known decision action."""
    if action is not None and action not in DECISION_ACTIONS:
        raise InvalidInput(f"unknown action {action!r}; known: {list(DECISION_ACTIONS)}")


def compaction_note(totals: Sequence[Sequence[Any]], dropped_now: int) -> tuple[str, int]:
    """(reason, bytes) of a ``compact`` summary row from the namespace's running totals
    ``(action, n, bytes, first_seq, last_seq)`` of dropped rows."""
    all_n = sum(int(t[1]) for t in totals)
    lo = min(int(t[3]) for t in totals)
    hi = max(int(t[4]) for t in totals)
    parts = ", ".join(f"{t[0]}={t[1]} ({t[2]} B)" for t in totals)
    reason = (
        f"log retention has dropped {all_n} decisions, seq {lo}..{hi} "
        f"({dropped_now} in this pass): {parts}"
    )
    return reason, sum(int(t[2]) for t in totals)


class _LogStore(Protocol):
    def namespace(self, name: str) -> Any: ...
    def namespaces(self) -> list[str]: ...
    def decision_count(self, namespace: str) -> int: ...
    def _decision_rows(self, namespace: str, since: int, action: str | None) -> list[Decision]: ...


class DecisionLogReads:
    """The decision log's read paths and a namespace's tombstones, for a store that provides
    ``namespace``, ``namespaces``, ``decision_count``, ``_decision_rows`` and ``log``."""

    def decisions(
        self: _LogStore, namespace: str, *, since: int = 0, action: str | None = None
    ) -> list[Decision]:
        """Decisions of ``namespace`` with ``seq > since``, oldest first.

        Raises
        ------
        NamespaceNotFound
            Unknown namespace.
        InvalidInput
            ``action`` is not one of :data:`memcurator.types.DECISION_ACTIONS`.
        """
        check_action(action)
        self.namespace(namespace)
        return self._decision_rows(namespace, since, action)

    def deleted_namespace_log(
        self: _LogStore, namespace: str, *, action: str | None = None
    ) -> list[Decision]:
        """The decision log a deleted namespace left behind, oldest first.

        ``delete_namespace`` keeps the append-only log: the namespace's rows, then a ``forget``
        tombstone per entry and one (empty entry id) for the namespace itself.
        :meth:`decisions` reads existing namespaces only; this reads the ones deleted.

        Raises
        ------
        NamespaceNotFound
            ``namespace`` exists (read it with :meth:`decisions`), or never had a log.
        InvalidInput
            ``action`` is not one of :data:`memcurator.types.DECISION_ACTIONS`.

        Examples
        --------
        >>> from memcurator.store.sqlite import SQLiteStore
        >>> s = SQLiteStore(":memory:")
        >>> s.create_namespace("a", embedder="hashing-4", dim=4)
        >>> _ = s.delete_namespace("a", reason="gone")
        >>> [(d.action, d.entry_id) for d in s.deleted_namespace_log("a")]
        [('forget', '')]
        """
        check_action(action)
        if namespace in self.namespaces():
            raise NamespaceNotFound(f"namespace {namespace!r} exists; it is not a deleted one")
        if not self.decision_count(namespace):
            raise NamespaceNotFound(
                f"namespace {namespace!r} does not exist and left no decision log; known: "
                f"{self.namespaces()}"
            )
        return self._decision_rows(namespace, 0, action)

    def _tombstones(
        self: Store, name: str, rows: Sequence[Sequence[Any]], step: int, reason: str
    ) -> int:
        """Log a ``forget`` per ``(id, bytes)`` row of a namespace being deleted and one (empty
        entry id) for the namespace; returns the bytes freed. Call inside the write
        transaction that deletes them."""
        for eid, nb in rows:
            self.log(name, step=step, action="forget", entry_id=eid, reason=reason, nbytes=nb)
        freed = sum(int(r[1]) for r in rows)
        self.log(
            name,
            step=step,
            action="forget",
            entry_id="",
            reason=f"{reason}: namespace {name!r} removed with {len(rows)} entries",
            nbytes=freed,
        )
        return freed
