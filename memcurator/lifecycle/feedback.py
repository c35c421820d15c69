"""Feedback: a task's outcome for the entries injected into it — counts, the policy's learning,
quarantine evictions and peer reputation, in one transaction."""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable

from memcurator import limits
from memcurator.errors import EntryNotFound, InvalidInput
from memcurator.lifecycle.context import Context
from memcurator.lifecycle.exchange import log_reputation
from memcurator.lifecycle.keep import evict_victims
from memcurator.lifecycle.resident import ResidentSet
from memcurator.trust import state
from memcurator.trust.provenance import corroborate
from memcurator.types import Entry, RecallResult


def check_reward(reward: object) -> float:
    """``reward`` as a float in [0, 1] (True/False count as 1/0).

    Raises
    ------
    InvalidInput
        NaN, infinite, non-numeric (a string such as ``"1"``) or out of range.

    Examples
    --------
    >>> check_reward(True)
    1.0
    """
    if not isinstance(reward, numbers.Real):
        raise InvalidInput(f"reward must be a number in [0, 1], got {reward!r}")
    r = float(reward)
    if not math.isfinite(r) or not 0.0 <= r <= 1.0:
        raise InvalidInput(f"reward must be a finite number in [0, 1], got {reward!r}")
    return r


def feedback(
    ctx: Context, used: Iterable[str] | RecallResult, reward: float, *, verified: bool = False
) -> None:
    """Report a task's outcome ``reward`` in [0, 1] for the entries that were injected.

    ``used`` is the :class:`~memcurator.types.RecallResult` whose entries were injected
    (learners then train on the features of that recall, whatever was recalled since) or a
    list of ids. Ids that were entries of the namespace but are no longer resident (evicted or
    forgotten since) are skipped; an id listed twice counts once (an entry is injected into a
    task or not). Each injected entry's ``uses``, ``successes`` (reward >= 0.5) or
    ``failures`` and ``last_used_step`` are updated, the policy learns from the copies
    (:meth:`~memcurator.policy.base.Policy.feedback`) and its new statistics are stored; what
    the policy then names regardless of the budget (feedback quarantine) is evicted, logged;
    new peer quarantines and releases are logged.

    ``verified=True`` says the reward comes from an execution check (the task's checker ran
    the result), not from a model's own judgement: a success then corroborates every listed
    entry on trust probation (:mod:`memcurator.trust.provenance`; logged ``corroborate``), so
    recall may inject it from now on. Probation entries are listed by id (from
    :meth:`~memcurator.Memory.write`), since recall never returned them.

    Raises
    ------
    InvalidInput
        NaN, infinite, non-numeric or out-of-range reward, ``used`` given as one string, or
        naming more than :data:`memcurator.limits.MAX_IDS` distinct ids.
    EntryNotFound
        An id that was never an entry of the namespace (a typo, another namespace's id).
        Nothing is updated in either case.
    """
    features = None
    if isinstance(used, RecallResult):
        features, used = used.features, list(used.ids)
    if isinstance(used, str):
        raise InvalidInput(f"used must be a list of entry ids, not the string {used!r}")
    r = check_reward(reward)
    if not isinstance(verified, bool):
        raise InvalidInput(f"verified must be True or False, got {verified!r}")
    ids = limits.check_ids(list(dict.fromkeys(used)))  # one outcome per entry, first-seen order
    ctx.sync()
    _check_known(ctx, ids)  # before the transaction: a rollback would reload the policy's state
    with ctx.transaction():
        res = ctx.res
        injected = [res.entries[res.index[i]] for i in ids if i in res.index]
        for m in injected:
            _count_use(ctx, m, r, verified)
        updates = ctx.policy.feedback(
            r, [ResidentSet.copy_of(m) for m in injected], ctx.step, features
        )
        for m in injected:
            if m.id in updates:
                m.stats = dict(updates[m.id])
            ctx.store.update(m)
        res.touch([m.id for m in injected])
        # what must go regardless of the budget (feedback quarantine) goes now, logged
        evict_victims(res, ctx.policy, ctx.step, ctx.log)
        log_reputation(ctx)
        ctx.save_state()


def _check_known(ctx: Context, ids: list[str]) -> None:
    """Refuse ids that were never entries of the namespace (:class:`EntryNotFound`); ids no
    longer resident (evicted or forgotten since) pass, to be skipped."""
    gone = [i for i in ids if i not in ctx.res.index]
    if not gone:
        return
    unknown = sorted(set(gone) - ctx.store.known_ids(ctx.namespace, gone))
    if unknown:
        raise EntryNotFound(
            f"no entry {unknown[0]!r} was ever in namespace {ctx.namespace!r}"
            + (f" (and {len(unknown) - 1} more unknown ids)" if len(unknown) > 1 else "")
            + "; pass the ids recall returned (evicted or forgotten ones are skipped)"
        )


def _count_use(ctx: Context, m: Entry, r: float, verified: bool) -> None:
    """Count one use of ``m`` with reward ``r``; a verified success corroborates it (logged)."""
    m.uses += 1
    m.last_used_step = ctx.step
    if r >= 0.5:
        m.successes += 1
    else:
        m.failures += 1
    if verified and r >= 0.5 and corroborate(state.of(m), f"verified outcome at step {ctx.step}"):
        ctx.log(
            ctx.step,
            "corroborate",
            m.id,
            r,
            f"off probation: verified outcome (execution check) reward {r:g}",
            m.bytes,
        )


__all__ = ["check_reward", "feedback"]
