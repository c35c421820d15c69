"""Domain objects shared by every layer: tasks, trajectories, entries, recall results, decisions.

These are plain dataclasses with no behaviour beyond validation; the store, the policies and the
benchmark all speak them (DESIGN.md, "Domain objects").
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

import numpy as np

from memcurator.errors import InvalidInput

Kind = Literal["raw", "insight", "skill"]
Origin = Literal["self", "peer", "external"]
Subset = Literal["clean", "victim", "attacker"]

KINDS: tuple[str, ...] = ("raw", "insight", "skill")
ORIGINS: tuple[str, ...] = ("self", "peer", "external")


@dataclass
class Task:
    """One task an agent must solve.

    Parameters
    ----------
    id : str
        Unique id within a stream (e.g. ``"fam17/v3"``).
    instruction : str
        The natural-language request shown to the agent.
    family : str
        Id of the task family it re-instantiates (one LifelongAgentBench task).
    payload : dict
        Environment data (for SQL: table name, columns, rows, reference SQL, kind).
    subset : {"clean", "victim", "attacker"}
        Evaluation subset: victims are post-drift tasks of drifted families, attacker tasks are
        later variants of poisoned target families.
    """

    id: str
    instruction: str
    family: str
    payload: dict[str, Any] = field(default_factory=dict)
    subset: Subset = "clean"


@dataclass
class Step:
    """One (observation, action) step of a trajectory."""

    observation: str
    action: str


@dataclass
class Trajectory:
    """What happened when an agent (or the expert it escalated to) worked on a task.

    Parameters
    ----------
    task_id : str
    steps : list of Step
        Interleaved observations and actions, in order.
    reward : float
        Outcome reward in [0, 1] from the environment's checker.
    tokens_in, tokens_out : int
        Prompt and completion tokens over all model calls.
    model_calls : int
    cost_usd : float
        Money spent on model calls, USD.
    latency_s : float
        Wall-clock seconds spent in model calls.
    solver : str
        ``"local"`` or ``"expert"``: who produced the final action.
    metrics : dict of str to float
        Evaluation metrics of the trajectory (EDM's ``pei``, ``frr``, ``ti``, ...; see
        :mod:`memcurator.envs.sql.edm`). :meth:`Memory.record` stores them in the entry's ``meta``,
        where an admission gate can read them.
    """

    task_id: str
    steps: list[Step] = field(default_factory=list)
    reward: float = 0.0
    tokens_in: int = 0
    tokens_out: int = 0
    model_calls: int = 0
    cost_usd: float = 0.0
    latency_s: float = 0.0
    solver: str = "local"
    metrics: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for k, v in self.metrics.items():
            if not isinstance(v, int | float) or not math.isfinite(float(v)):
                raise InvalidInput(f"trajectory metric {k!r} must be a finite number, got {v!r}")
        r = float(self.reward)
        if not math.isfinite(r) or not 0.0 <= r <= 1.0:
            raise InvalidInput(f"trajectory reward must be a finite number in [0, 1], got {r!r}")
        self.reward = r


#: Reserved prefix: a top-level ``meta`` key starting with it is memcurator's, never the user's.
RESERVED_PREFIX = "_"

#: The key each typed :class:`TrustState` field had in ``meta`` before schema v6 (and still has
#: in the flat form :meth:`TrustState.legacy` gives: old exports, byte accounting).
TRUST_KEYS: dict[str, str] = {
    "_probation": "probation",
    "_held_for": "held_for",
    "_taint": "taint",
    "claimed_origin": "claimed_origin",
    "_derived_from": "derived_from",
    "_vouched_by": "vouched_by",
    "_corroborated": "corroborated",
    "_user": "user",
    "_personal": "personal",
}


def is_internal_key(key: str) -> bool:
    """Whether a top-level ``meta`` key names memcurator's own state (a key starting with
    :data:`RESERVED_PREFIX`, or one of :data:`TRUST_KEYS`), not the user's data.

    Examples
    --------
    >>> is_internal_key("_probation"), is_internal_key("claimed_origin"), is_internal_key("family")
    (True, True, False)
    """
    return key.startswith(RESERVED_PREFIX) or key in TRUST_KEYS


@dataclass
class TrustState:
    """memcurator's own state of an entry: trust (probation, taint, provenance) and scope.

    Stored in the entry's own store columns (schema v6), never in the user's ``meta``. Each
    field is None when unset. Besides the typed fields, it reads and writes by the key the
    state had in ``meta`` before v6 (``state["_probation"]``, ``"_taint" in state``), so that a
    key added later (any other ``_``-key) needs no schema change: it lives in ``extra`` (the
    store's one generic JSON column).

    Attributes
    ----------
    probation : str or None
        Why the entry is on probation (kept, not injected); None when it is not.
    held_for : str or None
        On probation for what it says (only a verified outcome releases it).
    taint : str or None
        The channel its declared or observed sources imply (``"peer"``, ``"external"``).
    claimed_origin : str or None
        The origin its writer claimed when a check downgraded it.
    derived_from : list of dict or None
        Declared and observed sources (``{"kind", "id"[, "via"]}``).
    vouched_by : list of str or None
        Authenticated principals (``origin:detail``) that wrote the same content.
    corroborated : list of str or None
        The evidence that released it from probation.
    user : str or None
        The user it is scoped to (recall returns it to that user only).
    personal : bool or None
        True: personal data of ``user``, never shared to peers.
    extra : dict
        Any other internal key (``"_"`` + name) with its JSON value.

    Examples
    --------
    >>> t = TrustState(probation="origin external")
    >>> "_probation" in t, t["_probation"], t.get("_taint", "none")
    (True, 'origin external', 'none')
    >>> t["_outcome"] = {"ok": True}
    >>> t.extra, t.legacy()
    ({'_outcome': {'ok': True}}, {'_probation': 'origin external', '_outcome': {'ok': True}})
    """

    probation: str | None = None
    held_for: str | None = None
    taint: str | None = None
    claimed_origin: str | None = None
    derived_from: list[dict[str, Any]] | None = None
    vouched_by: list[str] | None = None
    corroborated: list[str] | None = None
    user: str | None = None
    personal: bool | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @staticmethod
    def _check(key: str) -> str | None:
        """The typed field of ``key`` (None: it lives in ``extra``), or :class:`InvalidInput`
        for a key that is neither."""
        name = TRUST_KEYS.get(key)
        if name is None and not (isinstance(key, str) and key.startswith(RESERVED_PREFIX)):
            raise InvalidInput(
                f"{key!r} is not a trust-state key: keys start with {RESERVED_PREFIX!r} or are "
                f"one of {sorted(TRUST_KEYS)}"
            )
        return name

    def get(self, key: str, default: Any = None) -> Any:
        """The value of ``key`` (``"_probation"``, ``"_outcome"``, ...), ``default`` if unset."""
        name = self._check(key)
        if name is None:
            return self.extra.get(key, default)
        v = getattr(self, name)
        return default if v is None else v

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self.get(key) is not None

    def __getitem__(self, key: str) -> Any:
        if key not in self:
            raise KeyError(key)
        return self.get(key)

    def __setitem__(self, key: str, value: Any) -> None:
        name = self._check(key)
        if name is None:
            self.extra[key] = value
        else:
            setattr(self, name, value)

    def pop(self, key: str, *default: Any) -> Any:
        """Remove ``key``; its value (``default`` if given and unset, else KeyError)."""
        if key not in self:
            if default:
                return default[0]
            raise KeyError(key)
        v = self.get(key)
        name = self._check(key)
        if name is None:
            del self.extra[key]
        else:
            setattr(self, name, None)
        return v

    def setdefault(self, key: str, value: Any) -> Any:
        """``key``'s value, set to ``value`` first when unset."""
        if key not in self:
            self[key] = value
        return self.get(key)

    def legacy(self) -> dict[str, Any]:
        """The set keys as they were kept in ``meta`` before schema v6 (what ``b(m)`` counts
        and what an old export carried), in field order, ``extra`` last."""
        out = {k: getattr(self, n) for k, n in TRUST_KEYS.items() if getattr(self, n) is not None}
        return out | self.extra

    @classmethod
    def from_legacy(cls, items: Mapping[str, Any]) -> TrustState:
        """The state from a mapping of internal keys (an old entry's ``meta`` minus its user
        keys, or an export's ``trust`` object); user keys in it are ignored."""
        t = cls()
        for k, v in items.items():
            if isinstance(k, str) and is_internal_key(k) and v is not None:
                t[k] = v
        return t

    def copy(self) -> TrustState:
        """A deep copy (editing it changes nothing of this one)."""
        return copy.deepcopy(self)


def split_meta(meta: Mapping[str, Any]) -> tuple[dict[str, Any], TrustState]:
    """``(user meta, trust state)`` of a pre-v6 ``meta`` that mixed the two: every internal
    top-level key (:func:`is_internal_key`) moves to the state, the rest stays (nested keys
    are the user's data whatever their name).

    Examples
    --------
    >>> m, t = split_meta({"family": "f", "_taint": "peer", "_x": 1, "n": {"_probation": 1}})
    >>> m, t.taint, t.extra
    ({'family': 'f', 'n': {'_probation': 1}}, 'peer', {'_x': 1})
    """
    user = {k: v for k, v in meta.items() if not (isinstance(k, str) and is_internal_key(k))}
    return user, TrustState.from_legacy(meta)


@dataclass
class Entry:
    """One memory record.

    Parameters
    ----------
    id : str
    namespace : str
    kind : {"raw", "insight", "skill"}
        A raw trajectory, a distilled insight, or a reusable skill.
    text : str
        The stored text (what is injected into a prompt).
    bytes : int
        Stored footprint ``b`` in bytes (computed once on admission by the store's sizer).
    raw_bytes : int
        Bytes ``b⁰`` of the raw trajectory it was formed from; ``raw_bytes / bytes`` is CURATOR's
        abstraction gain ``a`` (CURATOR, Eq. 3).
    embedding : ndarray of shape (d,), float32, L2-normalized
    origin : {"self", "peer", "external"}
    origin_detail : str
        Peer id, tool name or ``"expert"``.
    reinforcement : int
        How many times the same text was written again (self-reinforcement count, CURATOR ψ).
    uses, successes, failures : int
        Times injected into a prompt, and the outcomes of those tasks.
    created_step, last_used_step : int
        Logical clock (task index) at creation and last injection.
    meta : dict
        Free metadata (family id, task id, evaluation metrics such as EDM's PEI/TI): the
        user's alone, no top-level key is internal (:func:`is_internal_key`).
    stats : dict
        Per-method statistics kept by policies (e.g. reward sums for helpfulness).
    trust : TrustState
        memcurator's own state of the entry (probation, taint, provenance, user scope), kept
        in the store's own columns; ``meta`` is the user's alone.
    """

    id: str
    namespace: str
    kind: str
    text: str
    bytes: int
    raw_bytes: int
    embedding: np.ndarray = field(repr=False)
    origin: str = "self"
    origin_detail: str = ""
    reinforcement: int = 0
    uses: int = 0
    successes: int = 0
    failures: int = 0
    created_step: int = 0
    last_used_step: int = -1
    meta: dict[str, Any] = field(default_factory=dict)
    stats: dict[str, float] = field(default_factory=dict)
    trust: TrustState = field(default_factory=TrustState)

    @property
    def abstraction_gain(self) -> float:
        """CURATOR's ``a(m) = b⁰(m) / b(m)`` (Eq. 3), at least 1 for any distilled entry."""
        return self.raw_bytes / self.bytes if self.bytes > 0 else 1.0


class RecallResult(NamedTuple):
    """Typed result of a recall (STYLE.md rule 7).

    Attributes
    ----------
    ids : list of str, length k' <= k
        Entry ids, best first.
    scores : ndarray of shape (k',)
        The ranker's scores, descending.
    entries : list of Entry
        Copies of the entries, aligned with ``ids`` (editing them changes nothing stored).
    features : dict of str to ndarray, optional
        Learner inputs of each returned entry at this recall (TokenWorth's φ ⊕ z), for
        :meth:`Memory.feedback`: what is learned never depends on what was recalled since.
    step : int
        The memory's logical step at recall (-1 when unknown).
    """

    ids: list[str]
    scores: np.ndarray
    entries: list[Entry]
    features: dict[str, np.ndarray] | None = None
    step: int = -1


#: the actions a decision-log row can record
DECISION_ACTIONS = (
    "admit",
    "reject",
    "evict",
    "distill",
    "forget",
    "share",
    "receive",
    "replace",
    "reinforce",
    "downgrade",  # an origin claim (self/peer) that its signature did not prove
    "quarantine",  # a peer whose entries keep failing is refused (reversible)
    "release",  # a peer quarantine lifted
    "update",
    "notice",
    "compact",
    "corroborate",  # an entry on probation released by a verified outcome or agreement
    "trial",  # a contained, checked trial of an entry on probation (passed or failed)
)


@dataclass(frozen=True)
class Decision:
    """One row of the append-only decision log.

    ``action`` is one of admit, reject, evict, distill, forget, share, receive, replace,
    reinforce. ``score`` is the policy's score at decision time (NaN where none applies) and
    ``reason`` says why in words a person can read.
    """

    seq: int
    namespace: str
    step: int
    action: str
    entry_id: str
    score: float
    reason: str
    policy: str
    bytes: int
    at: float
