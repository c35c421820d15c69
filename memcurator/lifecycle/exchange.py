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
    with mem._transaction():
        for i, thr in chosen:
            m = ents[i]
            out.append(
                SharedEntry(
                    m.text, m.kind, m.bytes, float(t.q[i]), float(t.a[i]), float(t.rho[i]), m.id
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


def receive(mem: Memory, shared: Iterable[Any], peer: str) -> list[WriteResult]:
    # what a peer sends is ``share``'s output: SharedEntry objects and ForgetNotice objects
    """See :meth:`memcurator.Memory.receive`."""
    out = []
    for s in shared:
        if not isinstance(peer, str) or not peer:
            raise InvalidInput("peer must be a non-empty string")
        if isinstance(s, ForgetNotice):
            mem._sync()
            for m in list(mem._res.entries):
                if m.meta.get("received_from") == peer and m.meta.get("source_id") == s.source_id:
                    mem.forget(m.id, reason=f"forget notice from peer {peer!r} ({s.source_id})")
            continue
        a = float(s.a)
        if not np.isfinite(a) or a < 1.0 or not np.isfinite(float(s.q)):
            raise InvalidInput(f"advertised q={s.q!r}, a={s.a!r} must be finite, a >= 1")
        text = check_text(s.text, mem.max_text_bytes)
        e_b = int(mem.sizeof(text, {}, mem.embedder.embed(text)))
        out.append(
            mem.write(
                text,
                origin="peer",
                kind=s.kind,
                origin_detail=peer,
                raw_bytes=int(round(a * e_b)),
                stats={"q_adv": float(np.clip(s.q, -1.0, 1.0))},
                meta={"received_from": peer, "source_id": str(s.source_id)},
            )
        )
    return out


__all__ = ["receive", "share"]
