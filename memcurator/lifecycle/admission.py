"""The admission pipeline: the named steps every text offered to a memory passes, whether it
is a new entry (:func:`memcurator.lifecycle.write.write`, and :func:`.exchange.receive`, which
writes what a peer sent) or a new version of a resident entry
(:func:`memcurator.lifecycle.update.update`).

Steps, in order (:data:`STEPS`); each is a small function that gets only what it uses:

1. **provenance** (:func:`provenance`) — the declared sources (``derived_from``), the outside
   content the text copies from this handle's read window, and the standing of every entry it
   names as a source;
2. **signature** (:func:`check_signature`) — with a key ring, a ``self``/``peer`` claim needs a
   valid signature, else it is handled as ``external``;
3. **taint** (:func:`apply_taint`) — a claim more trusted than its sources is handled as the
   least trusted source;
4. **probation** (:func:`set_probation`) — an unproven origin is kept, not injected, until
   corroborated; an own record whose tool output instructs its reader is held;
5. **size** (:func:`oversize`) — an entry larger than the whole budget is refused;
6. **gate** — the policy's admission component (for a trust-gated policy, the domain and harm
   checks of :func:`memcurator.trust.gate.assess`), given the candidate with its trusted origin;
7. **outcome** (:func:`release_on_outcome`, received entries only) — a peer's entry admitted on
   probation with the sender's signed verified outcome (:mod:`memcurator.trust.outcome`) is
   released when the claim verifies, the content passes the gate's checks as if it were not on
   probation and the sender is in good standing with release credit left; a verified claim
   beyond the credit waits on probation until the receiver confirms earlier releases
   (:func:`release_waiting`); what cannot be proven stays on probation.

The state the steps pass along is one :class:`Admission`: the text, its claimed and trusted
origin, its metadata, its trust state (where taint and probation are recorded) and the
``downgrade`` reasons for the decision log. What differs between a new entry and a new
version is what the steps are told (``fresh``, the phrasing of a reason), never which steps
run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from memcurator.errors import BudgetExceeded, InvalidInput
from memcurator.lifecycle.context import Context
from memcurator.lifecycle.reads import observed_reason, observed_sources
from memcurator.trust import state
from memcurator.trust.auth import Claim, KeyRing, Signature
from memcurator.trust.domains import tool_output_instructions
from memcurator.trust.fingerprint import Match, ReadWindow
from memcurator.trust.outcome import OUTCOME, verify_outcome
from memcurator.trust.provenance import CHANNEL_ORDER, corroborate, entry_taint, taint_of
from memcurator.trust.state import (
    CLAIMED_ORIGIN,
    DERIVED_FROM,
    HELD_FOR,
    PROBATION,
    TAINT,
    VOUCHED,
)
from memcurator.types import TrustState

#: The steps in the order they run.
STEPS = ("provenance", "signature", "taint", "probation", "size", "gate", "outcome")


@dataclass
class Admission:
    """One text on its way through the pipeline.

    Attributes
    ----------
    text : str
    kind : str
    claimed : str
        The origin as claimed (a write) or as stored (an update).
    detail : str
        ``origin_detail``: the principal with ``claimed``.
    meta : dict
        The user's metadata the entry will be stored with.
    origin : str
        The trusted origin so far (an update starts from the least trusted of the stored
        origin and its taint).
    fresh : bool
        A new entry (True) or a new version of a resident one (False).
    proven : bool
        A key ring proved the claim and nothing downgraded it since.
    downgrades : list of str
        One ``downgrade`` decision-log reason per step that lowered the trust.
    note : str or None
        What the probation reason adds for the step that downgraded (None: none did).
    sources, observed : list of dict
        Declared sources (:func:`~memcurator.trust.provenance.parse_sources`) and the observed
        ones (``"via": "observed"``); ``match`` is the read-window match behind ``observed``.
    source_taints : dict of str to str
        The standing of each entry named as a source (entry id -> channel).
    trust : TrustState
        The entry's trust state (:mod:`memcurator.trust.state`); the steps record taint and
        probation here.
    """

    text: str
    kind: str
    claimed: str
    detail: str
    meta: dict[str, Any]
    origin: str
    fresh: bool
    proven: bool = False
    downgrades: list[str] = field(default_factory=list)
    note: str | None = None
    sources: list[dict[str, str]] = field(default_factory=list)
    observed: list[dict[str, str]] = field(default_factory=list)
    match: Match | None = None
    source_taints: dict[str, str] = field(default_factory=dict)
    trust: TrustState = field(default_factory=TrustState)

    def downgrade(self, origin: str, reason: str, note: str) -> None:
        """Handle the text as ``origin`` from now on, for ``reason`` (logged ``downgrade``)."""
        self.origin, self.proven, self.note = origin, False, note
        self.downgrades.append(reason)


# ------------------------------------------------------------------------------- provenance
def provenance(
    adm: Admission,
    reads: ReadWindow,
    user: str | None,
    resident: Any,
    known_ids: Any,
) -> None:
    """Step 1: fill ``adm.observed``/``adm.match`` from the read window (what the text copies of
    outside content this handle observed for ``user``) and ``adm.source_taints`` for the
    declared entry sources.

    ``resident.get(id)`` gives a resident entry; ``known_ids(ids)`` the ids of those ever in
    the namespace: one evicted or forgotten since it was read counts as outside (its standing is
    unknown now), while an id never seen here is the caller's error (raised by :func:`apply_taint`).
    """
    adm.observed, adm.match = observed_sources(reads, adm.text, user)
    taints = {
        s["id"]: entry_taint(state.of(e), e.origin)
        for s in adm.sources
        if s["kind"] == "entry" and (e := resident.get(s["id"])) is not None
    }
    gone = [s["id"] for s in adm.sources if s["kind"] == "entry" and s["id"] not in taints]
    if gone:
        known = known_ids(gone)
        taints.update({i: "external" for i in gone if i in known})
    adm.source_taints = taints


# -------------------------------------------------------------------------------- signature
def check_signature_type(ring: KeyRing | None, signature: Any) -> None:
    """Refuse a ``signature`` that is not a :class:`Signature`, or one given without a key ring.

    Raises
    ------
    InvalidInput
    """
    if signature is not None and not isinstance(signature, Signature):
        raise InvalidInput(
            f"signature must be a Signature (Memory.sign / KeyRing.sign), got "
            f"{type(signature).__name__}"
        )
    if ring is None and signature is not None:
        raise InvalidInput("a signature was given but this memory has no keyring to check it")


def verify_claim(ring: KeyRing | None, namespace: str, adm: Admission, signature: Any) -> str:
    """Why the key ring refuses ``adm``'s claim under ``signature`` (empty: proven, or no key
    ring to ask). A claim is :class:`~memcurator.trust.auth.Claim` ``(namespace, origin,
    origin_detail, kind, text)``.

    Raises
    ------
    InvalidInput
        See :func:`check_signature_type`.
    """
    check_signature_type(ring, signature)
    if ring is None:
        return ""
    v = ring.verify(Claim(namespace, adm.claimed, adm.detail, adm.kind, adm.text), signature)
    return v.reason if v.downgraded else ""


def check_signature(adm: Admission, ring: KeyRing | None, namespace: str, signature: Any) -> None:
    """Step 2: with a key ring, a ``self``/``peer`` claim not already tainted needs a valid
    signature; without one it is handled as ``external`` (the claim kept as
    ``trust["claimed_origin"]``). Sets ``adm.proven`` when the ring proved it.

    Raises
    ------
    InvalidInput
        See :func:`check_signature_type`.
    """
    down = verify_claim(ring, namespace, adm, signature)
    if down and adm.origin in ("self", "peer") and TAINT not in adm.trust:
        if adm.fresh:
            adm.trust[CLAIMED_ORIGIN] = adm.claimed
            adm.downgrade("external", down, "")
        else:
            adm.trust.setdefault(CLAIMED_ORIGIN, adm.claimed)
            adm.trust[TAINT] = "external"
            adm.downgrade(
                "external",
                f"update: {down}; {adm.origin} entry handled as external",
                " (unsigned update)",
            )
    adm.proven = ring is not None and not adm.downgrades and adm.origin in ("self", "peer")


# ------------------------------------------------------------------------------------ taint
def apply_taint(adm: Admission) -> None:
    """Step 3: record what the content was derived from (``trust["_derived_from"]``, the
    observed sources marked ``"via": "observed"``) and handle a claim more trusted than its
    least trusted source as that source (``trust["_taint"]``).

    A new entry records the taint of its sources whenever it is not ``self``; a new version
    records it only when it lowers the entry's standing (its earlier taint stays).

    Raises
    ------
    InvalidInput
        An ``entry:<id>`` source that was never an entry of this namespace.
    """
    new = adm.sources + adm.observed
    if not new:
        return
    if adm.fresh:
        adm.trust[DERIVED_FROM] = new
    else:
        have = list(adm.trust.get(DERIVED_FROM, []))
        adm.trust[DERIVED_FROM] = have + [s for s in new if s not in have]
    taint = taint_of(new, adm.source_taints)
    if adm.fresh and taint != "self":
        adm.trust[TAINT] = taint
    if CHANNEL_ORDER.index(taint) <= CHANNEL_ORDER.index(adm.origin):
        return
    adm.trust[TAINT] = taint
    adm.trust.setdefault(CLAIMED_ORIGIN, adm.claimed)
    adm.downgrade(taint, _taint_reason(adm, taint), " (tainted)")


def _taint_reason(adm: Admission, taint: str) -> str:
    if not adm.fresh:
        said = observed_reason(adm.match) if adm.match is not None else ""
        return f"taint: update {said}; {adm.origin} entry handled as {taint}"
    why = []
    if adm.sources:
        names = ", ".join(f"{s['kind']}:{s['id']}" if s["id"] else s["kind"] for s in adm.sources)
        why.append(f"{adm.origin} claim for content derived from {names}")
    if adm.match is not None:
        why.append(observed_reason(adm.match))
    claim = "" if adm.sources else f"{adm.origin} claim "
    return "taint: " + "; ".join(why) + f"; {claim}handled as {taint}"


# -------------------------------------------------------------------------------- probation
def set_probation(adm: Admission, probation: bool) -> bool:
    """Step 4, under a policy with probation (``probation``): put an unproven entry on
    probation (a new entry whose trusted origin is not ``self``, or a version a step just
    downgraded), vouched by its principal when a key ring proved it; hold an own record whose
    tool output instructs its reader (:func:`hold_tool_output`). Whether it is on probation
    now because of this step."""
    if not probation:
        return False
    if adm.origin != "self" and (adm.fresh or adm.note is not None):
        adm.trust[PROBATION] = f"origin {adm.origin}{adm.note or ''}"
        if adm.proven:
            adm.trust[VOUCHED] = [f"{adm.origin}:{adm.detail}"]
        return True
    if adm.origin == "self" and PROBATION not in adm.trust:
        return hold_tool_output(adm.trust, adm.origin, adm.text)
    return False


def hold_tool_output(trust: TrustState, origin: str, text: str) -> bool:
    """Put an own record whose tool output carries an instruction on probation (mutating its
    ``trust`` state); whether it did. Outside content inside the record, held for what it says
    (``trust["_held_for"]``), so only a verified outcome releases it, not more writers."""
    said = tool_output_instructions(text)
    if said:
        trust[PROBATION] = f"origin {origin}, its tool output instructs: {said[0]}"[:300]
        trust[HELD_FOR] = "tool output instruction"
    return bool(said)


# ---------------------------------------------------------------------------------- outcome
def release_on_outcome(
    meta: TrustState,
    text: str,
    signed: Any,
    *,
    ring: KeyRing | None,
    namespace: str,
    peer: str,
    standing: Any,
    strict: Any,
    step: int,
) -> tuple[bool, str]:
    """Step 7, for an entry received from ``peer`` and admitted: release it off probation on
    the sender's signed outcome claim ``signed`` (mutating ``meta``). Whether it released it,
    and the reason for the decision log ('' when there was no claim).

    The claim is kept as ``meta["_outcome"]`` (:data:`memcurator.trust.outcome.OUTCOME`) with
    the peer and ``status``: ``"released"``, ``"held: <reason>"`` (the claim or the content
    fails: it never releases) or ``"waiting: <reason>"`` (claim and content pass, the peer may
    not release now: :func:`release_waiting` releases it once it may). It releases only when
    every test passes, in this order:

    - the entry is on probation (else nothing is done), and not held for what it says
      (``_held_for``);
    - :func:`memcurator.trust.outcome.verify_outcome`: signed by ``peer`` for ``namespace``,
      about exactly ``text``, verdict ``pass``, its action in the text;
    - ``strict(text)`` gives '' (the content passes the gate as an entry *not* on probation: a
      plain instruction the gate waives for a contained entry is not released by a claim);
    - ``standing(peer)`` gives '' (good standing and release credit left:
      :meth:`memcurator.trust.reputation.PeerReputation.may_release`).

    Examples
    --------
    >>> meta = TrustState(probation="origin peer")
    >>> release_on_outcome(meta, "x", None, ring=None, namespace="n", peer="p",
    ...                    standing=lambda p: "", strict=lambda t: "", step=0)
    (False, '')
    """
    if signed is None or PROBATION not in meta:  # nothing to release
        return False, ""
    wait = ""
    if HELD_FOR in meta:
        why = f"held for what it says ({meta[HELD_FOR]}), only a local verified outcome releases it"
    else:
        why = verify_outcome(ring, signed, namespace=namespace, peer=peer, text=text) or strict(
            text
        )
        wait = "" if why else standing(peer)
    claim: dict[str, Any] = getattr(getattr(signed, "claim", None), "to_dict", dict)()
    status = f"held: {why}" if why else f"waiting: {wait}" if wait else "released"
    meta[OUTCOME] = {**claim, "peer": peer, "status": status}
    if why or wait:
        return (
            False,
            f"signed outcome of peer {peer!r} not accepted: {why or wait}; kept on probation",
        )
    return True, _release(meta, signed.claim.to_dict(), peer, step)


def _release(meta: TrustState, c: dict[str, Any], peer: str, step: int) -> str:
    corroborate(meta, f"signed outcome of peer {peer} (task {c['task']}) at step {step}")
    meta[OUTCOME] = {**meta.get(OUTCOME, {}), "status": "released"}
    return (
        f"off probation: signed outcome of peer {peer!r} (task {c['task']!r}, verdict "
        f"{c['verdict']}, state {str(c['state_hash'])[:12]}), peer in good standing"
    )


def waiting_on_claim(meta: Any) -> bool:
    """Whether an entry waits on probation for its verified claim's peer to be allowed to
    release it (status ``"waiting: ..."``, :func:`release_on_outcome`)."""
    o = meta.get(OUTCOME) if hasattr(meta, "get") else None
    return (
        isinstance(o, dict)
        and str(o.get("status", "")).startswith("waiting")
        and (PROBATION in meta)
    )


def release_waiting(entries: Any, rep: Any, step: int) -> list[tuple[Any, str]]:
    """Release, in order, the ``entries`` waiting on their verified claim
    (:func:`waiting_on_claim`) whose peer ``rep.may_release`` now (good standing, release
    credit: :meth:`memcurator.trust.reputation.PeerReputation.may_release`), counting each as
    released (``rep.note_release``). Mutates their trust state; returns ``(entry, reason)``
    for each released one (the caller stores and logs them). Claim and content were checked
    when the entry arrived.
    """
    done = []
    for m in entries:
        if not waiting_on_claim(m.trust):
            continue
        o = m.trust[OUTCOME]
        peer = str(o.get("peer", ""))
        if not peer or rep.may_release(peer):
            continue
        why = _release(m.trust, o, peer, step)
        rep.note_release(peer, m.id)
        done.append((m, why.replace("off probation:", "off probation (credit freed):", 1)))
    return done


# ------------------------------------------------------------------------------------- size
def oversize(
    log: Any, step: int, eid: str, nbytes: int, max_bytes: int | None, reason: str, message: str
) -> BudgetExceeded | None:
    """Step 5: an entry of ``nbytes`` that can never fit ``max_bytes`` (None: unbounded) is
    refused: its ``reject`` row (``reason``) is logged and the error to raise once the
    transaction committed is returned (raised inside it, the row would roll back with
    everything else); None when it fits. ``reason`` and ``message`` may use ``{b}`` (the
    entry's bytes) and ``{max_bytes}``.

    Examples
    --------
    >>> rows = []
    >>> def log(*row): rows.append(row)
    >>> oversize(log, 0, "e1", 10, 10, "", "") is None
    True
    >>> err = oversize(log, 0, "e1", 11, 10, "{b} > {max_bytes}", "never fits {max_bytes}")
    >>> str(err), rows[0][1], rows[0][4]
    ('never fits 10', 'reject', '11 > 10')
    """
    if max_bytes is None or nbytes <= max_bytes:
        return None
    log(step, "reject", eid, float("nan"), reason.format(b=nbytes, max_bytes=max_bytes), nbytes)
    return BudgetExceeded(message.format(b=nbytes, max_bytes=max_bytes))


def screen(ctx: Context, adm: Admission, signature: Any, user: str | None) -> None:
    """Steps 1-3 (provenance, signature, taint) on ``ctx``'s namespace, inside its transaction.

    Raises
    ------
    InvalidInput
        A bad signature, or an ``entry:<id>`` source that was never an entry here.
    """
    provenance(adm, ctx.reads, user, ctx.res, lambda ids: ctx.store.known_ids(ctx.namespace, ids))
    check_signature(adm, ctx.keyring, ctx.namespace, signature)
    apply_taint(adm)


def log_downgrades(log: Any, step: int, eid: str, nbytes: int, adm: Admission) -> None:
    """One ``downgrade`` row per step that lowered ``adm``'s trust, in step order."""
    for why in adm.downgrades:
        log(step, "downgrade", eid, float("nan"), why, nbytes)


__all__ = [
    "STEPS",
    "Admission",
    "apply_taint",
    "check_signature",
    "check_signature_type",
    "hold_tool_output",
    "log_downgrades",
    "oversize",
    "provenance",
    "release_on_outcome",
    "release_waiting",
    "screen",
    "set_probation",
    "verify_claim",
    "waiting_on_claim",
]
