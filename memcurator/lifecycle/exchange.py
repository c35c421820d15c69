"""Share and receive: CURATOR's Share under an uplink budget, and Trust on what peers send.

References
----------
CURATOR, Alg. 1 lines 13-22 and Eq. 7-8.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, TypedDict

import numpy as np

from memcurator.errors import DimensionMismatch, InvalidInput
from memcurator.lifecycle.admission import release_on_outcome, release_waiting
from memcurator.lifecycle.checks import check_text
from memcurator.lifecycle.context import Context
from memcurator.lifecycle.forget import forget
from memcurator.lifecycle.write import WriteResult, write
from memcurator.policy.share import (
    VERIFIED_Q,
    Demand,
    ForgetNotice,
    Offer,
    SharedEntry,
    entry_task,
    select_for_peer,
    shape_key,
    task_key,
    verified_share_scores,
)
from memcurator.policy.trust import RECEIVED_FROM
from memcurator.trust import state
from memcurator.trust.auth import Claim
from memcurator.trust.gate import assess
from memcurator.trust.outcome import (
    OUTCOME,
    OutcomeClaim,
    released_on_claim,
    sign_outcome,
    text_sha,
    verify_outcome,
)
from memcurator.trust.provenance import PROBATION, injectable
from memcurator.trust.reputation import PeerReputation, recompute_abstraction_gain


class ShareOptions(TypedDict, total=False):
    """The keyword arguments of :func:`share` (and :meth:`memcurator.Memory.share`)."""

    tau: float
    tau_rise: float
    delta: float
    sender: str | None
    to: str
    peer: str
    outcomes: Mapping[str, OutcomeClaim] | None


def share(
    ctx: Context,
    peer_sketch: np.ndarray,
    uplink_bytes: int,
    *,
    tau: float = 0.0,
    tau_rise: float = 5e-5,
    delta: float = 0.9,
    sender: str | None = None,
    to: str = "",
    peer: str = "",
    outcomes: Mapping[str, OutcomeClaim] | None = None,
) -> list[SharedEntry | ForgetNotice]:
    """Select resident entries to send a peer (CURATOR Alg. 1 lines 13-17, Eq. 7-8).

    ``peer_sketch`` has shape (d,); ``uplink_bytes`` is the round's budget L; ``tau``,
    ``tau_rise`` and ``delta`` are those of :func:`memcurator.policy.share.select_for_peer`
    (:class:`ShareOptions`). Returns :class:`~memcurator.policy.share.SharedEntry` objects,
    each logged as ``share``,
    preceded by a :class:`~memcurator.policy.share.ForgetNotice` for every entry shared
    with ``peer`` before (or shared with no peer name) and forgotten since, each logged as
    ``notice``; send the list as a whole over the channel to :func:`receive`. Personal
    entries (``write(personal=True)``) are never shared.
    With a ``keyring`` and ``sender`` (this agent's id at the peer), each entry is signed under
    ``sender``'s link key for the receiving namespace ``to`` and carries the raw trajectory
    it was distilled from when known (so the receiver can recompute its abstraction gain).
    ``outcomes`` maps entry ids to the verified outcome this agent observed for them
    (:class:`~memcurator.trust.outcome.OutcomeClaim`); with a keyring and ``sender``, an entry
    shared with one carries it signed for ``to`` (``SharedEntry.outcome``), evidence the
    receiver can release it on (:func:`receive`). A claim about exactly the entry's text is
    also the sender's own evidence (:func:`~memcurator.policy.share.verified_share_scores`): a
    verified pass is a prior on q (the entry can be sent before any reuse), a verified fail is
    never sent.

    Raises
    ------
    InvalidInput
        The policy has no share component (only curator-style policies share); ``outcomes``
        not a mapping of entry id to ``OutcomeClaim``.
    DimensionMismatch
        ``peer_sketch`` has the wrong dimension.
    """
    sk = _share_sketch(ctx, peer_sketch, peer)
    outcomes = _checked_outcomes(outcomes)
    ctx.sync()
    out: list[SharedEntry | ForgetNotice] = list(_notices(ctx, peer))
    cand = _share_candidates(ctx, sk, outcomes)
    if cand is None:
        return out
    ents, mat, rho, q, a, verdicts = cand
    chosen, _ = select_for_peer(
        ents,
        mat,
        rho,
        q,
        uplink_bytes=uplink_bytes,
        cost=_wire_estimates(ents, (q, a, rho), outcomes, ctx.keyring, sender or "", to),
        tau=tau,
        tau_rise=tau_rise,
        delta=delta,
    )
    ring = ctx.keyring if sender else None
    used = 0  # the budget holds what crosses: each entry's frame, envelope and claims included
    with ctx.transaction():
        for i, thr in chosen:
            m = ents[i]
            se = _signed_entry(ring, sender or "", to, m, (q[i], a[i], rho[i]), outcomes)
            wire = se.wire_bytes(sender or "")
            if used + wire > uplink_bytes:  # the estimate was short: not sent this round
                continue
            used += wire
            out.append(se)
            ctx.log(
                ctx.step,
                "share",
                m.id,
                float(rho[i]),
                f"rho_s={rho[i]:.3g} > tau={thr:.3g}; q={q[i]:.3f}, a={a[i]:.2f}"
                + (" (prior: verified pass)" if verdicts[i] == "pass" else ""),
                m.bytes,
            )
            ctx.store.mark_shared(ctx.namespace, m.id, peer)
    return out


def covers(ctx: Context, task: str, *, shape: bool = False) -> bool:
    """True when a resident entry that can be injected (not on probation) was distilled from
    exactly ``task`` (:func:`~memcurator.policy.share.entry_task`, compared by
    :func:`~memcurator.policy.share.task_key`): a memory that covers a task publishes no
    :class:`~memcurator.policy.share.Demand` for it. With ``shape``: from a task of
    ``task``'s shape (:func:`~memcurator.policy.share.shape_key`; the task itself included),
    a memory that holds such a sibling asks peers for the exact task only.

    Raises
    ------
    InvalidInput
        ``task`` is not a non-empty string.
    """
    key = shape_key(task) if shape else task_key(task)
    of = shape_key if shape else task_key
    ctx.sync()
    for m in ctx.res.entries:
        t = entry_task(m.text)
        if t is not None and injectable(m) and of(t) == key:
            return True
    return False


def offer(
    ctx: Context,
    demand: Demand,
    *,
    peer: str = "",
    outcomes: Mapping[str, OutcomeClaim] | None = None,
    match_cos: float | None = None,
    tau: float = 0.0,
    sender: str = "",
    to: str = "",
) -> Offer | None:
    """What this memory would send a peer that lacks ``demand``'s task (demand-driven Share).

    CURATOR's share score (Eq. 7) with the propensity of Eq. 8 re-projected on the demanded
    task instead of the peer's running sketch q̄_p: a peer that names the task it is about to
    run has told the sender more than its sketch can. Candidates are the entries :func:`share`
    may send (not personal, not on probation; a verified fail never), less those received from
    ``peer`` (it had them). An entry distilled from exactly the demanded task (its task key)
    is preferred to any other; then, when the demand carries a shape key, an entry of a
    sibling task (the same :func:`~memcurator.policy.share.shape_key`: one template, other
    constants); then, with ``match_cos`` and the demand's text, an entry whose cosine with
    the task is >= ``match_cos`` (experience of a similar task, for a model that adapts it).
    Of those, the one of highest ρ_s above ``tau``; nothing is logged (a sent entry is logged
    by :func:`fetch`).

    Parameters
    ----------
    demand : Demand
    peer : str, default ""
        The demanding peer (its copies are not offered back).
    outcomes : mapping of entry id to OutcomeClaim, optional
        Verified outcomes (a prior on q, as in :func:`share`).
    match_cos : float in (0, 1] or None, default None
        Similarity matching (needs ``demand.text``); None: exact task only.
    tau : float, default 0.0
        Share threshold τ on ρ_s, value per byte.
    sender, to : str
        The frame's sender and receiving namespace (for the fetched frame's size).

    Returns
    -------
    Offer or None
        None when nothing matches or clears τ.

    Raises
    ------
    InvalidInput
        The policy cannot share; ``match_cos`` outside (0, 1]; a bad ``outcomes``.

    References
    ----------
    CURATOR, Eq. 7-8 (ρ_s = (p_p·q·a − λĤ)/b > τ, p_p re-projected on what the peer
    advertises); the demand in place of the sketch is ours.
    """
    _check_offer(ctx, demand, match_cos)
    outcomes = _checked_outcomes(outcomes)
    exact_ids, shape_ids, text = _exact_for(ctx, demand)
    if text is None or (
        not exact_ids and not shape_ids and (match_cos is None or demand.text is None)
    ):
        return None
    sk = np.asarray(ctx.embedder.embed(text), dtype=np.float64)
    cand = _share_candidates(ctx, sk, outcomes)
    if cand is None:
        return None
    ents, mat, rho, q, a, _ = cand
    ok = np.array([m.meta.get(RECEIVED_FROM) != peer or not peer for m in ents], dtype=bool)
    ok &= rho > tau
    exact = np.array([m.id in exact_ids for m in ents], dtype=bool)
    sib = np.array([m.id in shape_ids for m in ents], dtype=bool)
    pick = np.flatnonzero(ok & _offer_match(ok, exact, sib, mat, sk, match_cos))
    if pick.size == 0:
        return None
    i = int(pick[np.argmax(rho[pick])])
    m = ents[i]
    (wire,) = _wire_estimates([m], (q[i : i + 1], a[i : i + 1], rho[i : i + 1]), outcomes,
                              ctx.keyring, sender, to)  # fmt: skip
    return Offer(
        m.id,
        float(rho[i]),
        bool(exact[i]),
        int(wire),
        float(q[i]),
        float(a[i]),
        shape=bool(sib[i] and not exact[i]),
    )


def _offer_match(
    ok: np.ndarray,
    exact: np.ndarray,
    sib: np.ndarray,
    mat: np.ndarray,
    sk: np.ndarray,
    match_cos: float | None,
) -> np.ndarray:
    """Which candidates :func:`offer` may pick from, shape (n,) bool: the exact task's entries
    when one may be sent (``ok``), else a sibling task's, else those whose cosine with the
    task is >= ``match_cos`` (none without it)."""
    if exact[ok].any():
        return exact
    if sib[ok].any():
        return sib
    return np.asarray(mat.astype(np.float64) @ sk >= (match_cos or 2.0))


def _check_offer(ctx: Context, demand: Any, match_cos: Any) -> None:
    """:class:`InvalidInput` for what :func:`offer` refuses."""
    if not ctx.policy.can_share:
        raise InvalidInput(f"policy {ctx.policy.name!r} cannot share; use a curator policy")
    if match_cos is not None and not 0.0 < match_cos <= 1.0:
        raise InvalidInput(f"match_cos must be in (0, 1], got {match_cos!r}")
    if not isinstance(demand, Demand):
        raise InvalidInput(f"demand must be a Demand, got {type(demand).__name__}")


def _exact_for(ctx: Context, demand: Demand) -> tuple[set[str], set[str], str | None]:
    """The ids of the resident entries distilled from exactly the demanded task, those of a
    sibling task (the demand's shape key, when it has one), and the task's text (the
    sender's own copy when it holds the task, else a sibling's, else the demand's, if sent)."""
    ctx.sync()
    ids: set[str] = set()
    sibs: set[str] = set()
    text = sib_text = demand.text
    for m in ctx.res.entries:
        t = entry_task(m.text)
        if t is None:
            continue
        if task_key(t) == demand.key:
            ids.add(m.id)
            text = t  # the sender holds the task's text: the demand's direction exactly
        elif demand.shape is not None and shape_key(t) == demand.shape:
            sibs.add(m.id)
            sib_text = sib_text or t
    return ids, sibs, text if ids else sib_text


def fetch(
    ctx: Context,
    chosen: Offer,
    *,
    sender: str = "",
    to: str = "",
    peer: str = "",
    outcomes: Mapping[str, OutcomeClaim] | None = None,
) -> SharedEntry | None:
    """The entry of an :class:`~memcurator.policy.share.Offer` this memory made, signed as
    :func:`share` signs (with its verified outcome claim), logged ``share`` and marked shared
    with ``peer``; None when it is no longer resident or can no longer be sent (forgotten,
    evicted or put on probation since the offer).

    Raises
    ------
    InvalidInput
        ``chosen`` is not an Offer; a bad ``outcomes``.
    """
    if not isinstance(chosen, Offer):
        raise InvalidInput(f"chosen must be an Offer, got {type(chosen).__name__}")
    outcomes = _checked_outcomes(outcomes)
    ctx.sync()
    m = ctx.res.get(chosen.source_id)
    if m is None or state.is_personal(m) or not injectable(m):
        return None
    ring = ctx.keyring if sender else None
    se = _signed_entry(ring, sender, to, m, (chosen.q, chosen.a, chosen.rho_s), outcomes)
    with ctx.transaction():
        ctx.log(
            ctx.step,
            "share",
            m.id,
            chosen.rho_s,
            f"demand of {peer or 'a peer'}: {chosen.match} task; "
            f"rho_s={chosen.rho_s:.3g}, q={chosen.q:.3f}",
            m.bytes,
        )
        ctx.store.mark_shared(ctx.namespace, m.id, peer)
    return se


def _share_candidates(
    ctx: Context, sk: np.ndarray, outcomes: Mapping[str, OutcomeClaim]
) -> tuple[list[Any], np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[Any]] | None:
    """The entries :func:`share` may send and their scores: (entries, their rows of the
    matrix, ρ_s, q, a, verdicts), or None when there is none. Personal data never leaves the
    memory; nor does an entry on trust probation (sharing it would launder an unproven entry
    into a peer's channel). A verified outcome about exactly an entry's text is a prior on q
    (:func:`~memcurator.policy.share.verified_share_scores`); a verified fail is not sent."""
    res = ctx.res
    rows = [i for i, m in enumerate(res.entries) if not state.is_personal(m) and injectable(m)]
    if not rows:
        return None
    ents = [res.entries[i] for i in rows]
    mat = res.matrix[rows]
    t = ctx.policy.share_terms(ents, mat, sk)
    verdicts = [
        c.verdict
        if (c := outcomes.get(m.id)) is not None and c.entry_sha == text_sha(m.text)
        else None
        for m in ents
    ]
    rho, q, ok = verified_share_scores(t.rho, t.p, t.q, t.a, t.b, verdicts)
    keep = np.flatnonzero(ok)
    return (
        [ents[i] for i in keep],
        mat[keep],
        rho[keep],
        q[keep],
        t.a[keep],
        [verdicts[i] for i in keep],
    )


def _signed_entry(
    ring: Any,
    sender: str,
    to: str,
    m: Any,
    qar: tuple[float, float, float],
    outcomes: Mapping[str, OutcomeClaim],
) -> SharedEntry:
    """``m`` as sent: signed under ``sender``'s link key for ``to`` with a ring, carrying its
    verified outcome claim signed too when it has one."""
    sig = signed = None
    if ring is not None and sender:
        sig = ring.sign(Claim(to, "peer", sender, m.kind, m.text), principal=sender)
        if m.id in outcomes:
            signed = sign_outcome(ring, outcomes[m.id], to=to, sender=sender)
    q, a, rho = (float(x) for x in qar)
    return SharedEntry(m.text, m.kind, m.bytes, q, a, rho, m.id, signature=sig, outcome=signed)


def _wire_estimates(
    ents: list[Any],
    qar: tuple[np.ndarray, np.ndarray, np.ndarray],
    outcomes: Mapping[str, Any],
    ring: Any,
    sender: str,
    to: str,
) -> list[int]:
    """Each entry's bytes on the link, for the selection (:func:`share` then holds the budget
    to the exact frames): its text as JSON escapes it, plus its frame without the text (its
    advertised ``qar`` = (q, a, ρ_s), a signature of the ring's size), plus its signed
    outcome when it has one (signed here: the claim carries its action)."""
    sig = None
    if ring is not None and sender:
        sig = ring.sign(Claim(to, "peer", sender, "insight", ""), principal=sender)
    q, a, rho = qar
    out = []
    for i, m in enumerate(ents):
        nums = float(q[i]), float(a[i]), float(rho[i])
        env = SharedEntry("", m.kind, m.bytes, *nums, m.id, signature=sig).wire_bytes(sender)
        claim = outcomes.get(m.id) if sig is not None else None
        if claim is not None:
            so = sign_outcome(ring, claim, to=to, sender=sender).to_wire()
            env += len(json.dumps(so, separators=(",", ":")).encode("utf-8")) + len(',"outcome":')
        out.append(len(json.dumps(m.text).encode("utf-8")) - 2 + env)
    return out


def _checked_outcomes(outcomes: Any) -> Mapping[str, OutcomeClaim]:
    """``outcomes`` ({} for None), or :class:`InvalidInput` when it is not a mapping of entry
    id to :class:`~memcurator.trust.outcome.OutcomeClaim`."""
    if outcomes is None:
        return {}
    if not isinstance(outcomes, Mapping) or not all(
        isinstance(k, str) and isinstance(v, OutcomeClaim) for k, v in outcomes.items()
    ):
        raise InvalidInput("outcomes must map entry ids to OutcomeClaim")
    return outcomes


def _share_sketch(ctx: Context, peer_sketch: Any, peer: Any) -> np.ndarray:
    """The peer's sketch as float64 (d,), or the error :func:`share` raises."""
    if not ctx.policy.can_share:
        raise InvalidInput(f"policy {ctx.policy.name!r} cannot share; use a curator policy")
    sk = np.asarray(peer_sketch, dtype=np.float64)
    if sk.shape != (ctx.embedder.dim,):
        raise DimensionMismatch(f"peer sketch has shape {sk.shape}, expected ({ctx.embedder.dim},)")
    if not np.all(np.isfinite(sk)):
        raise InvalidInput("peer sketch contains NaN or infinite values")
    if not isinstance(peer, str):
        raise InvalidInput(f"peer must be a string, got {peer!r}")
    return sk


def _notices(ctx: Context, peer: str) -> list[ForgetNotice]:
    """A forget notice for every entry shared with ``peer`` and forgotten since (logged)."""
    notices = ctx.store.pending_notices(ctx.namespace, peer)
    out = []
    if notices:
        with ctx.transaction():
            for eid in notices:
                out.append(ForgetNotice(eid))
                ctx.store.notice_sent(ctx.namespace, eid, peer)
                ctx.log(ctx.step, "notice", eid, float("nan"), f"forget notice to peer {peer!r}", 0)
    return out


def reputation(ctx: Context) -> PeerReputation | None:
    """The policy's peer reputation (its ``reputation`` estimator), or None if it keeps none."""
    get = getattr(ctx.policy, "estimator", None)
    if get is None:
        return None
    try:
        return get("reputation").rep  # type: ignore[no-any-return]
    except InvalidInput:
        return None


def receive(ctx: Context, shared: Iterable[Any], peer: str) -> list[WriteResult]:
    """Offer entries received from ``peer`` (CURATOR Trust, Alg. 1 lines 18-22).

    The sender's id is kept as ``meta["source_id"]``. What a peer sends is :func:`share`'s
    output: ``SharedEntry`` and ``ForgetNotice`` objects; a
    notice forgets the copy received from ``peer`` under that source id.

    Unlike CURATOR (Eq. 8: the sender's q and a transfer unchanged), nothing the peer advertises
    is taken on faith:

    - the abstraction gain is recomputed from the bytes received
      (:func:`~memcurator.trust.reputation.recompute_abstraction_gain`: 1 unless the raw
      trajectory came along and distils to exactly the entry);
    - the advertised q is shrunk toward the local prior 0 by the peer's reputation here
      (:meth:`~memcurator.trust.reputation.PeerReputation.shrink_q`; a policy without a
      ``reputation`` estimator weighs every peer as a new one);
    - with a keyring, the entry's signature must prove the peer sent it, or it is handled as
      external (logged as ``downgrade``);
    - the trust gate refuses entries of a quarantined peer;
    - an entry admitted on probation that carries the sender's signed verified outcome
      (``SharedEntry.outcome``) is released when the claim verifies, the peer is in good
      standing and the content passes the gate as if not on probation (the admission step
      :func:`~memcurator.lifecycle.admission.release_on_outcome`; logged ``corroborate``, or
      ``receive`` with the reason it stays on probation). The outcomes of entries released
      this way feed the peer's standing
      (:meth:`~memcurator.trust.reputation.PeerReputation.learn_claim`).

    The advertised numbers are kept in ``meta`` (``advertised_q``, ``advertised_a``).

    Raises
    ------
    InvalidInput
        ``peer`` empty or not a string; ``shared`` not an iterable of ``SharedEntry`` /
        ``ForgetNotice`` (checked before anything is written); an advertised q or a that is
        not finite, a < 1; text the write checks refuse.
    """
    shared = _checked_batch(shared, peer)
    rep = reputation(ctx) or PeerReputation()
    out = []
    for s in shared:
        if isinstance(s, ForgetNotice):
            _forget_notice(ctx, s, peer)
        else:
            out.append(_receive_one(ctx, s, peer, rep))
    return out


def _checked_batch(shared: Any, peer: Any) -> list[Any]:
    """``shared`` as a list, or :class:`InvalidInput` for a bad ``peer`` or anything in the
    batch that is not a ``SharedEntry`` / ``ForgetNotice`` (checked before anything is written:
    a bad batch writes nothing)."""
    if not isinstance(peer, str) or not peer:
        raise InvalidInput("peer must be a non-empty string")
    if isinstance(shared, (str, bytes)) or not isinstance(shared, Iterable):
        raise InvalidInput("shared must be a list of SharedEntry / ForgetNotice (share's output)")
    shared = list(shared)
    bad = [type(s).__name__ for s in shared if not isinstance(s, (SharedEntry, ForgetNotice))]
    if bad:
        raise InvalidInput(f"shared holds {bad[0]}, not SharedEntry / ForgetNotice")
    return shared


def _forget_notice(ctx: Context, s: ForgetNotice, peer: str) -> None:
    """Forget the copy received from ``peer`` under the notice's source id."""
    ctx.sync()
    for m in list(ctx.res.entries):
        if m.meta.get(RECEIVED_FROM) == peer and m.meta.get("source_id") == s.source_id:
            forget(ctx, [m.id], reason=f"forget notice from peer {peer!r} ({s.source_id})")


def _receive_one(ctx: Context, s: SharedEntry, peer: str, rep: PeerReputation) -> WriteResult:
    """Write one entry a peer sent, its advertised numbers recomputed or shrunk."""
    a_adv = float(s.a)
    if not np.isfinite(a_adv) or a_adv < 1.0 or not np.isfinite(float(s.q)):
        raise InvalidInput(f"advertised q={s.q!r}, a={s.a!r} must be finite, a >= 1")
    text = check_text(s.text, ctx.max_text_bytes)
    e_b = ctx.sizing.entry_bytes(text, {}, ctx.embedder.embed(text))
    a = recompute_abstraction_gain(text, getattr(s, "raw_text", None))
    signed = getattr(s, "outcome", None)
    q = rep.shrink_q(
        peer, float(np.clip(s.q, -1.0, 1.0)), _local_prior(ctx, signed, peer, text, rep)
    )
    if signed is None:
        return _write_received(ctx, s, peer, text, a, a_adv, q, e_b)
    with ctx.transaction():  # the entry and the outcome step's release commit together
        res = _write_received(ctx, s, peer, text, a, a_adv, q, e_b)
        m = ctx.res.get(res.id) if res.admitted and res.id is not None else None
        if m is not None:
            _outcome_step(ctx, m, signed, peer, rep)
    return res


def _local_prior(ctx: Context, signed: Any, peer: str, text: str, rep: PeerReputation) -> float:
    """The local prior that ``peer``'s advertised q is shrunk toward: :data:`VERIFIED_Q` (one
    successful pseudo-use, as the sender's own prior on a verified pass) when the entry carries
    a signed passing outcome that verifies for exactly ``text`` and the peer is in good
    standing, else 0. It weighs the entry against residents (Keep, rank), nothing else: the
    release off probation is still the outcome step's (:func:`_outcome_step`)."""
    if signed is None or rep.good_standing(peer):
        return 0.0
    why = verify_outcome(ctx.keyring, signed, namespace=ctx.namespace, peer=peer, text=text)
    return 0.0 if why else VERIFIED_Q


def _strict(text: str) -> str:
    """Why the gate's checks refuse ``text`` as a peer entry *not* on probation ('' if not)."""
    a = assess(text, origin="peer", probation=False)
    return "" if a.admit else f"its content would not pass outside probation ({a.reasons[-1]})"


def _outcome_step(ctx: Context, m: Any, signed: Any, peer: str, rep: PeerReputation) -> None:
    """The admission pipeline's ``outcome`` step on the received entry ``m``, logged."""
    released, why = release_on_outcome(
        m.trust,
        m.text,
        signed,
        ring=ctx.keyring,
        namespace=ctx.namespace,
        peer=peer,
        standing=rep.may_release,
        strict=_strict,
        step=ctx.step,
    )
    if not why:
        return
    if released:
        rep.note_release(peer, m.id)
    ctx.res.edited([m.id])
    ctx.store.update(m)
    ctx.log(ctx.step, "corroborate" if released else "receive", m.id, float("nan"), why, m.bytes)


def _write_received(
    ctx: Context,
    s: SharedEntry,
    peer: str,
    text: str,
    a: float,
    a_adv: float,
    q: float,
    e_b: int,
) -> WriteResult:
    return write(
        ctx,
        text,
        origin="peer",
        kind=s.kind,
        origin_detail=peer,
        raw_bytes=int(round(a * e_b)),
        stats={"q_adv": q},
        meta={
            RECEIVED_FROM: peer,
            "source_id": str(s.source_id),
            "advertised_q": float(s.q),
            "advertised_a": a_adv,
        },
        signature=getattr(s, "signature", None) if ctx.keyring is not None else None,
        derived_from=[{"kind": "peer", "id": peer}],
    )


def log_reputation(ctx: Context) -> None:
    """Write new peer quarantines and releases to the decision log (entry id ``peer:<id>``),
    put back on probation what a peer out of good standing released on its outcome claims
    (:func:`withdraw_releases`), and release what waits on a verified claim whose peer has
    release credit again (:func:`~memcurator.lifecycle.admission.release_waiting`)."""
    get = getattr(ctx.policy, "estimator", None)
    if get is None:
        return
    try:
        est = get("reputation")
    except InvalidInput:
        return
    for peer, action, reason in est.rep.log[est.logged :]:
        ctx.log(ctx.step, action, f"peer:{peer}", float("nan"), reason, 0)
    est.logged = len(est.rep.log)
    withdraw_releases(ctx, est.rep)
    released = {m.id for m in ctx.res.entries if released_on_claim(m.trust)}
    est.rep.drop_pending(released.__contains__)  # evicted or withdrawn: no outcome will come
    for m, why in release_waiting(list(ctx.res.entries), est.rep, ctx.step):
        ctx.res.edited([m.id])
        ctx.store.update(m)
        ctx.log(ctx.step, "corroborate", m.id, float("nan"), why, m.bytes)


def withdraw_releases(ctx: Context, rep: PeerReputation) -> list[str]:
    """Put every resident entry released off probation on the outcome claim of a peer that is
    out of good standing now back on probation (``trust["_outcome"]["status"]`` =
    ``"withdrawn: ..."``, logged ``downgrade``): its evidence was that peer's word. Returns the
    ids. Called inside the caller's transaction, after feedback."""
    out = [p for p in rep.lost_peers() if rep.good_standing(p)]
    if not out:
        return []
    done = []
    for m in list(ctx.res.entries):
        if not released_on_claim(m.trust):
            continue
        o: dict[str, Any] = dict(m.trust[OUTCOME])
        if o.get("peer") not in out:
            continue
        why = f"peer {o['peer']!r} out of good standing: {rep.good_standing(o['peer'])}"
        m.trust[PROBATION] = f"release on a signed outcome withdrawn ({why})"[:300]
        m.trust[OUTCOME] = {**o, "status": f"withdrawn: {why}"}
        ctx.res.edited([m.id])
        ctx.store.update(m)
        ctx.log(ctx.step, "downgrade", m.id, float("nan"), f"back on probation: {why}", m.bytes)
        done.append(m.id)
    return done


def release_peer(ctx: Context, peer: str, reason: str, *, reset: bool = False) -> None:
    """Lift the quarantine of ``peer`` (logged as ``release``); see
    :meth:`memcurator.trust.reputation.PeerReputation.release`.

    Raises
    ------
    InvalidInput
        The policy keeps no reputation, the peer is not quarantined, or no reason.
    """
    rep = reputation(ctx)
    if rep is None:
        raise InvalidInput(f"policy {ctx.policy.name!r} keeps no peer reputation")
    with ctx.transaction():
        rep.release(peer, reason, reset=reset)
        log_reputation(ctx)
        ctx.save_state()


class DemandSharing:
    """The demand-driven half of :class:`~memcurator.Memory`'s exchange (a mixin over the
    handle's context ``_ctx``): :meth:`covers`, :meth:`offer`, :meth:`fetch`."""

    _ctx: Context

    def covers(self, task: str, *, shape: bool = False) -> bool:
        """Whether an injectable entry of exactly ``task`` (with ``shape``: of its shape) is
        resident: :func:`covers`."""
        return covers(self._ctx, task, shape=shape)

    def offer(self, demand: Demand, **kw: Any) -> Offer | None:
        """What this memory would send for a peer's demand: :func:`offer`."""
        return offer(self._ctx, demand, **kw)

    def fetch(self, chosen: Offer, **kw: Any) -> SharedEntry | None:
        """The entry of an offer this memory made, signed and logged: :func:`fetch`."""
        return fetch(self._ctx, chosen, **kw)


__all__ = [
    "DemandSharing",
    "ShareOptions",
    "covers",
    "fetch",
    "log_reputation",
    "offer",
    "receive",
    "release_peer",
    "reputation",
    "share",
    "withdraw_releases",
]
