"""Release from probation by agreement with independent trusted entries (the write path's
corroboration step; the rule is :func:`memcurator.trust.agreement.agreement`).

Two directions, both run inside the write's transaction:

- an entry admitted *on probation* is checked against the trusted entries near it;
- an entry admitted as *evidence* (the owner's own, untainted) releases the probation entries
  near it that now agree with the trusted entries around them.

Evidence is an injectable entry that is the owner's own and untainted, or was corroborated by a
verified outcome or by two authenticated principals — never one released by agreement (no
chains), never one from the candidate's own principal (an attacker does not corroborate
itself).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from memcurator.embed.hashing import HashingEmbedder
from memcurator.trust import state
from memcurator.trust.agreement import AGREEMENT, agreement
from memcurator.trust.provenance import corroborate
from memcurator.trust.state import CORROBORATED, HELD_FOR, PROBATION, TAINT
from memcurator.types import Entry

#: nearest residents (cosine over the memory's embeddings) looked at for evidence
NEIGHBOURS = 10
_EMBED = HashingEmbedder()  # the embedder the conflict check was tuned with


def is_evidence(entry: Entry) -> bool:
    """Whether ``entry`` may corroborate another by agreement (see the module docstring).

    Examples
    --------
    >>> from types import SimpleNamespace as E
    >>> from memcurator.types import TrustState as T
    >>> is_evidence(E(origin="self", trust=T())), is_evidence(E(origin="external", trust=T()))
    (True, False)
    >>> is_evidence(E(origin="external", trust=T(corroborated=["verified outcome at step 3"])))
    True
    >>> is_evidence(E(origin="external", trust=T(corroborated=[AGREEMENT + " m1: ..."])))
    False
    """
    m = state.of(entry)
    if PROBATION in m:
        return False
    corr = [str(c) for c in m.get(CORROBORATED, [])]
    if corr:
        return any(not c.startswith(AGREEMENT) for c in corr)
    return entry.origin == "self" and TAINT not in m


def _principal(entry: Entry) -> str:
    return f"{entry.origin}:{entry.origin_detail}"


def _near(ctx: Any, entry: Entry, keep: Callable[[Entry], bool], *, probation: bool) -> list[Entry]:
    """The :data:`NEIGHBOURS` entries nearest ``entry`` (cosine over the memory's embeddings)
    among those on probation (``probation=True``) or not, that ``keep`` accepts: chosen after
    the filter, so entries crowding the neighbourhood (an attacker's flood on probation)
    cannot hide the evidence. The probation split is read from the cached column that recall
    uses (vectorised); ``keep`` is called in order of cosine until enough pass."""
    res = ctx.res
    onp = res.entries.columns.column("on_probation") > 0
    idx = np.flatnonzero(onp if probation else ~onp)
    if not len(idx):
        return []
    M = np.asarray(res.matrix)[idx]
    d = M @ np.asarray(entry.embedding, dtype=M.dtype)
    out: list[Entry] = []
    for j in np.argsort(-d, kind="stable"):
        m = res.entries[int(idx[int(j)])]
        if m.id != entry.id and keep(m):
            out.append(m)
            if len(out) == NEIGHBOURS:
                break
    return out


def _try_release(ctx: Any, st: int, cand: Entry, params: dict[str, float]) -> bool:
    me = _principal(cand)
    ev = [
        (m.id, m.text)
        for m in _near(
            ctx,
            cand,
            lambda m: is_evidence(m) and (m.origin == "self" or _principal(m) != me),
            probation=False,
        )
    ]
    if not ev:
        return False
    a = agreement(cand.text, ev, _EMBED, **params)
    if not a.agrees or not corroborate(state.of(cand), a.reason):
        return False
    ctx.res.edited([cand.id])
    ctx.store.update(cand)
    ctx.log(st, "corroborate", cand.id, a.support, f"off probation: {a.reason}", cand.bytes)
    return True


def release_by_agreement(ctx: Any, st: int, cand: Entry) -> list[str]:
    """Run both directions for the newly admitted ``cand``; the ids released (logged
    ``corroborate`` with the evidence ids, the content support as the score).

    Does nothing unless ``ctx.policy.agreement`` (the content-support share of
    :func:`~memcurator.trust.agreement.agreement`) is set.
    """
    support = getattr(ctx.policy, "agreement", None)
    if support is None:
        return []
    params = {"support": float(support)}
    t = state.of(cand)
    if PROBATION in t:
        held = HELD_FOR in t  # held for what it says: agreement does not release it
        return [cand.id] if not held and _try_release(ctx, st, cand, params) else []
    if not is_evidence(cand):
        return []
    return [
        m.id
        for m in _near(
            ctx, cand, lambda m: PROBATION in m.trust and HELD_FOR not in m.trust, probation=True
        )
        if _try_release(ctx, st, m, params)
    ]


__all__ = ["NEIGHBOURS", "is_evidence", "release_by_agreement"]
