"""Learn components: what a policy learns from queries, task outcomes and spent energy.

Each returns the injected entries' updated statistics instead of mutating them; the memory
persists what comes back.

References
----------
CURATOR, Sec. III-A (query sketch, working-task centroid), Eq. 3 (helpfulness head), Eq. 6
(energy virtual queue). TokenWorth, Sec. 4.2-4.3 (two-timescale learner).
"""

from __future__ import annotations

import numpy as np

from memcurator.policy.base import Features, StatUpdates
from memcurator.policy.components import Component
from memcurator.types import Entry


class RhoProfile(Component):
    """CURATOR's profile phase: the query sketch and centroid, the helpfulness head, Eq. 6.

    Parameters
    ----------
    helpfulness : bool, default True
        Update the marginal-utility head from outcomes. ``curator+worth`` turns it off: its q
        comes from the worth learner.
    """

    decision = "learn"
    needs = ("rho",)

    def __init__(self, helpfulness: bool = True):
        self.helpfulness = helpfulness

    def observe_query(self, e_q: np.ndarray) -> None:
        self._est["rho"].scorer.observe_query(e_q)

    def feedback(
        self, reward: float, injected: list[Entry], step: int, features: Features | None = None
    ) -> StatUpdates:
        if not self.helpfulness:
            return {}
        head = self._est["rho"].scorer.helpfulness
        new = head.observe(reward, [m.stats for m in injected])
        log_task = getattr(head, "log_task", None)
        if log_task is not None:  # a local baseline: the task joins the window (its last query)
            log_task(reward, [m.id for m in injected])
        return {m.id: st for m, st in zip(injected, new, strict=True)}

    def observe_energy(self, eps: float) -> None:
        energy = self._est["rho"].energy
        if energy is not None:
            energy.update(eps)  # Q(t+1) = [Q(t) + ε(t) − ε̄]₊ (Eq. 6)


class WorthLearning(Component):
    """TokenWorth's learner: probes from queries; one example ``(x, 2·reward − 1)`` per
    injected entry, ``x`` its features from the recall that injected it."""

    decision = "learn"
    needs = ("worth",)

    def observe_query(self, e_q: np.ndarray) -> None:
        self._est["worth"].observe(e_q)

    def feedback(
        self, reward: float, injected: list[Entry], step: int, features: Features | None = None
    ) -> StatUpdates:
        return dict(self._est["worth"].learn(reward, injected, step, features))

    def observe_energy(self, eps: float) -> None:
        """TokenWorth keeps no energy account."""


__all__ = ["RhoProfile", "WorthLearning"]
