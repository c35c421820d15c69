"""The service's tenants: one :class:`~memcurator.Memory` per namespace, the store's key ring,
and the signing of each write under the writing key's identity.

A tenant is opened on first use as ``Memory(store_url, namespace=..., policy=..., max_bytes=...,
keyring=ring)`` (any store the facade opens), and every call on it runs under the tenant's lock:
the request threads of one server process never interleave inside one namespace's lifecycle
stage. Other processes on the same store are seen through the store's change token, as with any
two :class:`~memcurator.Memory` handles.

Origins (CURATOR Sec. III-C, Eq. 4; :mod:`memcurator.trust.auth`): the service holds the key
ring and signs each write's :class:`~memcurator.trust.auth.Claim` itself, with
``origin_detail`` the key's name. A ``self`` key's writes are signed by the owner key, a
``peer`` key's by the ring key of the peer it names; so the Trust gate sees a proven origin,
and no client can claim an origin (or an identity) its key does not hold.
"""

from __future__ import annotations

import base64
import json
import os
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, NamedTuple

import numpy as np

from memcurator.errors import EntryNotFound, Forbidden
from memcurator.memory import Memory
from memcurator.service.keys import KeyInfo, KeyTable
from memcurator.service.ring import SharedRing
from memcurator.service.state import StateBackend
from memcurator.service.state.sqlite import SqliteState
from memcurator.trust.auth import OWNER, Claim, Signature
from memcurator.types import RecallResult

#: which origins a key of each origin may write with (it may lower its claim, never raise it)
ALLOWED_ORIGINS = {
    "self": ("self", "external"),
    "peer": ("peer", "external"),
    "external": ("external",),
}
#: recalls kept per tenant for ``feedback(recall_id=...)``
RECALLS_KEPT = 1024


def _array(a: np.ndarray) -> list[Any]:
    a = np.ascontiguousarray(a)
    return [a.dtype.str, list(a.shape), base64.b64encode(a.tobytes()).decode("ascii")]


def _unarray(v: list[Any]) -> np.ndarray:
    return np.frombuffer(base64.b64decode(v[2]), dtype=np.dtype(v[0])).reshape(v[1]).copy()


def recall_to_json(r: RecallResult) -> str:
    """What a feedback needs of a recall (ids, scores, the learners' features, step), as JSON:
    arrays exactly (dtype, shape, the raw bytes in base64), never rounded."""
    feats = None if r.features is None else {k: _array(v) for k, v in r.features.items()}
    return json.dumps(
        {
            "ids": list(r.ids),
            "scores": _array(np.asarray(r.scores)),
            "features": feats,
            "step": int(r.step),
        }
    )


def recall_from_json(s: str) -> RecallResult:
    """The recall :func:`recall_to_json` kept (its entries are not kept: feedback reads ids and
    features only)."""
    d = json.loads(s)
    feats = None if d["features"] is None else {k: _unarray(v) for k, v in d["features"].items()}
    return RecallResult(list(d["ids"]), _unarray(d["scores"]), [], feats, int(d["step"]))


class Signed(NamedTuple):
    """What :meth:`TenantPool.signature` proves of a write: the origin, its detail (the key's
    name) and the service's signature (None for ``external``)."""

    origin: str
    detail: str
    signature: Signature | None

    def write_kw(self) -> dict[str, Any]:
        """The keyword arguments of :meth:`memcurator.Memory.write` these set (``origin``,
        ``origin_detail``, ``signature``)."""
        return {"origin": self.origin, "origin_detail": self.detail, "signature": self.signature}


class Tenant:
    """One namespace's memory, its lock, and its recalls (kept in the service's shared state,
    so a feedback through any replica finds a recall made through another)."""

    def __init__(self, memory: Memory, state: StateBackend | None = None):
        self.memory = memory
        self.lock = threading.RLock()
        self.state: StateBackend = SqliteState(":memory:") if state is None else state

    def remember(self, r: RecallResult) -> str:
        """Keep ``r`` for a later feedback; returns its id (beyond :data:`RECALLS_KEPT` of
        this namespace, the oldest kept is dropped)."""
        rid = uuid.uuid4().hex
        ns = self.memory.namespace
        with self.state.tx() as tx:
            tx.x(
                "INSERT INTO svc_recalls(rid, namespace, body) VALUES (?,?,?)",
                (rid, ns, recall_to_json(r)),
            )
            old = tx.q(
                "SELECT seq FROM svc_recalls WHERE namespace=? ORDER BY seq DESC LIMIT 1 OFFSET ?",
                (ns, RECALLS_KEPT),
            )
            if old:
                tx.x("DELETE FROM svc_recalls WHERE namespace=? AND seq <= ?", (ns, old[0][0]))
        return rid

    def recalled(self, recall_id: str) -> RecallResult:
        """A kept recall.

        Raises
        ------
        EntryNotFound
            Unknown, expired or another tenant's id (one answer for all three).
        """
        with self.state.tx(write=False) as tx:
            rows = tx.q(
                "SELECT body FROM svc_recalls WHERE rid=? AND namespace=?",
                (recall_id, self.memory.namespace),
            )
        if not rows:
            raise EntryNotFound("no such recall")
        return recall_from_json(rows[0][0])


class TenantPool:
    """The tenants of one server, opened on demand.

    Parameters
    ----------
    store_url : str
        What :class:`~memcurator.Memory` opens (a SQLite path, or a URL of another backend).
    keys : KeyTable
        API keys and each namespace's policy and budget.
    ring_path : str or None
        A key ring file of an earlier version, imported into the shared state at start (only
        read). The ring itself lives in the shared state (:class:`SharedRing`), so every
        replica signs and verifies with the same keys.
    memory_options : dict, optional
        Further keyword arguments of every :class:`~memcurator.Memory` (``embedder``,
        ``seed``, ...).
    """

    def __init__(
        self,
        store_url: str,
        keys: KeyTable,
        ring_path: str | None = None,
        memory_options: dict[str, Any] | None = None,
    ):
        self.store_url = store_url
        self.keys = keys
        self.ring_path = ring_path
        self.memory_options = dict(memory_options or {})
        self._lock = threading.Lock()
        self._tenants: dict[str, Tenant] = {}
        # one ring for every replica, in the shared state; a ring file of an earlier version
        # is imported once (the state wins for a key both hold)
        self.ring = SharedRing(keys.state, ring_path)

    def tenant(self, namespace: str) -> Tenant:
        """The tenant of ``namespace`` (opened with its configured policy and budget)."""
        with self._lock:
            t = self._tenants.get(namespace)
            if t is None:
                cfg = self.keys.namespace_config(namespace)
                kw: dict[str, Any] = dict(self.memory_options)
                if cfg.policy is not None:
                    kw["policy"] = cfg.policy
                if cfg.max_bytes is not None:
                    kw["max_bytes"] = cfg.max_bytes
                t = Tenant(
                    Memory(self.store_url, namespace=namespace, keyring=self.ring, **kw),
                    self.keys.state,
                )
                self._tenants[namespace] = t
            return t

    def reopen(self, namespace: str, **changes: Any) -> Tenant:
        """Close and reopen a tenant after its configuration changed (budget)."""
        if changes:  # first: a tenant opened from here on (by any thread) has the change
            self.keys.configure(namespace, **changes)
        with self._lock:
            old = self._tenants.pop(namespace, None)
        if old is not None:
            with old.lock:  # calls on it finish first; calls waiting for it move on (using)
                old.memory.close()
        return self.tenant(namespace)

    def open_tenants(self) -> list[str]:
        with self._lock:
            return sorted(self._tenants)

    @contextmanager
    def using(self, key: KeyInfo) -> Iterator[Tenant]:
        """The key's tenant, locked for one call (if :meth:`reopen` replaced it while this
        call waited for the lock, the new one)."""
        while True:
            t = self.tenant(key.namespace)
            with t.lock:
                with self._lock:
                    current = self._tenants.get(key.namespace) is t
                if current:
                    yield t
                    return

    def signature(self, key: KeyInfo, origin: str | None, kind: str, text: str) -> Signed:
        """The origin, origin detail and signature of a write by ``key``.

        Raises
        ------
        Forbidden
            ``origin`` is one the key does not hold (``self`` from a peer or external key,
            ``peer`` from a self key, ...).
        """
        want = key.origin if origin is None else origin
        if want not in ALLOWED_ORIGINS[key.origin]:
            raise Forbidden(
                f"this key writes as {key.origin!r} ({key.name}); it may not claim origin {want!r}"
            )
        if want == "external":
            return Signed(want, key.name, None)
        signer = OWNER if want == "self" else key.name
        with self._lock:
            self.ring.ensure(signer)  # a peer's ring key, made the first time any replica signs
            sig = self.ring.sign(Claim(key.namespace, want, key.name, kind, text), signer)
        return Signed(want, key.name, sig)

    def close(self) -> None:
        with self._lock:
            tenants, self._tenants = list(self._tenants.values()), {}
        for t in tenants:
            with t.lock:
                t.memory.close()


def ring_path_for(keys_path: str) -> str | None:
    """The key ring file beside a key file (None for an in-memory key table)."""
    return None if keys_path == ":memory:" else os.fspath(keys_path) + ".ring"


__all__ = ["ALLOWED_ORIGINS", "RECALLS_KEPT", "Signed", "Tenant", "TenantPool", "ring_path_for"]
