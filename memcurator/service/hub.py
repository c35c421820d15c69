"""The hub of a peer group (CURATOR Sec. III-D, Fig. 4): peers exchange shared entries through it.

A *group* is a namespace of the service: every peer of the group holds an API key for that
namespace with the ``peer`` scope, and the key's name is the peer's identity. Nothing the
client sends chooses the group or the sender:

- ``push``: the sender is the key's name, the group the key's namespace; the body carries the
  entries and forget notices (and, optionally, the one peer they are addressed to, and the
  sender's round number);
- ``pull``: the messages other peers of the key's group pushed after a cursor, addressed to
  this peer or to all; never the caller's own, never another group's. The hub keeps each
  peer's cursor (where its last pull ended), so a pull without one goes on from there;
- ``sketch``: each peer publishes its query sketch (CURATOR Eq. 8: a sender prices an entry by
  its value *at the receiver*), and reads the others'.

The hub relays; it neither scores nor admits anything. Each receiving peer runs its own Trust
gate (:meth:`memcurator.Memory.receive`) on what it pulls, with the sender identity the hub
attached (the pushing key's name), and verifies the entry's signature (made by the sender
under its link key for the receiver) against that identity: a peer cannot pass its entries off
as another's, since the hub names the sender and the signature must match that name.

State is kept in the service's shared state (:mod:`memcurator.service.state`: the key file
of a SQLite store, the database of a PostgreSQL one), so every replica of the service serves
one queue per group: a push acknowledged by one replica is pulled through any other, and a
restart or a ``kill -9`` loses nothing acknowledged. A push is one transaction that locks its
group's row (the sequence number and the byte caps are read and changed together); without a
state (tests, a library user) the hub keeps its own in-memory SQLite.

Bounds. A message is kept for ``retention_s`` seconds (default :data:`RETENTION_S`) and among
the group's last ``max_messages``; older ones are dropped, and a peer whose cursor is older
than the oldest kept message is told so on pull. Memory is bounded in bytes too: what one peer
has pushed and the hub still keeps is at most ``max_peer_bytes`` (default
:data:`MAX_PEER_BYTES`), a whole group's at most ``max_group_bytes`` (default
:data:`MAX_GROUP_BYTES`), counted as the UTF-8 bytes of each push's entries and notices as
JSON. A push over either cap is refused, not queued (:class:`~memcurator.errors.RateLimited`,
429 with ``Retry-After``: when enough of the kept pushes expire), so one chatty peer cannot
push the others' messages out, nor a group exhaust the server; a single push larger than the
per-peer cap can never fit (:class:`~memcurator.errors.BudgetExceeded`, 413).

References
----------
CURATOR, Sec. III-D (Share and Trust over an uplink budget L), Fig. 4 (two nodes and a hub).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from memcurator.errors import BudgetExceeded, InvalidInput, RateLimited
from memcurator.service.state import StateBackend, Tx
from memcurator.service.state.sqlite import SqliteState

#: messages kept per group; the oldest are dropped beyond it (a peer that lags further behind
#: is told so on pull: its cursor is older than the oldest kept message)
MAX_MESSAGES = 100_000
#: the most entries + notices in one push
MAX_ITEMS = 1000
#: the largest sketch accepted (dimension)
MAX_SKETCH_DIM = 4096
#: bytes one peer's kept pushes may hold (entries and notices as JSON)
MAX_PEER_BYTES = 64 << 20
#: bytes one group's kept pushes may hold
MAX_GROUP_BYTES = 256 << 20
#: seconds a push is kept for pulling
RETENTION_S = 3600.0
#: rows a pull reads at a time
_PAGE = 500


@dataclass(frozen=True)
class Message:
    """One push, as the hub keeps it.

    Attributes
    ----------
    seq : int
        Position in the group's log (from 1, increasing).
    sender : str
        The pushing key's name (never a body field).
    to : str or None
        The peer it is addressed to; None: every other peer of the group.
    round : int
        The sender's round counter (the hub keeps it as given; it orders nothing).
    entries : list of dict
        Shared entries (text, kind, bytes, q, a, rho_s, source_id, raw_text, signature).
    notices : list of str
        Source ids the sender forgot since it shared them.
    nbytes : int
        What it counts against the byte caps: its entries and notices as JSON, UTF-8 bytes.
    at : float
        When it was pushed (the hub's clock, seconds).
    """

    seq: int
    sender: str
    to: str | None
    round: int
    entries: list[dict[str, Any]]
    notices: list[str]
    nbytes: int = 0
    at: float = 0.0


class Hub:
    """The groups of one server: each a message log and the peers' sketches.

    Parameters
    ----------
    max_messages : int, default :data:`MAX_MESSAGES`
        Messages kept per group.
    max_peer_bytes : int, default :data:`MAX_PEER_BYTES`
        Bytes of one peer's kept pushes, per group.
    max_group_bytes : int, default :data:`MAX_GROUP_BYTES`
        Bytes of one group's kept pushes.
    retention_s : float, default :data:`RETENTION_S`
        Seconds a push is kept.
    clock : callable () -> float, default :func:`time.time`
        Seconds (wall-clock time by default: replicas compare their stamps; tests pass a fake
        clock).
    state : StateBackend, optional
        Where the queue lives (shared by the replicas); None: a private in-memory one.

    Raises
    ------
    InvalidInput
        A bound that is not positive.
    """

    def __init__(
        self,
        max_messages: int = MAX_MESSAGES,
        *,
        max_peer_bytes: int = MAX_PEER_BYTES,
        max_group_bytes: int = MAX_GROUP_BYTES,
        retention_s: float = RETENTION_S,
        clock: Callable[[], float] = time.time,
        state: StateBackend | None = None,
    ):
        for name, v in (
            ("max_messages", max_messages),
            ("max_peer_bytes", max_peer_bytes),
            ("max_group_bytes", max_group_bytes),
        ):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise InvalidInput(f"{name} must be an integer >= 1, got {v!r}")
        if not (isinstance(retention_s, int | float) and math.isfinite(retention_s)) or (
            retention_s <= 0
        ):
            raise InvalidInput(f"retention_s must be a positive number, got {retention_s!r}")
        self.max_messages = max_messages
        self.max_peer_bytes = max_peer_bytes
        self.max_group_bytes = max_group_bytes
        self.retention_s = float(retention_s)
        self.clock = clock
        self.state: StateBackend = SqliteState(":memory:") if state is None else state

    def _group(self, tx: Tx, name: str, now: float) -> tuple[int, int, int]:
        """Lock ``name``'s row (made when missing), drop its expired messages; returns
        (next_seq, dropped_through, nbytes) after that."""
        tx.x(
            "INSERT INTO svc_hub_groups(grp, next_seq, dropped_through, nbytes) "
            "VALUES (?,1,0,0) ON CONFLICT(grp) DO NOTHING",
            (name,),
        )
        nxt, dropped, nbytes = tx.q(
            "SELECT next_seq, dropped_through, nbytes FROM svc_hub_groups WHERE grp=? FOR UPDATE",
            (name,),
        )[0]
        (keep_from,) = tx.q(
            "SELECT MIN(seq) FROM svc_hub_messages WHERE grp=? AND at >= ?",
            (name, now - self.retention_s),
        )[0]
        upto = nxt - 1 if keep_from is None else keep_from - 1  # the oldest come first
        if upto > dropped:
            dropped, nbytes = self._drop(tx, name, upto, nbytes)
        return int(nxt), int(dropped), int(nbytes)

    @staticmethod
    def _drop(tx: Tx, name: str, upto: int, nbytes: int) -> tuple[int, int]:
        """Drop the messages of ``name`` through seq ``upto``; returns the group's new
        (dropped_through, nbytes), written to its row."""
        (gone,) = tx.q(
            "SELECT COALESCE(SUM(nbytes), 0) FROM svc_hub_messages WHERE grp=? AND seq <= ?",
            (name, upto),
        )[0]
        tx.x("DELETE FROM svc_hub_messages WHERE grp=? AND seq <= ?", (name, upto))
        nbytes -= int(gone)
        tx.x(
            "UPDATE svc_hub_groups SET dropped_through=?, nbytes=? WHERE grp=?",
            (upto, nbytes, name),
        )
        return upto, nbytes

    def push(
        self,
        group: str,
        sender: str,
        *,
        to: str | None,
        round: int,
        entries: list[dict[str, Any]],
        notices: list[str],
    ) -> int:
        """Append one message; returns its seq.

        Raises
        ------
        InvalidInput
            Addressed to the sender itself, or more than :data:`MAX_ITEMS` items.
        BudgetExceeded
            One push larger than ``max_peer_bytes``: it could never be kept.
        RateLimited
            The sender's kept pushes, or the group's, would pass their byte cap;
            ``retry_after_s`` says when enough of them expire.
        """
        if to is not None and to == sender:
            raise InvalidInput("a peer cannot address a push to itself")
        if len(entries) + len(notices) > MAX_ITEMS:
            raise InvalidInput(f"at most {MAX_ITEMS} entries and notices per push")
        size = len(json.dumps([entries, notices], separators=(",", ":")).encode("utf-8"))
        if size > min(self.max_peer_bytes, self.max_group_bytes):
            raise BudgetExceeded(
                f"this push is {size} bytes, over the hub's cap of "
                f"{min(self.max_peer_bytes, self.max_group_bytes)} bytes per peer; push fewer "
                "entries at a time"
            )
        body = json.dumps([entries, notices], separators=(",", ":"))
        with self.state.tx() as tx:
            now = self.clock()
            seq, dropped, nbytes = self._group(tx, group, now)
            self._check_caps(tx, group, nbytes, sender, size, now)
            tx.x(
                "INSERT INTO svc_hub_messages(grp, seq, sender, recipient, round, body, nbytes, "
                "at) VALUES (?,?,?,?,?,?,?,?)",
                (group, seq, sender, to, round, body, size, now),
            )
            nbytes += size
            tx.x(
                "UPDATE svc_hub_groups SET next_seq=?, nbytes=? WHERE grp=?",
                (seq + 1, nbytes, group),
            )
            if seq - dropped > self.max_messages:
                self._drop(tx, group, seq - self.max_messages, nbytes)
            return seq

    def _check_caps(
        self, tx: Tx, group: str, nbytes: int, sender: str, size: int, now: float
    ) -> None:
        (mine,) = tx.q(
            "SELECT COALESCE(SUM(nbytes), 0) FROM svc_hub_messages WHERE grp=? AND sender=?",
            (group, sender),
        )[0]
        caps = (
            (int(mine), self.max_peer_bytes, sender, f"pushed by {sender!r}"),
            (nbytes, self.max_group_bytes, None, "for this group"),
        )
        for held, cap, who, whose in caps:
            if held + size > cap:
                wait = self._wait_for(tx, group, held, size, cap, now, who)
                name = "max_peer_bytes" if who is not None else "max_group_bytes"
                per = "peer" if who is not None else "group"
                raise RateLimited(
                    f"the hub keeps {held} bytes {whose} and this push is {size}: over the cap "
                    f"of {cap} bytes per {per} ({name}); retry when older pushes expire (in "
                    f"{math.ceil(wait)} s)",
                    retry_after_s=wait,
                )

    def _wait_for(
        self, tx: Tx, group: str, held: int, need: int, cap: int, now: float, sender: str | None
    ) -> float:
        """Seconds until enough kept messages (of ``sender``, or of anyone) expire for
        ``need`` more bytes to fit ``cap`` (``held`` bytes kept now)."""
        rows = tx.q(
            "SELECT sender, nbytes, at FROM svc_hub_messages WHERE grp=? ORDER BY seq", (group,)
        )
        for who, nb, at in rows:
            if sender is None or who == sender:
                held -= int(nb)
                if held + need <= cap:
                    return max(1.0, at + self.retention_s - now)
        return self.retention_s

    def pull(self, group: str, me: str, since: int | None, limit: int) -> tuple[list[Message], int]:
        """Messages of ``group`` after ``since`` for ``me`` (from other peers, addressed to
        ``me`` or to all), oldest first, at most ``limit``; and the cursor to pull from next.

        The hub keeps each peer's cursor (where its last pull ended) in the shared state, so
        ``since=None`` goes on from there, through any replica and across restarts; a peer
        that never pulled starts at the oldest kept message. Every pull, with ``since`` or
        without, moves the peer's cursor to the returned one (one transaction with the read),
        so a peer that re-reads from an older ``since`` continues from where that read ended.

        Raises
        ------
        InvalidInput
            ``since`` (given, or the peer's kept cursor) is before the oldest kept message
            (messages were dropped unread), or ``since`` is beyond the last seq handed out.
        """
        with self.state.tx() as tx:
            nxt, dropped, _ = self._group(tx, group, self.clock())
            if since is None:
                kept = tx.q("SELECT seq FROM svc_hub_cursors WHERE grp=? AND peer=?", (group, me))
                since = int(kept[0][0]) if kept else dropped
            if since < dropped:
                raise InvalidInput(
                    f"cursor {since} is older than the hub keeps (messages through "
                    f"{dropped} were dropped); pull from {dropped}"
                )
            if since >= nxt:
                raise InvalidInput(f"cursor {since} is beyond the last message ({nxt - 1})")
            out, cursor = self._read(tx, group, me, since, limit, nxt)
            tx.x(
                "INSERT INTO svc_hub_cursors(grp, peer, seq) VALUES (?,?,?) "
                "ON CONFLICT(grp, peer) DO UPDATE SET seq=excluded.seq",
                (group, me, cursor),
            )
            return out, cursor

    @staticmethod
    def _read(
        tx: Tx, group: str, me: str, since: int, limit: int, nxt: int
    ) -> tuple[list[Message], int]:
        out: list[Message] = []
        cursor = since
        while True:  # messages to others do not count toward the limit: read on
            rows = tx.q(
                "SELECT seq, sender, recipient, round, body, nbytes, at FROM "
                "svc_hub_messages WHERE grp=? AND seq > ? ORDER BY seq LIMIT ?",
                (group, cursor, _PAGE),
            )
            for seq, sender, to, rnd, body, nb, at in rows:
                if len(out) >= limit:
                    return out, cursor
                cursor = int(seq)
                if sender != me and (to is None or to == me):
                    entries, notices = json.loads(body)
                    out.append(Message(cursor, sender, to, int(rnd), entries, notices, nb, at))
            if len(rows) < _PAGE:
                return out, nxt - 1

    def cursor(self, group: str, peer: str) -> int | None:
        """Where ``peer``'s last pull of ``group`` ended (None: it never pulled)."""
        with self.state.tx(write=False) as tx:
            rows = tx.q("SELECT seq FROM svc_hub_cursors WHERE grp=? AND peer=?", (group, peer))
        return int(rows[0][0]) if rows else None

    def messages(self, group: str) -> list[Message]:
        """Every message ``group`` keeps (all senders and recipients), oldest first, read in one
        transaction: a consistent copy of the group's log for the inspector's traffic view.
        An unknown group has none."""
        with self.state.tx() as tx:
            rows = tx.q(
                "SELECT seq, sender, recipient, round, body, nbytes, at FROM "
                "svc_hub_messages WHERE grp=? ORDER BY seq",
                (group,),
            )
        out = []
        for seq, sender, to, rnd, body, nb, at in rows:
            entries, notices = json.loads(body)
            out.append(Message(int(seq), sender, to, int(rnd), entries, notices, nb, at))
        return out

    def set_sketch(self, group: str, peer: str, round: int, sketch: list[float]) -> None:
        """Publish ``peer``'s query sketch (replacing its previous one)."""
        if not 1 <= len(sketch) <= MAX_SKETCH_DIM:
            raise InvalidInput(f"a sketch has 1 to {MAX_SKETCH_DIM} numbers, got {len(sketch)}")
        with self.state.tx() as tx:
            tx.x(
                "INSERT INTO svc_hub_sketches(grp, peer, round, sketch) VALUES (?,?,?,?) "
                "ON CONFLICT(grp, peer) DO UPDATE SET round=excluded.round, "
                "sketch=excluded.sketch",
                (group, peer, round, json.dumps([float(x) for x in sketch])),
            )

    def sketches(self, group: str) -> dict[str, tuple[int, list[float]]]:
        """Every peer's last published (round, sketch) in ``group``."""
        with self.state.tx(write=False) as tx:
            rows = tx.q("SELECT peer, round, sketch FROM svc_hub_sketches WHERE grp=?", (group,))
        return {p: (int(r), json.loads(sk)) for p, r, sk in rows}


__all__ = [
    "MAX_GROUP_BYTES",
    "MAX_ITEMS",
    "MAX_MESSAGES",
    "MAX_PEER_BYTES",
    "MAX_SKETCH_DIM",
    "RETENTION_S",
    "Hub",
    "Message",
]
