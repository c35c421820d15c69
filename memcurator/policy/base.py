"""The policy interface the memory calls, and the small typed values that cross it.

A policy never touches the store. The memory asks it, in turn: how to rank recall candidates
(:meth:`Policy.rerank`), whether to admit a write (:meth:`Policy.admit`), in what order entries
stay resident under the budget (:meth:`Policy.priority`; the resident set enforces ``max_bytes``
and evicts from the tail, as cachetools' ``Cache`` does with ``popitem``), what to evict
regardless of bytes (:meth:`Policy.victims`), and it tells it what happened
(:meth:`Policy.observe_query`, :meth:`Policy.feedback`). Every method and attribute the memory
uses is declared here: nothing is probed with ``getattr``.

The presets are :class:`~memcurator.policy.bundle.ComponentPolicy` objects: one small component
per decision (``memcurator/policy/components.py``). A user may still subclass :class:`Policy`
directly for a one-off policy.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np

from memcurator.errors import InvalidInput
from memcurator.types import Entry

#: What ``feedback`` receives: learner inputs by entry id (arrays of each entry's features).
Features = Mapping[str, np.ndarray]
#: What ``feedback`` returns: ``{entry id: {stat name: new value}}`` for the memory to persist.
StatUpdates = dict[str, dict[str, float]]
#: What ``victims`` returns: ``(entry id, score, reason)`` of each entry to evict.
Victims = list[tuple[str, float, str]]


class Params:
    """scikit-learn-style parameters: ``get_params``, ``clone`` and ``repr`` from ``__init__``."""

    def get_params(self) -> dict[str, Any]:
        """The constructor arguments, read back from attributes of the same name."""
        sig = inspect.signature(type(self).__init__)
        return {
            k: getattr(self, k)
            for k, p in sig.parameters.items()
            if k != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        }

    def clone(self) -> Any:
        """A fresh, unattached copy with the same parameters and no learned state."""
        return type(self)(**self.get_params())

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"


class Verdict(NamedTuple):
    """An admission decision: ``ok``, the gate's ``score`` (NaN where none) and its ``reason``."""

    ok: bool
    score: float
    reason: str


class Ranking(NamedTuple):
    """Recall scores of n candidates and what learning needs from the ranking.

    Attributes
    ----------
    scores : ndarray of shape (n,)
        Higher ranks first; NaN or ``-inf`` are never returned by recall.
    features : ndarray of shape (n, D) or None
        Per-candidate learner inputs (TokenWorth's φ ⊕ z); they travel on the
        :class:`~memcurator.types.RecallResult` to :meth:`Memory.feedback`, so what is learned
        never depends on the order of calls.
    """

    scores: np.ndarray
    features: np.ndarray | None = None


class Policy(Params):
    """Base policy: admit every write, rank by cosine, keep the newest that fit.

    Attributes
    ----------
    name : str
        The preset name; decisions and saved state are attributed to it.
    bounded : bool
        Whether the preset is meant to run under the byte budget. It is a hint for the
        benchmark (which runs ``keep-all`` and ``full-oracle`` with ``max_bytes=None``); the
        memory enforces whatever ``max_bytes`` it is given, for every policy.
    writes : bool
        ``False`` for the no-memory baseline: :meth:`Memory.record` writes nothing.
    form : {"raw", "insight"}
        What :meth:`Memory.record` writes: the raw trajectory, or its distilled insight.
    min_reward : float
        :meth:`Memory.record` writes a trajectory only if its reward is at least this.
    distills : bool
        Whether an entry about to fall out is first offered to the distiller (CURATOR, Alg. 1).
    redundancy_delta : float or None
        Cosine floor of Keep's version rule: under budget pressure an older version of the
        same request goes first (it never adds an eviction); None switches the rule off.
    recall_all : bool
        Rerank every resident entry instead of the BM25/dense candidate pool (the oracle).
    can_share : bool
        Whether :meth:`share_terms` and :attr:`sketch` are available (CURATOR's Share).
    probation : bool
        Whether an admitted entry whose trusted origin is not ``self`` is kept on probation:
        not injected by recall until corroborated (:mod:`memcurator.trust.provenance`).
    agreement : float or None
        Under probation, the content-support share at which independent trusted entries
        release a probation entry by agreement (:mod:`memcurator.lifecycle.agree`); None: off.
    curator : object or None
        The read-time curate component (JitMem, MemPilot; see
        :class:`~memcurator.policy.components.CurateComponent`), None for write-time policies.
        The agent loop calls it; :class:`~memcurator.memory.Memory` never does.
    """

    name = "base"
    bounded = True
    writes = True
    form = "raw"
    min_reward = 0.5
    distills = False
    redundancy_delta: float | None = None
    recall_all = False
    can_share = False
    probation = False
    agreement: float | None = None
    curator: Any = None

    def attach(self, dim: int) -> None:
        """Called once by the memory with the embedding dimension, before any other call."""
        self._dim = dim

    def set_budget(self, max_bytes: int | None) -> None:
        """The memory's byte budget (None: unbounded), for rules that read it (TokenWorth's
        ``B_max`` tied to bytes). Called after :meth:`attach`; the default ignores it."""

    # --- profile -----------------------------------------------------------------
    def observe_query(self, e_q: np.ndarray) -> None:
        """A query was recalled for; ``e_q`` has shape (d,)."""

    def feedback(
        self, reward: float, injected: list[Entry], step: int, features: Features | None = None
    ) -> StatUpdates:
        """A task ended with ``reward`` in [0, 1]; ``injected`` were in its prompt.

        ``injected`` are copies whose ``uses``/``successes``/``failures``/``last_used_step`` the
        memory has already updated; ``features`` maps their ids to the learner inputs of the
        recall that injected them. Returns ``{id: new stats}`` for the memory to persist;
        nothing is mutated.
        """
        return {}

    def observe_energy(self, eps: float) -> None:
        """The step that just ended spent ``eps`` energy-proxy bytes (embedding + scanning)."""

    # --- decisions ---------------------------------------------------------------
    def admit(self, candidate: Entry, resident: list[Entry], E: np.ndarray, step: int) -> Verdict:
        """Whether to admit ``candidate`` given the resident set (rows of ``E``)."""
        return Verdict(True, float("nan"), f"{self.name} admits every write")

    def priority(self, entries: list[Entry], E: np.ndarray, step: int) -> np.ndarray:
        """Keep order, shape (n,): higher stays resident first. Default: newest first."""
        return np.array([m.created_step for m in entries], dtype=np.float64)

    def victims(
        self, entries: list[Entry], E: np.ndarray, step: int, changed: list[Entry] | None = None
    ) -> Victims:
        """Entries to evict regardless of bytes, as (id, score, reason); default none.

        ``changed``, when given, lists the residents added or given feedback since the last
        call (None: unknown, look at all); a rule that depends on an entry's own counts alone
        may look at these only.
        """
        return []

    def evict_reason(self) -> str:
        return f"lowest {self.name} priority when the byte budget was full"

    def rerank(
        self, candidates: list[Entry], cosine: np.ndarray, e_q: np.ndarray, step: int
    ) -> Ranking | np.ndarray:
        """Final recall scores of the candidates, shape (n_candidates,). Default: cosine.

        A :class:`Ranking` may carry learner features; a bare array is taken as scores.
        """
        return Ranking(np.asarray(cosine, dtype=np.float64))

    def recallable(self, entries: list[Entry]) -> np.ndarray | None:
        """Which ``entries`` this policy's rank could ever return, whatever the query: a bool
        mask of shape (n,), or None when all of them (the default).

        Recall applies it **before** the candidate pool is cut, so entries the rank would
        score ``-inf`` on a per-entry property (EDM: no PEI) cannot fill the pool and hide
        recallable ones (:func:`memcurator.lifecycle.recall.recall`). ``entries`` are the
        resident objects: read them, never change them.
        """
        return None

    def set_oracle(self, oracle: Any) -> None:
        """Give an oracle-ranked policy the benchmark's per-task oracle; others ignore it."""

    def admission_sketch(self, E: np.ndarray) -> np.ndarray | None:
        """The vector v whose products ``E @ v`` with the residents' rows admission reads
        (CURATOR's propensity normaliser, Eq. 3), in ``E``'s precision; None when admission
        reads none. Recall computes them in its own pass over ``E`` and leaves them for the
        next write (:func:`memcurator.lifecycle.recall.recall`)."""
        return None

    # --- share -------------------------------------------------------------------
    @property
    def sketch(self) -> np.ndarray:
        """The query sketch q̄ advertised to peers (CURATOR Eq. 8), shape (d,)."""
        raise InvalidInput(f"policy {self.name!r} keeps no query sketch; use a curator policy")

    def share_terms(self, entries: list[Entry], E: np.ndarray, sketch: np.ndarray) -> Any:
        """ρ_s, q and a of ``entries`` against a peer's sketch (CURATOR Eq. 7-8)."""
        raise InvalidInput(f"policy {self.name!r} cannot share; use a curator policy")

    def clone(self) -> Any:
        """A fresh copy with the same parameters and no learned state; keeps the preset name."""
        c = super().clone()
        if "name" in vars(self):
            c.name = self.name
        return c

    # --- persistence ---------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        return {}

    def load_state(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state` returned."""


__all__ = ["Params", "Policy", "Ranking", "Verdict"]
