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

References
----------
CURATOR, Sec. III-D (Share and Trust over an uplink budget L), Fig. 4 (two nodes and a hub).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from memcurator.errors import InvalidInput

#: messages kept per group; the oldest are dropped beyond it (a peer that lags further behind
#: is told so on pull: its cursor is older than the oldest kept message)
MAX_MESSAGES = 100_000
#: the most entries + notices in one push
MAX_ITEMS = 1000
#: the largest sketch accepted (dimension)
MAX_SKETCH_DIM = 4096


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
    """

    seq: int
    sender: str
    to: str | None
    round: int
    entries: list[dict[str, Any]]
    notices: list[str]


@dataclass
class _Group:
    messages: list[Message] = field(default_factory=list)
    next_seq: int = 1
    dropped_through: int = 0  # the last seq no longer kept
    sketches: dict[str, tuple[int, list[float]]] = field(default_factory=dict)


class Hub:
    """The groups of one server: each a message log and the peers' sketches.

    Parameters
    ----------
    max_messages : int, default :data:`MAX_MESSAGES`
        Messages kept per group.
    """

    def __init__(self, max_messages: int = MAX_MESSAGES):
        if max_messages < 1:
            raise InvalidInput(f"max_messages must be >= 1, got {max_messages}")
        self.max_messages = max_messages
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
        """
        if to is not None and to == sender:
            raise InvalidInput("a peer cannot address a push to itself")
        if len(entries) + len(notices) > MAX_ITEMS:
            raise InvalidInput(f"at most {MAX_ITEMS} entries and notices per push")
        with self._lock:
            g = self._group(group)
            m = Message(g.next_seq, sender, to, round, list(entries), list(notices))
            g.next_seq += 1
            g.messages.append(m)
            if len(g.messages) > self.max_messages:
                drop = len(g.messages) - self.max_messages
                g.dropped_through = g.messages[drop - 1].seq
                del g.messages[:drop]
            return m.seq

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


__all__ = ["MAX_ITEMS", "MAX_MESSAGES", "MAX_SKETCH_DIM", "Hub", "Message"]
