"""Update: replace one entry's text in place, atomically, then run the Keep pass."""

from __future__ import annotations

from memcurator.errors import BudgetExceeded, DuplicateEntry, EntryNotFound
from memcurator.lifecycle.checks import check_text, dedup_key, embed_checked
from memcurator.lifecycle.context import Context
from memcurator.lifecycle.keep import keep_pass
from memcurator.lifecycle.resident import ResidentSet
from memcurator.lifecycle.write import WriteResult


def update(ctx: Context, entry_id: str, text: str | bytes, *, reason: str = "") -> WriteResult:
    """Replace one entry's text, atomically: the old version stays if anything fails.

    The new text is validated as in :func:`memcurator.lifecycle.write.write`, embedded, sized
    and written in one transaction with an ``update`` decision (old and new bytes, ``reason``);
    the Keep pass then runs. Use, success and failure counts stay with the entry (it is the
    same memory, corrected). If any step raises (validation, budget, the store, the Keep pass),
    nothing changes, in the store or in the resident set.

    Returns
    -------
    WriteResult
        ``id`` is ``entry_id``; ``evicted`` may name it if Keep evicted it.

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
            ctx.store.update(new)
            why = f"text replaced: {cur.bytes} -> {b} bytes" + (f"; {reason}" if reason else "")
            ctx.log(ctx.step, "update", entry_id, float("nan"), why, b)
            res.replace(res.index[entry_id], new)
            g = keep_pass(ctx, ctx.step)
            ctx.save_state()
    if oversized is not None:
        raise oversized
    return WriteResult(entry_id, True, why, float("nan"), g.evicted, g.distilled)


__all__ = ["update"]
