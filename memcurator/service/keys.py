"""API keys of ``memcurator serve``: one namespace per key, scopes, a rate limit, stored hashed.

Where the keys live
-------------------
In the service's shared state (:mod:`memcurator.service.state`), so every replica of one
store sees the same keys: for a SQLite store, its key file (default ``<store>.keys``, created
with mode 0600; several processes on one file); for a PostgreSQL store, tables of the
database (any number of replicas). Not in the store's own tables: the
:class:`~memcurator.store.base.Store` protocol carries memory only, so a store export, backup
or ``memcurator import`` never carries them. Only hashes are kept. A key file of an earlier
version keeps working: a SQLite store's is upgraded in place, and ``--keys FILE`` beside a
PostgreSQL store imports the file's keys into the database at start.

A key is ``mck_<key_id>_<secret>``: ``key_id`` (12 hex characters) is public and finds the row;
``secret`` is 32 random bytes (URL-safe base64), of which only SHA-256 is stored. A 256-bit
random secret needs no slow hash (scrypt and its kind protect low-entropy passwords from
guessing; nobody can guess 2^256); the comparison is constant-time (:func:`hmac.compare_digest`).

The tenant comes from the key alone: :meth:`KeyTable.authenticate` returns the row, whose
``namespace`` every route then uses; nothing the client sends can name another.

Examples
--------
>>> t = KeyTable(":memory:")
>>> info, token = t.create("team-a", name="alice", scopes=("read", "write"))
>>> t.authenticate(token).namespace, info.scopes
('team-a', ('read', 'write'))
>>> t.revoke(info.key_id, "left the team")
>>> t.authenticate(token)
Traceback (most recent call last):
...
memcurator.errors.Unauthorized: invalid or revoked API key
"""

from __future__ import annotations

import hashlib
import hmac
import math
import os
import re
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass

from memcurator.errors import Forbidden, InvalidInput, RateLimited, Unauthorized
from memcurator.limits import check_int
from memcurator.service.state import StateBackend, open_state
from memcurator.service.state.sqlite import SqliteState

#: what a key may do: read (recall, entries, decisions, namespace), write (write, feedback,
#: record, update, forget), admin (forget-all, the namespace's budget, metrics), peer (the hub
#: routes: push to, pull from and publish a sketch in the namespace's peer group,
#: :mod:`memcurator.service.hub`)
SCOPES: tuple[str, ...] = ("read", "write", "admin", "peer")
#: the origins a key writes as: its holder is the namespace's own agent (self), a peer (its
#: name is the peer id), or an outside source (external)
KEY_ORIGINS: tuple[str, ...] = ("self", "peer", "external")
TOKEN_PREFIX = "mck_"
_TOKEN = re.compile(r"^mck_([0-9a-f]{12})_([A-Za-z0-9_-]{43})$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$")
_UNAUTHORIZED = "invalid or revoked API key"
#: the answer to a request without a key (a different one from a wrong key's: a newcomer who
#: forgot the header is told what to send; it says nothing about any key)
NO_KEY = (
    "no API key: send the header 'Authorization: Bearer <key>' (make a key with "
    "`memcurator keys create STORE --namespace NS --name NAME`)"
)


@dataclass(frozen=True)
class KeyInfo:
    """One API key as stored (never its secret).

    Attributes
    ----------
    key_id : str
        Public id (the middle of the token).
    namespace : str
        The one namespace the key reaches.
    name : str
        Its holder's identity: the ``origin_detail`` of every write it makes, and the peer id
        of a ``peer`` key.
    origin : {"self", "peer", "external"}
        The origin its writes carry (signed by the service, so the Trust gate sees it proven).
    scopes : tuple of str
    rate_per_min : float or None
        Requests per minute allowed (a token bucket of that capacity); None: unlimited.
    created_at : float
        Unix seconds.
    revoked : str or None
        Why it was revoked; None while live.
    """

    key_id: str
    namespace: str
    name: str
    origin: str
    scopes: tuple[str, ...]
    rate_per_min: float | None
    created_at: float
    revoked: str | None = None

    def require(self, scope: str) -> None:
        """Raise :class:`Forbidden` unless the key holds ``scope``."""
        if scope not in self.scopes:
            raise Forbidden(
                f"this key lacks the {scope!r} scope (it has {', '.join(self.scopes) or 'none'})"
            )


@dataclass(frozen=True)
class NamespaceConfig:
    """How the service opens a tenant's namespace: policy preset and byte budget (None: the
    defaults, ``curator`` and the budget the namespace was stored with)."""

    name: str
    policy: str | None = None
    max_bytes: int | None = None


def check_name(what: str, value: str) -> str:
    """``value`` if it is 1-128 characters of letters, digits and ``._:@-`` (first a letter
    or digit); :class:`InvalidInput` otherwise."""
    if not isinstance(value, str) or not _NAME.match(value):
        raise InvalidInput(
            f"{what} must be 1-128 characters of letters, digits and . _ : @ - (starting with a "
            f"letter or digit), got {value!r}"
        )
    return value


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode("ascii")).hexdigest()


class KeyTable:
    """The API keys and tenant namespaces of one service, in its shared state.

    Parameters
    ----------
    path : str, Path or StateBackend
        A key file (SQLite, created mode 0600; ``":memory:"`` for tests), or an open state
        (:func:`memcurator.service.state.open_state`; the table closes it on :meth:`close`).
    clock : callable () -> float, default :func:`time.time`
        Unix seconds for ``created_at`` and ``revoked_at``.

    Raises
    ------
    InvalidInput
        The file exists but is not a key file.
    """

    def __init__(
        self, path: str | os.PathLike[str] | StateBackend, clock: Callable[[], float] = time.time
    ):
        if isinstance(path, str | os.PathLike):
            self.state: StateBackend = SqliteState(os.fspath(path))
        else:
            self.state = path
        self.path = self.state.where
        self.clock = clock

    @classmethod
    def for_store(cls, store_url: str, keys_path: str | os.PathLike[str] | None = None) -> KeyTable:
        """The key table of the service over ``store_url`` (see
        :func:`~memcurator.service.state.open_state`: a PostgreSQL store's state is in its
        database, ``keys_path`` then a key file to import)."""
        return cls(open_state(store_url, keys_path))

    # ------------------------------------------------------------------ keys
    def create(
        self,
        namespace: str,
        *,
        name: str,
        scopes: tuple[str, ...] | list[str] = ("read", "write"),
        origin: str = "self",
        rate_per_min: float | None = None,
    ) -> tuple[KeyInfo, str]:
        """Issue a key for ``namespace``; returns its row and the token (shown once, never
        stored).

        Raises
        ------
        InvalidInput
            A bad namespace or name, an unknown scope or origin, no scope, a rate that is not
            a positive finite number, or a live key of the same name in the namespace.
        """
        check_name("namespace", namespace)
        check_name("name", name)
        scopes = tuple(dict.fromkeys(scopes))
        bad = [s for s in scopes if s not in SCOPES]
        if bad or not scopes:
            raise InvalidInput(f"scopes must be a non-empty subset of {list(SCOPES)}, got {bad}")
        if origin not in KEY_ORIGINS:
            raise InvalidInput(f"origin must be one of {list(KEY_ORIGINS)}, got {origin!r}")
        if rate_per_min is not None and (
            not isinstance(rate_per_min, int | float)
            or isinstance(rate_per_min, bool)
            or not math.isfinite(rate_per_min)
            or rate_per_min <= 0
        ):
            raise InvalidInput(f"rate_per_min must be a positive number, got {rate_per_min!r}")
        key_id, secret = secrets.token_hex(6), secrets.token_urlsafe(32)
        info = KeyInfo(
            key_id,
            namespace,
            name,
            origin,
            tuple(s for s in SCOPES if s in scopes),
            None if rate_per_min is None else float(rate_per_min),
            self.clock(),
        )
        with self.state.tx() as tx:
            clash = tx.q(
                "SELECT key_id FROM api_keys WHERE namespace=? AND name=? AND revoked_at IS NULL",
                (namespace, name),
            )
            if clash:
                raise InvalidInput(
                    f"namespace {namespace!r} already has a live key named {name!r} "
                    f"({clash[0][0]}); revoke it first or pick another name"
                )
            tx.x(
                "INSERT INTO api_keys(key_id, secret_sha256, namespace, name, origin, scopes, "
                "rate_per_min, created_at) VALUES (?,?,?,?,?,?,?,?)",
                (
                    key_id,
                    _hash(secret),
                    namespace,
                    name,
                    origin,
                    ",".join(info.scopes),
                    info.rate_per_min,
                    info.created_at,
                ),
            )
            tx.x(
                "INSERT INTO tenant_namespaces(name) VALUES (?) ON CONFLICT(name) DO NOTHING",
                (namespace,),
            )
        return info, f"{TOKEN_PREFIX}{key_id}_{secret}"

    def _row(self, r: tuple) -> KeyInfo:
        return KeyInfo(
            r[0], r[1], r[2], r[3], tuple(r[4].split(",")), r[5], r[6], r[7] if r[7] else None
        )

    _COLS = "key_id, namespace, name, origin, scopes, rate_per_min, created_at, revoked_reason"

    def list(self, namespace: str | None = None) -> list[KeyInfo]:
        """Every key (of ``namespace`` when given), oldest first, revoked ones included."""
        with self.state.tx(write=False) as tx:
            if namespace is None:
                rows = tx.q(f"SELECT {self._COLS} FROM api_keys ORDER BY created_at, key_id")
            else:
                rows = tx.q(
                    f"SELECT {self._COLS} FROM api_keys WHERE namespace=? "
                    "ORDER BY created_at, key_id",
                    (namespace,),
                )
        return [self._row(r) for r in rows]

    def revoke(self, key_id: str, reason: str) -> None:
        """Revoke a key at once (its next request gets 401).

        Raises
        ------
        InvalidInput
            Unknown or already revoked key id, or no reason.
        """
        if not reason or not reason.strip():
            raise InvalidInput("say why the key is revoked (--reason)")
        with self.state.tx() as tx:
            n = tx.x(
                "UPDATE api_keys SET revoked_at=?, revoked_reason=? "
                "WHERE key_id=? AND revoked_at IS NULL",
                (self.clock(), reason, key_id),
            )
        if n != 1:
            raise InvalidInput(f"no live key {key_id!r}; `memcurator keys list` shows them")

    def authenticate(self, token: str | None) -> KeyInfo:
        """The live key whose token this is.

        Raises
        ------
        Unauthorized
            No token (:data:`NO_KEY`, which says how to send one); or a malformed, unknown,
            wrong-secret or revoked one (one message for all four, so a key cannot be probed).
        """
        if not token:
            raise Unauthorized(NO_KEY)
        m = _TOKEN.match(token)
        if m is None:
            raise Unauthorized(_UNAUTHORIZED)
        r = self._one(f"SELECT {self._COLS}, secret_sha256 FROM api_keys WHERE key_id=?", m[1])
        if r is None or not hmac.compare_digest(r[8], _hash(m.group(2))) or r[7] is not None:
            raise Unauthorized(_UNAUTHORIZED)
        return self._row(r[:8])

    def live(self, key_id: str) -> KeyInfo:
        """The row of a key authenticated earlier, if it is still live (a long-lived stdio
        server checks this on every call, so a revocation stops it at once).

        Raises
        ------
        Unauthorized
            Unknown or revoked.
        """
        r = self._one(f"SELECT {self._COLS} FROM api_keys WHERE key_id=?", key_id)
        if r is None or r[7] is not None:
            raise Unauthorized(_UNAUTHORIZED)
        return self._row(r)

    # ------------------------------------------------------------------ namespaces
    def configure(self, name: str, *, policy: str | None = None, max_bytes: int | None = None):
        """Set a tenant namespace's policy preset and budget (None keeps what is set)."""
        check_name("namespace", name)
        if max_bytes is not None:
            max_bytes = check_int(max_bytes, "max_bytes", 1)
        with self.state.tx() as tx:
            tx.x(
                "INSERT INTO tenant_namespaces(name, policy, max_bytes) VALUES (?,?,?) "
                "ON CONFLICT(name) DO UPDATE SET "
                "policy=COALESCE(excluded.policy, tenant_namespaces.policy), "
                "max_bytes=COALESCE(excluded.max_bytes, tenant_namespaces.max_bytes)",
                (name, policy, max_bytes),
            )

    def namespace_config(self, name: str) -> NamespaceConfig:
        """The tenant's configuration (defaults when none was set)."""
        r = self._one("SELECT policy, max_bytes FROM tenant_namespaces WHERE name=?", name)
        return NamespaceConfig(name) if r is None else NamespaceConfig(name, r[0], r[1])

    def _one(self, sql: str, arg: str) -> tuple | None:
        with self.state.tx(write=False) as tx:
            rows = tx.q(sql, (arg,))
        return tuple(rows[0]) if rows else None

    def close(self) -> None:
        self.state.close()


class RateLimiter:
    """A token bucket per key: capacity ``rate_per_min`` requests, refilled at that rate.

    Parameters
    ----------
    clock : callable () -> float, default :func:`time.monotonic`
        Seconds; tests pass a fake one.

    state : StateBackend, optional
        Where the buckets live (the service's shared state: every replica draws from one
        bucket per key); None: a private in-memory one.

    Notes
    -----
    Each check is one short transaction that locks the key's bucket row, so replicas count
    together. Their clocks must agree (the default is wall-clock time for that reason).

    Examples
    --------
    >>> now = [0.0]
    >>> rl = RateLimiter(clock=lambda: now[0])
    >>> k = KeyInfo("k", "ns", "a", "self", ("read",), 2.0, 0.0)
    >>> rl.check(k); rl.check(k)
    >>> try:
    ...     rl.check(k)
    ... except RateLimited as e:
    ...     print(round(e.retry_after_s))
    30
    >>> now[0] = 30.0; rl.check(k)
    """

    def __init__(self, clock: Callable[[], float] = time.time, state: StateBackend | None = None):
        self.clock = clock
        self.state: StateBackend = SqliteState(":memory:") if state is None else state

    def check(self, key: KeyInfo) -> None:
        """Take one request from ``key``'s bucket.

        Raises
        ------
        RateLimited
            The bucket is empty; ``retry_after_s`` until one request fits.
        """
        rate = key.rate_per_min
        if rate is None:
            return
        now = self.clock()
        with self.state.tx() as tx:
            tx.x(
                "INSERT INTO svc_rate(key_id, tokens, at) VALUES (?,?,?) "
                "ON CONFLICT(key_id) DO NOTHING",
                (key.key_id, float(rate), now),
            )
            tokens, at = tx.q(
                "SELECT tokens, at FROM svc_rate WHERE key_id=? FOR UPDATE", (key.key_id,)
            )[0]
            tokens = min(rate, tokens + max(0.0, now - at) * rate / 60.0)
            take = 1.0 if tokens >= 1.0 else 0.0
            tx.x(
                "UPDATE svc_rate SET tokens=?, at=? WHERE key_id=?",
                (tokens - take, max(now, at), key.key_id),
            )
        if not take:
            wait = (1.0 - tokens) * 60.0 / rate
            raise RateLimited(
                f"this key allows {rate:g} requests per minute; retry in {wait:.1f} s", wait
            )


def default_keys_path(store_url: str) -> str:
    """The key file beside a file store (``<store>.keys``).

    Raises
    ------
    InvalidInput
        For an in-memory store or a URL (a server store has no folder to put it in): pass
        the key file explicitly (``--keys``).
    """
    if store_url == ":memory:" or "://" in store_url:
        raise InvalidInput(
            f"no default key file for {store_url!r}; pass --keys PATH (a local file, mode 0600)"
        )
    return f"{store_url}.keys"


__all__ = [
    "KEY_ORIGINS",
    "NO_KEY",
    "SCOPES",
    "KeyInfo",
    "KeyTable",
    "NamespaceConfig",
    "RateLimiter",
    "check_name",
    "default_keys_path",
]
