"""CURATOR's Share: which resident insights to send a peer under an uplink budget.

References
----------
CURATOR, Alg. 1 lines 13-17 and Eq. 7-8: ρ_s(m) = (V̂_p(m) − λĤ(m))/b(m) > τ, with the
propensity re-projected on the peer's advertised query sketch q̄_p; a redundancy test drops an
entry whose cosine with one already selected is ≥ δ; τ rises as the uplink budget L is used up.
:func:`verified_share_scores` adds a prior on q(m) from a verified outcome of the task the entry
was written from (our extension: the paper's q has no prior but the population rate).
:class:`Demand` and :class:`Offer` are the messages of demand-driven sharing (our extension:
Eq. 8 re-projected on the one query a peer lacks instead of its running sketch; see
:func:`memcurator.lifecycle.exchange.offer`).
"""

from __future__ import annotations

import builtins
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from memcurator.errors import InvalidInput
from memcurator.policy.components import Component
from memcurator.trust.auth import Signature
from memcurator.trust.outcome import OutcomeClaim, SignedOutcome, text_sha
from memcurator.types import Entry


@dataclass(frozen=True)
class ForgetNotice:
    """What crosses the link when the sender forgot an entry it had shared: the receiver
    forgets its copy (the one it received from this peer with this ``source_id``).

    Attributes
    ----------
    source_id : str
        The entry id at the sender (receivers keep it as ``meta["source_id"]``).
    """

    source_id: str

    @property
    def bytes(self) -> int:
        """Uplink cost: the id's UTF-8 bytes."""
        return len(self.source_id.encode("utf-8"))


@dataclass(frozen=True)
class SharedEntry:
    """What crosses the link for one shared entry.

    Attributes
    ----------
    text : str
    kind : str
    bytes : int
        Uplink cost: the entry's stored bytes b(m).
    q : float
        The sender's helpfulness q(m), advertised (Eq. 8: transfers unchanged).
    a : float
        The sender's abstraction gain a(m) = b⁰/b, advertised.
    rho_s : float
        The share score that selected it (per byte).
    source_id : str
        The entry id at the sender; the receiver keeps it (``meta["source_id"]``) so that a
        later :class:`ForgetNotice` reaches the copy.
    signature : Signature or None, default None
        The sender's MAC over ``Claim(receiver namespace, "peer", sender, kind, text)``
        (:mod:`memcurator.trust.auth`); the receiver verifies it.
    raw_text : str or None, default None
        The raw trajectory the entry was distilled from, when sent: the receiver recomputes
        ``a`` from it (:func:`memcurator.trust.reputation.recompute_abstraction_gain`).
    outcome : SignedOutcome or None, default None
        The sender's verified outcome for this entry, signed for the receiver
        (:class:`memcurator.trust.outcome.SignedOutcome`): evidence that can release it off
        probation at the receiver while the sender is in good standing.
    """

    text: str
    kind: str
    bytes: int
    q: float
    a: float
    rho_s: float
    source_id: str
    signature: Any = None
    raw_text: str | None = None
    outcome: Any = None

    @classmethod
    def from_wire(cls, d: Mapping[str, Any], *, outcome: Any = None) -> SharedEntry:
        """The entry of a JSON dict with these fields' names (a peer frame, a hub message);
        ``signature`` as ``[key_id, mac]`` or null, ``raw_text`` optional. ``outcome`` is
        taken as given: each transport decides what a malformed claim means.

        Raises
        ------
        KeyError, ValueError, TypeError
            A field is missing or not of its type.
        """
        sig = d.get("signature")
        return cls(
            d["text"],
            d["kind"],
            int(d["bytes"]),
            float(d["q"]),
            float(d["a"]),
            float(d["rho_s"]),
            d["source_id"],
            signature=None if sig is None else Signature(*sig),
            raw_text=d.get("raw_text"),
            outcome=outcome,
        )

    def wire(self, sender: str) -> dict[str, Any]:
        """The JSON frame of this entry from ``sender`` (:meth:`wire_bytes` counts it)."""
        sig = self.signature
        d: dict[str, Any] = {
            "sender": sender,
            "text": self.text,
            "kind": self.kind,
            "bytes": self.bytes,
            "q": self.q,
            "a": self.a,
            "rho_s": self.rho_s,
            "source_id": self.source_id,
            "raw_text": self.raw_text,
            "signature": None if sig is None else [sig.key_id, sig.mac],
        }
        if self.outcome is not None:  # the frame of an entry without one is as before
            d["outcome"] = self.outcome.to_wire()
        return d

    def compact(self, sender: str, task: str | None = None) -> builtins.bytes:
        """The entry as a compact frame (JSON, UTF-8) for a receiver that knows ``task``
        (demand-driven sharing: the task it demanded). Nothing the receiver can rebuild
        crosses: the ``Task:`` line when it is ``task``, the outcome claim's action when it
        is the text's ``Action:`` line, the claim's entry hash (the receiver hashes the text
        it rebuilt: a frame altered on the way fails the claim's signature), a missing raw
        trajectory; the advertised numbers are rounded to 4 significant digits.
        :meth:`from_compact` rebuilds exactly this entry (those numbers rounded).

        Examples
        --------
        >>> e = SharedEntry("Task: Count rows.\\nAction: SELECT 1;", "insight", 9, 0.25, 1.0,
        ...                 1e-4, "e1")
        >>> f = e.compact("p1", task="Count rows.")
        >>> len(f) < e.wire_bytes("p1") // 2
        True
        >>> SharedEntry.from_compact(f, task="Count rows.") == ("p1", e)
        True
        """
        text, omit = self.text, False
        if task is not None and entry_task(text) == task and text.startswith(f"Task: {task}\n"):
            text, omit = text[len(f"Task: {task}\n") :], True
        d: dict[str, Any] = {"s": sender, "t": text}
        if omit:
            d["T"] = 1
        if self.kind != "insight":
            d["k"] = self.kind
        d.update(b=self.bytes, q=_g4(self.q), a=_g4(self.a), r=_g4(self.rho_s), i=self.source_id)
        if self.raw_text is not None:
            d["x"] = self.raw_text
        if self.signature is not None:
            d["g"] = [self.signature.key_id, self.signature.mac]
        if self.outcome is not None:
            c, sig = self.outcome.claim, self.outcome.signature
            o: dict[str, Any] = {"t": c.task, "v": c.verdict, "h": c.state_hash}
            o["g"] = [sig.key_id, sig.mac]
            if c.action != _action_line(self.text):
                o["a"] = c.action
            if c.entry_sha != text_sha(self.text):
                o["e"] = c.entry_sha
            d["o"] = o
        return json.dumps(d, ensure_ascii=False, separators=(",", ":")).encode("utf-8")

    @classmethod
    def from_compact(
        cls, frame: builtins.bytes, task: str | None = None
    ) -> tuple[str, SharedEntry]:
        """``(sender, entry)`` of a :meth:`compact` frame, rebuilt with the receiver's
        ``task`` where the frame left it out.

        Raises
        ------
        InvalidInput
            Not a compact frame; a frame that left out a task the receiver does not give.
        """
        try:
            d = json.loads(frame.decode("utf-8"))
            text = d["t"]
            if d.get("T"):
                if task is None:
                    raise InvalidInput("the frame left out its task and none was given")
                text = f"Task: {task}\n{text}"
            out = None
            if "o" in d:
                o = d["o"]
                claim = OutcomeClaim(
                    o["t"],
                    o.get("a", _action_line(text)),
                    o["v"],
                    o["h"],
                    o.get("e", text_sha(text)),
                )
                out = SignedOutcome(claim, Signature(*o["g"]))
            names = {"b": "bytes", "q": "q", "a": "a", "r": "rho_s", "i": "source_id"}
            wire = {v: d[k] for k, v in names.items()}
            wire.update(text=text, kind=d.get("k", "insight"), signature=d.get("g"))
            wire["raw_text"] = d.get("x")
            return d["s"], cls.from_wire(wire, outcome=out)
        except InvalidInput:
            raise
        except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError) as err:
            raise InvalidInput(f"not a compact shared-entry frame: {err}") from None

    def wire_bytes(self, sender: str = "") -> int:
        """Bytes this entry takes on the link: its compact JSON frame in UTF-8 (the text as
        JSON escapes it, the envelope, the signature and the signed outcome claim).

        Examples
        --------
        >>> s = SharedEntry("Task: a\\nAction: b", "insight", 9, 0.1, 1.0, 0.0, "e1")
        >>> s.wire_bytes("p1") - len(s.text.encode("utf-8")) > 100  # the envelope counts
        True
        """
        return len(json.dumps(self.wire(sender), separators=(",", ":")).encode("utf-8"))


def _g4(x: float) -> float:
    """``x`` rounded to 4 significant digits (an advertised number on a compact frame)."""
    return float(f"{float(x):.4g}")


_ACTION_LINE = re.compile(r"^Action: (.*)$", re.MULTILINE)


def _action_line(text: str) -> str:
    """The text's first ``Action:`` line's content ('' when it has none)."""
    m = _ACTION_LINE.search(text)
    return m.group(1) if m else ""


#: bytes of a task key (:func:`task_key`): 8 (a demand's cost is mostly its key; a sender
#: compares it with the few hundred tasks it holds, so a chance match is ~1e-16 per demand,
#: and the receiver checks the entry's task on arrival, :func:`answers`)
KEY_BYTES = 8
_TASK_LINE = re.compile(r"\ATask: (.+?)\s*$", re.MULTILINE)


def task_key(task: str) -> bytes:
    """The 8-byte key of a task's text: BLAKE2b-64 of the text with whitespace runs folded
    and the ends stripped (case kept: SQL literals are case-sensitive).

    Raises
    ------
    InvalidInput
        ``task`` is not a non-empty string.

    Examples
    --------
    >>> task_key("Count  rows.\\n") == task_key("Count rows.")
    True
    >>> len(task_key("Count rows."))
    8
    """
    return _digest(_fold(task), KEY_BYTES)


def _fold(task: str, *, literals: bool = False) -> str:
    """``task`` with whitespace runs folded (and, with ``literals``, quoted strings and
    numbers as ``#``); :class:`InvalidInput` for anything but a non-empty string."""
    if not isinstance(task, str) or not task.strip():
        raise InvalidInput(f"a task must be a non-empty string, got {task!r:.60}")
    return " ".join((_LITERAL.sub("#", task) if literals else task).split())


def _digest(text: str, n: int) -> bytes:
    return hashlib.blake2b(text.encode("utf-8"), digest_size=n).digest()


#: bytes of a task's shape key (:func:`shape_key`)
SHAPE_BYTES = 8
_LITERAL = re.compile(r"'[^']*'|\"[^\"]*\"|\d+(?:[.,]\d+)*")


def task_shape(task: str) -> str:
    """The task's text with its literals folded: quoted strings and numbers become ``#``,
    whitespace runs one space. Tasks of one template that differ only in their constants
    ("... exceeds 500 minutes" / "... exceeds 950 minutes") have one shape. Refuses what
    :func:`task_key` refuses (:class:`~memcurator.errors.InvalidInput`).

    Examples
    --------
    >>> task_shape("Count orders of customer 17 in 'north'.")
    'Count orders of customer # in #.'
    """
    return _fold(task, literals=True)


def shape_key(task: str) -> bytes:
    """The 8-byte key of a task's shape (:func:`task_shape`; its errors): BLAKE2b-64. A
    sibling offered under it is checked on arrival (:func:`answers`), so a collision costs
    one fetch, never a wrong admission.

    Examples
    --------
    >>> [shape_key(t) == shape_key("Sum x over 500 rows.")
    ...  for t in ("Sum x over 950 rows.", "Sum y over 500 rows.")]
    [True, False]
    """
    return _digest(task_shape(task), SHAPE_BYTES)


def entry_task(text: str) -> str | None:
    """The task an insight was distilled from: the ``Task:`` line of
    :func:`memcurator.distill.render_insight`'s format (None for text of another form).

    Examples
    --------
    >>> entry_task("Task: Count rows.\\nAction: SELECT COUNT(*) FROM t")
    'Count rows.'
    >>> entry_task("always check the schema first") is None
    True
    """
    m = _TASK_LINE.match(text)
    return m.group(1) if m else None


@dataclass(frozen=True)
class Demand:
    """What a receiver publishes about a task its memory does not cover (demand-driven
    sharing): the task's key, and, only when the receiver accepts experience of similar
    tasks, the task's text.

    Attributes
    ----------
    key : bytes
        :func:`task_key` of the task (8 bytes): a sender matches it against the task of
        each insight it holds; it reveals nothing of the text to a peer that lacks the task.
    text : str or None, default None
        The task's text, sent only for similarity matching
        (:func:`memcurator.lifecycle.exchange.offer`'s ``match_cos``).
    shape : bytes or None, default None
        :func:`shape_key` of the task (8 bytes), sent when the receiver holds no entry of
        the task's shape either: a sender that lacks the exact task may then answer with a
        sibling (the same template, other constants).

    Raises
    ------
    InvalidInput
        ``key`` not :data:`KEY_BYTES` bytes, ``shape`` not :data:`SHAPE_BYTES` bytes, or an
        empty ``text``.

    Examples
    --------
    >>> Demand(task_key("Count rows.")).bytes
    8
    >>> Demand(task_key("Count rows."), "Count rows.").bytes
    19
    >>> Demand.of("Count rows.", with_shape=True).bytes
    16
    """

    key: bytes
    text: str | None = None
    shape: bytes | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.key, bytes) or len(self.key) != KEY_BYTES:
            raise InvalidInput(f"a demand's key must be {KEY_BYTES} bytes")
        if self.text is not None and (not isinstance(self.text, str) or not self.text.strip()):
            raise InvalidInput("a demand's text must be a non-empty string or None")
        if self.shape is not None and (
            not isinstance(self.shape, bytes) or len(self.shape) != SHAPE_BYTES
        ):
            raise InvalidInput(f"a demand's shape key must be {SHAPE_BYTES} bytes or None")

    @classmethod
    def of(cls, task: str, *, with_text: bool = False, with_shape: bool = False) -> Demand:
        """The demand for ``task`` (its text along only with ``with_text``, its shape key
        only with ``with_shape``)."""
        return cls(
            task_key(task), task if with_text else None, shape_key(task) if with_shape else None
        )

    @property
    def bytes(self) -> int:
        """Bytes on the link: the key, the shape key and the text's UTF-8."""
        text = 0 if self.text is None else len(self.text.encode("utf-8"))
        return KEY_BYTES + (0 if self.shape is None else SHAPE_BYTES) + text


@dataclass(frozen=True)
class Offer:
    """A sender's answer to a :class:`Demand`: which entry it would send, and why.

    Attributes
    ----------
    source_id : str
        The entry's id at the sender (what the receiver fetches).
    rho_s : float
        Its share score against the demand (Eq. 7 with Eq. 8's propensity on the demanded
        task), per byte.
    exact : bool
        The entry was distilled from exactly the demanded task (its task key matches).
    wire : int
        Bytes of the entry's frame if fetched (:meth:`SharedEntry.wire_bytes`).
    q, a : float, default 0.0 and 1.0
        The helpfulness and abstraction gain the sender will advertise in the frame (kept
        by the sender for :func:`memcurator.lifecycle.exchange.fetch`; not part of the
        offer's bytes).
    shape : bool, default False
        Not exact: the entry's task has the demanded shape (:func:`shape_key`), a sibling.
    """

    source_id: str
    rho_s: float
    exact: bool
    wire: int
    q: float = 0.0
    a: float = 1.0
    shape: bool = False

    @property
    def bytes(self) -> int:
        """Bytes on the link: id, score (4), flags (1), announced frame size (4)."""
        return len(self.source_id.encode("utf-8")) + 9

    @property
    def match(self) -> str:
        """How it answers the demand: ``"exact"``, ``"shape"`` or ``"similar"``."""
        return "exact" if self.exact else "shape" if self.shape else "similar"


def answers(demand: Demand, entry: SharedEntry, *, shape: bool = False) -> bool:
    """True when ``entry`` was distilled from exactly ``demand``'s task (with ``shape``: from
    a task of the demanded shape, :func:`shape_key`): what a receiver checks of an entry
    offered as ``exact`` (or ``shape``) before it takes it (a peer that claims to hold the
    task and sends something else is caught here, whatever it signs).

    Examples
    --------
    >>> d = Demand.of("Count rows of 17.", with_shape=True)
    >>> e = SharedEntry("Task: Count rows of 23.\\nAction: SELECT 1", "insight", 9, 0, 1, 0, "e")
    >>> answers(d, e), answers(d, e, shape=True), answers(Demand.of("Count rows of 17."), e,
    ...                                                   shape=True)
    (False, True, False)
    """
    t = entry_task(entry.text)
    if t is None:
        return False
    if shape:
        return demand.shape is not None and shape_key(t) == demand.shape
    return task_key(t) == demand.key


#: q(m) a verified pass is worth before any reuse: one pseudo-use of reward 1 against the
#: helpfulness head's prior (α = 2 pseudo-uses at a population rate π ≈ 0.25):
#: (1 + α·π)/(1 + α) − π = 0.25 (:class:`memcurator.value.helpfulness.MarginalUtility`)
VERIFIED_Q = 0.25


def verified_share_scores(
    rho_s: np.ndarray,
    p: np.ndarray,
    q: np.ndarray,
    a: np.ndarray,
    b: np.ndarray,
    verdicts: Sequence[str | None],
    *,
    verified_q: float = VERIFIED_Q,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """ρ_s (Eq. 7) with a prior on q from the sender's verified outcome of each entry.

    An entry written from a task whose outcome the agent checked has evidence of helpfulness
    before any reuse: a verified pass means its action solved its own task. Eq. 8 values an
    entry at V̂_p = p_p·q·a with q learned from later injections only, so a new record has
    q ≈ 0 and never clears τ. Here a verified pass raises q to at least ``verified_q`` (the
    value of one successful pseudo-use, :data:`VERIFIED_Q`); a verified fail is never sent
    (evidence the entry misleads); an entry with no verdict keeps Eq. 7 unchanged. The
    entries still compete on net value per byte under the uplink budget
    (:func:`select_for_peer`), so a big verified entry loses to a small one of equal value.

    Parameters
    ----------
    rho_s, p, q, a, b : ndarray of shape (n,)
        Eq. 7-8's terms against the peer's sketch: share score (value per byte), propensity,
        helpfulness, abstraction gain, bytes.
    verdicts : sequence of {"pass", "fail", None}, length n
        The verified outcome of each entry's own task (None: not verified).
    verified_q : float, default 0.25
        The prior q of a verified pass, in [0, 1].

    Returns
    -------
    rho_s : ndarray of shape (n,)
        ρ_s + p·(q' − q)·a / b, q' = max(q, verified_q) for a pass.
    q : ndarray of shape (n,)
        q' (the helpfulness to advertise).
    eligible : ndarray of bool, shape (n,)
        False for a verified fail.

    Raises
    ------
    InvalidInput
        Lengths differ, an unknown verdict, or ``verified_q`` outside [0, 1].

    References
    ----------
    CURATOR, Eq. 7-8 (ρ_s = (p_p·q·a − λĤ)/b > τ); the prior is ours (the paper's helpfulness
    head starts from the population rate).

    Examples
    --------
    >>> one = np.ones(2)
    >>> r, q, ok = verified_share_scores(np.zeros(2), one, np.zeros(2), one, 100 * one,
    ...                                  ["pass", None])
    >>> r.tolist(), q.tolist(), ok.tolist()
    ([0.0025, 0.0], [0.25, 0.0], [True, True])
    """
    n = len(verdicts)
    arrs = [np.asarray(x, dtype=np.float64) for x in (rho_s, p, q, a, b)]
    if any(x.shape != (n,) for x in arrs):
        raise InvalidInput(f"share terms and verdicts must all have length {n}")
    if not 0.0 <= verified_q <= 1.0:
        raise InvalidInput(f"verified_q must be in [0, 1], got {verified_q}")
    bad = {v for v in verdicts if v not in ("pass", "fail", None)}
    if bad:
        raise InvalidInput(f"unknown verdicts {sorted(map(str, bad))}")
    rho0, pp, q0, aa, bb = arrs
    passed = np.array([v == "pass" for v in verdicts], dtype=bool)
    eligible = np.array([v != "fail" for v in verdicts], dtype=bool)
    q1 = np.where(passed, np.maximum(q0, verified_q), q0)
    rho1 = rho0 + pp * (q1 - q0) * aa / np.maximum(bb, 1.0)
    return rho1, q1, eligible


def select_for_peer(
    entries: list[Entry],
    E: np.ndarray,
    rho_s: np.ndarray,
    q: np.ndarray,
    *,
    uplink_bytes: int,
    cost: Sequence[int] | None = None,
    tau: float = 0.0,
    tau_rise: float = 5e-5,
    delta: float = 0.9,
) -> tuple[list[tuple[int, float]], list[tuple[int, str]]]:
    """Greedy share selection (Alg. 1 lines 13-17).

    Parameters
    ----------
    entries : list of Entry, length n
    E : ndarray of shape (n, d)
        Their unit embeddings.
    rho_s : ndarray of shape (n,)
        Share scores (value per byte) against the peer's sketch.
    q : ndarray of shape (n,)
        Helpfulness to advertise.
    uplink_bytes : int
        Budget L, bytes, for this sharing round.
    cost : sequence of int, length n, optional
        What each entry costs on the link, bytes (default: its stored bytes ``Entry.bytes``).
        :func:`memcurator.lifecycle.exchange.share` passes the UTF-8 bytes of the text, what
        actually crosses: the stored footprint also counts the embedding, which the receiver
        recomputes, so charging it made one entry (≈ 2.2 kB) exceed a per-peer budget of
        L / (M − 1) = 1,666 B and nothing was ever sent.
    tau : float, default 0.0
        Base share threshold τ, value per byte.
    tau_rise : float, default 5e-5
        τ grows linearly with the used fraction of L: τ(u) = τ + tau_rise · u / L, so the last
        bytes of the link go only to clearly valuable entries. 5e-5 is the density of an entry of
        net value 0.125 at 2.5 KB (our reading: the paper says only that τ rises).
    delta : float, default 0.9
        Redundancy threshold δ on cosine with an already selected entry.

    Returns
    -------
    chosen : list of (index, threshold at selection)
    skipped : list of (index, reason) for entries that cleared neither test

    Raises
    ------
    InvalidInput
        Negative ``uplink_bytes``, or a NaN score.
    """
    if uplink_bytes < 0:
        raise InvalidInput(f"uplink_bytes must be >= 0, got {uplink_bytes}")
    if not np.all(np.isfinite(rho_s)):
        raise InvalidInput("share scores contain NaN or infinite values")
    costs = [m.bytes for m in entries] if cost is None else [int(c) for c in cost]
    if len(costs) != len(entries) or any(c < 0 for c in costs):
        raise InvalidInput("cost must hold one non-negative byte count per entry")
    order = np.argsort(-rho_s, kind="stable")
    used = 0
    chosen: list[tuple[int, float]] = []
    skipped: list[tuple[int, str]] = []
    for i in order:
        i = int(i)
        thr = tau + tau_rise * (used / uplink_bytes if uplink_bytes else 1.0)
        if rho_s[i] <= thr:
            skipped.append((i, f"rho_s={rho_s[i]:.3g} <= tau={thr:.3g}"))
            continue
        if used + costs[i] > uplink_bytes:
            skipped.append((i, f"{costs[i]} bytes do not fit the {uplink_bytes - used} left"))
            continue
        if chosen:
            sims = E[[c for c, _ in chosen]] @ E[i]
            j = int(np.argmax(sims))
            if sims[j] >= delta:
                skipped.append(
                    (i, f"redundant with {entries[chosen[j][0]].id} (cos={sims[j]:.3f})")
                )
                continue
        chosen.append((i, thr))
        used += costs[i]
    return chosen, skipped


class RhoShare(Component):
    """CURATOR's Share component: the advertised sketch q̄ and ρ_s against a peer's (Eq. 7-8).

    Examples
    --------
    >>> RhoShare.needs
    ('rho',)
    """

    decision = "share"
    needs = ("rho",)

    @property
    def sketch(self) -> np.ndarray:
        """The running query sketch q̄, shape (d,)."""
        return np.asarray(self._est["rho"].scorer.sketch)

    def share_terms(self, entries: list[Entry], E: np.ndarray, sketch: np.ndarray) -> Any:
        """ρ's terms of ``entries`` with propensity against the peer's ``sketch`` (Eq. 8)."""
        return self._est["rho"].terms(entries, E, sketch=sketch)
