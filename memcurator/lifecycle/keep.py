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
from memcurator.lifecycle.resident import ResidentSet
from memcurator.lifecycle.versions import proven_better
from memcurator.policy.base import Policy
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
    distill: Callable[[Entry, int, int | None], bool],
    scan: Callable[[int], None] = lambda n: None,
) -> GovernResult:
    """Density/priority-ordered greedy fill of the budget (CURATOR Alg. 1 lines 7-12).

    Entries are visited by descending policy priority; one that does not fit is first offered
    to the distiller when the policy distills, and evicted if it still does not fit. While the
    budget is exceeded, an entry whose cosine with a higher-ranked kept entry is at least the
    policy's ``redundancy_delta`` is evicted as redundant, except that between two such
    near-duplicates the newer stays unless the older is proven better
    (:func:`memcurator.lifecycle.versions.proven_better`): a kept older one is then evicted as
    superseded. NaN priorities rank last; equal priorities keep the newer entry first.

    ``scan(n_bytes)`` is told the resident bytes a priority pass reads (the energy proxy).

    Returns
    -------
    GovernResult
    """
    evicted = evict_victims(res, policy, step, log)
    if max_bytes is None or res.used <= max_bytes:
        return GovernResult(evicted, [], res.used)
    scan(res.used)
    pr = np.asarray(policy.priority(res.entries, res.matrix, step), dtype=np.float64)
    pr = np.where(np.isfinite(pr), pr, -np.inf)
    delta = res.delta
    # Only two kinds of entry need the loop below: those with a near-duplicate (the redundancy
    # test) and the tail of the fill order that does not fit. Every other entry precedes the
    # tail and is kept, so the loop visits just those, in fill order (_fill_rows), with the
    # same outcome as visiting all n (tests/test_keep_partial.py).
    # Both ends of every pair: the graph built on first use takes its cosines by blocks of a
    # float32 product, which is not bitwise symmetric, so a pair at delta can be listed from
    # one end only; the listed end looks for the other among the kept entries.
    dup_rows = (
        []
        if delta is None
        else sorted(
            {res.index[x] for k, v in res.near.items() if v for x in (k, *v) if x in res.index}
        )
    )
    order = _fill_rows(pr, res, res.used - max_bytes, dup_rows)
    used = res.used - sum(res.entries[int(i)].bytes for i in order)
    keep: set[str] = set()
    distilled: list[str] = []
    gone: list[str] = []
    for i in order:
        m = res.entries[i]
        dup = None
        if delta is not None:
            for nb in [nb for nb in res.near.get(m.id, {}) if nb in keep]:
                old_e = res.get(nb)
                # between versions of one request the newer stays unless the older is proven
                # better (versions.proven_better): the kept older one gives way
                if old_e is not None and res.index[nb] < i and not proven_better(old_e, m):
                    keep.discard(nb)
                    used -= old_e.bytes
                    res.store.delete(res.namespace, nb)
                    log(
                        step,
                        "evict",
                        nb,
                        float(pr[res.index[nb]]),
                        f"superseded: cosine {res.near[m.id][nb]:.3f} >= delta={delta:g} with "
                        f"newer resident {m.id}, and not proven better",
                        old_e.bytes,
                    )
                    gone.append(nb)
                elif dup is None:
                    dup = nb
        if dup is None and used + m.bytes > max_bytes and policy.distills and m.kind == "raw":
            if distill(m, step, int(i)):
                distilled.append(m.id)
        if dup is None and used + m.bytes <= max_bytes:
            keep.add(m.id)
            used += m.bytes
        else:
            reason = policy.evict_reason()
            if dup is not None:
                reason = (
                    f"redundant: cosine {res.near[m.id][dup]:.3f} >= delta={delta:g} "
                    f"with higher-ranked resident {dup}"
                )
            res.store.delete(res.namespace, m.id)
            log(step, "evict", m.id, float(pr[i]), reason, m.bytes)
            gone.append(m.id)
    evicted += gone
    if gone or distilled:
        res.remove(set(gone))
    return GovernResult(evicted, distilled, res.used)


def _fill_rows(pr: np.ndarray, res: ResidentSet, need: int, extra: list[int]) -> np.ndarray:
    """Rows of the fill order's tail whose bytes reach ``need``, plus the rows ``extra``, in
    fill order.

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
    extra : list of int
        Rows the fill must visit wherever they rank (entries with a near-duplicate).

    Returns
    -------
    ndarray of int
        Row indices, in fill order.
    """
    n = pr.shape[0]
    idx = np.arange(n)
    k = 64
    while True:
        if k >= n - 1:
            cand = idx
        else:
            thr = pr[np.argpartition(pr, k)[k]]
            cand = np.nonzero(pr <= thr)[0]  # the last len(cand) rows of the fill order
        cand = cand[np.lexsort((-cand, -pr[cand]))]
        b = np.fromiter((res.entries[int(i)].bytes for i in cand), dtype=np.int64, count=len(cand))
        tail_bytes = np.cumsum(b[::-1])
        if tail_bytes[-1] >= need or len(cand) == n:
            t = min(int(np.searchsorted(tail_bytes, need)) + 1, len(cand))
            tail = cand[len(cand) - t :]
            break
        k *= 4
    if not extra:
        return tail
    rows = np.union1d(tail, np.asarray(extra, dtype=np.int64))
    return rows[np.lexsort((-rows, -pr[rows]))]


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
) -> tuple[bool, int]:
    """Replace a raw entry by its distilled insight if that is smaller (CURATOR Alg. 1 l. 9).

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
    extra = max(m.bytes - int(sizeof(m.text, m.meta, m.embedding)), 0)
    b = int(sizeof(text, meta, e)) + extra
    if b >= m.bytes:
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

    def distill(m: Entry, st: int, row: int | None = None) -> bool:
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
