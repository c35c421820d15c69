"""Keep components: the order in which entries stay resident, and what must go regardless.

The resident set enforces the byte budget and evicts from the tail of ``priority`` (cachetools'
``popitem``); a keep component only orders (STYLE.md rule 1).

References
----------
CURATOR, Alg. 1 lines 7-12 and Prop. 1 (density greedy); Section V-A (LRU, recency and
success-replay baselines). TokenWorth, Sec. 4.4 (worth-guided replacement, capacity B_max).
"""

from __future__ import annotations

import numpy as np

from memcurator.errors import InvalidInput
from memcurator.policy.base import Victims
from memcurator.policy.components import Component
from memcurator.policy.keep_contradict import ContradictionGuard
from memcurator.types import Entry
from memcurator.value.coverage import check_ramp, coverage_priority, near_neighbours


class _Keep(Component):
    decision = "keep"
    distills = False
    redundancy_delta: float | None = None

    def victims(self, entries: list[Entry], E: np.ndarray, step: int) -> Victims:
        """Entries to evict regardless of bytes; none by default."""
        return []

    def evict_reason(self) -> str:
        return f"lowest {getattr(self, '_policy_name', 'keep')} priority when the budget was full"


class NewestFirst(_Keep):
    """Oldest out first (FIFO by creation step): the recency baseline and the default.

    Examples
    --------
    >>> from memcurator.types import Entry
    >>> e = [Entry(str(i), "ns", "raw", "t", 1, 1, np.ones(2), created_step=i) for i in (3, 1)]
    >>> NewestFirst().priority(e, np.ones((2, 2)), 5).tolist()
    [3.0, 1.0]
    """

    def priority(self, entries: list[Entry], E: np.ndarray, step: int) -> np.ndarray:
        return np.array([m.created_step for m in entries], dtype=np.float64)

    def evict_reason(self) -> str:
        return "oldest entry when the byte budget was full"


class LeastRecentlyUsed(_Keep):
    """Least recently used out first: priority is the last step injected or created."""

    def priority(self, entries: list[Entry], E: np.ndarray, step: int) -> np.ndarray:
        return np.array([max(m.last_used_step, m.created_step) for m in entries], dtype=np.float64)

    def evict_reason(self) -> str:
        return "least recently used when the byte budget was full"


class MostSuccessful(_Keep):
    """Success replay: entries that led to the most net successes stay; ties go to newer."""

    def priority(self, entries: list[Entry], E: np.ndarray, step: int) -> np.ndarray:
        return np.array(
            [m.successes - m.failures + 1e-6 * m.created_step for m in entries], dtype=np.float64
        )

    def evict_reason(self) -> str:
        return "fewest successes when the byte budget was full"


class RhoDensity(_Keep):
    """CURATOR's Keep: density-greedy fill of the budget by ρ (Prop. 1, Alg. 1 lines 7-12).

    Entries of positive net value V̂ − λĤ are ranked by ρ; all others after them, by net value
    (a non-positive net value never raises Eq. 5's objective, and dividing a negative value by b
    would favour the larger of two harmful entries).

    Parameters
    ----------
    distill : bool, default True
        Offer a raw entry about to fall out to the distiller first (Alg. 1, line 9).
    redundancy_delta : float or None, default 0.85
        Cosine floor of Keep's version rule (our extension; None switches the rule off).
        Two residents are versions of one request when their cosine is ≥ δ **and** their
        task lines are equal up to case and whitespace, or their cosine reaches the memory's
        same-request threshold (0.99) with the same literals
        (:func:`memcurator.lifecycle.resident.why_same_request`). Under budget pressure the
        outranked version (the older, unless proven better) is the first victim; the rule
        never adds an eviction, and entries that differ in a literal ("user 17" / "user 18")
        are distinct facts, ranked by ρ like any other. In CURATOR, δ is Share's redundancy
        test on the uplink (Alg. 1 line 15), not a Keep rule.
    guard_contradictions : bool, default True
        An unproven entry that contradicts an older injectable resident ranks just below it
        (:class:`~memcurator.policy.keep_contradict.ContradictionGuard`): a contradiction is
        never resolved in favour of the unproven side by eviction (issue 33).
    coverage : bool, default False
        Rank by the *marginal* value given the entries ranked above (lazy greedy,
        :func:`memcurator.value.coverage.coverage_priority`): an entry whose embedding nearly
        duplicates a kept one has its value discounted by its redundancy r ∈ [0, 1] and ranks
        below every entry that duplicates nothing kept when r = 1 (CURATOR Eq. 3's q as a
        marginal utility and Alg. 1 line 15's δ test applied to the resident set; TokenWorth
        Sec. 4.4's coverage). False (the default): each entry scored alone, as before issue 35.
        Off by default because entries that differ only in a literal ("user 17" / "user 18")
        are near-duplicates by embedding: for a fact memory they are distinct facts
        (tests/test_keep_budget.py, issue 19), while for a memory read through literal
        alignment (``curator/align``, which turns one exemplar into the answer for any literal)
        they are redundant exemplars of one request pattern; that preset turns it on.
    coverage_lo, coverage_hi : float, default 0.7, 0.9
        The redundancy ramp in cosine: r = 0 at or below ``coverage_lo``, 1 at or above
        ``coverage_hi``. Tuned on seed 0 of the fake-executor SQL stream, where exemplars of one
        family have cosine ≥ 0.89 (5th percentile) and of different families ≤ 0.65 (issue 35).
    coverage_max_rows : int, default 2048
        Above this many residents the pass is O(n² d) too costly per write and entries are
        scored alone (the ramp is not applied).

    Raises
    ------
    InvalidInput
        A bad ``redundancy_delta``, ramp or ``coverage_max_rows``.
    """

    needs = ("rho",)

    def __init__(
        self,
        distill: bool = True,
        redundancy_delta: float | None = 0.85,
        guard_contradictions: bool = True,
        coverage: bool = False,
        coverage_lo: float = 0.7,
        coverage_hi: float = 0.9,
        coverage_max_rows: int = 2048,
    ):
        check_ramp(coverage_lo, coverage_hi)
        if isinstance(coverage_max_rows, bool) or int(coverage_max_rows) < 0:
            raise InvalidInput(f"coverage_max_rows must be >= 0, got {coverage_max_rows!r}")
        self.coverage = bool(coverage)
        self.coverage_lo = float(coverage_lo)
        self.coverage_hi = float(coverage_hi)
        self.coverage_max_rows = int(coverage_max_rows)
        self.distill = distill
        self.guard_contradictions = guard_contradictions
        self._guard = ContradictionGuard() if guard_contradictions else None
        if redundancy_delta is not None and not -1.0 <= redundancy_delta <= 1.0:
            raise InvalidInput(
                "redundancy_delta is a cosine threshold in [-1, 1] (or None), "
                f"got {redundancy_delta!r}"
            )
        self.redundancy_delta = redundancy_delta
        self.distills = distill

    def priority(self, entries: list[Entry], E: np.ndarray, step: int) -> np.ndarray:
        rho_est = self._est["rho"]
        t = rho_est.terms(entries, E)
        net = t.V - rho_est.lam * t.H
        if self.coverage and 1 < len(entries) <= self.coverage_max_rows:
            pr = coverage_priority(
                t.V,
                t.H,
                t.b,
                rho_est.lam,
                near_neighbours(E, self.coverage_lo),
                self.coverage_lo,
                self.coverage_hi,
                per_byte=bool(getattr(rho_est, "per_byte", True)),
            )
        else:
            lowest = float(t.rho[net > 0].min()) if np.any(net > 0) else 0.0
            pr = np.where(net > 0, t.rho, lowest - 1.0 + np.tanh(net))
        return pr if self._guard is None else self._guard.adjust(entries, E, pr)

    def evict_reason(self) -> str:
        cov = (
            ", its value discounted by redundancy with higher-ranked residents"
            if self.coverage
            else ""
        )
        if self._est["rho"].helpfulness == "worth":
            return (
                f"lowest net-value density rho (q = learned worth){cov} when the byte budget "
                "was full"
            )
        return f"lowest net-value density rho{cov} when the byte budget was full"


class ProbeWorth(_Keep):
    """TokenWorth's keep: evict the admission's victim, the lowest worth over capacity, and
    under byte pressure by probe-averaged worth (Sec. 4.4)."""

    needs = ("worth",)

    def victims(self, entries: list[Entry], E: np.ndarray, step: int) -> Victims:
        """The victim named by the last admission, then, if the bank still holds more than
        ``capacity`` records (reopened with a smaller capacity), the lowest-worth extras."""
        wm = self._est["worth"]
        ids = {m.id for m in entries}
        out = [v for v in wm.victims if v[0] in ids]
        wm.victims = []
        extra = len(entries) - len(out) - wm.bank_capacity()
        if extra > 0:
            chosen = {v[0] for v in out}
            rest = [i for i, m in enumerate(entries) if m.id not in chosen]
            w = wm.probe_worth([entries[i] for i in rest], np.asarray(E)[rest], step).mean(axis=1)
            for j in np.argsort(w, kind="stable")[:extra]:
                m = entries[rest[j]]
                out.append(
                    (
                        m.id,
                        float(w[j]),
                        f"lowest probe-averaged worth ({w[j]:.3f}) over capacity "
                        f"{wm.bank_capacity()}",
                    )
                )
        return out

    def priority(self, entries: list[Entry], E: np.ndarray, step: int) -> np.ndarray:
        wm = self._est["worth"]
        pr = wm.probe_worth(entries, E, step).mean(axis=1)
        doomed = {v[0] for v in wm.victims}
        return np.array(
            [-np.inf if m.id in doomed else p for m, p in zip(entries, pr, strict=True)]
        )

    def evict_reason(self) -> str:
        return "lowest probe-averaged TokenWorth worth when the byte budget was full"


__all__ = ["LeastRecentlyUsed", "MostSuccessful", "NewestFirst", "ProbeWorth", "RhoDensity"]
