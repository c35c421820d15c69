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

:class:`SessionReads` keeps the sessions in the process (a library user's choice).
:class:`SharedSessionReads`, what the service runs (:func:`attach`), keeps them in the
service's shared state (:mod:`memcurator.service.state`, table ``svc_observations``): each
observation is one row holding the hashed shingles of the text read (never the text), its
source and its byte count, and each process replays a session's rows into a local window
before it matches a write. So an observation through one replica taints a copying write
through another, a restarted server keeps what its sessions observed, and the bounds above hold
for a key across every replica (a session's life is measured on the wall clock, which the
replicas share).
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
from memcurator.trust.fingerprint import Match, ReadWindow, shingles

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


@dataclass
class _Replay:
    """A process's copy of one shared session: its rows replayed into a window."""

    window: ReadWindow
    cursor: int = 0  # the last row replayed
    reads: int = 0
    nbytes: int = 0
    last_at: float = 0.0


def _pack(hashes: list[int]) -> str:
    return " ".join(f"{h:016x}" for h in hashes)


def _unpack(text: str) -> list[int]:
    return [int(h, 16) for h in text.split()]


class SharedSessionReads(SessionReads):
    """:class:`SessionReads` kept in the service's shared state, so every replica (and a
    restarted server) sees what any of them observed.

    Each observation is one row of ``svc_observations``: the key, the session, the hashed
    5-word shingles of the text (:func:`~memcurator.trust.fingerprint.shingles`; the text is
    not stored), its source, its reader and its UTF-8 bytes. Before a write is matched, the
    session's rows this process has not yet seen are replayed, in order, into its local
    window, which then holds what one process observing all of them would hold. A session ends
    ``ttl_s`` seconds of wall clock after its last observation; its rows are deleted by the
    next observation of its key (or :meth:`end`).

    Parameters
    ----------
    state : StateBackend
        The service's shared state (:func:`memcurator.service.state.open_state`).
    **bounds
        ``ttl_s``, ``max_key_bytes``, ``max_sessions``, ``max_shingles`` and ``clock`` as
        :class:`SessionReads`; the byte and session caps count the key's live rows in the
        shared state, whichever replica wrote them, and ``clock`` defaults to ``time.time``,
        the wall clock (the replicas' clocks must agree to about a second).

    Raises
    ------
    InvalidInput
        A bound that is not positive.

    Examples
    --------
    >>> from memcurator.service.state import open_state
    >>> st = open_state(":memory:", ":memory:")
    >>> a, b = SharedSessionReads(st), SharedSessionReads(st)  # two replicas
    >>> with a.scope("k1", "s1"):
    ...     a.add("Ticket 88: the VPN gateway in Lyon restarts nightly at 02:00 for "
    ...           "patching; expect ten minutes of downtime.", "tool_output:tickets")
    15
    >>> with b.scope("k1", "s1"):  # observed through a, matched through b
    ...     b.match("Note: the VPN gateway in Lyon restarts nightly at 02:00 for patching; "
    ...             "expect ten minutes of downtime.").sources
    ('tool_output:tickets',)
    >>> st.close()
    """

    def __init__(self, state: Any, **bounds: Any):
        bounds.setdefault("clock", time.time)
        super().__init__(**bounds)
        self.state = state
        self._local: dict[tuple[str, str], _Replay] = {}

    def _purge(self, tx: Any, key_id: str, now: float) -> None:
        """Delete the rows of ``key_id``'s sessions that ended (last observation too old)."""
        tx.x(
            "DELETE FROM svc_observations WHERE key_id=? AND session IN (SELECT session FROM "
            "svc_observations WHERE key_id=? GROUP BY session HAVING MAX(at) <= ?)",
            (key_id, key_id, now - self.ttl_s),
        )

    def _sync(self, key_id: str, session: str) -> _Replay | None:
        """Replay the session's new rows into this process's window; None when the session
        has no live observation."""
        now = float(self.clock())
        with self._guard:
            loc = self._local.get((key_id, session))
            cursor, held = (0, 0) if loc is None else (loc.cursor, loc.reads)
        with self.state.tx(write=False) as tx:
            rows = tx.q(
                "SELECT seq, shingles, source, reader, nbytes, at FROM svc_observations "
                "WHERE key_id=? AND session=? AND seq>? ORDER BY seq",
                (key_id, session, cursor),
            )
            before = tx.q(
                "SELECT COUNT(*) FROM svc_observations WHERE key_id=? AND session=? AND seq<=?",
                (key_id, session, cursor),
            )
        if loc is not None and int(before[0][0]) != held:
            # the session was ended (or purged) elsewhere since: replay it from its start
            with self._guard:
                if self._local.get((key_id, session)) is loc:
                    del self._local[(key_id, session)]
            return self._sync(key_id, session)
        with self._guard:
            loc = self._local.get((key_id, session))
            if rows and loc is None:
                loc = self._local[(key_id, session)] = _Replay(
                    ReadWindow(max_shingles=self.max_shingles)
                )
            if loc is None:
                return None
            for seq, sh, source, reader, nbytes, at in rows:
                if int(seq) <= loc.cursor:
                    continue  # another thread of this process replayed it first
                loc.window.add_shingles(_unpack(sh), source, reader)
                loc.cursor, loc.reads = int(seq), loc.reads + 1
                loc.nbytes += int(nbytes)
                loc.last_at = max(loc.last_at, float(at))
            for k in [k for k, v in self._local.items() if v.last_at + self.ttl_s <= now]:
                del self._local[k]  # ended sessions of every key, this one included
            return loc if loc.last_at + self.ttl_s > now else None

    def window(self, key_id: str, session: str, *, create: bool) -> ReadWindow | None:
        """The session's window as replayed from the shared state (``create`` is ignored: a
        session exists once it has an observation)."""
        loc = self._sync(key_id, session)
        return None if loc is None else loc.window

    def add(self, text: str, source: str, user: str | None = None) -> int:
        """Record ``text``'s hashed shingles as one row of the current session, charging its
        bytes to the key across all replicas.

        Raises
        ------
        InvalidInput
            Called outside any session (:meth:`scope`).
        BudgetExceeded
            The key's live sessions would hold more than ``max_key_bytes`` bytes, or the key
            already holds ``max_sessions`` other sessions. Nothing is recorded.
        StoreError
            The shared state cannot be reached.
        """
        cur = _CURRENT.get()
        if cur is None:
            raise InvalidInput("an observation needs a session (SessionReads.scope)")
        key_id, session = cur
        nbytes = len(text.encode("utf-8"))
        hashes = [h for h, _ in shingles(text)]
        now = float(self.clock())
        with self.state.tx() as tx:
            # one observer of a key at a time across replicas (PostgreSQL: the key's row)
            tx.q("SELECT key_id FROM api_keys WHERE key_id=? FOR UPDATE", (key_id,))
            self._purge(tx, key_id, now)
            live = dict(
                tx.q(
                    "SELECT session, SUM(nbytes) FROM svc_observations WHERE key_id=? "
                    "GROUP BY session",
                    (key_id,),
                )
            )
            held = sum(int(v) for v in live.values())
            if held + nbytes > self.max_key_bytes:
                raise BudgetExceeded(
                    f"this key's observation sessions hold {held} bytes; {nbytes} more would "
                    f"pass max_key_bytes ({self.max_key_bytes}); end a session (DELETE "
                    f"/v1/observations) or wait for it to expire ({self.ttl_s:g} s after its "
                    "last observation)"
                )
            if session not in live and len(live) >= self.max_sessions:
                raise BudgetExceeded(
                    f"this key holds {len(live)} live observation sessions (max_sessions "
                    f"{self.max_sessions}); end one (DELETE /v1/observations) or let it expire"
                )
            tx.x(
                "INSERT INTO svc_observations(key_id, session, shingles, source, reader, "
                "nbytes, at) VALUES (?,?,?,?,?,?,?)",
                (key_id, session, _pack(hashes), source, user, nbytes, now),
            )
        self._sync(key_id, session)
        return len(hashes)

    def match(self, text: str, user: str | None = None) -> Match | None:
        cur = _CURRENT.get()
        loc = None if cur is None else self._sync(*cur)
        return None if loc is None else loc.window.match(text, user)

    def __len__(self) -> int:
        cur = _CURRENT.get()
        loc = None if cur is None else self._sync(*cur)
        return 0 if loc is None else len(loc.window)

    def status(self, key_id: str, session: str) -> dict[str, Any]:
        """As :meth:`SessionReads.status`, counted over every replica's observations."""
        now = float(self.clock())
        with self.state.tx() as tx:
            self._purge(tx, key_id, now)
            rows = tx.q(
                "SELECT session, COUNT(*), SUM(nbytes), MAX(at) FROM svc_observations "
                "WHERE key_id=? GROUP BY session",
                (key_id,),
            )
        mine = [r for r in rows if r[0] == session]
        return {
            "session": session,
            "reads": int(mine[0][1]) if mine else 0,
            "bytes": int(mine[0][2]) if mine else 0,
            "key_bytes": sum(int(r[2]) for r in rows),
            "max_key_bytes": self.max_key_bytes,
            "expires_in_s": max(0.0, float(mine[0][3]) + self.ttl_s - now) if mine else 0.0,
        }

    def end(self, key_id: str, session: str) -> bool:
        """Drop one session's observations in every replica (True when it had any)."""
        with self.state.tx() as tx:
            n = tx.x("DELETE FROM svc_observations WHERE key_id=? AND session=?", (key_id, session))
        with self._guard:
            self._local.pop((key_id, session), None)
        return n > 0


def attach(pool: Any) -> SessionReads:
    """The read window of a :class:`~memcurator.service.tenants.TenantPool`: the one its
    tenants' handles are opened with (made and set when it has none yet): a
    :class:`SharedSessionReads` in the key table's shared state."""
    opts = pool.memory_options
    reads = opts.get("read_window")
    if not isinstance(reads, SessionReads):
        if reads is not None:
            raise InvalidInput("the service keeps the read window itself: pass no read_window")
        reads = opts["read_window"] = SharedSessionReads(pool.keys.state)
    return reads


__all__ = [
    "MAX_KEY_BYTES",
    "MAX_SESSIONS",
    "SESSION_PATTERN",
    "SESSION_TTL_S",
    "SessionReads",
    "SharedSessionReads",
    "attach",
    "check_session",
]
