"""EDM (Eval-Driven Memory) as components: the evaluation gate and cos × PEI recall.

A trajectory persists only if its evaluation certifies it (Algorithm 1: PEI ≥ 0.8 ∧ TI ≥ 4.0);
recall returns the entry maximising cosine × PEI among those with cosine ≥ 0.87. The metrics
travel on the trajectory (:class:`~memcurator.types.Trajectory.metrics`), are stored in the
entry's metadata by :meth:`Memory.record`, and are computed for SQL tasks as described in
:mod:`memcurator.envs.sql.edm`.

References
----------
EDM, Algorithm 1 (Selective Storage Protocol) and Section 4.1.4 (retrieval,
``argmax cos(e_τ, e_P) × PEI(τ)`` subject to ``cos ≥ 0.87``).
"""

from __future__ import annotations

import math

import numpy as np

from memcurator.errors import InvalidInput
from memcurator.policy.base import Ranking, Verdict
from memcurator.policy.components import Component
from memcurator.types import Entry


def _metric(m: Entry, key: str) -> float:
    try:
        v = float(m.meta.get(key, float("nan")))
    except (TypeError, ValueError):
        return float("nan")
    return v


class EvalGate(Component):
    """Admit a write only if its evaluation certifies it: PEI ≥ ``min_pei`` and TI ≥ ``min_ti``.

    An entry that carries no evaluation (``meta`` without ``pei``/``ti``: a hand-written note,
    a peer's or an attacker's entry) is not certified and is rejected, with that reason.

    Parameters
    ----------
    min_pei : float, default 0.8
    min_ti : float, default 4.0
        Thresholds τ_storage and τ_trace of Algorithm 1.

    Raises
    ------
    InvalidInput
        Non-finite thresholds.

    Examples
    --------
    >>> from memcurator.types import Entry
    >>> e = Entry("a", "ns", "raw", "t", 1, 1, np.ones(2), meta={"pei": 0.5, "ti": 5.0})
    >>> EvalGate().admit(e, [], np.zeros((0, 2)), 0).ok
    False
    """

    decision = "admit"

    def __init__(self, min_pei: float = 0.8, min_ti: float = 4.0):
        self.min_pei = min_pei
        self.min_ti = min_ti
        if not (math.isfinite(min_pei) and math.isfinite(min_ti)):
            raise InvalidInput(f"min_pei and min_ti must be finite, got {min_pei!r}, {min_ti!r}")

    def admit(self, candidate: Entry, resident: list[Entry], E: np.ndarray, step: int) -> Verdict:
        p, ti = _metric(candidate, "pei"), _metric(candidate, "ti")
        if not (math.isfinite(p) and math.isfinite(ti)):
            return Verdict(False, float("nan"), "edm: no evaluation metrics (PEI, TI) to certify")
        if p >= self.min_pei and ti >= self.min_ti:
            return Verdict(
                True, p, f"edm: PEI={p:.2f} >= {self.min_pei:g} and TI={ti:g} >= {self.min_ti:g}"
            )
        return Verdict(
            False,
            p,
            f"edm: not certified (PEI={p:.2f} vs {self.min_pei:g}, TI={ti:g} vs {self.min_ti:g})",
        )


class CosineTimesPEI(Component):
    """EDM's recall: score cos × PEI, only for candidates with cosine ≥ ``min_cosine``.

    Candidates below the similarity threshold, or without a PEI, get ``-inf`` (never recalled):
    a query that matches nothing closely enough recalls nothing.

    Parameters
    ----------
    min_cosine : float, default 0.87
        The paper's similarity threshold.

    Examples
    --------
    >>> from memcurator.types import Entry
    >>> es = [Entry(i, "ns", "raw", "t", 1, 1, np.ones(2), meta={"pei": p})
    ...       for i, p in (("a", 0.5), ("b", 1.0), ("c", 1.0))]
    >>> CosineTimesPEI().rerank(es, np.array([0.95, 0.9, 0.5]), np.ones(2), 0).scores.tolist()
    [0.475, 0.9, -inf]
    """

    decision = "rank"
    recall_all = False

    def __init__(self, min_cosine: float = 0.87):
        self.min_cosine = min_cosine
        if not math.isfinite(min_cosine):
            raise InvalidInput(f"min_cosine must be finite, got {min_cosine!r}")

    def recallable(self, entries: list[Entry]) -> np.ndarray | None:
        """Entries with a finite PEI (the others are never recalled, whatever the query), or
        None when all have one: recall leaves the others out before it cuts its pool."""
        ok = np.fromiter(
            (math.isfinite(_metric(m, "pei")) for m in entries), dtype=bool, count=len(entries)
        )
        return None if ok.all() else ok

    def rerank(
        self, candidates: list[Entry], cosine: np.ndarray, e_q: np.ndarray, step: int
    ) -> Ranking:
        cos = np.asarray(cosine, dtype=np.float64)
        p = np.array([_metric(m, "pei") for m in candidates], dtype=np.float64)
        ok = (cos >= self.min_cosine) & np.isfinite(p)
        return Ranking(np.where(ok, cos * np.nan_to_num(p, nan=0.0), -np.inf))


__all__ = ["CosineTimesPEI", "EvalGate"]
