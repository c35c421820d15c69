"""Evidence that travels: a peer's verified outcome, signed, carried with the entry it shares.

A peer's entry arrives on probation (:mod:`memcurator.trust.provenance`): the receiver has no
evidence that it works. The sender often has: it ran the task, a checker executed its action
and gave a verdict. An :class:`OutcomeClaim` says so — the task, the action that was checked,
the check's verdict and a hash of the state the check saw — and names the entry it is about by
the SHA-256 of its text. The sender signs it under its link key for the receiving namespace
(the same HMAC key ring as the entry's own signature, :mod:`memcurator.trust.auth`; the claim
is serialised as the text of an auth :class:`~memcurator.trust.auth.Claim` of kind
``"outcome"``, so an outcome MAC can never pass for an entry MAC).

A verified claim is evidence of what the *sender* saw, not proof that the entry works here: the
receiver releases the entry off probation only while the sender is in good standing
(:meth:`memcurator.trust.reputation.PeerReputation.good_standing`), and the outcomes of the
entries it released that way feed the sender's standing, so a peer that signs false outcomes
loses the right to release anything after a few failures (the admission step
:func:`memcurator.lifecycle.admission.release_on_outcome`).

Meta key: ``_outcome`` (:data:`OUTCOME`) holds the claim as received, the sending peer and
what the receiver made of it (``status``: ``"released"`` or ``"held: <reason>"``).

References
----------
CURATOR, Sec. III-C/D (Trust on what peers send; here the sender's verified outcome travels as
signed evidence and its reputation answers for it).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from typing import Any

from memcurator.errors import InvalidInput
from memcurator.trust.auth import Claim, KeyRing, Signature

#: meta key of the outcome claim an entry arrived with (internal trust state)
OUTCOME = "_outcome"
#: the auth claim kind an outcome is signed under (never an entry kind)
OUTCOME_KIND = "outcome"
#: verdicts a claim may carry; only ``"pass"`` can release an entry
VERDICTS = ("pass", "fail")


def text_sha(text: str) -> str:
    """Hex SHA-256 of ``text``'s UTF-8 bytes: how a claim names the entry it is about.

    Examples
    --------
    >>> text_sha("abc")[:16]
    'ba7816bf8f01cfea'
    """
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def state_hash(*parts: Any) -> str:
    """Hex SHA-256 of the JSON of ``parts``: a digest of the state a check saw (result rows, a
    table hash), sent instead of the state itself.

    Examples
    --------
    >>> state_hash([[1, "a"]]) == state_hash([[1, "a"]]), state_hash(1) == state_hash(2)
    (True, False)
    """
    doc = json.dumps(list(parts), sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(doc.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class OutcomeClaim:
    """What a sender says it verified about one entry.

    Parameters
    ----------
    task : str
        The task it ran (an id or its instruction).
    action : str
        The action the checker executed (e.g. the SQL); must occur in the entry's text.
    verdict : {"pass", "fail"}
        The check's verdict.
    state_hash : str
        Digest of the state the check saw (:func:`state_hash`).
    entry_sha : str
        :func:`text_sha` of the entry the claim is about.

    Raises
    ------
    InvalidInput
        A field that is not a string, an empty task or action, an unknown verdict.

    Examples
    --------
    >>> c = OutcomeClaim("t1", "SELECT 1;", "pass", state_hash([[1]]), text_sha("x"))
    >>> OutcomeClaim.from_dict(c.to_dict()) == c
    True
    """

    task: str
    action: str
    verdict: str
    state_hash: str
    entry_sha: str

    def __post_init__(self) -> None:
        for name in ("task", "action", "verdict", "state_hash", "entry_sha"):
            if not isinstance(getattr(self, name), str):
                raise InvalidInput(f"outcome claim {name} must be a str")
        if not self.task or not self.action.strip():
            raise InvalidInput("an outcome claim needs a task and an action")
        if self.verdict not in VERDICTS:
            raise InvalidInput(f"verdict must be one of {VERDICTS}, got {self.verdict!r}")

    def to_dict(self) -> dict[str, str]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Any) -> OutcomeClaim:
        """The claim of :meth:`to_dict`'s dict.

        Raises
        ------
        InvalidInput
            Not a dict with exactly the claim's fields.
        """
        keys = ("task", "action", "verdict", "state_hash", "entry_sha")
        if not isinstance(d, dict) or set(d) != set(keys):
            raise InvalidInput(f"an outcome claim is a dict with the keys {list(keys)}")
        return cls(*(d[k] for k in keys))

    def canonical(self) -> str:
        """The claim as the sorted-key JSON text the signature covers."""
        return json.dumps(self.to_dict(), sort_keys=True, ensure_ascii=True, separators=(",", ":"))


@dataclass(frozen=True)
class SignedOutcome:
    """An :class:`OutcomeClaim` and the sender's MAC over it (for one receiving namespace)."""

    claim: OutcomeClaim
    signature: Signature

    def to_wire(self) -> dict[str, Any]:
        """Plain data for a JSON frame."""
        return {
            "claim": self.claim.to_dict(),
            "signature": [self.signature.key_id, self.signature.mac],
        }

    @classmethod
    def from_wire(cls, d: Any) -> SignedOutcome:
        """The signed claim of :meth:`to_wire`'s dict.

        Raises
        ------
        InvalidInput
            Not :meth:`to_wire`'s shape.
        """
        if not isinstance(d, dict) or not isinstance(d.get("signature"), list | tuple):
            raise InvalidInput("a signed outcome is {'claim': {...}, 'signature': [key_id, mac]}")
        sig = d["signature"]
        if len(sig) != 2 or not all(isinstance(x, str) for x in sig):
            raise InvalidInput("an outcome signature is [key_id, mac]")
        return cls(OutcomeClaim.from_dict(d.get("claim")), Signature(sig[0], sig[1]))


def _auth_claim(claim: OutcomeClaim, namespace: str, sender: str) -> Claim:
    return Claim(namespace, "peer", sender, OUTCOME_KIND, claim.canonical())


def sign_outcome(ring: KeyRing, claim: OutcomeClaim, *, to: str, sender: str) -> SignedOutcome:
    """Sign ``claim`` as ``sender`` for the receiving namespace ``to``.

    Raises
    ------
    InvalidInput
        ``sender`` has no live key in ``ring``.

    Examples
    --------
    >>> ring = KeyRing(); _ = ring.add("p1", secret=b"s" * 32)
    >>> c = OutcomeClaim("t1", "SELECT 1;", "pass", "h", text_sha("Action: SELECT 1;"))
    >>> so = sign_outcome(ring, c, to="agent-b", sender="p1")
    >>> verify_outcome(ring, so, namespace="agent-b", peer="p1", text="Action: SELECT 1;")
    ''
    >>> verify_outcome(ring, so, namespace="agent-c", peer="p1", text="Action: SELECT 1;")[:24]
    'outcome claim not proven'
    """
    return SignedOutcome(claim, ring.sign(_auth_claim(claim, to, sender), principal=sender))


def _norm(s: str) -> str:
    return " ".join(s.split())


def verify_outcome(
    ring: KeyRing | None, signed: Any, *, namespace: str, peer: str, text: str
) -> str:
    """Why ``signed`` is no evidence for the entry ``text`` received from ``peer`` ('' when it
    is: signed by ``peer`` for ``namespace``, about exactly this text, a passing verdict, and
    its action occurs in the text).

    Parameters
    ----------
    ring : KeyRing or None
        The receiver's key ring (None: nothing can be proven).
    signed : SignedOutcome
    namespace, peer : str
        The receiving namespace and the sending peer.
    text : str
        The entry as received.

    Returns
    -------
    str
        The reason, for the decision log; empty when the claim is evidence.
    """
    if ring is None:
        return "no key ring to verify an outcome claim"
    if not isinstance(signed, SignedOutcome):
        return f"not a signed outcome claim ({type(signed).__name__})"
    c = signed.claim
    v = ring.verify(_auth_claim(c, namespace, peer), signed.signature)
    if v.downgraded:
        return f"outcome claim not proven: {v.reason}"
    if c.entry_sha != text_sha(text):
        return "outcome claim is about another text (entry hash differs)"
    if c.verdict != "pass":
        return f"outcome claim verdict {c.verdict!r}"
    if _norm(c.action) not in _norm(text):
        return "the claim's checked action is not in the entry"
    return ""


def released_on_claim(meta: Any) -> bool:
    """Whether an entry's meta says it was released off probation on a peer's outcome claim.

    Examples
    --------
    >>> released_on_claim({OUTCOME: {"status": "released"}}), released_on_claim({})
    (True, False)
    """
    o = meta.get(OUTCOME) if hasattr(meta, "get") else None
    return isinstance(o, dict) and o.get("status") == "released"


__all__ = [
    "OUTCOME",
    "OUTCOME_KIND",
    "VERDICTS",
    "released_on_claim",
    "OutcomeClaim",
    "SignedOutcome",
    "sign_outcome",
    "state_hash",
    "text_sha",
    "verify_outcome",
]
