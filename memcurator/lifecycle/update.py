"""Update: replace one entry's text in place, atomically, then run the Keep pass."""

from __future__ import annotations

import numpy as np

from memcurator.errors import BudgetExceeded, DuplicateEntry, EntryNotFound
from memcurator.lifecycle.checks import check_text, dedup_key, embed_checked
from memcurator.lifecycle.context import Context
from memcurator.lifecycle.keep import keep_pass
from memcurator.lifecycle.reads import observed_reason, observed_sources
from memcurator.lifecycle.resident import ResidentSet
from memcurator.lifecycle.write import WriteResult, hold_tool_output, verify_origin
from memcurator.trust.auth import Signature
from memcurator.trust.provenance import (
    CHANNEL_ORDER,
    DERIVED_FROM,
    PROBATION,
    TAINT,
    least_trusted,
    taint_of,
)
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
    same memory, corrected). Its provenance stays too (``meta`` is copied: a tainted entry
    stays tainted), and a new text that copies outside content this handle observed
    (:mod:`memcurator.lifecycle.reads`) taints it as on write: the source is added to
    ``meta["_derived_from"]``, ``meta["_taint"]`` set, the entry put on probation under a
    policy with probation, and a ``downgrade`` row logged (the entry's ``origin`` field keeps
    its write-time value; the taint is in ``meta``). If any step raises (validation, budget,
    the store, the Keep pass), nothing changes, in the store or in the resident set.

    The new text passes the same trust checks as a write (issue 22: an update is no way around
    the gate). With a key ring, a ``self`` or ``peer`` entry's new text needs a signature over
    it as on write (``signature``); without one the entry is tainted ``external`` (on probation
    under a policy with probation, a ``downgrade`` row logged). Under a policy with a trust gate
    (one with probation) the new version is then assessed like a write of its text from the
    entry's trusted origin: a refused update is logged ``reject`` and changes nothing (the old
    version stays, ``admitted=False``); an own record whose tool output now carries an
    instruction goes on probation as on write.

    Parameters
    ----------
    signature : Signature, optional
        The writer's signature over the new text
        (:meth:`memcurator.Memory.sign` for an own entry).

    Returns
    -------
    WriteResult
        ``id`` is ``entry_id``; ``admitted`` is False when the gate refused the new text;
        ``evicted`` may name it if Keep evicted it.

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
    oversized: BudgetExceeded | None = None
    with ctx.transaction():
        res = ctx.res
        cur = res.get(entry_id)
        if cur is None:
            raise EntryNotFound(f"no entry {entry_id!r} in namespace {ctx.namespace!r}")
        other = res.by_key(key)
        if other is not None and other.id != entry_id:
            raise DuplicateEntry(f"entry {other.id!r} already holds this text; forget one")
        new = ResidentSet.copy_of(cur)
        new.meta["text_sha1"] = key
        taint_why = _observed_taint(ctx, new, new_text)
        e = ctx.sizing.stored(e0)
        # what the entry counts besides its text, meta and vector (origin detail, written
        # statistics) stays counted: b(m) of the new version keeps the old one's extra bytes
        extra = cur.bytes - ctx.sizing.entry_bytes(cur.text, cur.meta, cur.embedding)
        b = ctx.sizing.entry_bytes(new_text, new.meta, e) + max(extra, 0)
        if ctx.max_bytes is not None and b > ctx.max_bytes:
            # logged and committed, raised outside the transaction (as in write)
            msg = f"new version of {b} bytes can never fit max_bytes={ctx.max_bytes}"
            ctx.log(ctx.step, "reject", entry_id, float("nan"), f"update: {msg}", b)
            oversized = BudgetExceeded(msg + "; the old version stays")
        else:
            new.text, new.embedding, new.bytes = new_text, e, b
            new.raw_bytes = max(cur.raw_bytes, b)
            sig_why = _unsigned_taint(ctx, new, signature)
            refused = _gate(ctx, new, res)
            if refused is not None:
                score, why = refused
                ctx.log(ctx.step, "reject", entry_id, score, why, b)
                return WriteResult(entry_id, False, why, score)
            ctx.store.update(new)
            why = f"text replaced: {cur.bytes} -> {b} bytes" + (f"; {reason}" if reason else "")
            for down in (taint_why, sig_why):
                if down:
                    ctx.log(ctx.step, "downgrade", entry_id, float("nan"), down, b)
            ctx.log(ctx.step, "update", entry_id, float("nan"), why, b)
            res.replace(res.index[entry_id], new)
            g = keep_pass(ctx, ctx.step)
            ctx.save_state()
    if oversized is not None:
        raise oversized
    return WriteResult(entry_id, True, why, float("nan"), g.evicted, g.distilled)


def _unsigned_taint(ctx: Context, new: Entry, signature: Signature | None) -> str:
    """Taint ``new`` ``external`` when a key ring guards its ``self``/``peer`` origin and the
    new text carries no valid signature; the log reason (empty when proven or unguarded)."""
    if ctx.keyring is None and signature is None:
        return ""
    # raises for a signature that is not one, or one given to a memory without a key ring
    _, down = verify_origin(ctx, new.text, new.origin, new.origin_detail, new.kind, signature)
    if not down or new.origin not in ("self", "peer") or TAINT in new.meta:
        return ""
    new.meta[TAINT] = "external"
    new.meta.setdefault("claimed_origin", new.origin)
    if ctx.policy.probation:
        new.meta[PROBATION] = "origin external (unsigned update)"
    return f"update: {down}; {new.origin} entry handled as external"


def _gate(ctx: Context, new: Entry, res: ResidentSet) -> tuple[float, str] | None:
    """The trust gate's refusal of ``new`` (score, reason), or None when it passes (or the
    policy has no trust gate). Sets the tool-output hold of an own record (mutating meta)."""
    if not ctx.policy.probation:
        return None
    cand = ResidentSet.copy_of(new)
    cand.origin = least_trusted([new.origin, str(new.meta.get(TAINT, "") or new.origin)])
    i = res.index[new.id]
    others = [m for j, m in enumerate(res.entries) if j != i]
    M = np.delete(np.asarray(res.matrix), i, axis=0)
    ok, score, why = ctx.policy.admit(cand, others, M, ctx.step)
    if not ok:
        return score, f"update refused: {why}; the old version stays"
    if cand.origin == "self" and PROBATION not in new.meta:
        hold_tool_output(new.meta, "self", new.text)
    return None


def _observed_taint(ctx: Context, new: Entry, text: str) -> str:
    """Taint ``new`` (mutating its meta) if ``text`` copies observed reads; the log reason."""
    observed, match = observed_sources(ctx, text, new.meta.get("_user"))
    if match is None:
        return ""
    have = list(new.meta.get(DERIVED_FROM, []))
    new.meta[DERIVED_FROM] = have + [s for s in observed if s not in have]
    before = least_trusted([new.origin, str(new.meta.get(TAINT, "") or "")])
    taint = least_trusted([before, taint_of(observed, {})])
    if CHANNEL_ORDER.index(taint) <= CHANNEL_ORDER.index(before):
        return ""
    new.meta[TAINT] = taint
    new.meta.setdefault("claimed_origin", new.origin)
    if ctx.policy.probation:
        new.meta[PROBATION] = f"origin {taint} (tainted)"
    return f"taint: update {observed_reason(match)}; {before} entry handled as {taint}"


__all__ = ["update"]
