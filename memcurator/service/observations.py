"""What each key's session observed the agent read, so a later write that copies it is tainted.

The library's provenance by observation (:meth:`memcurator.Memory.observe_read`,
:mod:`memcurator.lifecycle.reads`) keeps fingerprints of what the agent read in the handle's
:class:`~memcurator.trust.fingerprint.ReadWindow`, and the write path asks that window whether a
new entry copies any of it. The service holds one handle per namespace for every key and
session of that namespace, so it gives each tenant's handle one :class:`SessionReads` as its
window: a window that routes every ``add`` and ``match`` to the window of the session the
current call belongs to (:meth:`SessionReads.scope`). The write path itself is the library's,
unchanged: the same match, the same taint, ``downgrade`` row and probation.

A **session** is one key plus an optional session id the client chooses (REST: the
``X-Memcurator-Session`` header; MCP: a ``session`` argument; none: the key's default session).
What one key observed never taints another key's writes, and one session's reads never taint
another session's writes of the same key.

Bounds (memory held is bounded by them; each refusal changes nothing):

- a session expires ``ttl_s`` seconds after its last observation (its window is dropped whole;
  a later write that copies what it held is not tainted by it);
- the observed text a key's live sessions hold is at most ``max_key_bytes`` UTF-8 bytes
  (:class:`~memcurator.errors.BudgetExceeded`, 413, beyond it: end a session or wait for it to
  expire), and one key holds at most ``max_sessions`` live sessions;
- each session's window keeps at most ``max_shingles`` distinct shingles (the library's rule:
  the least recently observed are dropped first).

Measured (tracemalloc, one key, 8 sessions, 4 kB pages of this project's docs observed until
the cap refused one): the windows took about 12 bytes of heap per observed byte, 48 MiB at a
4 MiB cap; so the default cap (2 MiB) holds a key to about 24 MiB. The number of keys bounds
the rest (the key table).

Today the sessions live in the server process (like the library's window): a restarted server,
or another replica behind a balancer, has observed nothing. :class:`SessionReads` is the one
place to change for that: the windows are reached only through :meth:`SessionReads.window` and
the byte accounting through :meth:`SessionReads.add`.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from memcurator.errors import BudgetExceeded, InvalidInput
from memcurator.trust.fingerprint import Match, ReadWindow

#: seconds a session lives after its last observation
SESSION_TTL_S = 3600.0
#: observed text one key's live sessions may hold, UTF-8 bytes (about 12 bytes of heap each)
MAX_KEY_BYTES = 2 << 20
#: live sessions one key may hold
MAX_SESSIONS = 16
#: longest session id, characters
MAX_SESSION_CHARS = 128
#: what a session id may be made of (it is echoed in answers and logs)
SESSION_PATTERN = r"^[A-Za-z0-9._:\-]{1,128}$"
_SESSION_RE = re.compile(SESSION_PATTERN)

#: the (key id, session id) the current call acts in; None outside any session
_CURRENT: ContextVar[tuple[str, str] | None] = ContextVar("memcurator_session", default=None)


def check_session(session: Any) -> str:
    """A session id as given, or ``""`` (the key's default session) for None.

    Raises
    ------
    InvalidInput
        Not a string of 1..128 characters from ``A-Za-z0-9._:-``.

    Examples
    --------
    >>> check_session(None), check_session("run-7")
    ('', 'run-7')
    """
    if session is None:
        return ""
    if not isinstance(session, str) or not _SESSION_RE.match(session):
        raise InvalidInput(
            f"session must be 1..{MAX_SESSION_CHARS} characters of A-Za-z0-9._:- , "
            f"got {str(session)[:40]!r}"
        )
    return session


@dataclass
class _Session:
    window: ReadWindow
    expires: float
    nbytes: int = 0
    reads: int = 0


@dataclass
class _KeySessions:
    sessions: dict[str, _Session] = field(default_factory=dict)

    def held(self) -> int:
        return sum(s.nbytes for s in self.sessions.values())


class SessionReads(ReadWindow):
    """The read window of every tenant handle of one server: each call's session's window.

    Parameters
    ----------
    ttl_s : float, seconds, default :data:`SESSION_TTL_S`
        A session is dropped this long after its last observation.
    max_key_bytes : int, bytes, default :data:`MAX_KEY_BYTES`
        Observed text one key's live sessions may hold.
    max_sessions : int, default :data:`MAX_SESSIONS`
        Live sessions one key may hold.
    max_shingles : int, default 20000
        Each session window's size (:class:`~memcurator.trust.fingerprint.ReadWindow`).
    clock : callable () -> float, seconds, default time.monotonic
        Tests pass a fake clock.

    Raises
    ------
    InvalidInput
        A bound that is not positive.

    Examples
    --------
    >>> reads = SessionReads()
    >>> with reads.scope("k1", "s1"):
    ...     reads.add("Ticket 88: the VPN gateway in Lyon restarts nightly at 02:00 for "
    ...               "patching; expect ten minutes of downtime.", "tool_output:tickets")
    15
    >>> with reads.scope("k1", "s1"):
    ...     reads.match("Note: the VPN gateway in Lyon restarts nightly at 02:00 for patching; "
    ...                 "expect ten minutes of downtime.").sources
    ('tool_output:tickets',)
    >>> with reads.scope("k2", "s1"):  # another key observed nothing
    ...     reads.match("the VPN gateway in Lyon restarts nightly at 02:00 for patching") is None
    True
    """

    def __init__(
        self,
        *,
        ttl_s: float = SESSION_TTL_S,
        max_key_bytes: int = MAX_KEY_BYTES,
        max_sessions: int = MAX_SESSIONS,
        max_shingles: int = 20000,
        clock: Callable[[], float] = time.monotonic,
    ):
        super().__init__(max_shingles=max_shingles)
        if not (isinstance(ttl_s, int | float) and ttl_s > 0):
            raise InvalidInput(f"ttl_s must be positive seconds, got {ttl_s!r}")
        for name, v in (("max_key_bytes", max_key_bytes), ("max_sessions", max_sessions)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise InvalidInput(f"{name} must be a positive integer, got {v!r}")
        self.ttl_s = float(ttl_s)
        self.max_key_bytes = max_key_bytes
        self.max_sessions = max_sessions
        self.clock = clock
        self._keys: dict[str, _KeySessions] = {}
        self._guard = threading.Lock()

    # ------------------------------------------------------------------ the current session
    @staticmethod
    @contextmanager
    def scope(key_id: str, session: str | None = None) -> Iterator[None]:
        """Run the body in ``key_id``'s session ``session`` (None: the key's default one).

        Raises
        ------
        InvalidInput
            A malformed session id (:func:`check_session`).
        """
        token = _CURRENT.set((key_id, check_session(session)))
        try:
            yield
        finally:
            _CURRENT.reset(token)

    def window(self, key_id: str, session: str, *, create: bool) -> ReadWindow | None:
        """The live window of one session (a new one when ``create``; None when it has none).
        Expired sessions of the key are dropped first."""
        now = float(self.clock())
        with self._guard:
            ks = self._keys.get(key_id)
            if ks is not None:
                for sid in [s for s, v in ks.sessions.items() if v.expires <= now]:
                    del ks.sessions[sid]
            s = None if ks is None else ks.sessions.get(session)
            if s is None and create:
                if ks is None:
                    ks = self._keys[key_id] = _KeySessions()
                if len(ks.sessions) >= self.max_sessions:
                    raise BudgetExceeded(
                        f"this key holds {len(ks.sessions)} live observation sessions "
                        f"(max_sessions {self.max_sessions}); end one (DELETE "
                        "/v1/observations) or let it expire"
                    )
                s = ks.sessions[session] = _Session(ReadWindow(max_shingles=self.max_shingles),
                                                    now + self.ttl_s)  # fmt: skip
            if ks is not None and not ks.sessions:
                del self._keys[key_id]
            return None if s is None else s.window

    # ------------------------------------------------------------------ ReadWindow's interface
    def add(self, text: str, source: str, user: str | None = None) -> int:
        """Record ``text`` in the current session's window (the library's
        :meth:`~memcurator.trust.fingerprint.ReadWindow.add`), charging its bytes to the key.

        Raises
        ------
        InvalidInput
            Called outside any session (:meth:`scope`).
        BudgetExceeded
            The key's live sessions would hold more than ``max_key_bytes`` bytes, or the key
            already holds ``max_sessions`` sessions. Nothing is recorded.
        """
        cur = _CURRENT.get()
        if cur is None:
            raise InvalidInput("an observation needs a session (SessionReads.scope)")
        key_id, session = cur
        nbytes = len(text.encode("utf-8"))
        with self._guard:
            ks = self._keys.get(key_id)
            held = 0 if ks is None else ks.held()
        if held + nbytes > self.max_key_bytes:
            raise BudgetExceeded(
                f"this key's observation sessions hold {held} bytes; {nbytes} more would pass "
                f"max_key_bytes ({self.max_key_bytes}); end a session (DELETE "
                f"/v1/observations) or wait for it to expire ({self.ttl_s:g} s after its last "
                "observation)"
            )
        w = self.window(key_id, session, create=True)
        assert w is not None
        n = w.add(text, source, user)
        with self._guard:
            s = self._keys[key_id].sessions[session]
            s.nbytes += nbytes
            s.reads += 1
            s.expires = float(self.clock()) + self.ttl_s
        return n

    def match(self, text: str, user: str | None = None) -> Match | None:
        """What ``text`` copies from the current session's window (None outside any session,
        or when the session observed nothing still live)."""
        cur = _CURRENT.get()
        if cur is None:
            return None
        w = self.window(cur[0], cur[1], create=False)
        return None if w is None else w.match(text, user)

    def __len__(self) -> int:
        """Distinct shingles the current session's window holds (0 outside any session)."""
        cur = _CURRENT.get()
        w = None if cur is None else self.window(cur[0], cur[1], create=False)
        return 0 if w is None else len(w)

    # ------------------------------------------------------------------ a session's life
    def status(self, key_id: str, session: str) -> dict[str, Any]:
        """One session's counts: ``reads``, ``bytes`` it holds, ``key_bytes`` (all the key's
        live sessions), ``expires_in_s`` (0 for no live session)."""
        self.window(key_id, session, create=False)  # drops what expired
        now = float(self.clock())
        with self._guard:
            ks = self._keys.get(key_id)
            s = None if ks is None else ks.sessions.get(session)
            return {
                "session": session,
                "reads": 0 if s is None else s.reads,
                "bytes": 0 if s is None else s.nbytes,
                "key_bytes": 0 if ks is None else ks.held(),
                "max_key_bytes": self.max_key_bytes,
                "expires_in_s": 0.0 if s is None else max(0.0, s.expires - now),
            }

    def end(self, key_id: str, session: str) -> bool:
        """Drop one session's window (True when it had one)."""
        with self._guard:
            ks = self._keys.get(key_id)
            if ks is None or session not in ks.sessions:
                return False
            del ks.sessions[session]
            if not ks.sessions:
                del self._keys[key_id]
            return True


def attach(pool: Any) -> SessionReads:
    """The :class:`SessionReads` of a :class:`~memcurator.service.tenants.TenantPool`: the
    read window its tenants' handles are opened with (made and set when it has none yet)."""
    opts = pool.memory_options
    reads = opts.get("read_window")
    if not isinstance(reads, SessionReads):
        if reads is not None:
            raise InvalidInput("the service keeps the read window itself: pass no read_window")
        reads = opts["read_window"] = SessionReads()
    return reads


__all__ = [
    "MAX_KEY_BYTES",
    "MAX_SESSIONS",
    "SESSION_PATTERN",
    "SESSION_TTL_S",
    "SessionReads",
    "attach",
    "check_session",
]
