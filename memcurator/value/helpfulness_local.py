"""Helpfulness q(m) against a local counterfactual: the reward of nearby tasks that did not
inject m, instead of the reward of every task that did not.

CURATOR's Eq. 3 defines helpfulness per task, ``q(m) = E_x[U(x; R_x ∪ {m}) − U(x; R_x)]``: the
counterfactual is the *same* task without m. :class:`~memcurator.value.helpfulness.MarginalUtility`
stands in for ``U(x; R_x)`` with the reward rate of all tasks that did not inject m. On a task
kind the executor finds hard, that global rate is far above what the model achieves on that kind
without m, so a useful exemplar of a hard family looks harmful: its q turns negative, it is
evicted, and every new exemplar of the family enters with q ≈ 0 and is ranked last at its own
write (docs/fronts.md, "Seed 1's gap, found": 18 of one seed's current entries went this way on
the DML stream, and victim accuracy fell to 0.210 against keep-all's 0.457).

This head keeps a window of the last ``window`` tasks (query embedding, reward, injected ids) and
measures m's baseline on the window's tasks whose query is within cosine ``tau`` of m and which
did not inject m (tasks before m existed count: they are the family without m)::

    base_m = (r_near + β · base_global) / (n_near + β)
    q(m)   = (r_m + α·π_in) / (n_m + α) − base_m

With no nearby task the baseline is the global one, so the head then agrees with
:class:`MarginalUtility`. The window is persisted with the head's state (float16 query vectors,
base64), so two handles and a reopened memory score alike.

References
----------
CURATOR, Eq. 3 (helpfulness as marginal utility). The local counterfactual is our reading for
hard task kinds (issue 11, cause 5).
"""

from __future__ import annotations

import base64
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from memcurator.errors import DimensionMismatch, InvalidInput
from memcurator.value.columns import EntryColumns
from memcurator.value.helpfulness import MarginalUtility


@dataclass(eq=False, repr=False)
class LocalBaselineUtility(MarginalUtility):
    """q(m) = shrunk injected reward rate of m − reward rate of nearby tasks without m.

    Parameters
    ----------
    alpha, gamma : float, default 2.0, 0.7
        As in :class:`~memcurator.value.helpfulness.MarginalUtility`.
    window : int, default 128
        Tasks remembered (query, reward, injected ids); the oldest leaves first.
    tau : float, default 0.85
        Cosine between a task's query and an entry's embedding above which the task is "near"
        the entry. 0.85 is Keep's near-duplicate δ: with the hashing embedder, same-family task
        lines have cosine ≥ 0.86 (5th percentile), other families ≤ 0.78.
    beta : float, default 2.0
        Pseudo-tasks of the global baseline in the local one (shrinkage).

    Raises
    ------
    InvalidInput
        ``window < 1``, ``tau`` outside [-1, 1], ``beta <= 0``, or the parent's checks.

    Notes
    -----
    A task's outcome is paired with the last query observed before it (a recall, or
    :meth:`Memory.observe <memcurator.memory.Memory.observe>`): several recalls per task pair
    it with the last one. After a re-embedding the window's queries are in the old space until
    they leave it (as CURATOR's sketch is). The window is saved with the head's state on every
    commit: about 190 KB at the default 128 tasks × 512 dimensions (12 KB without it).

    Examples
    --------
    A hard task kind: without the exemplar the model fails (three tasks), with it half succeed.
    The global baseline (easy tasks elsewhere succeed) calls the exemplar harmful; the local one
    does not.

    >>> import numpy as np
    >>> h = LocalBaselineUtility(window=16)
    >>> hard, easy = np.eye(4)[0], np.eye(4)[1]
    >>> for _ in range(6):
    ...     h.observe_query(easy); _ = h.observe(1.0, []); h.log_task(1.0, [])
    >>> for _ in range(3):
    ...     h.observe_query(hard); _ = h.observe(0.0, []); h.log_task(0.0, [])
    >>> st = {}
    >>> for r in (1.0, 0.0, 1.0, 0.0):
    ...     h.observe_query(hard); [st] = h.observe(r, [st]); h.log_task(r, ["m"])
    >>> bool(h.q_many([st])[0] < 0 < h.q_local([st], hard[None, :], ["m"])[0])
    True
    """

    local = True

    window: int = 128
    tau: float = 0.85
    beta: float = 2.0

    def __post_init__(self) -> None:
        super().__post_init__()
        window, tau, beta = self.window, self.tau, self.beta
        if not isinstance(window, int) or window < 1:
            raise InvalidInput(f"window must be an integer >= 1, got {window!r}")
        if not (isinstance(tau, int | float) and math.isfinite(tau) and -1.0 <= tau <= 1.0):
            raise InvalidInput(f"tau is a cosine in [-1, 1], got {tau!r}")
        if not (isinstance(beta, int | float) and math.isfinite(beta) and beta > 0):
            raise InvalidInput(f"beta must be a finite number > 0, got {beta!r}")
        self.tau = float(tau)
        self.beta = float(beta)
        self._Q: np.ndarray | None = None  # (window, d) unit queries, float32
        self._r = np.zeros(window)
        self._ids: list[frozenset[str]] = [frozenset()] * window
        self._count = 0  # tasks logged so far (the ring holds min(count, window))
        self._last: np.ndarray | None = None

    # ------------------------------------------------------------------ the task window
    def observe_query(self, e_q: np.ndarray) -> None:
        """Remember the query of the task whose outcome :meth:`log_task` will record, shape (d,).

        Raises
        ------
        DimensionMismatch
            A query of another dimension than the window's.
        InvalidInput
            NaN or infinite values.
        """
        e = np.asarray(e_q, dtype=np.float64).reshape(-1)
        if not np.all(np.isfinite(e)):
            raise InvalidInput("query embedding contains NaN or infinite values")
        if self._Q is not None and e.shape[0] != self._Q.shape[1]:
            raise DimensionMismatch(
                f"query embedding has dimension {e.shape[0]}, the window holds {self._Q.shape[1]}"
            )
        n = float(np.linalg.norm(e))
        self._last = (e / n if n > 0 else e).astype(np.float32)

    def log_task(self, reward: float, injected_ids: Sequence[str]) -> None:
        """Add the last observed query's task with its ``reward`` and injected ids to the window
        (nothing without an observed query: the outcome of a task never recalled for).

        Raises
        ------
        InvalidInput
            A NaN or out-of-range reward (the window is left unchanged).
        """
        r = float(reward)
        if not math.isfinite(r) or not 0 <= r <= 1:
            raise InvalidInput(f"reward must be finite and in [0, 1], got {reward!r}")
        if self._last is None:
            return
        if self._Q is None:
            self._Q = np.zeros((self.window, self._last.shape[0]), dtype=np.float32)
        i = self._count % self.window
        self._Q[i] = self._last.astype(np.float16)  # the persisted precision: reopen scores alike
        self._r[i] = r
        self._ids[i] = frozenset(str(x) for x in injected_ids)
        self._count += 1
        self._last = None

    def near_counts(self, E: np.ndarray, ids: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Per entry, the window's tasks near it that did not inject it: (count, summed reward),
        each of shape (n,). ``E`` holds the entries' embeddings, shape (n, d)."""
        E = np.asarray(E)
        n = E.shape[0] if E.ndim == 2 else 0
        k = min(self._count, self.window)
        if n == 0 or k == 0 or self._Q is None:
            return np.zeros(n), np.zeros(n)
        if E.shape[1] != self._Q.shape[1]:
            raise DimensionMismatch(
                f"embeddings have dimension {E.shape[1]}, the window holds {self._Q.shape[1]}"
            )
        E64 = np.asarray(E, dtype=np.float64)
        norms = np.linalg.norm(E64, axis=1)
        cos = (E64 @ self._Q[:k].astype(np.float64).T) / np.where(norms > 0, norms, 1.0)[:, None]
        near = cos >= self.tau
        row = {x: i for i, x in enumerate(ids)}
        for j in range(k):  # a task that injected the entry is not its counterfactual
            for x in self._ids[j]:
                i = row.get(x)
                if i is not None:
                    near[i, j] = False
        return near.sum(axis=1).astype(np.float64), near.astype(np.float64) @ self._r[:k]

    def q_local(
        self, stats: list[dict[str, float]] | EntryColumns, E: np.ndarray, ids: Sequence[str]
    ) -> np.ndarray:
        """q(m) with the local baseline for entries whose embeddings are the rows of ``E`` and
        whose ids are ``ids``; shape (n,). Same injected term and peer blending as
        :meth:`~memcurator.value.helpfulness.MarginalUtility.q_many`."""
        inj, glob = self.rates(stats)
        n_near, r_near = self.near_counts(E, ids)
        base = (r_near + self.beta * glob) / (n_near + self.beta)
        return self.blend_advertised(inj - base, stats)

    # ------------------------------------------------------------------ persistence
    def state(self) -> dict[str, Any]:
        st: dict[str, Any] = dict(super().state())
        k = min(self._count, self.window)
        if self._Q is not None and k:
            order = [(self._count - k + j) % self.window for j in range(k)]  # oldest first
            st["window"] = {
                "d": int(self._Q.shape[1]),
                "q16": base64.b64encode(self._Q[order].astype(np.float16).tobytes()).decode(),
                "r": [float(self._r[i]) for i in order],
                "ids": [sorted(self._ids[i]) for i in order],
            }
        return st

    def load_state(self, s: dict[str, Any]) -> None:
        """Restore :meth:`state`. The query observed since the last :meth:`log_task` is this
        handle's task in progress, not shared state: it is kept (a memory reloads the state
        after another handle's commit, between a recall and its feedback)."""
        super().load_state(s)
        self._Q, self._count = None, 0
        self._r = np.zeros(self.window)
        self._ids = [frozenset()] * self.window
        w = s.get("window")
        if not w:
            return
        d = int(w["d"])
        if self._last is not None and self._last.shape[0] != d:
            self._last = None  # a window of another dimension: the pending query cannot join it
        Q = np.frombuffer(base64.b64decode(w["q16"]), dtype=np.float16).reshape(-1, d)
        keep = Q.shape[0] - min(Q.shape[0], self.window)  # a smaller window keeps the newest
        self._Q = np.zeros((self.window, d), dtype=np.float32)
        for j in range(keep, Q.shape[0]):
            i = self._count % self.window
            self._Q[i] = Q[j].astype(np.float32)
            self._r[i] = float(w["r"][j])
            self._ids[i] = frozenset(w["ids"][j])
            self._count += 1


__all__ = ["LocalBaselineUtility"]
