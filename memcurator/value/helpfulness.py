"""Helpfulness q(m): an entry's marginal utility, tracked online from task outcomes.

References
----------
CURATOR, Eq. 3: q(m) = E_x[U(x; R_x ∪ {m}) − U(x; R_x)], "tracked online by a calibrated
streaming head". The paper reads U label-free from self-consistency of sampled answers; here U is
the outcome reward the caller reports (an execution check), which is what the SQL testbed has.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from memcurator.errors import InvalidInput
from memcurator.value.columns import EntryColumns, stat_column


@dataclass(eq=False, repr=False)
class MarginalUtility:
    """Streaming, shrunk estimate of each entry's marginal utility.

    For entry m, with discounted injected-outcome sums ``(n_m, r_m)`` and undiscounted totals
    ``(N_m, R_m)``::

        q(m) = (r_m + α·π_in) / (n_m + α)  −  (R − R_m + 1) / (N − N_m + 2)

    An entry received from a peer carries the sender's advertised ``q_adv`` in its stats (Eq. 8:
    helpfulness transfers unchanged); it counts as ``alpha`` pseudo-uses, so local outcomes take
    over as they accumulate.

    The first term is the entry's reward rate when injected, shrunk toward the population rate
    ``π_in`` of tasks that had any injection (empirical-Bayes calibration: an unused entry starts
    at the average effect of memory, not at zero). The second is the reward rate of the tasks in
    which m was *not* injected (Laplace-smoothed). Discounting by ``gamma`` per use makes the
    estimate track non-stationary value, so an exemplar that turns stale after a schema drift
    loses its credit within a few failures.

    Parameters
    ----------
    alpha : float, default 2.0
        Prior strength, in pseudo-uses.
    gamma : float, default 0.7
        Per-use discount of an entry's own outcome history (1.0 = no forgetting).

    Examples
    --------
    >>> mu = MarginalUtility()
    >>> st = {}
    >>> for r in (1.0, 1.0, 1.0):
    ...     [st] = mu.observe(r, [st])
    >>> mu.observe(0.0, [])
    []
    >>> round(mu.q(st), 3)
    0.571
    """

    alpha: float = 2.0
    gamma: float = 0.7

    def __post_init__(self) -> None:
        if self.alpha <= 0 or not 0 < self.gamma <= 1:
            raise InvalidInput("alpha must be > 0 and gamma in (0, 1]")
        self._n_all = 0.0
        self._r_all = 0.0
        self._n_inj = 0.0
        self._r_inj = 0.0

    def observe(self, reward: float, injected: list[dict[str, float]]) -> list[dict[str, float]]:
        """Record one task's outcome ``reward`` in [0, 1]; return the injected entries' new stats.

        ``injected`` holds the ``Entry.stats`` of the entries injected for the task (empty when
        none was); they are not mutated: the updated copies come back, aligned with
        ``injected``, for the caller (the memory) to persist.

        Raises
        ------
        InvalidInput
            A NaN or out-of-range reward (the head's counters are left unchanged).
        """
        r = float(reward)
        if not math.isfinite(r) or not 0 <= r <= 1:
            raise InvalidInput(f"reward must be finite and in [0, 1], got {reward!r}")
        self._n_all += 1
        self._r_all += r
        if injected:
            self._n_inj += 1
            self._r_inj += r
        out = []
        for old in injected:
            st = dict(old)
            st["q_n"] = self.gamma * st.get("q_n", 0.0) + 1.0
            st["q_r"] = self.gamma * st.get("q_r", 0.0) + r
            st["n_in"] = st.get("n_in", 0.0) + 1.0
            st["r_in"] = st.get("r_in", 0.0) + r
            out.append(st)
        return out

    @property
    def prior_in(self) -> float:
        """Population reward rate of tasks with an injected entry (Laplace-smoothed)."""
        return (self._r_inj + 1.0) / (self._n_inj + 2.0)

    def q(self, stats: dict[str, float]) -> float:
        """The entry's marginal utility estimate, in [-1, 1]."""
        inj = (stats.get("q_r", 0.0) + self.alpha * self.prior_in) / (
            stats.get("q_n", 0.0) + self.alpha
        )
        # Clamp: an entry's totals can exceed the head's when the head's state was lost or
        # replaced (the namespace reopened under another policy), which would divide by zero.
        n_out = max(self._n_all - stats.get("n_in", 0.0), 0.0)
        r_out = min(max(self._r_all - stats.get("r_in", 0.0), 0.0), n_out)
        base = (r_out + 1.0) / (n_out + 2.0)
        q = inj - base
        if "q_adv" in stats:  # a peer's advertised q (CURATOR Eq. 8), until local evidence
            w = self.alpha / (stats.get("q_n", 0.0) + self.alpha)
            q = w * float(stats["q_adv"]) + (1.0 - w) * q
        return q

    def q_many(self, stats: list[dict[str, float]] | EntryColumns) -> np.ndarray:
        """:meth:`q` for many entries at once, shape (n,); same arithmetic, vectorized.

        ``stats``: the entries' ``Entry.stats`` dicts, or their cached columns
        (:class:`~memcurator.value.columns.EntryColumns`).
        """
        inj, base = self.rates(stats)
        return self.blend_advertised(inj - base, stats)

    def rates(self, stats: list[dict[str, float]] | EntryColumns) -> tuple[np.ndarray, np.ndarray]:
        """The two rates of q, each of shape (n,): the entry's shrunk injected reward rate, and
        the Laplace-smoothed reward rate of the tasks that did not inject it."""
        q_r, q_n = stat_column(stats, "q_r"), stat_column(stats, "q_n")
        return (q_r + self.alpha * self.prior_in) / (q_n + self.alpha), self.base_rate(stats)

    def base_rate(self, stats: list[dict[str, float]] | EntryColumns) -> np.ndarray:
        """The Laplace-smoothed reward rate of the tasks that did not inject each entry,
        shape (n,) (the counterfactual of Eq. 3 taken over all other tasks)."""
        n_in, r_in = stat_column(stats, "n_in"), stat_column(stats, "r_in")
        n_out = np.maximum(self._n_all - n_in, 0.0)
        r_out = np.minimum(np.maximum(self._r_all - r_in, 0.0), n_out)
        return (r_out + 1.0) / (n_out + 2.0)

    def blend_advertised(
        self,
        q: np.ndarray,
        stats: list[dict[str, float]] | EntryColumns,
        uses: np.ndarray | None = None,
    ) -> np.ndarray:
        """Blend a peer's advertised q (CURATOR Eq. 8) into ``q``, shape (n,), until local
        evidence takes over: the advertised value counts as ``alpha`` pseudo-uses against
        ``uses`` (default: the entry's discounted injected uses ``q_n``)."""
        adv = stat_column(stats, "q_adv", np.nan)
        n = stat_column(stats, "q_n") if uses is None else uses
        w = self.alpha / (n + self.alpha)
        return np.where(np.isnan(adv), q, w * adv + (1.0 - w) * q)

    def state(self) -> dict[str, float]:
        return {
            "n_all": self._n_all,
            "r_all": self._r_all,
            "n_inj": self._n_inj,
            "r_inj": self._r_inj,
        }

    def load_state(self, s: dict[str, float]) -> None:
        self._n_all, self._r_all = float(s["n_all"]), float(s["r_all"])
        self._n_inj, self._r_inj = float(s["n_inj"]), float(s["r_inj"])
