"""Feedback quarantine as a keep component: any keep order, plus eviction of entries that fail.

CURATOR (Sec. V-C, Fig. 7b) only *demotes* a poisoned entry that slipped in: its helpfulness
falls, but under a roomy budget it stays resident and keeps being recalled. :class:`Quarantine`
wraps any keep component and, whatever the budget, names as victims the entries whose success
lower confidence bound fell below a threshold after ``min_uses`` uses
(:func:`memcurator.trust.reputation.feedback_quarantine`); the memory evicts them with that
reason in the decision log.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from memcurator.errors import InvalidInput
from memcurator.policy.base import Victims
from memcurator.policy.components import Component, create_component
from memcurator.trust.reputation import feedback_quarantine
from memcurator.types import Entry


@dataclass(eq=False, repr=False)
class Quarantine(Component):
    """Keep component ``keep`` plus feedback quarantine.

    Parameters
    ----------
    keep : dict, default ``{"name": "rho-density"}``
        The wrapped keep component's spec (any registered keep component).
    min_uses : int, default 4
        Uses (successes + failures) before an entry is judged.
    threshold : float, default 0.15
        On the lower confidence bound of the entry's success rate.
    method : {"wilson", "beta"}, default "wilson"
    conf : float, default 0.9

    Raises
    ------
    InvalidInput
        A wrapped spec that is not a keep component; bad ``min_uses``/``method``.

    Examples
    --------
    >>> from memcurator.types import Entry
    >>> q = Quarantine(keep={"name": "newest"})
    >>> q.bind(2, {}, "demo")
    >>> bad = Entry("b", "ns", "insight", "t", 1, 1, np.ones(2), successes=0, failures=5)
    >>> ok = Entry("g", "ns", "insight", "t", 1, 1, np.ones(2), successes=4, failures=1)
    >>> [v[0] for v in q.victims([bad, ok], np.ones((2, 2)), 9)]
    ['b']
    """

    decision = "keep"

    keep: dict[str, Any] | None = None
    min_uses: int = 4
    threshold: float = 0.15
    method: str = "wilson"
    conf: float = 0.9

    def __post_init__(self) -> None:
        spec = dict(self.keep) if self.keep is not None else {"name": "rho-density"}
        if spec.get("name") == "quarantine":
            raise InvalidInput("quarantine cannot wrap itself")
        self._inner = create_component("keep", spec)
        feedback_quarantine(0, 0, min_uses=self.min_uses, method=self.method, conf=self.conf)  # type: ignore[arg-type]
        self.needs = tuple(self._inner.needs)
        self.distills = bool(getattr(self._inner, "distills", False))
        self.redundancy_delta = getattr(self._inner, "redundancy_delta", None)

    def bind(self, dim: int, estimators: Mapping[str, Any], policy_name: str) -> None:
        super().bind(dim, estimators, policy_name)
        self._inner.bind(dim, estimators, policy_name)

    def priority(self, entries: list[Entry], E: np.ndarray, step: int) -> np.ndarray:
        return np.asarray(self._inner.priority(entries, E, step))  # type: ignore[attr-defined]

    #: :meth:`victims` accepts ``changed`` (a verdict depends on the entry's own counts only)
    incremental_victims = True

    def victims(
        self, entries: list[Entry], E: np.ndarray, step: int, changed: list[Entry] | None = None
    ) -> Victims:
        """The wrapped component's victims, then every entry that fails feedback quarantine.

        With ``changed`` (the residents added or given feedback since the last pass), only
        those are tested: an entry's verdict depends on its own counts alone, so one that has
        not changed was already tested with the same counts (O(changed) per write, not O(n)).
        """
        out = list(self._inner.victims(entries, E, step))  # type: ignore[attr-defined]
        named = {v[0] for v in out}
        for m in entries if changed is None else changed:
            if m.id in named or m.successes + m.failures < self.min_uses:
                continue
            d = _verdict(
                m.successes,
                m.failures,
                min_uses=self.min_uses,
                threshold=self.threshold,
                method=self.method,  # type: ignore[arg-type]
                conf=self.conf,
            )
            if d.quarantine:
                out.append((m.id, d.score, d.reason))
        return out

    def evict_reason(self) -> str:
        return str(self._inner.evict_reason())  # type: ignore[attr-defined]

    def state(self) -> dict[str, Any]:
        return self._inner.state()

    def load_state(self, state: Mapping[str, Any]) -> None:
        self._inner.load_state(state)


# The verdict depends on the two counts and the settings alone; residents share few distinct
# (successes, failures) pairs, so a Keep pass over n entries costs n dictionary lookups.
_verdict = functools.lru_cache(maxsize=4096)(feedback_quarantine)

__all__ = ["Quarantine"]
