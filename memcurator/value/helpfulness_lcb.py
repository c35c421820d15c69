"""Helpfulness q(m) from a Beta lower confidence bound on the entry's injected-success rate.

CURATOR's streaming head (:class:`~memcurator.value.helpfulness.MarginalUtility`) shrinks an
entry's reward rate toward the population prior and forgets with γ = 0.7 per use, so an entry
never holds more than ~3.3 uses of evidence: a brand-new entry starts at the prior and ranks level
with an incumbent solved 11+ times. On the 1,000 × 3 run that let new entries displace proven
ones 950 times per seed (docs/bench-1000x3.md, cause 4). This head scores an entry by what its
record *guarantees*: the lower ``level`` quantile of its Beta posterior, so an unproven entry
starts low, a proven one rises toward its rate, and two failures pull a stale one down at once.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from memcurator.errors import InvalidInput
from memcurator.value.columns import EntryColumns, stat_column
from memcurator.value.helpfulness import MarginalUtility

#: ``Entry.stats`` keys of this head: discounted injected uses and rewards
STAT_LCB_N, STAT_LCB_R = "lcb_n", "lcb_r"


@dataclass(eq=False, repr=False)
class BetaLCBUtility(MarginalUtility):
    """q(m) = LCB_level(Beta posterior of m's injected-success rate) − rate without m.

    With discounted counts ``n_m`` (uses) and ``r_m`` (summed reward), and the population rate
    ``π_in`` of tasks that had an injection (as in :class:`MarginalUtility`)::

        posterior  Beta(r_m + α·π_in,  n_m − r_m + α·(1 − π_in))
        q(m)       = F⁻¹(level) − (R − R_m + 1) / (N − N_m + 2)

    Parameters
    ----------
    alpha : float, default 2.0
        Prior strength in pseudo-uses (centred on ``π_in``).
    gamma : float, default 0.7
        The parent head's discount (its ``q_n``/``q_r`` stats stay maintained, unused by q).
    level : float, default 0.1
        Lower quantile of the posterior (0.1: a 90% one-sided lower bound). Smaller is more
        conservative toward unproven entries.
    lcb_gamma : float, default 0.95
        Per-use discount of the counts the bound reads (about the last 20 uses), so a proven
        entry's bound can become tight and a drifted one still loses it within a few failures.

    Raises
    ------
    InvalidInput
        ``level`` outside (0, 0.5], ``lcb_gamma`` outside (0, 1], or the parent's checks.

    Examples
    --------
    >>> h = BetaLCBUtility()
    >>> new, proven, failing = {}, {}, {}
    >>> for _ in range(10):
    ...     [proven] = h.observe(1.0, [proven])
    >>> for _ in range(2):
    ...     [failing] = h.observe(0.0, [failing])
    >>> qs = h.q_many([new, proven, failing])
    >>> bool(qs[1] > qs[0] > qs[2])
    True

    References
    ----------
    CURATOR, Eq. 3 (helpfulness q as marginal utility); the bound is our reading for
    separating failing and unproven entries fast (issue 11, cause 4).
    """

    level: float = 0.1
    lcb_gamma: float = 0.95

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0 < self.level <= 0.5:
            raise InvalidInput(f"level must be in (0, 0.5], got {self.level!r}")
        if not 0 < self.lcb_gamma <= 1:
            raise InvalidInput(f"lcb_gamma must be in (0, 1], got {self.lcb_gamma!r}")

    def observe(self, reward: float, injected: list[dict[str, float]]) -> list[dict[str, float]]:
        """As :meth:`MarginalUtility.observe`, also updating the bound's discounted counts."""
        out = super().observe(reward, injected)
        r = float(reward)
        for st in out:
            st[STAT_LCB_N] = self.lcb_gamma * st.get(STAT_LCB_N, 0.0) + 1.0
            st[STAT_LCB_R] = self.lcb_gamma * st.get(STAT_LCB_R, 0.0) + r
        return out

    def q(self, stats: dict[str, float]) -> float:
        """The entry's helpfulness, a lower bound; in [-1, 1]."""
        return float(self.q_many([stats])[0])

    def q_many(self, stats: list[dict[str, float]] | EntryColumns) -> np.ndarray:
        """:meth:`q` for many entries, shape (n,); ``stats`` as for
        :meth:`MarginalUtility.q_many <memcurator.value.helpfulness.MarginalUtility.q_many>`."""
        from scipy.stats import beta

        def col(k: str, default: float = 0.0) -> np.ndarray:
            return stat_column(stats, k, default)

        ln, lr = col(STAT_LCB_N), col(STAT_LCB_R)
        lr = np.clip(lr, 0.0, ln)
        pi = min(max(self.prior_in, 1e-3), 1 - 1e-3)
        lower = beta.ppf(self.level, lr + self.alpha * pi, ln - lr + self.alpha * (1 - pi))
        q = np.asarray(lower, dtype=np.float64) - self.base_rate(stats)
        return self.blend_advertised(q, stats, uses=ln)  # a peer's q (Eq. 8) until local uses


__all__ = ["STAT_LCB_N", "STAT_LCB_R", "BetaLCBUtility"]
