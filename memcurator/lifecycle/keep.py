"""The Keep pass: restore the byte budget by the policy's priority, evict what it names.

The resident set enforces ``max_bytes`` for every policy (no flag turns it off); the policy's
keep component only orders entries and names victims (STYLE.md rule 1, cachetools).

References
----------
CURATOR, Alg. 1 lines 7-12 (density/priority-ordered greedy fill, distill on fall-out).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from memcurator.lifecycle.checks import dedup_key
from memcurator.lifecycle.context import Context
from memcurator.lifecycle.resident import ResidentSet, why_same_request
from memcurator.lifecycle.versions import proven_better
from memcurator.policy.base import Policy
from memcurator.trust import state
from memcurator.types import Entry

Log = Callable[[int, str, str, float, str, int], None]


@dataclass
class GovernResult:
    """Outcome of one Keep pass: evicted and distilled ids, resident bytes after."""

    evicted: list[str]
    distilled: list[str]
    used_bytes: int


def evict_victims(res: ResidentSet, policy: Policy, step: int, log: Log) -> list[str]:
    """Evict what the policy names regardless of bytes (a count capacity, a replacement).

    Each named resident is deleted and logged as ``evict`` with the policy's score and reason.
    """
    if not res.entries:
        return []
    out: list[str] = []
    changed = res.take_changed()
    for eid, score, reason in policy.victims(res.entries, res.matrix, step, changed=changed):
        m = res.get(eid)
        if m is None or eid in out:
            continue
        res.store.delete(res.namespace, eid)
        log(step, "evict", eid, float(score), reason, m.bytes)
        out.append(eid)
    if out:
        res.remove(set(out))
    return out


def govern(
    res: ResidentSet,
    policy: Policy,
    max_bytes: int | None,
    step: int,
    log: Log,
    distill: Callable[[Entry, int, int | None, int | None], bool],
    scan: Callable[[int], None] = lambda n: None,
) -> GovernResult:
    """Density/priority-ordered greedy fill of the budget (CURATOR Alg. 1 lines 7-12).

    Entries are visited by descending policy priority and kept while they fit; one that does
    not fit is first offered to the distiller when the policy distills (Alg. 1 line 9), with
    the bytes still free, and evicted if it still does not fit (a distillation that would not
    fit is refused before anything is rewritten, :func:`distill_entry`). So every evicted entry
    was needed: given the entries kept, it would not fit back (the kept bytes only grow during
    the fill).

    Versions of one request (:attr:`ResidentSet.near`: task lines equal up to case and
    whitespace, or cosine >= the memory's same-request threshold with the same literals) only
    choose the victim, never add one: an entry that another resident version of its request
    outranks (the newer one, unless the older is proven better,
    :func:`memcurator.lifecycle.versions.proven_better`) is visited after every other entry,
    so it is the first to go when bytes must go, and stays when they need not. Distinct facts
    ("user 17" and "user 18") are ranked by priority like any other entries. NaN priorities
    rank last; equal priorities keep the newer entry first.

    ``scan(n_bytes)`` is told the resident bytes a priority pass reads (the energy proxy).

    Returns
    -------
    GovernResult

    References
    ----------
    CURATOR, Alg. 1 lines 7-12. Its δ (line 15) is Share's redundancy test on the uplink; Keep
    has none, and uses δ (``redundancy_delta``) only as the cosine floor of the version graph.
    """
    evicted = evict_victims(res, policy, step, log)
    if max_bytes is None or res.used <= max_bytes:
        return GovernResult(evicted, [], res.used)
    scan(res.used)
    pr = np.asarray(policy.priority(res.entries, res.matrix, step), dtype=np.float64)
    pr = np.where(np.isfinite(pr), pr, -np.inf)
    outranked = _outranked(res) if res.delta is not None else {}
    # Only the tail of the fill order whose bytes reach the excess can lose an entry; every
    # row before it fits whatever happens in the tail, so the loop visits just the tail, with
    # the same outcome as visiting all n (tests/test_keep_partial.py).
    order = _fill_order(pr, res, res.used - max_bytes, sorted(outranked))
    used = res.used - sum(res.entries[int(i)].bytes for i in order)
    distilled: list[str] = []
    gone: list[str] = []
    for i in order:
        m = res.entries[i]
        if used + m.bytes > max_bytes and policy.distills and m.kind == "raw":
            if distill(m, step, int(i), max_bytes - used):
                distilled.append(m.id)
        if used + m.bytes <= max_bytes:
            used += m.bytes
            continue
        by = outranked.get(int(i))
        reason = policy.evict_reason() if by is None else _version_reason(res, m, *by)
        res.store.delete(res.namespace, m.id)
        log(step, "evict", m.id, float(pr[i]), reason, m.bytes)
        gone.append(m.id)
    evicted += gone
    if gone or distilled:
        res.remove(set(gone))
    return GovernResult(evicted, distilled, res.used)


def _outranked(res: ResidentSet) -> dict[int, tuple[str, float, bool]]:
    """Rows that another resident version of their request outranks.

    Between two versions the newer stays unless the older is proven better
    (:func:`~memcurator.lifecycle.versions.proven_better`). Returns ``row -> (id of the
    version that outranks it, their cosine, whether that version is the newer)``.
    """
    out: dict[int, tuple[str, float, bool]] = {}
    for a_id, nbs in res.near.items():
        ia = res.index.get(a_id)
        if ia is None:
            continue
        a = res.entries[ia]
        for b_id, cos in nbs.items():
            ib = res.index.get(b_id)
            if ib is None or ia in out:
                continue
            b = res.entries[ib]
            if ib > ia and not proven_better(a, b):
                out[ia] = (b_id, cos, True)
            elif ib < ia and proven_better(b, a):
                out[ia] = (b_id, cos, False)
    return out


def _version_reason(res: ResidentSet, m: Entry, by: str, cos: float, newer: bool) -> str:
    """The decision-log reason for evicting ``m``, which version ``by`` outranks."""
    other = res.get(by)
    why = None if other is None else why_same_request(m.text, other.text, cos, res.same_request)
    same = f"same request as {'newer' if newer else 'older'} resident {by} ({why})"
    if newer:
        return f"superseded: {same}, and not proven better, when the byte budget was full"
    return f"redundant: {same}, which is proven better, when the byte budget was full"


def _fill_order(pr: np.ndarray, res: ResidentSet, need: int, last: list[int]) -> np.ndarray:
    """The tail of the fill order whose bytes reach ``need``, in fill order, where the rows
    ``last`` follow every other row (each part by descending priority, ties to the newer).

    Parameters
    ----------
    pr, res, need :
        As in :func:`_fill_rows`.
    last : list of int
        Rows that go after all others (outranked versions of a request).

    Returns
    -------
    ndarray of int
        Row indices, in fill order.
    """
    if not last:
        return _fill_rows(pr, res, need)
    low = np.asarray(last, dtype=np.int64)
    low = low[np.lexsort((-low, -pr[low]))]
    b = np.fromiter((res.entries[int(i)].bytes for i in low), dtype=np.int64, count=len(low))
    tail_bytes = np.cumsum(b[::-1])
    if tail_bytes[-1] >= need:
        t = int(np.searchsorted(tail_bytes, need)) + 1
        return low[len(low) - t :]
    rest = np.ones(pr.shape[0], dtype=bool)
    rest[low] = False
    head = _fill_rows(pr, res, need - int(tail_bytes[-1]), np.flatnonzero(rest))
    return np.concatenate([head, low])


def _fill_rows(
    pr: np.ndarray, res: ResidentSet, need: int, rows: np.ndarray | None = None
) -> np.ndarray:
    """Rows of the fill order's tail whose bytes reach ``need``, in fill order.

    The fill order is descending priority, ties to the newer entry (later in insertion order:
    writes within one step share created_step, and recency/LRU must not evict the entry just
    written before older ones), i.e. ``np.lexsort((-np.arange(n), -pr))``. Every row before the
    tail fits the budget whatever happens in the tail, so the fill need not visit it. The tail
    is found by partition, O(n + t log t) for a tail of t rows, instead of sorting all n.

    Parameters
    ----------
    pr : ndarray of shape (n,)
        Priorities, NaN already mapped to -inf.
    res : ResidentSet
    need : int
        Bytes over the budget (> 0).
    rows : ndarray of int, ascending, optional
        Only these rows take part (default all n).

    Returns
    -------
    ndarray of int
        Row indices, in fill order.
    """
    idx = np.arange(pr.shape[0]) if rows is None else np.asarray(rows, dtype=np.int64)
    p = pr[idx]
    n = p.shape[0]
    pos = np.arange(n)
    k = 64
    while True:
        if k >= n - 1:
            cand = pos
        else:
            thr = p[np.argpartition(p, k)[k]]
            cand = np.nonzero(p <= thr)[0]  # the last len(cand) rows of the fill order
        cand = cand[np.lexsort((-cand, -p[cand]))]
        b = np.fromiter(
            (res.entries[int(idx[i])].bytes for i in cand), dtype=np.int64, count=len(cand)
        )
        tail_bytes = np.cumsum(b[::-1])
        if tail_bytes[-1] >= need or len(cand) == n:
            t = min(int(np.searchsorted(tail_bytes, need)) + 1, len(cand))
            return idx[cand[len(cand) - t :]]
        k *= 4


def distill_entry(
    res: ResidentSet,
    m: Entry,
    step: int,
    row: int | None,
    *,
    distiller: Any,
    embed: Callable[[str], np.ndarray],
    sizeof: Callable[[str, dict[str, Any], np.ndarray], int],
    log: Log,
    text_hash: Callable[[str], str],
    room: int | None = None,
) -> tuple[bool, int]:
    """Replace a raw entry by its distilled insight if that pays (CURATOR Alg. 1 l. 9).

    A distillation pays only when the insight, counted as stored (text, meta, vector and the
    origin detail), costs fewer bytes than the raw entry it replaces **and** fits the ``room``
    left in the budget (bytes; None: no limit): an insight that is evicted in the same pass
    saves nothing and costs an embedding and a rewrite. A refusal is logged as a ``notice`` with
    both sizes (issue 35, item 3); a distiller that finds no insight is not logged.

    Returns (distilled, text bytes embedded).
    """
    text = distiller.distill(m.text)
    if not text:
        return False, 0
    e = embed(text)
    n_embedded = len(text.encode("utf-8"))
    meta = dict(m.meta)
    meta["text_sha1"] = text_hash(text)
    # the origin detail and written statistics the raw entry counted stay counted
    extra = max(m.bytes - int(sizeof(m.text, state.sized_meta(m.meta, m.trust), m.embedding)), 0)
    b = int(sizeof(text, state.sized_meta(meta, m.trust), e)) + extra
    why = None
    if b >= m.bytes:
        why = f"the insight ({b} bytes as stored) is not smaller than the raw entry ({m.bytes})"
    elif room is not None and b > room:
        why = f"the insight ({b} bytes) would not fit the {max(room, 0)} bytes left; evicted raw"
    if why is not None:
        log(step, "notice", m.id, float("nan"), f"distillation refused: {why}", m.bytes)
        return False, n_embedded
    old = m.bytes
    res.keys.pop(m.meta.get("text_sha1"), None)
    m.text, m.kind, m.embedding, m.meta = text, "insight", e, meta
    m.raw_bytes = max(m.raw_bytes, old)
    m.bytes = b
    res.used += b - old
    res.store.update(m)
    if row is not None:
        res.set_row(row, e)  # keep the cached matrix exact for the rest of this pass
    else:
        res.changed()
    res.keys[meta["text_sha1"]] = m.id
    res.link(m, exclude=row)
    log(
        step,
        "distill",
        m.id,
        float("nan"),
        f"distilled before falling out: {old} -> {b} bytes (a={m.raw_bytes / b:.2f})",
        b,
    )
    return True, n_embedded


def keep_pass(ctx: Context, step: int) -> GovernResult:
    """:func:`govern` on a context (its budget, log and distiller), inside the caller's
    transaction; text embedded by distillation and bytes scanned go to its energy meter."""

    def distill(m: Entry, st: int, row: int | None = None, room: int | None = None) -> bool:
        ok, n = distill_entry(
            ctx.res,
            m,
            st,
            row,
            distiller=ctx.distiller,
            embed=ctx.embed,
            sizeof=ctx.sizing.entry_bytes,
            log=ctx.log,
            text_hash=dedup_key,
            room=room,
        )
        ctx.energy.add(n)
        return ok

    return govern(ctx.res, ctx.policy, ctx.max_bytes, step, ctx.log, distill, ctx.energy.add)


def run_keep(ctx: Context) -> GovernResult:
    """The Keep pass now, in its own transaction, with the policy state saved after it."""
    with ctx.transaction():
        g = keep_pass(ctx, ctx.step)
        ctx.save_state()
    return g


__all__ = ["GovernResult", "distill_entry", "evict_victims", "govern", "keep_pass", "run_keep"]
