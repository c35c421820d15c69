"""CURATOR's Share: which resident insights to send a peer under an uplink budget.

References
----------
CURATOR, Alg. 1 lines 13-17 and Eq. 7-8: ρ_s(m) = (V̂_p(m) − λĤ(m))/b(m) > τ, with the
propensity re-projected on the peer's advertised query sketch q̄_p; a redundancy test drops an
entry whose cosine with one already selected is ≥ δ; τ rises as the uplink budget L is used up.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from memcurator.errors import InvalidInput
from memcurator.policy.components import Component
from memcurator.types import Entry


@dataclass(frozen=True)
class ForgetNotice:
    """What crosses the link when the sender forgot an entry it had shared: the receiver
    forgets its copy (the one it received from this peer with this ``source_id``).

    Attributes
    ----------
    source_id : str
        The entry id at the sender (receivers keep it as ``meta["source_id"]``).
    """

    source_id: str

    @property
    def bytes(self) -> int:
        """Uplink cost: the id's UTF-8 bytes."""
        return len(self.source_id.encode("utf-8"))


@dataclass(frozen=True)
class SharedEntry:
    """What crosses the link for one shared entry.

    Attributes
    ----------
    text : str
    kind : str
    bytes : int
        Uplink cost: the entry's stored bytes b(m).
    q : float
        The sender's helpfulness q(m), advertised (Eq. 8: transfers unchanged).
    a : float
        The sender's abstraction gain a(m) = b⁰/b, advertised.
    rho_s : float
        The share score that selected it (per byte).
    source_id : str
        The entry id at the sender; the receiver keeps it (``meta["source_id"]``) so that a
        later :class:`ForgetNotice` reaches the copy.
    signature : Signature or None, default None
        The sender's MAC over ``Claim(receiver namespace, "peer", sender, kind, text)``
        (:mod:`memcurator.trust.auth`); the receiver verifies it.
    raw_text : str or None, default None
        The raw trajectory the entry was distilled from, when sent: the receiver recomputes
        ``a`` from it (:func:`memcurator.trust.reputation.recompute_abstraction_gain`).
    outcome : SignedOutcome or None, default None
        The sender's verified outcome for this entry, signed for the receiver
        (:class:`memcurator.trust.outcome.SignedOutcome`): evidence that can release it off
        probation at the receiver while the sender is in good standing.
    """

    text: str
    kind: str
    bytes: int
    q: float
    a: float
    rho_s: float
    source_id: str
    signature: Any = None
    raw_text: str | None = None
    outcome: Any = None


def select_for_peer(
    entries: list[Entry],
    E: np.ndarray,
    rho_s: np.ndarray,
    q: np.ndarray,
    *,
    uplink_bytes: int,
    tau: float = 0.0,
    tau_rise: float = 5e-5,
    delta: float = 0.9,
) -> tuple[list[tuple[int, float]], list[tuple[int, str]]]:
    """Greedy share selection (Alg. 1 lines 13-17).

    Parameters
    ----------
    entries : list of Entry, length n
    E : ndarray of shape (n, d)
        Their unit embeddings.
    rho_s : ndarray of shape (n,)
        Share scores (value per byte) against the peer's sketch.
    q : ndarray of shape (n,)
        Helpfulness to advertise.
    uplink_bytes : int
        Budget L, bytes, for this sharing round.
    tau : float, default 0.0
        Base share threshold τ, value per byte.
    tau_rise : float, default 5e-5
        τ grows linearly with the used fraction of L: τ(u) = τ + tau_rise · u / L, so the last
        bytes of the link go only to clearly valuable entries. 5e-5 is the density of an entry of
        net value 0.125 at 2.5 KB (our reading: the paper says only that τ rises).
    delta : float, default 0.9
        Redundancy threshold δ on cosine with an already selected entry.

    Returns
    -------
    chosen : list of (index, threshold at selection)
    skipped : list of (index, reason) for entries that cleared neither test

    Raises
    ------
    InvalidInput
        Negative ``uplink_bytes``, or a NaN score.
    """
    if uplink_bytes < 0:
        raise InvalidInput(f"uplink_bytes must be >= 0, got {uplink_bytes}")
    if not np.all(np.isfinite(rho_s)):
        raise InvalidInput("share scores contain NaN or infinite values")
    order = np.argsort(-rho_s, kind="stable")
    used = 0
    chosen: list[tuple[int, float]] = []
    skipped: list[tuple[int, str]] = []
    for i in order:
        i = int(i)
        thr = tau + tau_rise * (used / uplink_bytes if uplink_bytes else 1.0)
        m = entries[i]
        if rho_s[i] <= thr:
            skipped.append((i, f"rho_s={rho_s[i]:.3g} <= tau={thr:.3g}"))
            continue
        if used + m.bytes > uplink_bytes:
            skipped.append((i, f"{m.bytes} bytes do not fit the {uplink_bytes - used} left"))
            continue
        if chosen:
            sims = E[[c for c, _ in chosen]] @ E[i]
            j = int(np.argmax(sims))
            if sims[j] >= delta:
                skipped.append(
                    (i, f"redundant with {entries[chosen[j][0]].id} (cos={sims[j]:.3f})")
                )
                continue
        chosen.append((i, thr))
        used += m.bytes
    return chosen, skipped


class RhoShare(Component):
    """CURATOR's Share component: the advertised sketch q̄ and ρ_s against a peer's (Eq. 7-8).

    Examples
    --------
    >>> RhoShare.needs
    ('rho',)
    """

    decision = "share"
    needs = ("rho",)

    @property
    def sketch(self) -> np.ndarray:
        """The running query sketch q̄, shape (d,)."""
        return np.asarray(self._est["rho"].scorer.sketch)

    def share_terms(self, entries: list[Entry], E: np.ndarray, sketch: np.ndarray) -> Any:
        """ρ's terms of ``entries`` with propensity against the peer's ``sketch`` (Eq. 8)."""
        return self._est["rho"].terms(entries, E, sketch=sketch)
