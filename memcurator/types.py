"""Domain objects shared by every layer: tasks, trajectories, entries, recall results, decisions.

These are plain dataclasses with no behaviour beyond validation; the store, the policies and the
benchmark all speak them (DESIGN.md, "Domain objects").
"""

from __future__ import annotations

import math
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
        Free metadata (family id, task id, evaluation metrics such as EDM's PEI/TI).
    stats : dict
        Per-method statistics kept by policies (e.g. reward sums for helpfulness).
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
