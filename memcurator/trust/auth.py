"""Authenticated provenance: an entry's origin is a claim until a key proves it.

CURATOR (Sec. III-C, Eq. 4) reads the origin tag of an entry (self, peer, external) as a fact; an
attacker who controls that field ("forged self", Sec. V-C) or plants memories through queries
recovers most of the attack. Here an origin is a *claim*: ``origin="self"`` must carry a MAC under
a key of the store's owner, ``origin="peer"`` a MAC under a key of the named peer. A claim that is
unsigned, signed with an unknown or revoked key, signed by someone other than the principal it
names, or whose MAC does not match its bytes is handled as ``"external"`` and the memory logs why
(:attr:`Verification.reason`).

Why HMAC-SHA256 (stdlib :mod:`hmac`) and not Ed25519
-----------------------------------------------------
- The owner is both the signer and the only verifier of ``self`` entries: a symmetric key is the
  natural fit, and no new dependency is needed (``cryptography`` is not installed here).
- For peers each *link* has its own 32-byte secret, shared by exactly two parties. A receiver can
  therefore forge "peer P said X" only towards itself, which gains it nothing. What HMAC cannot
  give is *transferable* proof: an entry forwarded over two hops carries only the last sender's
  MAC. We do not forward signatures (a re-shared entry is signed by the forwarder, whose
  reputation then answers for it), so Ed25519's public verifiability buys nothing yet. If entries
  must one day be verified by parties that do not share a secret with their author, switch
  :func:`_mac` to Ed25519; the :class:`Claim` serialisation does not change.

Key set-up
----------
>>> ring = KeyRing()
>>> owner = ring.add(OWNER)                    # the store owner's signing key (random, 32 bytes)
>>> p1 = ring.add("p1", secret=b"k" * 32)      # the secret agreed with peer p1 out of band
>>> c = Claim("agent-a", "self", "expert", "insight", "Task: t\\nAction: SELECT 1;")
>>> ring.verify(c, ring.sign(c)).status
'valid'

Rotation: :meth:`KeyRing.rotate` adds a new key for the principal and makes it the signing key;
old keys keep verifying the entries they signed until they are revoked.

>>> sig_old = ring.sign(c)
>>> new = ring.rotate(OWNER)
>>> ring.sign(c).key_id == new, ring.verify(c, sig_old).status
(True, 'valid')

Revocation: :meth:`KeyRing.revoke` marks a key revoked (with the reason); every claim it signed
then verifies as ``"revoked_key"`` and is downgraded to external. A principal whose only key is
revoked cannot sign until it gets a new one (:meth:`KeyRing.add` or :meth:`KeyRing.rotate`).

>>> ring.revoke(sig_old.key_id, "laptop lost")
>>> v = ring.verify(c, sig_old)
>>> v.status, v.trusted_origin
('revoked_key', 'external')

Keys hold secrets: :meth:`KeyRing.save` writes them to a file readable by its owner only (mode
0600); keep that file out of the store and out of any shared folder.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from memcurator.errors import InvalidInput

#: the principal name of the store's owner; peers are named by their peer id
OWNER = "self"
#: version tag of the canonical claim serialisation (changes invalidate every old MAC)
CLAIM_VERSION = "memcurator-claim-v1"
_MIN_SECRET = 16

Status = Literal[
    "valid",
    "external",
    "unsigned",
    "unknown_key",
    "revoked_key",
    "wrong_principal",
    "bad_signature",
]


@dataclass(frozen=True)
class Claim:
    """The fields of an entry whose provenance a signature covers.

    Parameters
    ----------
    namespace : str
        Store namespace the entry is written to (a MAC for one namespace is void in another).
    origin : {"self", "peer", "external"}
    origin_detail : str
        Peer id for ``origin="peer"``; free (tool, ``"expert"``) otherwise.
    kind : str
        ``"raw"``, ``"insight"`` or ``"skill"``.
    text : str
        The entry text, byte for byte.
    """

    namespace: str
    origin: str
    origin_detail: str
    kind: str
    text: str

    def principal(self) -> str | None:
        """Who must have signed this claim: :data:`OWNER`, the peer id, or None (external)."""
        if self.origin == "self":
            return OWNER
        if self.origin == "peer":
            return self.origin_detail
        return None


@dataclass(frozen=True)
class Signature:
    """A MAC over a claim: ``mac`` is hex HMAC-SHA256 under key ``key_id``."""

    key_id: str
    mac: str


@dataclass(frozen=True)
class Verification:
    """Outcome of checking a claim.

    Attributes
    ----------
    status : str
        ``"valid"``, ``"external"`` (nothing claimed), ``"unsigned"``, ``"unknown_key"``,
        ``"revoked_key"``, ``"wrong_principal"`` or ``"bad_signature"``.
    trusted_origin : str
        The origin the memory may act on: the claimed one when valid, else ``"external"``.
    principal : str or None
        Key holder that signed (when the key is known).
    key_id : str or None
    reason : str
        One line for the decision log.
    """

    status: str
    trusted_origin: str
    principal: str | None
    key_id: str | None
    reason: str

    @property
    def ok(self) -> bool:
        """True when the claimed origin is proven (or nothing beyond external was claimed)."""
        return self.status in ("valid", "external")

    @property
    def downgraded(self) -> bool:
        """True when a self/peer claim failed and the entry is to be handled as external."""
        return not self.ok


@dataclass
class _Key:
    key_id: str
    principal: str
    secret: bytes
    seq: int
    revoked: str | None = None  # revocation reason


def canonical_bytes(claim: Claim, key_id: str) -> bytes:
    """The exact bytes a MAC covers: sorted-key JSON of the claim, the key id and a version.

    JSON with escaped strings gives an unambiguous encoding (no field can run into the next),
    so ``("a", "bc")`` and ``("ab", "c")`` never serialise alike.

    Examples
    --------
    >>> canonical_bytes(Claim("n", "self", "", "insight", "x"), "k1")[:44]
    b'{"key_id":"k1","kind":"insight","namespace":'
    """
    for name in ("namespace", "origin", "origin_detail", "kind", "text"):
        if not isinstance(getattr(claim, name), str):
            raise InvalidInput(f"claim.{name} must be a str, got {type(getattr(claim, name))}")
    doc = {
        "v": CLAIM_VERSION,
        "namespace": claim.namespace,
        "origin": claim.origin,
        "origin_detail": claim.origin_detail,
        "kind": claim.kind,
        "text": claim.text,
        "key_id": key_id,
    }
    return json.dumps(doc, sort_keys=True, ensure_ascii=True, separators=(",", ":")).encode()


def _mac(secret: bytes, data: bytes) -> str:
    return hmac.new(secret, data, hashlib.sha256).hexdigest()


class KeyRing:
    """Keys of the store owner and of each peer, with ids, rotation and revocation.

    Parameters
    ----------
    token_bytes : callable, default :func:`secrets.token_bytes`
        Source of fresh secrets (a CSPRNG; tests may pass a deterministic one).

    Notes
    -----
    Each principal has one *signing* key (the newest unrevoked one) and any number of verifying
    keys. Key ids are ``"<principal>#<n>"`` unless given.

    One ring may be shared by handles in several threads (a service signs for every tenant):
    adding, rotating and revoking keys take turns under the ring's lock, and signing, listing
    and saving read a snapshot of the keys, so a key added in one thread never breaks a
    signature made in another (issue 32, item 2).

    Examples
    --------
    >>> ring = KeyRing()
    >>> kid = ring.add("p2", secret=bytes(32))
    >>> ring.signing_key("p2") == kid, ring.principals()
    (True, ['p2'])
    """

    def __init__(self, token_bytes: Callable[[int], bytes] = secrets.token_bytes):
        self.token_bytes = token_bytes
        self._keys: dict[str, _Key] = {}
        self._seq = 0
        self._lock = threading.RLock()

    def _all(self) -> list[_Key]:
        """A snapshot of the keys (another thread may add one while the caller reads)."""
        with self._lock:
            return list(self._keys.values())

    # ---------------------------------------------------------------- key management
    def add(self, principal: str, secret: bytes | None = None, key_id: str | None = None) -> str:
        """Add a key for ``principal`` and make it its signing key.

        Parameters
        ----------
        principal : str
            :data:`OWNER` for the store owner, else a peer id.
        secret : bytes, optional
            At least 16 bytes; a fresh 32-byte secret when omitted.
        key_id : str, optional
            Must be new; ``"<principal>#<n>"`` when omitted.

        Returns
        -------
        str
            The key id.

        Raises
        ------
        InvalidInput
            Empty principal, a short or non-bytes secret, or a key id already in use.
        """
        if not isinstance(principal, str) or not principal:
            raise InvalidInput("principal must be a non-empty string")
        if secret is None:
            secret = self.token_bytes(32)
        if not isinstance(secret, (bytes, bytearray)) or len(secret) < _MIN_SECRET:
            raise InvalidInput(f"secret must be bytes of length >= {_MIN_SECRET}")
        with self._lock:
            seq = self._seq + 1
            kid = key_id if key_id is not None else f"{principal}#{seq}"
            if kid in self._keys:
                raise InvalidInput(f"key id {kid!r} already exists")
            self._seq = seq
            self._keys[kid] = _Key(kid, principal, bytes(secret), seq)
        return kid

    def rotate(self, principal: str, secret: bytes | None = None) -> str:
        """Add a new signing key for a principal that has one; old keys still verify.

        Raises
        ------
        InvalidInput
            If ``principal`` has no key yet (use :meth:`add`).
        """
        with self._lock:
            if not any(k.principal == principal for k in self._keys.values()):
                raise InvalidInput(f"{principal!r} has no key to rotate; add one first")
            return self.add(principal, secret)

    def revoke(self, key_id: str, reason: str) -> None:
        """Revoke a key: claims it signed verify as ``"revoked_key"`` from now on.

        Raises
        ------
        InvalidInput
            Unknown key id or empty reason.
        """
        with self._lock:
            if key_id not in self._keys:
                raise InvalidInput(f"unknown key id {key_id!r}; known: {sorted(self._keys)}")
            if not reason:
                raise InvalidInput("say why the key is revoked")
            self._keys[key_id].revoked = reason

    def signing_key(self, principal: str) -> str:
        """Id of the newest unrevoked key of ``principal``.

        Raises
        ------
        InvalidInput
            If it has none.
        """
        live = [k for k in self._all() if k.principal == principal and not k.revoked]
        if not live:
            raise InvalidInput(f"{principal!r} has no unrevoked key")
        return max(live, key=lambda k: k.seq).key_id

    def principals(self) -> list[str]:
        """Principals holding at least one key, sorted."""
        return sorted({k.principal for k in self._all()})

    # ---------------------------------------------------------------- sign / verify
    def sign(self, claim: Claim, principal: str | None = None) -> Signature:
        """MAC ``claim`` with the signing key of ``principal`` (default: the one it names).

        Raises
        ------
        InvalidInput
            External claims name no principal and none was given, or it has no live key.
        """
        who = principal if principal is not None else claim.principal()
        if who is None:
            raise InvalidInput("an external claim names no signer; pass principal=")
        kid = self.signing_key(who)
        return Signature(kid, _mac(self._keys[kid].secret, canonical_bytes(claim, kid)))

    def verify(self, claim: Claim, signature: Signature | None) -> Verification:
        """Check a claim; any failure downgrades it to ``"external"`` with the reason.

        Parameters
        ----------
        claim : Claim
        signature : Signature or None

        Returns
        -------
        Verification
        """
        need = claim.principal()
        if need is None:
            return Verification("external", "external", None, None, "external: nothing to prove")
        head = f"origin={claim.origin!r} ({claim.origin_detail or '-'}) handled as external: "
        if signature is None:
            return Verification("unsigned", "external", None, None, head + "unsigned")
        key = self._keys.get(signature.key_id)
        if key is None:
            return Verification(
                "unknown_key",
                "external",
                None,
                signature.key_id,
                head + f"unknown key {signature.key_id!r}",
            )
        if key.revoked is not None:
            return Verification(
                "revoked_key",
                "external",
                key.principal,
                key.key_id,
                head + f"key {key.key_id!r} revoked ({key.revoked})",
            )
        if key.principal != need:
            return Verification(
                "wrong_principal",
                "external",
                key.principal,
                key.key_id,
                head + f"signed by {key.principal!r}, claim needs {need!r}",
            )
        want = _mac(key.secret, canonical_bytes(claim, key.key_id))
        if not hmac.compare_digest(want, str(signature.mac)):
            return Verification(
                "bad_signature",
                "external",
                key.principal,
                key.key_id,
                head + f"MAC mismatch under {key.key_id!r} (altered or forged)",
            )
        return Verification(
            "valid",
            claim.origin,
            key.principal,
            key.key_id,
            f"origin={claim.origin!r} verified under {key.key_id!r}",
        )

    # ---------------------------------------------------------------- persistence
    def save(self, path: str | os.PathLike[str]) -> None:
        """Write all keys (secrets included) to ``path`` with mode 0600."""
        with self._lock:
            seq, keys = self._seq, list(self._keys.values())
        doc = {
            "seq": seq,
            "keys": [
                {
                    "key_id": k.key_id,
                    "principal": k.principal,
                    "secret": k.secret.hex(),
                    "seq": k.seq,
                    "revoked": k.revoked,
                }
                for k in keys
            ],
        }
        p = Path(path)
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(doc, f)
        os.chmod(p, 0o600)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> KeyRing:
        """Read a key ring written by :meth:`save`.

        Raises
        ------
        InvalidInput
            If the file is not a saved key ring.
        """
        try:
            doc = json.loads(Path(path).read_text())
            ring = cls()
            for k in doc["keys"]:
                ring._keys[k["key_id"]] = _Key(
                    k["key_id"],
                    k["principal"],
                    bytes.fromhex(k["secret"]),
                    int(k["seq"]),
                    k["revoked"],
                )
            ring._seq = int(doc["seq"])
        except (KeyError, TypeError, ValueError) as e:
            raise InvalidInput(f"{path} is not a saved key ring: {e}") from None
        return ring
