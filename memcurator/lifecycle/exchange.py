"""Share and receive: CURATOR's Share under an uplink budget, and Trust on what peers send.

References
----------
CURATOR, Alg. 1 lines 13-22 and Eq. 7-8.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from memcurator.errors import DimensionMismatch, InvalidInput
from memcurator.lifecycle.write import WriteResult, check_text
from memcurator.policy.share import ForgetNotice, SharedEntry, select_for_peer
from memcurator.policy.trust import RECEIVED_FROM
from memcurator.trust.auth import Claim
from memcurator.trust.reputation import PeerReputation, recompute_abstraction_gain

if TYPE_CHECKING:
    from memcurator.memory import Memory


def share(
    mem: Memory,
    peer_sketch: np.ndarray,
    uplink_bytes: int,
    *,
    tau: float,
    tau_rise: float,
    delta: float,
    sender: str | None = None,
    to: str = "",
    peer: str = "",
) -> list[SharedEntry | ForgetNotice]:
    """See :meth:`memcurator.Memory.share`."""
    if not mem.policy.can_share:
        raise InvalidInput(f"policy {mem.policy.name!r} cannot share; use a curator policy")
    sk = np.asarray(peer_sketch, dtype=np.float64)
    if sk.shape != (mem.embedder.dim,):
        raise DimensionMismatch(f"peer sketch has shape {sk.shape}, expected ({mem.embedder.dim},)")
    if not np.all(np.isfinite(sk)):
        raise InvalidInput("peer sketch contains NaN or infinite values")
    if not isinstance(peer, str):
        raise InvalidInput(f"peer must be a string, got {peer!r}")
    res = mem._res
    mem._sync()
    out: list[SharedEntry | ForgetNotice] = []
    notices = mem.store.pending_notices(mem.namespace, peer)
    if notices:
        with mem._transaction():
            for eid in notices:
                out.append(ForgetNotice(eid))
                mem.store.notice_sent(mem.namespace, eid, peer)
                mem._log(
                    mem.step, "notice", eid, float("nan"), f"forget notice to peer {peer!r}", 0
                )
    # personal data never leaves the memory
    rows = [i for i, m in enumerate(res.entries) if not m.meta.get("_personal")]
    if not rows:
        return out
    ents = [res.entries[i] for i in rows]
    mat = res.matrix[rows]
    t = mem.policy.share_terms(ents, mat, sk)
    chosen, _ = select_for_peer(
        ents,
        mat,
        t.rho,
        t.q,
        uplink_bytes=uplink_bytes,
        tau=tau,
        tau_rise=tau_rise,
        delta=delta,
    )
    ring = mem.keyring if sender else None
    with mem._transaction():
        for i, thr in chosen:
            m = ents[i]
            sig = None
            if ring is not None and sender:
                sig = ring.sign(Claim(to, "peer", sender, m.kind, m.text), principal=sender)
            out.append(
                SharedEntry(
                    m.text,
                    m.kind,
                    m.bytes,
                    float(t.q[i]),
                    float(t.a[i]),
                    float(t.rho[i]),
                    m.id,
                    signature=sig,
                )
            )
            mem._log(
                mem.step,
                "share",
                m.id,
                float(t.rho[i]),
                f"rho_s={t.rho[i]:.3g} > tau={thr:.3g}; q={t.q[i]:.3f}, a={t.a[i]:.2f}",
                m.bytes,
            )
            mem.store.mark_shared(mem.namespace, m.id, peer)
    return out


def reputation(mem: Memory) -> PeerReputation | None:
    """The policy's peer reputation (its ``reputation`` estimator), or None if it keeps none."""
    get = getattr(mem.policy, "estimator", None)
    if get is None:
        return None
    try:
        return get("reputation").rep  # type: ignore[no-any-return]
    except InvalidInput:
        return None


def receive(mem: Memory, shared: Iterable[Any], peer: str) -> list[WriteResult]:
    """See :meth:`memcurator.Memory.receive`.

    What a peer sends is :func:`share`'s output: ``SharedEntry`` and ``ForgetNotice`` objects; a
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
    - the trust gate refuses entries of a quarantined peer.

    The advertised numbers are kept in ``meta`` (``advertised_q``, ``advertised_a``).
    """
    rep = reputation(mem) or PeerReputation()
    out = []
    for s in shared:
        if not isinstance(peer, str) or not peer:
            raise InvalidInput("peer must be a non-empty string")
        if isinstance(s, ForgetNotice):
            mem._sync()
            for m in list(mem._res.entries):
                if m.meta.get(RECEIVED_FROM) == peer and m.meta.get("source_id") == s.source_id:
                    mem.forget(m.id, reason=f"forget notice from peer {peer!r} ({s.source_id})")
            continue
        a_adv = float(s.a)
        if not np.isfinite(a_adv) or a_adv < 1.0 or not np.isfinite(float(s.q)):
            raise InvalidInput(f"advertised q={s.q!r}, a={s.a!r} must be finite, a >= 1")
        text = check_text(s.text, mem.max_text_bytes)
        e_b = mem.entry_bytes(text, {}, mem.embedder.embed(text))
        a = recompute_abstraction_gain(text, getattr(s, "raw_text", None))
        q = rep.shrink_q(peer, float(np.clip(s.q, -1.0, 1.0)), 0.0)
        out.append(
            mem.write(
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
                signature=getattr(s, "signature", None) if mem.keyring is not None else None,
            )
        )
    return out


def log_reputation(mem: Memory) -> None:
    """Write new peer quarantines and releases to the decision log (entry id ``peer:<id>``)."""
    get = getattr(mem.policy, "estimator", None)
    if get is None:
        return
    try:
        est = get("reputation")
    except InvalidInput:
        return
    for peer, action, reason in est.rep.log[est.logged :]:
        mem._log(mem.step, action, f"peer:{peer}", float("nan"), reason, 0)
    est.logged = len(est.rep.log)


def release_peer(mem: Memory, peer: str, reason: str, *, reset: bool = False) -> None:
    """See :meth:`memcurator.Memory.release_peer`."""
    rep = reputation(mem)
    if rep is None:
        raise InvalidInput(f"policy {mem.policy.name!r} keeps no peer reputation")
    with mem._transaction():
        rep.release(peer, reason, reset=reset)
        log_reputation(mem)
        mem._save_state()


__all__ = ["log_reputation", "receive", "release_peer", "reputation", "share"]
