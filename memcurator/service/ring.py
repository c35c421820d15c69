"""One signing key ring for every replica of the service, kept in the shared state.

The service signs each write's :class:`~memcurator.trust.auth.Claim` itself (the owner's key
for a ``self`` write, the peer's ring key for a ``peer`` write) and the tenant's
:class:`~memcurator.Memory` checks the signature with the same ring. With several replicas on
one store, an envelope signed through one replica must verify through any other, so the ring's
keys (principal, secret, revocation) live in the service's shared state
(:mod:`memcurator.service.state`, table ``svc_ring_keys``) beside the API keys: the store's
database, or the key file of a SQLite store. The secrets are as sensitive as that file or
database already is (it holds the API keys' hashes; the secrets are HMAC keys, stored as hex).

:class:`SharedRing` is a :class:`~memcurator.trust.auth.KeyRing` that reads the table at start,
adds a principal's key there the first time any replica signs for it (the first insert wins;
every replica then uses that one), and reads the table again when asked to verify a key id it
does not hold yet (made by another replica since). A key ring file of an earlier version
(``<keys>.ring``) is imported at start (the state wins for a key id both hold).

Examples
--------
>>> from memcurator.service.state import open_state
>>> from memcurator.trust.auth import OWNER, Claim
>>> st = open_state(":memory:", ":memory:")
>>> a, b = SharedRing(st), SharedRing(st)
>>> a.ensure("peer-1")
>>> c = Claim("ns", "peer", "peer-1", "raw", "text")
>>> b.verify(c, a.sign(c, "peer-1")).ok, b.principals() == a.principals()
(True, True)
>>> st.close()
"""

from __future__ import annotations

import os
import secrets
import threading
import time
from pathlib import Path

from memcurator.service.state import StateBackend
from memcurator.trust.auth import OWNER, Claim, KeyRing, Signature, Verification


class SharedRing(KeyRing):
    """A key ring whose keys live in the service's shared state.

    Parameters
    ----------
    state : StateBackend
        The shared state (:func:`memcurator.service.state.open_state`).
    import_path : str or path, optional
        A key ring file of an earlier version (:meth:`KeyRing.save`) whose keys are copied
        into the state now (a missing file imports nothing; the file is only read).

    Raises
    ------
    InvalidInput
        ``import_path`` is not a saved key ring.
    StoreError
        The state cannot be read.
    """

    def __init__(self, state: StateBackend, import_path: str | os.PathLike[str] | None = None):
        super().__init__()
        self.state = state
        self._sync = threading.Lock()
        if import_path is not None and Path(import_path).exists():
            old = KeyRing.load(import_path)
            with state.tx() as tx:
                for k in old._keys.values():  # a KeyRing's own keys (this is one too)
                    tx.x(
                        "INSERT INTO svc_ring_keys(key_id, principal, secret, created_at, "
                        "revoked) VALUES (?,?,?,?,?) ON CONFLICT(key_id) DO NOTHING",
                        (k.key_id, k.principal, k.secret.hex(), time.time(), k.revoked),
                    )
        self.ensure(OWNER)

    def refresh(self) -> None:
        """Take in the keys (and revocations) other replicas added since."""
        with self.state.tx(write=False) as tx:
            rows = tx.q(
                "SELECT key_id, principal, secret, revoked FROM svc_ring_keys "
                "ORDER BY created_at, key_id"
            )
        with self._sync:
            for kid, principal, secret, revoked in rows:
                if kid not in self._keys:
                    self.add(principal, bytes.fromhex(secret), key_id=kid)
                if revoked and not self._keys[kid].revoked:
                    self.revoke(kid, revoked)

    def ensure(self, principal: str) -> None:
        """Make sure ``principal`` has a key every replica shares (created by the first)."""
        if principal in self.principals():
            return
        self.refresh()
        if principal in self.principals():
            return
        with self.state.tx() as tx:
            tx.x(
                "INSERT INTO svc_ring_keys(key_id, principal, secret, created_at, revoked) "
                "VALUES (?,?,?,?,NULL) ON CONFLICT(key_id) DO NOTHING",
                (f"{principal}#1", principal, secrets.token_bytes(32).hex(), time.time()),
            )
        self.refresh()

    def verify(self, claim: Claim, signature: Signature | None) -> Verification:
        """:meth:`KeyRing.verify`, after reading the state again if ``signature``'s key id is
        not held yet (another replica made it)."""
        if signature is not None and signature.key_id not in self._keys:
            self.refresh()
        return super().verify(claim, signature)


__all__ = ["SharedRing"]
