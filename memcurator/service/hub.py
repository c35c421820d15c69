"""The hub of a peer group (CURATOR Sec. III-D, Fig. 4): peers exchange shared entries through it.

A *group* is a namespace of the service: every peer of the group holds an API key for that
namespace with the ``peer`` scope, and the key's name is the peer's identity. Nothing the
client sends chooses the group or the sender:

- ``push``: the sender is the key's name, the group the key's namespace; the body carries the
  entries and forget notices (and, optionally, the one peer they are addressed to, and the
  sender's round number);
- ``pull``: the messages other peers of the key's group pushed after a cursor, addressed to
  this peer or to all; never the caller's own, never another group's;
- ``sketch``: each peer publishes its query sketch (CURATOR Eq. 8: a sender prices an entry by
  its value *at the receiver*), and reads the others'.

The hub relays; it neither scores nor admits anything. Each receiving peer runs its own Trust
gate (:meth:`memcurator.Memory.receive`) on what it pulls, with the sender identity the hub
attached (the pushing key's name), and verifies the entry's signature (made by the sender
under its link key for the receiver) against that identity: a peer cannot pass its entries off
as another's, since the hub names the sender and the signature must match that name.

State is kept in memory, per server process (a relay queue, not a store of record): a restart
loses what was pushed and not yet pulled, and the pushing peers' stores still hold every entry
(share again to resend). Run the hub with one worker.

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
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from memcurator.errors import BudgetExceeded, InvalidInput, RateLimited

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


@dataclass
class _Group:
    messages: list[Message] = field(default_factory=list)
    next_seq: int = 1
    dropped_through: int = 0  # the last seq no longer kept
    sketches: dict[str, tuple[int, list[float]]] = field(default_factory=dict)
    nbytes: int = 0  # bytes of the kept messages
    peer_bytes: dict[str, int] = field(default_factory=dict)  # the same, by sender

    def drop(self, n: int) -> None:
        """Drop the ``n`` oldest kept messages."""
        for m in self.messages[:n]:
            self.nbytes -= m.nbytes
            left = self.peer_bytes[m.sender] - m.nbytes
            if left:
                self.peer_bytes[m.sender] = left
            else:
                del self.peer_bytes[m.sender]
        if n:
            self.dropped_through = self.messages[n - 1].seq
            del self.messages[:n]

    def expire(self, before: float) -> None:
        """Drop the messages pushed before ``before`` (the oldest come first)."""
        n = 0
        while n < len(self.messages) and self.messages[n].at < before:
            n += 1
        self.drop(n)

    def wait_for(self, need: int, cap: int, now: float, retention_s: float, sender: str | None):
        """Seconds until enough kept messages (of ``sender``, or of anyone) expire for
        ``need`` more bytes to fit ``cap``."""
        held = self.nbytes if sender is None else self.peer_bytes.get(sender, 0)
        for m in self.messages:
            if sender is None or m.sender == sender:
                held -= m.nbytes
                if held + need <= cap:
                    return max(1.0, m.at + retention_s - now)
        return retention_s


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
    clock : callable () -> float
        Seconds (tests pass a fake clock).

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
        clock: Callable[[], float] = time.monotonic,
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
        self._lock = threading.Lock()
        self._groups: dict[str, _Group] = {}

    def _group(self, name: str) -> _Group:
        g = self._groups.get(name)
        if g is None:
            g = self._groups[name] = _Group()
        return g

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
        with self._lock:
            g = self._group(group)
            now = self.clock()
            g.expire(now - self.retention_s)
            self._check_caps(g, sender, size, now)
            m = Message(g.next_seq, sender, to, round, list(entries), list(notices), size, now)
            g.next_seq += 1
            g.messages.append(m)
            g.nbytes += size
            g.peer_bytes[sender] = g.peer_bytes.get(sender, 0) + size
            if len(g.messages) > self.max_messages:
                g.drop(len(g.messages) - self.max_messages)
            return m.seq

    def _check_caps(self, g: _Group, sender: str, size: int, now: float) -> None:
        caps = (
            (g.peer_bytes.get(sender, 0), self.max_peer_bytes, sender, f"pushed by {sender!r}"),
            (g.nbytes, self.max_group_bytes, None, "for this group"),
        )
        for held, cap, who, whose in caps:
            if held + size > cap:
                wait = g.wait_for(size, cap, now, self.retention_s, who)
                name = "max_peer_bytes" if who is not None else "max_group_bytes"
                per = "peer" if who is not None else "group"
                raise RateLimited(
                    f"the hub keeps {held} bytes {whose} and this push is {size}: over the cap "
                    f"of {cap} bytes per {per} ({name}); retry when older pushes expire (in "
                    f"{math.ceil(wait)} s)",
                    retry_after_s=wait,
                )

    def pull(self, group: str, me: str, since: int, limit: int) -> tuple[list[Message], int]:
        """Messages of ``group`` after ``since`` for ``me`` (from other peers, addressed to
        ``me`` or to all), oldest first, at most ``limit``; and the cursor to pull from next.

        Raises
        ------
        InvalidInput
            ``since`` is before the oldest kept message (messages were dropped unread), or
            beyond the last seq handed out.
        """
        with self._lock:
            g = self._group(group)
            g.expire(self.clock() - self.retention_s)
            if since < g.dropped_through:
                raise InvalidInput(
                    f"cursor {since} is older than the hub keeps (messages through "
                    f"{g.dropped_through} were dropped); pull from {g.dropped_through}"
                )
            if since >= g.next_seq:
                raise InvalidInput(f"cursor {since} is beyond the last message ({g.next_seq - 1})")
            out: list[Message] = []
            cursor = since
            for m in g.messages:
                if m.seq <= since:
                    continue
                if len(out) >= limit:
                    break
                cursor = m.seq
                if m.sender != me and (m.to is None or m.to == me):
                    out.append(m)
            else:
                cursor = g.next_seq - 1
            return out, cursor

    def set_sketch(self, group: str, peer: str, round: int, sketch: list[float]) -> None:
        """Publish ``peer``'s query sketch (replacing its previous one)."""
        if not 1 <= len(sketch) <= MAX_SKETCH_DIM:
            raise InvalidInput(f"a sketch has 1 to {MAX_SKETCH_DIM} numbers, got {len(sketch)}")
        with self._lock:
            self._group(group).sketches[peer] = (round, list(sketch))

    def sketches(self, group: str) -> dict[str, tuple[int, list[float]]]:
        """Every peer's last published (round, sketch) in ``group``."""
        with self._lock:
            return dict(self._group(group).sketches)


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
