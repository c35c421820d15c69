"""Update: replace one entry's text in place, atomically, then run the Keep pass."""

from __future__ import annotations

import numpy as np

from memcurator.errors import DuplicateEntry, EntryNotFound
from memcurator.lifecycle.admission import (
    Admission,
    log_downgrades,
    oversize,
    screen,
    set_probation,
)
from memcurator.lifecycle.checks import check_text, dedup_key, embed_checked
from memcurator.lifecycle.context import Context
from memcurator.lifecycle.keep import GovernResult, keep_pass
from memcurator.lifecycle.resident import ResidentSet
from memcurator.lifecycle.write import WriteResult
from memcurator.trust import state
from memcurator.trust.auth import Signature
from memcurator.trust.provenance import least_trusted
from memcurator.trust.state import TAINT
from memcurator.types import Entry


def update(
    ctx: Context,
    entry_id: str,
    text: str | bytes,
    *,
    reason: str = "",
    signature: Signature | None = None,
) -> WriteResult:
    """Replace one entry's text, atomically: the old version stays if anything fails.

    The new text is validated as in :func:`memcurator.lifecycle.write.write`, embedded, sized
    and written in one transaction with an ``update`` decision (old and new bytes, ``reason``);
    the Keep pass then runs. Use, success and failure counts stay with the entry (it is the
    same memory, corrected). Its provenance stays too (its trust state is copied: a tainted
    entry stays tainted), and a new text that copies outside content this handle observed
    (:mod:`memcurator.lifecycle.reads`) taints it as on write: the source is added to
    ``trust["_derived_from"]``, ``trust["_taint"]`` set, the entry put on probation under a
    policy with probation, and a ``downgrade`` row logged (the entry's ``origin`` field keeps
    its write-time value; the taint is in its trust state). If any step raises (validation, budget,
    the store, the Keep pass), nothing changes, in the store or in the resident set.

    The new text passes the same trust checks as a write (issue 22: an update is no way around
    the gate). With a key ring, a ``self`` or ``peer`` entry's new text needs a signature over
    it as on write (``signature``); without one the entry is tainted ``external`` (on probation
    under a policy with probation, a ``downgrade`` row logged). Under a policy with a trust gate
    (one with probation) the new version is then assessed like a write of its text from the
    entry's trusted origin: a refused update is logged ``reject`` and changes nothing (the old
    version stays, ``admitted=False``); an own record whose tool output now carries an
    instruction goes on probation as on write.

    The checks are write's admission pipeline (:mod:`memcurator.lifecycle.admission`: provenance,
    signature, taint, probation, size, gate) run on the new version: the first step that lowers
    the trust logs its ``downgrade`` row, before the ``update`` or ``reject`` row, and the
    probation it adds to the trust state is counted in the new version's bytes.

    Parameters
    ----------
    signature : Signature, optional
        The writer's signature over the new text
        (:meth:`memcurator.Memory.sign` for an own entry).

    Returns
    -------
    WriteResult
        ``id`` is ``entry_id``; ``admitted`` is False when the gate refused the new text (the
        old version stays) or when the Keep pass then evicted the entry (``evicted`` names it).

    Raises
    ------
    EntryNotFound
        ``entry_id`` is not resident.
    InvalidInput
        Text refused by the write checks.
    DuplicateEntry
        Text identical (case and whitespace aside) to another resident entry (forget one of
        them instead); a subclass of :class:`InvalidInput`.
    BudgetExceeded
        The new version alone is larger than ``max_bytes`` (logged as ``reject``; nothing else
        changes).
    """
    new_text = check_text(text, ctx.max_text_bytes)
    e0 = embed_checked(ctx.embedder.embed, new_text)
    key = dedup_key(new_text)
    with ctx.transaction():
        cur = _resident(ctx, entry_id, key)
        new = ResidentSet.copy_of(cur)
        new.meta["text_sha1"] = key
        adm = Admission(
            new_text,
            cur.kind,
            cur.origin,
            cur.origin_detail,
            new.meta,
            least_trusted([cur.origin, str(state.of(cur).get(TAINT, "") or "")]),
            fresh=False,
            trust=state.of(new),
        )
        screen(ctx, adm, signature, state.user_of(cur))
        set_probation(adm, bool(ctx.policy.probation))
        e = ctx.sizing.stored(e0)
        # what the entry counts besides its text, meta and vector (origin detail, written
        # statistics) stays counted: b(m) of the new version keeps the old one's extra bytes
        old_meta = state.sized_meta(cur.meta, state.of(cur))
        extra = cur.bytes - ctx.sizing.entry_bytes(cur.text, old_meta, cur.embedding)
        b = ctx.sizing.entry_bytes(new_text, state.sized_meta(new.meta, new.trust), e)
        b += max(extra, 0)
        log_downgrades(ctx.log, ctx.step, entry_id, b, adm)
        oversized = oversize(
            ctx.log,
            ctx.step,
            entry_id,
            b,
            ctx.max_bytes,
            "update: new version of {b} bytes can never fit max_bytes={max_bytes}",
            "new version of {b} bytes can never fit max_bytes={max_bytes}; the old version stays",
        )
        if oversized is None:
            new.text, new.embedding, new.bytes = new_text, e, b
            new.raw_bytes = max(cur.raw_bytes, b)
            refused = _gate(ctx, new, adm.origin)
            if refused is not None:
                score, why = refused
                ctx.log(ctx.step, "reject", entry_id, score, why, b)
                return WriteResult(entry_id, False, why, score)
            why = f"text replaced: {cur.bytes} -> {b} bytes" + (f"; {reason}" if reason else "")
            g = _replace(ctx, new, why)
    if oversized is not None:
        raise oversized
    return WriteResult.kept(entry_id, why, float("nan"), g.evicted, g.distilled)


def _resident(ctx: Context, entry_id: str, key: str) -> Entry:
    """The resident entry ``entry_id`` whose text becomes the one of dedup key ``key``.

    Raises
    ------
    EntryNotFound, DuplicateEntry
    """
    cur = ctx.res.get(entry_id)
    if cur is None:
        raise EntryNotFound(f"no entry {entry_id!r} in namespace {ctx.namespace!r}")
    other = ctx.res.by_key(key)
    if other is not None and other.id != entry_id:
        raise DuplicateEntry(f"entry {other.id!r} already holds this text; forget one")
    return cur


def _gate(ctx: Context, new: Entry, origin: str) -> tuple[float, str] | None:
    """The trust gate's refusal of ``new`` judged as from ``origin`` (score, reason), or None
    when it passes or the policy has no trust gate (one with probation). The entry's old
    version is left out of the residents it is judged against."""
    if not ctx.policy.probation:
        return None
    cand = ResidentSet.copy_of(new)
    cand.origin = origin
    res = ctx.res
    i = res.index[new.id]
    others = [m for j, m in enumerate(res.entries) if j != i]
    M = np.delete(np.asarray(res.matrix), i, axis=0)
    ok, score, why = ctx.policy.admit(cand, others, M, ctx.step)
    if not ok:
        return score, f"update refused: {why}; the old version stays"
    return None


def _replace(ctx: Context, new: Entry, why: str) -> GovernResult:
    """Store the new version in place of the old one, log it, run the Keep pass."""
    ctx.store.update(new)
    ctx.log(ctx.step, "update", new.id, float("nan"), why, new.bytes)
    ctx.res.replace(ctx.res.index[new.id], new)
    g = keep_pass(ctx, ctx.step)
    ctx.save_state()
    return g


__all__ = ["update"]
