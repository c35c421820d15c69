"""Contained trials of entries on trust probation: the candidates for a query, and the outcome.

An entry from an unproven source is admitted on probation (:mod:`memcurator.trust.provenance`):
kept and counted, never returned by :func:`~memcurator.lifecycle.recall.recall_for`. It is
released by a verified outcome (:func:`~memcurator.lifecycle.feedback.feedback` with
``verified=True``), but an entry that is never shown never gets one. A *trial* breaks that loop
without opening the live path: the caller asks for the probation entries relevant to a task
(:func:`probation_candidates`, a separate read that never enters recall), shows one to a model
in a **shadow** attempt whose action runs only in a contained checker (a copy of the task's
database, a fresh sandbox), and reports the checked outcome (:func:`trial_outcome`). The
shadow's answer is never the live answer and is never written to memory.

A passed trial is a verified success: the entry is corroborated (logged ``corroborate``) and
recall may inject it from then on. A failed trial is a verified failure: it counts against the
entry (``failures``, the policy's learning and the writing peer's reputation, as a failed live
use would) and the entry stays on probation. No separate eviction rule is added: under a keep
policy with the feedback quarantine (``curator``: :mod:`memcurator.policy.quarantine`, Wilson
90% success lower bound under 0.15 after 4 uses) an entry that fails 4 trials in a row is
evicted, with that reason in the decision log; under a policy without it the entry stays on
probation until the budget evicts it. Every trial is logged (action ``trial``) with its
outcome and the checker's reason.

References
----------
CURATOR, Sec. III-C (provenance); issue 22, direction 2 ("admission is not injection":
injected only once corroborated by a verified outcome). Hines et al., arXiv:2403.14720, 2024
(on the recall path a trialled entry is shown spotlighted, as data).
"""

from __future__ import annotations

import numpy as np

from memcurator.errors import EntryNotFound, InvalidInput
from memcurator.lifecycle.context import Context
from memcurator.lifecycle.feedback import feedback
from memcurator.lifecycle.query import check_recall_args, query_vector
from memcurator.lifecycle.recall import other_users_rows
from memcurator.lifecycle.resident import ResidentSet
from memcurator.retrieve.hybrid import blend_scores
from memcurator.trust import state
from memcurator.types import RecallResult


def probation_candidates(
    ctx: Context,
    query: str,
    k: int = 1,
    *,
    user: str | None = None,
    min_score: float | None = None,
) -> RecallResult:
    """Up to ``k`` entries **on probation** relevant to ``query``, for a contained trial.

    This is not recall: only entries on probation are eligible (the complement of recall's
    probation rule), the policy's rank is not consulted (no policy state is read or changed,
    the query is not folded into the sketch), nothing is logged and no use is counted. Entries
    scoped to another user (``trust.user``) and content-free entries are never returned, as
    in recall; entries refused, evicted or forgotten are not resident and so never returned;
    only this namespace's entries are read. The query's and the eligible entries' bytes count
    as energy (nothing when no entry is eligible: a column test, no scan).

    Ranking: ``cosine + lexical_weight * bm25 / max(bm25)`` over the eligible entries
    (:func:`~memcurator.retrieve.hybrid.blend_scores`, the same blend recall adds to its
    policy scores), ties by store order.

    Parameters
    ----------
    ctx : Context
    query : str
        The task the trial is for.
    k : int, default 1
    user : str, optional
        The user the trial runs for (``user=`` of recall).
    min_score : float, optional
        Only entries whose cosine with the query is at least this, in [-1, 1].

    Returns
    -------
    RecallResult
        Ids, blended scores (descending) and copies of the entries; ``features`` None.

    Raises
    ------
    InvalidInput
        Empty query or one without a letter or digit, ``k`` not a positive integer,
        ``min_score`` not finite.
    """
    query, e_q = query_vector(ctx.embedder, query)
    check_recall_args(k, min_score)
    ctx.sync_usable()
    res = ctx.res
    empty = RecallResult([], np.zeros(0), [], None, ctx.step)
    if len(res.entries) == 0:
        return empty
    cols = res.entries.columns
    ok = (
        (cols.column("on_probation") > 0)
        & ~(cols.column("content_free") > 0)
        & ~other_users_rows(res, user)
    )
    rows = np.flatnonzero(ok)
    if rows.size == 0:
        return empty
    # energy: the query and the entries on probation read (a column test found them)
    ctx.energy.add(len(query.encode("utf-8")) + sum(res.entries[int(i)].bytes for i in rows))
    cos = (res.matrix[rows] @ e_q).astype(np.float64)
    if min_score is not None:
        keep = cos >= float(min_score)
        rows, cos = rows[keep], cos[keep]
        if rows.size == 0:
            return empty
    bm = res.bm25.scores(query)
    lex = np.zeros(rows.size) if bm is None else np.asarray(bm, dtype=np.float64)[rows]
    scores = blend_scores(cos, lex, lexical_weight=ctx.lexical_weight)
    order = np.argsort(-scores, kind="stable")[: int(k)]
    picked = [res.entries[int(rows[j])] for j in order]
    return RecallResult(
        [m.id for m in picked],
        scores[order],
        [ResidentSet.copy_of(m) for m in picked],
        None,
        ctx.step,
    )


def trial_outcome(ctx: Context, entry_id: str, passed: bool, reason: str) -> bool:
    """Record the checked outcome of one contained trial of an entry on probation.

    Logs a ``trial`` row (score 1 or 0, ``reason`` from the checker), then reports the outcome
    as verified feedback (:func:`~memcurator.lifecycle.feedback.feedback`,
    ``verified=True``): a pass releases the entry (logged ``corroborate``), a failure counts
    against it (a verified failure; the policy's feedback quarantine may then evict it,
    logged with its reason; see the module notes).

    Parameters
    ----------
    ctx : Context
    entry_id : str
        An entry on probation (from :func:`probation_candidates`).
    passed : bool
        True only when the shadow attempt passed the task's execution check **and** the domain
        harm check.
    reason : str
        What the checker found, in words (stored in the log).

    Returns
    -------
    bool
        Whether the entry is now released (injectable).

    Raises
    ------
    InvalidInput
        ``passed`` not a bool, an empty ``reason``, or an entry that is not on probation
        (released meanwhile, or never on it: use ``feedback``).
    EntryNotFound
        ``entry_id`` is not resident (never written, refused, evicted or forgotten).
    """
    if not isinstance(passed, bool):
        raise InvalidInput(f"passed must be True or False, got {passed!r}")
    if not isinstance(reason, str) or not reason.strip():
        raise InvalidInput("a trial needs the checker's reason in words")
    ctx.sync()
    m = ctx.res.get(entry_id)
    if m is None:
        raise EntryNotFound(
            f"no resident entry {entry_id!r} in namespace {ctx.namespace!r} to record a trial for"
        )
    if not state.on_probation(m):
        raise InvalidInput(
            f"entry {entry_id!r} is not on probation; report its outcome with feedback()"
        )
    with ctx.transaction():
        ctx.log(
            ctx.step,
            "trial",
            m.id,
            1.0 if passed else 0.0,
            ("passed" if passed else "failed") + f" contained trial: {reason.strip()}",
            m.bytes,
        )
        feedback(ctx, [entry_id], 1.0 if passed else 0.0, verified=True)  # same transaction
    ctx.sync()
    after = ctx.res.get(entry_id)
    return after is not None and not state.on_probation(after)


__all__ = ["probation_candidates", "trial_outcome"]
