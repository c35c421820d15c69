"""Rank components: the final order of recall candidates.

References
----------
CURATOR, Eq. 3 (helpfulness q). TokenWorth, Sec. 4.1 (rank by learned worth, inject K_max).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from memcurator.policy.base import Ranking
from memcurator.policy.components import Component
from memcurator.types import Entry


class CosineRank(Component):
    """Rank by cosine with the query (RAG-style similarity).

    Examples
    --------
    >>> CosineRank().rerank([], np.array([0.2, 0.9]), np.zeros(2), 0).scores.tolist()
    [0.2, 0.9]
    """

    decision = "rank"
    recall_all = False

    def rerank(
        self, candidates: list[Entry], cosine: np.ndarray, e_q: np.ndarray, step: int
    ) -> Ranking:
        return Ranking(np.asarray(cosine, dtype=np.float64))


class CosinePlusHelpfulness(CosineRank):
    """cosine + beta_q · q(m): among equally relevant entries, the more helpful is injected.

    Parameters
    ----------
    beta_q : float, default 0.5
        Our addition: the paper ranks candidates only through propensity; 0 switches it off.
    """

    needs = ("rho",)

    def __init__(self, beta_q: float = 0.5):
        self.beta_q = beta_q

    def rerank(
        self, candidates: list[Entry], cosine: np.ndarray, e_q: np.ndarray, step: int
    ) -> Ranking:
        if self.beta_q == 0:
            return Ranking(np.asarray(cosine, dtype=np.float64))
        head = self._est["rho"].scorer.helpfulness
        if getattr(head, "local", False) and candidates:
            # a local baseline reads the entries' embeddings: the q that Keep and share score
            E = np.vstack([m.embedding for m in candidates])
            q = head.q_local([m.stats for m in candidates], E, [m.id for m in candidates])
        else:
            q = np.array([head.q(m.stats) for m in candidates])
        return Ranking(np.asarray(cosine, dtype=np.float64) + self.beta_q * q)


class LearnedWorth(CosineRank):
    """TokenWorth's recall: rank by learned worth w·φ + η·r(z), keep at most ``k_max``.

    Parameters
    ----------
    k_max : int or None, default 1
        ``K_max``: the rest of the pool gets ``-inf`` (never recalled). None leaves ``k`` to the
        caller.

    Notes
    -----
    The ranking carries each candidate's features, so feedback trains on exactly the inputs the
    choice was made on, whatever was recalled in between.
    """

    needs = ("worth",)

    def __init__(self, k_max: int | None = 1):
        from memcurator.policy.estimators import _pos_int

        self.k_max = k_max
        if k_max is not None:
            _pos_int("k_max", k_max)

    def rerank(
        self, candidates: list[Entry], cosine: np.ndarray, e_q: np.ndarray, step: int
    ) -> Ranking:
        w, V = self._est["worth"].rank(candidates, e_q, step)
        if self.k_max is not None and len(w) > self.k_max:
            drop = np.argsort(-w, kind="stable")[self.k_max :]
            w = w.copy()
            w[drop] = -np.inf
        return Ranking(w, V)


class OracleRank(CosineRank):
    """Recall with an oracle: an upper bound, not a deployable policy.

    The benchmark sets the oracle per task (:meth:`set_oracle`): whether an entry is a correct,
    current exemplar for the task at hand. Only those entries are ranked, by cosine, among every
    resident entry (``recall_all``); with no oracle it ranks like plain cosine.
    """

    recall_all = True

    def __init__(self) -> None:
        self.oracle: Callable[[Entry], bool] | None = None

    def rerank(
        self, candidates: list[Entry], cosine: np.ndarray, e_q: np.ndarray, step: int
    ) -> Ranking:
        cos = np.asarray(cosine, dtype=np.float64)
        if self.oracle is None:
            return Ranking(cos)
        ok = np.array([bool(self.oracle(m)) for m in candidates])
        return Ranking(np.where(ok, cos, -np.inf))


__all__ = ["CosinePlusHelpfulness", "CosineRank", "LearnedWorth", "OracleRank"]
